// recflow._pywrap: the one extension module of the Python package. It binds
// graph construction (py_graph.h), sessions (py_session.cc), NumPy
// conversion (py_tensor.h), the op and gradient registries, custom-op
// libraries, error translation (py_status.h), the protobuf bridge
// (py_proto.cc) and TFRecord files (py_record_io.cc). The `recflow` package
// (recflow/python/recflow/) builds TensorFlow 1.x's API on top of it; nothing
// here is meant to be called by users directly. See docs/python.md.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "recflow/core/dtype.h"
#include "recflow/python/py_graph.h"
#include "recflow/python/py_status.h"
#include "recflow/python/py_tensor.h"

namespace py = pybind11;

namespace recflow {
namespace python {
void RegisterSessionBindings(py::module_& m);  // py_session.cc
void RegisterProtoBindings(py::module_& m);    // py_proto.cc
void RegisterFunctionBindings(py::module_& m); // py_function.cc
void RegisterDistributedBindings(py::module_& m);  // py_distributed.cc
void RegisterModelBindings(py::module_& m);    // py_models.cc
void RegisterSummaryBindings(py::module_& m);  // py_summary.cc
void RegisterMetricsBindings(py::module_& m);  // py_metrics.cc
void RegisterRecordIoBindings(py::module_& m);  // py_record_io.cc
}  // namespace python
}  // namespace recflow

PYBIND11_MODULE(_pywrap, m) {
  using namespace recflow;          // NOLINT
  using namespace recflow::python;  // NOLINT
  m.doc() =
      "recflow's C++ core for the recflow Python package (see docs/python.md).";
  RegisterStatusBindings(m);
  RegisterGraphBindings(m);
  RegisterSessionBindings(m);
  RegisterProtoBindings(m);
  RegisterFunctionBindings(m);
  RegisterDistributedBindings(m);
  RegisterModelBindings(m);
  RegisterSummaryBindings(m);
  RegisterMetricsBindings(m);
  RegisterRecordIoBindings(m);
  m.def(
      "dtype_name",
      [](int dtype) { return DataTypeString(static_cast<DataType>(dtype)); },
      py::arg("dtype"), "recflow's name of a DataType number: 1 -> 'float'.");
  m.def(
      "tensor_roundtrip",
      [](py::handle value, int dtype) {
        // NumPy -> Tensor -> NumPy, for tests of the conversions.
        if (dtype != 0 && !DataTypeIsValid(dtype)) {
          throw py::value_error("tensor_roundtrip: not a DataType number");
        }
        return TensorToNumpy(
            TensorFromPython(value, static_cast<DataType>(dtype), "value"),
            "value");
      },
      py::arg("value"), py::arg("dtype") = 0);
}
