/* DistributedOptimizer's gradient hook in C (hvd._speedups' `hook`).
 *
 * Backward runs a parameter's hook once its gradient is accumulated, and a
 * step runs one per parameter (161 for ResNet-50), each between backward's
 * kernels, whose data has just gone through the caches: the Python hook and
 * the frames under it cost microseconds there. This hook does the common
 * case of the Python hook (hvd/torch/optimizer.py) in one C call: when the
 * gradient's reduction is due in this backward pass (its `delay` is 1), its
 * in-place allreduce options are kept (`options`, made by the Python path
 * at its first reduction) and `param.grad` is a dense tensor the fast path
 * takes without requiring grad, it submits the in-place allreduce, records
 * it where the Python path does (the optimizer's handles, _engine's pending
 * table) and sets `delay` to 0. Every other call (the first step, a missing,
 * sparse or non-contiguous gradient, a pass that is not the last, a
 * submission the library refused at once, the C path switched off) runs the
 * Python hook, which knows every case and its error. The optimizer makes this
 * hook only for a gradient reduced alone without compression. */
#include "python/hvd/_speedups.h"

typedef struct {
  PyObject ob_base;   /* PyObject_HEAD */
  PyObject* gradient; /* the optimizer's _Gradient: .param, .delay, .options */
  PyObject* param;
  PyObject* slow;    /* the Python hook: every case this one leaves */
  PyObject* handles; /* the optimizer's {gradient: (handle, ())} */
  PyObject* pending; /* _engine's {handle: (tensor, None)} */
  PyObject* kept;    /* gradient.options once made, else NULL */
  void* options;     /* kept's hvd_options address */
  int floating_only; /* kept's: an Average */
} Hook;

static PyTypeObject* hook_type;
static PyObject* no_contexts; /* (): the result is the gradient itself */

/* Keeps gradient.options once the Python path has made them: 1 kept, 0 not
 * made yet, -1 error. */
static int KeepOptions(Hook* h) {
  PyObject* kept = PyObject_GetAttr(h->gradient, names.options);
  if (kept == NULL) return -1;
  if (kept == Py_None) {
    Py_DECREF(kept);
    return 0;
  }
  /* (cached options, floating_only); the cached options' [1]: the
   * address of their hvd_options. */
  PyObject* cached = PySequence_GetItem(kept, 0);
  PyObject* address = cached == NULL ? NULL : PySequence_GetItem(cached, 1);
  PyObject* floating = PySequence_GetItem(kept, 1);
  void* options = address == NULL ? NULL : PyLong_AsVoidPtr(address);
  const int floating_only = floating == NULL ? -1 : PyObject_IsTrue(floating);
  Py_XDECREF(cached);
  Py_XDECREF(address);
  Py_XDECREF(floating);
  if (PyErr_Occurred() || floating_only < 0) {
    Py_DECREF(kept);
    return -1;
  }
  h->kept = kept;
  h->options = options;
  h->floating_only = floating_only;
  return 1;
}

/* Whether this call is the C path's: 1 yes, 0 the Python hook's, -1
 * error. */
static int Takes(Hook* h) {
  if (!g.hooks_enabled || g.allreduce_async == NULL) return 0;
  if (h->kept == NULL) {
    const int kept = KeepOptions(h);
    if (kept <= 0) return kept;
  }
  long long delay;
  if (LongOf(h->gradient, names.delay, 0, &delay) < 0) return -1;
  return delay == 1;
}

/* Records a submitted reduction as the Python path does: 0, or -1 with an
 * error set. */
static int Record(Hook* h, hvd_handle handle, PyObject* grad) {
  PyObject* key = PyLong_FromLongLong(handle);
  PyObject* keep = key == NULL ? NULL : PyTuple_Pack(2, grad, Py_None);
  PyObject* entry = keep == NULL ? NULL : PyTuple_Pack(2, key, no_contexts);
  PyObject* zero = PyLong_FromLong(0);
  int rc = entry == NULL || zero == NULL ? -1 : 0;
  /* The pending table first: it keeps the tensor alive while the
   * reduction runs. */
  if (rc == 0) rc = PyDict_SetItem(h->pending, key, keep);
  if (rc == 0) rc = PyDict_SetItem(h->handles, h->gradient, entry);
  if (rc == 0) rc = PyObject_SetAttr(h->gradient, names.delay, zero);
  Py_XDECREF(key);
  Py_XDECREF(keep);
  Py_XDECREF(entry);
  Py_XDECREF(zero);
  return rc;
}

/* Submits param.grad's in-place allreduce: 1 submitted and recorded, 0 not
 * taken (the Python hook is to run), -1 error. */
static int SubmitGradient(Hook* h) {
  PyObject* grad = PyObject_GetAttr(h->param, names.grad);
  if (grad == NULL) return -1;
  hvd_handle handle = 0;
  int taken = 0;
  if (grad != Py_None) {
    long long requires_grad;
    if (LongOf(grad, names.requires_grad, 0, &requires_grad) < 0) {
      taken = -1;
    } else if (!requires_grad) {
      taken = SubmitInPlace(grad, h->options, h->floating_only, &handle);
    }
  }
  if (taken == 1) {
    /* Refused (a name still in flight): nothing was queued, and the
     * Python hook's submission raises the library's error. */
    taken = handle <= 0 ? 0 : Record(h, handle, grad) < 0 ? -1 : 1;
  }
  Py_DECREF(grad);
  return taken;
}

static PyObject* HookCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  Hook* h = (Hook*)self;
  if (h->slow == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "hvd._speedups: hook cleared");
    return NULL;
  }
  int taken = Takes(h);
  if (taken == 1) taken = SubmitGradient(h);
  if (taken < 0) return NULL;
  if (taken == 0) return PyObject_Call(h->slow, args, kwargs);
  Py_RETURN_NONE;
}

static int HookTraverse(PyObject* self, visitproc visit, void* arg) {
  Hook* h = (Hook*)self;
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(h->gradient);
  Py_VISIT(h->param);
  Py_VISIT(h->slow);
  Py_VISIT(h->handles);
  Py_VISIT(h->pending);
  Py_VISIT(h->kept);
  return 0;
}

static int HookClear(PyObject* self) {
  Hook* h = (Hook*)self;
  Py_CLEAR(h->gradient);
  Py_CLEAR(h->param);
  Py_CLEAR(h->slow);
  Py_CLEAR(h->handles);
  Py_CLEAR(h->pending);
  Py_CLEAR(h->kept);
  h->options = NULL;
  return 0;
}

static void HookDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  HookClear(self);
  freefunc free_object = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_object(self);
  Py_DECREF(type);
}

static PyType_Slot kHookSlots[] = {
    {Py_tp_call, HookCall},
    {Py_tp_traverse, HookTraverse},
    {Py_tp_clear, HookClear},
    {Py_tp_dealloc, HookDealloc},
    {0, NULL},
};

static PyType_Spec kHookSpec = {
    .name = "hvd._speedups.GradientHook",
    .basicsize = sizeof(Hook),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = kHookSlots,
};

int MakeHookType(PyObject* module) {
  (void)module;
  if (hook_type == NULL) {
    hook_type = (PyTypeObject*)PyType_FromSpec(&kHookSpec);
    if (hook_type == NULL) return -1;
  }
  if (no_contexts == NULL) {
    no_contexts = PyTuple_New(0);
    if (no_contexts == NULL) return -1;
  }
  return 0;
}

/* hook(gradient, slow, handles, pending): the hook of one _Gradient;
 * `slow` is its Python hook, `handles` the optimizer's table of this
 * step's reductions, `pending` _engine's table of submitted handles. */
PyObject* NewHook(PyObject* module, PyObject* const* args, Py_ssize_t n) {
  (void)module;
  if (n != 4 || !PyCallable_Check(args[1]) || !PyDict_Check(args[2]) ||
      !PyDict_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError,
                    "hvd._speedups.hook(gradient, slow, handles, pending)");
    return NULL;
  }
  PyObject* param = PyObject_GetAttr(args[0], names.param);
  if (param == NULL) return NULL;
  allocfunc alloc = (allocfunc)PyType_GetSlot(hook_type, Py_tp_alloc);
  Hook* h = (Hook*)alloc(hook_type, 0);
  if (h == NULL) {
    Py_DECREF(param);
    return NULL;
  }
  h->param = param;
  h->gradient = Py_NewRef(args[0]);
  h->slow = Py_NewRef(args[1]);
  h->handles = Py_NewRef(args[2]);
  h->pending = Py_NewRef(args[3]);
  return (PyObject*)h;
}
