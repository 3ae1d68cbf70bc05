/* hvd._speedups: the per-call path of an allreduce in C, for the Python
 * bindings. Optional: without it (another Python, no compiler) the bindings
 * take their pure-Python path, which does the same thing in a few
 * microseconds more per call.
 *
 * Compiled against Python's stable ABI (3.11 and later) and DLPack only:
 * nothing here knows numpy or torch. It takes
 *   - objects of the registered array type that export the buffer protocol
 *     (numpy.ndarray), read through that protocol, and
 *   - objects of the registered tensor type (torch.Tensor), read through
 *     their Python attributes (is_cuda, is_sparse, dtype, is_contiguous(),
 *     data_ptr(), shape), the dtype mapped by the registered table; a GPU
 *     one (is_cuda) only where a stream function was registered with the
 *     type: it gives the device's current stream (get_device()), which the
 *     call's options carry, so the op waits for the work queued there;
 * and calls libhvd.so's C ABI through the function addresses the bindings
 * hand over from the library they loaded (it links against nothing).
 * Anything else (another type, a non-contiguous tensor, a dtype the
 * fast path leaves alone, an empty tensor) is answered NotImplemented
 * before anything is submitted, and the caller takes the Python path, which
 * knows every case and its error message. DistributedOptimizer's gradient
 * hook, which submits through the same path, is in _speedups_hook.c. */
#include "python/hvd/_speedups.h"

#include <string.h>

enum { kMaxDims = 16 };

/* One tensor as the C ABI takes it, with what keeps its description. */
typedef struct {
  DLTensor dl;
  int64_t shape[kMaxDims];
  Py_buffer view;
  int has_view;
  void* stream; /* a GPU tensor's producer stream (cudaStream_t) */
} Described;

struct Globals g;
struct Names names;

/* Releases what a description holds. */
static void Forget(Described* d) {
  if (d->has_view) PyBuffer_Release(&d->view);
  d->has_view = 0;
}

/* DLPack type of a buffer's struct-module format, for the types the numpy
 * binding supports (bool excepted: it crosses as uint8 with the type named
 * in the options, which the Python path does). 0 when not taken. */
static int BufferType(const char* format, Py_ssize_t itemsize, DLDataType* t) {
  if (format == NULL) return 0;
  if (*format == '@' || *format == '=' || *format == '<') ++format;
  if (format[0] == '\0' || format[1] != '\0') return 0;
  t->lanes = 1;
  t->bits = (uint8_t)(itemsize * 8);
  switch (format[0]) {
    case 'e': case 'f': case 'd':
      t->code = kDLFloat;
      return 1;
    case 'b': case 'h': case 'i': case 'l': case 'q':
      t->code = kDLInt;
      return itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8;
    case 'B': case 'H':
      t->code = kDLUInt;
      return 1;
    default:
      return 0;
  }
}

/* 1 described, 0 not taken (no error set), -1 error. */
static int DescribeArray(PyObject* obj, int writable, Described* d) {
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
  if (writable) flags |= PyBUF_WRITABLE;
  if (PyObject_GetBuffer(obj, &d->view, flags) < 0) {
    PyErr_Clear();
    return 0;
  }
  d->has_view = 1;
  if (d->view.ndim > kMaxDims || d->view.len == 0 ||
      !BufferType(d->view.format, d->view.itemsize, &d->dl.dtype)) {
    Forget(d);
    return 0;
  }
  d->dl.data = d->view.buf;
  d->dl.device.device_type = kDLCPU;
  d->dl.ndim = d->view.ndim;
  for (int i = 0; i < d->view.ndim; ++i) d->shape[i] = d->view.shape[i];
  return 1;
}

int LongOf(PyObject* obj, PyObject* name, int call, long long* out) {
  PyObject* value = call ? PyObject_CallMethodObjArgs(obj, name, NULL)
                         : PyObject_GetAttr(obj, name);
  if (value == NULL) return -1;
  *out = PyLong_AsLongLong(value);
  Py_DECREF(value);
  return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* A GPU tensor's device (get_device()) and that device's current stream
 * (the registered stream_of). 0, or -1 with an error set. */
static int CurrentStream(PyObject* obj, Described* d) {
  long long device;
  if (LongOf(obj, names.get_device, 1, &device) < 0) return -1;
  PyObject* stream =
      PyObject_CallFunction(g.tensor_stream_of, "L", device);
  if (stream == NULL) return -1;
  d->stream = PyLong_AsVoidPtr(stream);
  Py_DECREF(stream);
  if (PyErr_Occurred()) return -1;
  d->dl.device.device_type = kDLCUDA;
  d->dl.device.device_id = (int32_t)device;
  return 0;
}

static int DescribeTensor(PyObject* obj, Described* d) {
  long long is_cuda, is_sparse, contiguous, data;
  if (LongOf(obj, names.is_cuda, 0, &is_cuda) < 0 ||
      LongOf(obj, names.is_sparse, 0, &is_sparse) < 0) {
    return -1;
  }
  if (is_sparse || (is_cuda && g.tensor_stream_of == NULL)) return 0;
  PyObject* dtype = PyObject_GetAttr(obj, names.dtype);
  if (dtype == NULL) return -1;
  PyObject* dl = PyDict_GetItemWithError(g.tensor_dtypes, dtype);
  Py_DECREF(dtype);
  if (dl == NULL) return PyErr_Occurred() ? -1 : 0;
  /* A (code, bits) tuple, as the bindings register them. */
  const long code = PyLong_AsLong(PyTuple_GetItem(dl, 0));
  const long bits = PyLong_AsLong(PyTuple_GetItem(dl, 1));
  if (PyErr_Occurred()) return -1;
  if (LongOf(obj, names.is_contiguous, 1, &contiguous) < 0) return -1;
  if (!contiguous) return 0;
  PyObject* shape = PyObject_GetAttr(obj, names.shape);
  if (shape == NULL) return -1;
  Py_ssize_t ndim = PySequence_Size(shape);
  int64_t count = 1;
  for (Py_ssize_t i = 0; i < ndim && ndim <= kMaxDims; ++i) {
    PyObject* n = PySequence_GetItem(shape, i);
    d->shape[i] = n == NULL ? -1 : PyLong_AsLongLong(n);
    Py_XDECREF(n);
    count *= d->shape[i];
  }
  Py_DECREF(shape);
  if (PyErr_Occurred()) return -1;
  if (ndim < 0 || ndim > kMaxDims || count <= 0) return 0;
  if (LongOf(obj, names.data_ptr, 1, &data) < 0) return -1;
  d->dl.data = (void*)(intptr_t)data;
  d->dl.device.device_type = kDLCPU;
  if (is_cuda && CurrentStream(obj, d) < 0) return -1;
  d->dl.ndim = (int32_t)ndim;
  d->dl.dtype.code = (uint8_t)code;
  d->dl.dtype.bits = (uint8_t)bits;
  d->dl.dtype.lanes = 1;
  return 1;
}

/* Describes `obj` (of a registered type) as the C ABI takes it; writable:
 * as an output; floating_only: an Average, which the Python path turns
 * into a Sum for integer tensors. 1 described, 0 not taken (no error set),
 * -1 error. */
static int Describe(PyObject* obj, int writable, int floating_only,
                    Described* d) {
  memset(d, 0, sizeof(*d));
  PyObject* type = (PyObject*)Py_TYPE(obj);
  int taken;
  if (g.array_type != NULL && type == g.array_type) {
    taken = DescribeArray(obj, writable, d);
  } else if (g.tensor_type != NULL && type == g.tensor_type) {
    taken = DescribeTensor(obj, d);
  } else {
    return 0;
  }
  if (taken != 1) return taken;
  if (floating_only && d->dl.dtype.code != kDLFloat &&
      d->dl.dtype.code != kDLBfloat) {
    Forget(d);
    return 0;
  }
  d->dl.shape = d->shape;
  return 1;
}

/* `out` as the same tensor as `in`: in place, the view held once. */
static void SameAsInput(const Described* in, Described* out) {
  *out = *in;
  out->has_view = 0;
  out->dl.shape = out->shape;
}

/* A new output for `input` (described in `in`), made by its type's
 * registered empty_like, described in `out`: a new reference with *taken
 * 1; NULL with *taken 0 when outputs that large come from hvd's pool (the
 * Python path), or -1 on error. empty_like of a C-contiguous input is
 * C-contiguous with its shape and type, so only its address is read. */
static PyObject* NewOutput(PyObject* input, const Described* in,
                           Described* out, int* taken) {
  int64_t bytes = in->dl.dtype.bits / 8;
  for (int i = 0; i < in->dl.ndim; ++i) bytes *= in->shape[i];
  *taken = 0;
  if (bytes >= g.pooled_bytes && in->dl.device.device_type == kDLCPU) {
    return NULL;
  }
  const int array = (PyObject*)Py_TYPE(input) == g.array_type;
  PyObject* output = PyObject_CallFunctionObjArgs(
      array ? g.array_empty_like : g.tensor_empty_like, input, NULL);
  *taken = -1;
  if (output == NULL) return NULL;
  SameAsInput(in, out);
  if (array) {
    if (PyObject_GetBuffer(output, &out->view,
                           PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
      Py_DECREF(output);
      return NULL;
    }
    out->has_view = 1;
    out->dl.data = out->view.buf;
  } else {
    long long data;
    if (LongOf(output, names.data_ptr, 1, &data) < 0) {
      Py_DECREF(output);
      return NULL;
    }
    out->dl.data = (void*)(intptr_t)data;
  }
  *taken = 1;
  return output;
}

static int Ready(void) {
  if (g.allreduce_async != NULL) return 1;
  PyErr_SetString(PyExc_RuntimeError, "hvd._speedups: init() not called");
  return 0;
}

/* init(allreduce_async, wait, release, handle_error, handle_error_code,
 *      wait_slice_seconds, pooled_output_bytes): the C ABI's functions by
 * address, and the bindings' constants. */
static PyObject* Init(PyObject* self, PyObject* args) {
  unsigned long long a, w, r, e, c;
  double slice;
  long long pooled;
  if (!PyArg_ParseTuple(args, "KKKKKdL", &a, &w, &r, &e, &c, &slice,
                        &pooled)) {
    return NULL;
  }
  g.allreduce_async = (hvd_handle(*)(DLTensor*, DLTensor*, const void*))a;
  g.wait = (int (*)(hvd_handle, double))w;
  g.release = (void (*)(hvd_handle))r;
  g.handle_error = (const char* (*)(hvd_handle))e;
  g.handle_error_code = (int (*)(hvd_handle))c;
  g.wait_slice = slice;
  g.pooled_bytes = pooled;
  Py_RETURN_NONE;
}

static void Replace(PyObject** slot, PyObject* value) {
  PyObject* old = *slot;
  Py_XINCREF(value);
  *slot = value;
  Py_XDECREF(old);
}

/* register_array_type(type, empty_like) */
static PyObject* RegisterArrayType(PyObject* self, PyObject* args) {
  PyObject *type, *empty_like;
  if (!PyArg_ParseTuple(args, "OO", &type, &empty_like)) return NULL;
  Replace(&g.array_type, type);
  Replace(&g.array_empty_like, empty_like);
  Py_RETURN_NONE;
}

/* register_tensor_type(type, {dtype: (code, bits)}, empty_like
 *                      [, stream_of]): stream_of(device index) -> the
 * device's current stream as an int; without it GPU tensors are left to the
 * Python path. */
static PyObject* RegisterTensorType(PyObject* self, PyObject* args) {
  PyObject *type, *dtypes, *empty_like, *stream_of = Py_None;
  if (!PyArg_ParseTuple(args, "OO!O|O", &type, &PyDict_Type, &dtypes,
                        &empty_like, &stream_of)) {
    return NULL;
  }
  Replace(&g.tensor_type, type);
  Replace(&g.tensor_dtypes, dtypes);
  Replace(&g.tensor_empty_like, empty_like);
  Replace(&g.tensor_stream_of, stream_of == Py_None ? NULL : stream_of);
  Py_RETURN_NONE;
}

/* The options at `options` (the bindings' cached hvd_options), with the
 * input's stream where it has one: a copy, since the cached struct serves
 * every stream (the core copies the options at enqueue). */
static const hvd_options* WithStream(const void* options, const Described* in,
                                     hvd_options* copy) {
  if (in->stream == NULL) return (const hvd_options*)options;
  memcpy(copy, options, sizeof(*copy));
  copy->stream = in->stream;
  return copy;
}

static hvd_handle Submit(Described* in, Described* out, void* options) {
  hvd_options copy;
  const hvd_options* o = WithStream(options, in, &copy);
  hvd_handle handle;
  Py_BEGIN_ALLOW_THREADS
  handle = g.allreduce_async(&in->dl, &out->dl, o);
  Py_END_ALLOW_THREADS
  return handle;
}

/* The arguments submit and allreduce share: (input, output,
 * options_address, floating_only, ...), `want` of them. 0, or -1 with an
 * error set. */
static int Arguments(PyObject* const* args, Py_ssize_t n, Py_ssize_t want,
                     void** options, int* floating_only) {
  if (!Ready()) return -1;
  if (n != want) {
    PyErr_SetString(PyExc_TypeError, "hvd._speedups: wrong argument count");
    return -1;
  }
  *options = PyLong_AsVoidPtr(args[2]);
  *floating_only = PyObject_IsTrue(args[3]);
  return PyErr_Occurred() || *floating_only < 0 ? -1 : 0;
}

int SubmitInPlace(PyObject* tensor, void* options, int floating_only,
                  hvd_handle* handle) {
  Described in, out;
  const int taken = Describe(tensor, 1, floating_only, &in);
  if (taken != 1) return taken;
  SameAsInput(&in, &out);
  *handle = Submit(&in, &out, options);
  Forget(&in);
  return 1;
}

/* allreduce's tensors: the output is the input itself (in place) or None,
 * a new one made here (NewOutput); any other output is not taken. 1 with
 * both tensors described and *output a new reference, 0 when not taken, -1
 * error. */
static int Begin(PyObject* const* args, Py_ssize_t n, void** options,
                 Described* in, Described* out, PyObject** output) {
  int floating_only;
  if (Arguments(args, n, 5, options, &floating_only) < 0) return -1;
  const int in_place = args[1] == args[0];
  if (!in_place && args[1] != Py_None) return 0;
  int taken = Describe(args[0], in_place, floating_only, in);
  if (taken != 1) return taken;
  if (in_place) {
    SameAsInput(in, out);
    *output = args[0];
    Py_INCREF(*output);
    return 1;
  }
  *output = NewOutput(args[0], in, out, &taken);
  if (taken != 1) Forget(in);
  return taken;
}

/* submit(input, input, options_address, floating_only): the handle of an
 * in-place allreduce of `input`; an int <= 0 when the library refused it
 * (its hvd_last_error says why); NotImplemented when the fast path does not
 * take the tensor. */
static PyObject* SubmitAllreduce(PyObject* self, PyObject* const* args,
                                 Py_ssize_t n) {
  void* options;
  int floating_only;
  if (Arguments(args, n, 4, &options, &floating_only) < 0) return NULL;
  if (args[1] != args[0]) Py_RETURN_NOTIMPLEMENTED;
  hvd_handle handle;
  const int taken = SubmitInPlace(args[0], options, floating_only, &handle);
  if (taken < 0) return NULL;
  if (taken == 0) Py_RETURN_NOTIMPLEMENTED;
  return PyLong_FromLongLong(handle);
}

/* The handle's failure as (status code, message); releases the handle. */
static PyObject* Failure(hvd_handle handle, int rc) {
  PyObject* result;
  if (rc == kError) {
    const char* message = g.handle_error(handle);
    result = Py_BuildValue("(iN)", g.handle_error_code(handle),
                           PyUnicode_DecodeUTF8(message, strlen(message),
                                                "replace"));
  } else {
    result = Py_BuildValue("(is)", 13, "hvd: the handle of a submitted "
                                       "allreduce was not valid");
  }
  g.release(handle);
  return result;
}

/* Waits for `handle` in slices of g.wait_slice from *rc (its first slice's
 * result, or kTimeout to start with one), checking for signals between
 * them; sets *rc to the final result. -1 when a signal handler raised (the
 * exception set, the handle neither complete nor released), else 0. */
static int WaitInSlices(hvd_handle handle, int* rc) {
  while (*rc == kTimeout) {
    if (PyErr_CheckSignals() < 0) return -1;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = g.wait(handle, g.wait_slice);
    Py_END_ALLOW_THREADS
    *rc = r;
  }
  return 0;
}

/* wait(handle): waits for a submitted handle whose result needs nothing
 * from it (an in-place allreduce): None when it completed, (status code,
 * message) when it failed; either way the handle is released. When a
 * signal handler raises (Ctrl-C), the exception propagates and the handle
 * stays waitable, unreleased. */
static PyObject* Wait(PyObject* self, PyObject* arg) {
  if (!Ready()) return NULL;
  const long long handle = PyLong_AsLongLong(arg);
  if (handle == -1 && PyErr_Occurred()) return NULL;
  int rc = kTimeout;
  if (WaitInSlices(handle, &rc) < 0) return NULL;
  if (rc != kOk) return Failure(handle, rc);
  g.release(handle);
  Py_RETURN_NONE;
}

/* allreduce(input, output, options_address, floating_only, on_interrupt):
 * submit, then wait; output: the input (in place) or None (a new one like
 * the input). The output
 * when done (the handle released); NotImplemented as submit; an int <= 0
 * when the library refused it; (status code, message) when the operation
 * failed. Waits in slices, checking for signals between them: when a
 * handler raises (Ctrl-C), the operation is still running, so
 * on_interrupt(handle, (input, output)) is called to keep both alive and
 * the handle waitable, and the exception propagates. */
static PyObject* Allreduce(PyObject* self, PyObject* const* args,
                           Py_ssize_t n) {
  void* options;
  Described in, out;
  PyObject* output = NULL;
  const int taken = Begin(args, n, &options, &in, &out, &output);
  if (taken < 0) return NULL;
  if (taken == 0) Py_RETURN_NOTIMPLEMENTED;
  hvd_options copy;
  const hvd_options* o = WithStream(options, &in, &copy);
  hvd_handle handle;
  int rc = kTimeout;
  Py_BEGIN_ALLOW_THREADS
  handle = g.allreduce_async(&in.dl, &out.dl, o);
  if (handle > 0) rc = g.wait(handle, g.wait_slice);
  Py_END_ALLOW_THREADS
  Forget(&in);
  Forget(&out);
  if (handle <= 0) {
    Py_DECREF(output);
    return PyLong_FromLongLong(handle);
  }
  if (WaitInSlices(handle, &rc) < 0) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject* kept = PyObject_CallFunction(args[4], "L(OO)", handle, args[0],
                                           output);
    Py_XDECREF(kept);
    Py_DECREF(output);
    PyErr_Restore(type, value, traceback);
    return NULL;
  }
  if (rc != kOk) {
    Py_DECREF(output);
    return Failure(handle, rc);
  }
  g.release(handle);
  return output;
}

/* set_hooks_enabled(flag): whether gradient hooks take their C path (the
 * bindings switch it with the rest of the module). */
static PyObject* SetHooksEnabled(PyObject* self, PyObject* arg) {
  const int enabled = PyObject_IsTrue(arg);
  if (enabled < 0) return NULL;
  g.hooks_enabled = enabled;
  Py_RETURN_NONE;
}

static PyMethodDef kMethods[] = {
    {"init", Init, METH_VARARGS, NULL},
    {"register_array_type", RegisterArrayType, METH_VARARGS, NULL},
    {"register_tensor_type", RegisterTensorType, METH_VARARGS, NULL},
    {"submit", (PyCFunction)(void (*)(void))SubmitAllreduce, METH_FASTCALL,
     NULL},
    {"allreduce", (PyCFunction)(void (*)(void))Allreduce, METH_FASTCALL, NULL},
    {"wait", Wait, METH_O, NULL},
    {"hook", (PyCFunction)(void (*)(void))NewHook, METH_FASTCALL, NULL},
    {"set_hooks_enabled", SetHooksEnabled, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_speedups",
    .m_doc = "The per-call path of an allreduce in C (see _speedups.c).",
    .m_size = -1,
    .m_methods = kMethods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
  struct {
    PyObject** slot;
    const char* text;
  } wanted[] = {
      {&names.is_cuda, "is_cuda"},
      {&names.is_sparse, "is_sparse"},
      {&names.dtype, "dtype"},
      {&names.is_contiguous, "is_contiguous"},
      {&names.shape, "shape"},
      {&names.data_ptr, "data_ptr"},
      {&names.get_device, "get_device"},
      {&names.grad, "grad"},
      {&names.requires_grad, "requires_grad"},
      {&names.param, "param"},
      {&names.delay, "delay"},
      {&names.options, "options"},
  };
  for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); ++i) {
    if (*wanted[i].slot == NULL) {
      *wanted[i].slot = PyUnicode_InternFromString(wanted[i].text);
      if (*wanted[i].slot == NULL) return NULL;
    }
  }
  g.hooks_enabled = 1;
  PyObject* module = PyModule_Create(&kModule);
  if (module != NULL && MakeHookType(module) < 0) Py_CLEAR(module);
  return module;
}
