// NumPy <-> recflow Tensor, for feeds, fetches and tensor-valued attrs.
//
// Into a Tensor (feeds, constants): always one copy into a new 64-byte
// aligned buffer: a memcpy when the array is C-contiguous, NumPy's strided
// copy otherwise (any strides, read-only arrays, views, broadcasts). recflow's
// TensorBuffer cannot borrow foreign memory, so a feed is never aliased:
// kernels and variables can keep what they were fed without the caller's
// array changing under them.
//
// Out of a Tensor (fetches): no copy when the Tensor is the only holder of its
// buffer (a freshly computed result): the ndarray points into recflow's
// buffer and its `base` is a capsule owning a reference to it, so the memory
// lives as long as the array (or any view of it). Such arrays are writeable:
// nothing else sees the buffer. When the buffer is shared (a variable's value,
// a constant a kernel keeps, the same tensor fetched twice) the array is a
// copy, as TensorFlow does, so that writing into a fetched array never changes
// the model.
//
// Call with the GIL held.
#ifndef RECFLOW_PYTHON_PY_TENSOR_H_
#define RECFLOW_PYTHON_PY_TENSOR_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "absl/strings/string_view.h"
#include "recflow/core/tensor.h"

namespace recflow {
namespace python {

// NumPy's dtype for `dtype`. TypeError naming `what` when NumPy has no
// equivalent (bfloat16, resource, variant, quantized types).
pybind11::dtype NumpyDtypeFor(DataType dtype, absl::string_view what);
// recflow's dtype for a NumPy dtype; DT_INVALID when there is none. 'S', 'U'
// and object arrays map to DT_STRING.
DataType DataTypeForNumpy(const pybind11::dtype& dtype);

// A Tensor holding a copy of `value`: an ndarray, or anything np.asarray
// takes (scalars, nested lists). With expected == DT_INVALID the Tensor
// takes the array's dtype; otherwise the array's dtype must already be
// `expected` (no silent casts here; the Python layer casts as TF does), except
// that a string tensor takes 'S', 'U' and object arrays of bytes or str.
// Object arrays are refused for every other dtype. Errors name `what`:
// TypeError (dtype), ValueError (np.asarray's own, e.g. ragged lists),
// StatusError ResourceExhausted when the buffer cannot be allocated.
Tensor TensorFromPython(pybind11::handle value, DataType expected,
                        absl::string_view what);

// An ndarray for `tensor` (see the header comment for when it is a copy).
// Strings become an object array of bytes. TypeError naming `what` for
// resource and variant tensors and dtypes NumPy lacks.
pybind11::object TensorToNumpy(Tensor tensor, absl::string_view what);

// What Session.run returns for a fetched tensor, as TensorFlow's session
// (PyArray_Return): TensorToNumpy, except that a scalar is a NumPy scalar
// (numpy.float32, numpy.int64, ...) and a string scalar is `bytes`.
pybind11::object FetchToPython(Tensor tensor, absl::string_view what);

}  // namespace python
}  // namespace recflow

#endif  // RECFLOW_PYTHON_PY_TENSOR_H_
