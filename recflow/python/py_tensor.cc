#include "recflow/python/py_tensor.h"

#include <pybind11/stl.h>

#include <complex>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/python/py_status.h"
#include "recflow/runtime/caching_allocator.h"

namespace py = pybind11;

namespace recflow {
namespace python {
namespace {

// NumPy functions and dtypes the conversions use, looked up once. Leaked on
// purpose: releasing them at exit would run after the interpreter is gone.
struct NumpyApi {
  py::object asarray;
  py::object copyto;
  py::object empty;
  py::object char_encode;
  py::dtype float16;
  py::dtype object;
};

const NumpyApi& Numpy() {
  static const NumpyApi* api = [] {
    py::module_ np = py::module_::import("numpy");
    auto* a = new NumpyApi;
    a->asarray = np.attr("asarray");
    a->copyto = np.attr("copyto");
    a->empty = np.attr("empty");
    a->char_encode = np.attr("char").attr("encode");
    a->float16 = py::dtype::from_args(py::str("float16"));
    a->object = py::dtype::from_args(py::str("object"));
    return a;
  }();
  return *api;
}

std::vector<py::ssize_t> NumpyShape(const TensorShape& shape) {
  std::vector<py::ssize_t> dims;
  dims.reserve(shape.dims());
  for (int d = 0; d < shape.dims(); ++d) {
    dims.push_back(static_cast<py::ssize_t>(shape.dim_size(d)));
  }
  return dims;
}

std::string TypeName(py::handle h) {
  return py::str(py::type::handle_of(h).attr("__name__"));
}

TensorShape ShapeOf(const py::array& a, absl::string_view what) {
  std::vector<int64_t> dims(a.shape(), a.shape() + a.ndim());
  auto shape = TensorShape::Build(dims);
  if (!shape.ok()) throw StatusError(errors::Annotate(shape.status(), what));
  return *shape;
}

Tensor Allocate(DataType dtype, const TensorShape& shape,
                absl::string_view what) {
  auto t = Tensor::Create(dtype, shape, caching_cpu_allocator());
  if (!t.ok()) throw StatusError(errors::Annotate(t.status(), what));
  return std::move(t).value();
}

// A string tensor from an array of kind 'S', 'U' or 'O'.
Tensor StringTensor(py::array a, absl::string_view what) {
  if (a.dtype().kind() == 'U') a = Numpy().char_encode(a, "utf-8");
  // (np.ascontiguousarray would make a 0-d array 1-d.)
  if (!(a.flags() & py::array::c_style)) a = a.attr("copy")("C");
  Tensor t = Allocate(DT_STRING, ShapeOf(a, what), what);
  std::string* out = t.data<std::string>();
  const int64_t n = t.NumElements();
  if (a.dtype().kind() == 'S') {
    // Fixed-width bytes: NumPy drops trailing NULs, and so do we.
    const size_t width = static_cast<size_t>(a.itemsize());
    const char* p = static_cast<const char*>(a.data());
    for (int64_t i = 0; i < n; ++i, p += width) {
      size_t len = width;
      while (len > 0 && p[len - 1] == '\0') --len;
      out[i].assign(p, len);
    }
    return t;
  }
  // Object array: every element bytes or str (UTF-8 encoded).
  PyObject* const* items = static_cast<PyObject* const*>(a.data());
  for (int64_t i = 0; i < n; ++i) {
    PyObject* item = items[i];
    if (item != nullptr && PyBytes_Check(item)) {
      char* data = nullptr;
      Py_ssize_t len = 0;
      if (PyBytes_AsStringAndSize(item, &data, &len) != 0)
        throw py::error_already_set();
      out[i].assign(data, static_cast<size_t>(len));
    } else if (item != nullptr && PyUnicode_Check(item)) {
      Py_ssize_t len = 0;
      const char* data = PyUnicode_AsUTF8AndSize(item, &len);
      if (data == nullptr) throw py::error_already_set();
      out[i].assign(data, static_cast<size_t>(len));
    } else {
      throw py::type_error(
          absl::StrCat(what, ": element ", i, " of the object array is ",
                       item == nullptr ? std::string("NULL") : TypeName(item),
                       "; a string tensor takes bytes or str elements"));
    }
  }
  return t;
}

}  // namespace

py::dtype NumpyDtypeFor(DataType dtype, absl::string_view what) {
  switch (BaseType(dtype)) {
    case DT_FLOAT:
      return py::dtype::of<float>();
    case DT_DOUBLE:
      return py::dtype::of<double>();
    case DT_INT32:
      return py::dtype::of<int32_t>();
    case DT_INT64:
      return py::dtype::of<int64_t>();
    case DT_UINT8:
      return py::dtype::of<uint8_t>();
    case DT_INT8:
      return py::dtype::of<int8_t>();
    case DT_INT16:
      return py::dtype::of<int16_t>();
    case DT_UINT16:
      return py::dtype::of<uint16_t>();
    case DT_UINT32:
      return py::dtype::of<uint32_t>();
    case DT_UINT64:
      return py::dtype::of<uint64_t>();
    case DT_BOOL:
      return py::dtype::of<bool>();
    case DT_COMPLEX64:
      return py::dtype::of<std::complex<float>>();
    case DT_COMPLEX128:
      return py::dtype::of<std::complex<double>>();
    case DT_HALF:
      return Numpy().float16;
    case DT_STRING:
      return Numpy().object;
    default:
      break;
  }
  if (BaseType(dtype) == DT_RESOURCE) {
    throw py::type_error(absl::StrCat(what,
                                      " is a resource handle (dtype resource), "
                                      "which cannot leave the session; "
                                      "fetch the value it refers to instead "
                                      "(e.g. a variable's read_value())"));
  }
  if (BaseType(dtype) == DT_VARIANT) {
    throw py::type_error(absl::StrCat(
        what,
        " is a variant (dtype variant, e.g. a tf.data dataset), which cannot "
        "leave the session; iterate it (make_one_shot_iterator().get_next()) "
        "and fetch the elements instead"));
  }
  throw py::type_error(
      absl::StrCat(what, " has dtype ", DataTypeString(dtype),
                   ", which has no NumPy equivalent; cast it in the graph "
                   "(tf.cast) to one that has"));
}

DataType DataTypeForNumpy(const py::dtype& dtype) {
  const size_t size = static_cast<size_t>(dtype.itemsize());
  switch (dtype.kind()) {
    case 'f':
      return size == 2   ? DT_HALF
             : size == 4 ? DT_FLOAT
             : size == 8 ? DT_DOUBLE
                         : DT_INVALID;
    case 'i':
      return size == 1   ? DT_INT8
             : size == 2 ? DT_INT16
             : size == 4 ? DT_INT32
             : size == 8 ? DT_INT64
                         : DT_INVALID;
    case 'u':
      return size == 1   ? DT_UINT8
             : size == 2 ? DT_UINT16
             : size == 4 ? DT_UINT32
             : size == 8 ? DT_UINT64
                         : DT_INVALID;
    case 'b':
      return size == 1 ? DT_BOOL : DT_INVALID;
    case 'c':
      return size == 8 ? DT_COMPLEX64 : size == 16 ? DT_COMPLEX128 : DT_INVALID;
    case 'S':
    case 'U':
    case 'O':
      return DT_STRING;
    default:
      return DT_INVALID;
  }
}

Tensor TensorFromPython(py::handle value, DataType expected,
                        absl::string_view what) {
  if (value.is_none()) {
    throw py::type_error(
        absl::StrCat(what,
                     " is None; expected a NumPy array or a value "
                     "np.asarray accepts"));
  }
  expected = BaseType(expected);
  py::array a = py::isinstance<py::array>(value)
                    ? py::reinterpret_borrow<py::array>(value)
                    : py::array(Numpy().asarray(value));
  const py::dtype dt = a.dtype();
  const char kind = dt.kind();
  if (kind == 'O' && expected != DT_STRING) {
    if (expected != DT_INVALID) {
      throw py::type_error(absl::StrCat(
          what,
          " is an array of Python objects (dtype object) but the tensor is ",
          DataTypeString(expected),
          "; give a numeric array (object arrays are taken only "
          "for string tensors, as arrays of bytes or str)"));
    }
    // No dtype asked for: an object array is taken as strings, or refused.
    return StringTensor(a, what);
  }
  if (kind == 'S' || kind == 'U' || kind == 'O') {
    if (expected != DT_INVALID && expected != DT_STRING) {
      throw py::type_error(
          absl::StrCat(what, " is an array of strings but the tensor is ",
                       DataTypeString(expected)));
    }
    return StringTensor(a, what);
  }
  const DataType got = DataTypeForNumpy(dt);
  if (got == DT_INVALID) {
    throw py::type_error(absl::StrCat(what, " has NumPy dtype ",
                                      std::string(py::str(py::handle(dt))),
                                      ", which recflow tensors cannot hold"));
  }
  if (expected != DT_INVALID && got != expected) {
    throw py::type_error(
        absl::StrCat(what, " is an array of ", DataTypeString(got),
                     " but the tensor is ", DataTypeString(expected)));
  }
  if (dt.byteorder() == '>') {  // non-native (big-endian) data: swap once
    a = a.attr("astype")(dt.attr("newbyteorder")("="));
  }
  Tensor t = Allocate(got, ShapeOf(a, what), what);
  if (t.NumElements() == 0) return t;
  if (a.flags() & py::array::c_style) {
    std::memcpy(t.raw_data(), a.data(), t.TotalBytes());
  } else {
    // NumPy does the strided copy into a view of the tensor's buffer. The
    // capsule only marks the view as borrowed; the Tensor owns the memory
    // and outlives the view, which dies in this scope.
    py::capsule borrowed(t.raw_data(), [](void*) {});
    py::array dst(a.dtype(), NumpyShape(t.shape()), {}, t.raw_data(), borrowed);
    Numpy().copyto(dst, a, py::arg("casting") = "no");
  }
  return t;
}

py::object TensorToNumpy(Tensor tensor, absl::string_view what) {
  const DataType dtype = tensor.dtype();
  py::dtype dt = NumpyDtypeFor(dtype, what);  // throws for resource & co.
  const std::vector<py::ssize_t> shape = NumpyShape(tensor.shape());
  const int64_t n = tensor.NumElements();
  if (n > 0 && tensor.raw_data() == nullptr) {
    throw StatusError(errors::Internal(what, ": the tensor has no buffer"));
  }
  if (dtype == DT_STRING) {
    py::array out =
        Numpy().empty(py::tuple(py::cast(shape)), py::arg("dtype") = dt);
    PyObject** items = static_cast<PyObject**>(out.mutable_data());
    const std::string* src = tensor.data<std::string>();
    for (int64_t i = 0; i < n; ++i) {
      PyObject* b = PyBytes_FromStringAndSize(
          src[i].data(), static_cast<Py_ssize_t>(src[i].size()));
      if (b == nullptr) throw py::error_already_set();
      Py_XDECREF(items[i]);  // the None np.empty put there
      items[i] = b;
    }
    return out;
  }
  if (n == 0) return py::array(dt, shape);
  if (tensor.RefCountIsOne()) {
    // Zero copy: the capsule owns a Tensor sharing the buffer.
    auto* owner = new Tensor(std::move(tensor));
    py::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
    return py::array(dt, shape, {}, owner->raw_data(), base);
  }
  py::array out(dt, shape);
  std::memcpy(out.mutable_data(), tensor.raw_data(), tensor.TotalBytes());
  return out;
}

py::object FetchToPython(Tensor tensor, absl::string_view what) {
  const bool scalar = tensor.dims() == 0;
  py::object out = TensorToNumpy(std::move(tensor), what);
  if (!scalar) return out;
  return out[py::tuple()];  // arr[()]: the element as a NumPy scalar, or the bytes
}

}  // namespace python
}  // namespace recflow
