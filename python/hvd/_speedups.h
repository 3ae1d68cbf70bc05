/* What hvd._speedups' two files share (_speedups.c: the module, the tensor
 * descriptions and the calls into libhvd.so; _speedups_hook.c: the
 * optimizer's gradient hook). Private to the module: nothing here is seen
 * outside the shared object (it is built with hidden visibility). */
#ifndef HVD_PYTHON_SPEEDUPS_H_
#define HVD_PYTHON_SPEEDUPS_H_

#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "core/c_api.h"
#include "dlpack/dlpack.h"

enum { kOk = 0, kTimeout = 1, kError = -1 };

/* The C ABI's functions (init) and the registered types. */
struct Globals {
  hvd_handle (*allreduce_async)(DLTensor*, DLTensor*, const void*);
  int (*wait)(hvd_handle, double);
  void (*release)(hvd_handle);
  const char* (*handle_error)(hvd_handle);
  int (*handle_error_code)(hvd_handle);
  double wait_slice;
  int64_t pooled_bytes; /* outputs this large: the Python path's pool */
  int hooks_enabled;    /* gradient hooks take their C path */
  PyObject* array_type; /* numpy.ndarray, or NULL */
  PyObject* array_empty_like;
  PyObject* tensor_type; /* torch.Tensor, or NULL */
  PyObject* tensor_empty_like;
  PyObject* tensor_dtypes;    /* torch dtype -> (DLPack code, bits) */
  PyObject* tensor_stream_of; /* device index -> current stream, or NULL */
};
extern struct Globals g;

/* The attributes read on every call, as interned names: looked up without
 * making a string of each name each time. */
struct Names {
  PyObject* is_cuda;
  PyObject* is_sparse;
  PyObject* dtype;
  PyObject* is_contiguous;
  PyObject* shape;
  PyObject* data_ptr;
  PyObject* get_device;
  PyObject* grad;
  PyObject* requires_grad;
  PyObject* param;
  PyObject* delay;
  PyObject* options;
};
extern struct Names names;

/* `obj.name` (or `obj.name()` when `call`) as a C long long; -1 with an
 * error set when it fails. */
int LongOf(PyObject* obj, PyObject* name, int call, long long* out);

/* Submits the in-place allreduce of `tensor` (of a registered type) under
 * the options at `options` (the bindings' cached hvd_options), the GIL
 * released; floating_only: an Average, which the Python path turns into a
 * Sum for integer tensors. 1 submitted, *handle set (<= 0: the library
 * refused it, its hvd_last_error says why); 0 not taken (no error set);
 * -1 error. */
int SubmitInPlace(PyObject* tensor, void* options, int floating_only,
                  hvd_handle* handle);

/* The gradient hook's type, made by MakeHookType at the module's import;
 * hook(...) makes one (_speedups_hook.c). */
int MakeHookType(PyObject* module);
PyObject* NewHook(PyObject* module, PyObject* const* args, Py_ssize_t n);

#endif /* HVD_PYTHON_SPEEDUPS_H_ */
