#include "recflow/python/py_status.h"

#include "absl/strings/str_cat.h"

namespace py = pybind11;

namespace recflow {
namespace python {
namespace {

// The callable (code, message) -> exception instance that
// recflow/framework/errors.py registers. An owned reference, kept for the
// life of the interpreter (dropping it at exit would run Python code after
// finalization).
PyObject* g_error_factory = nullptr;

void SetPythonError(const absl::Status& status) {
  const std::string message(status.message());
  if (g_error_factory != nullptr) {
    // Messages may quote bytes from files or feeds: never fail on bad UTF-8.
    PyObject* text = PyUnicode_DecodeUTF8(
        message.data(), static_cast<Py_ssize_t>(message.size()), "replace");
    if (text == nullptr) return;
    PyObject* exc = PyObject_CallFunction(
        g_error_factory, "iO", static_cast<int>(status.code()), text);
    Py_DECREF(text);
    if (exc == nullptr) return;  // the factory raised; that error stands
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
    Py_DECREF(exc);
    return;
  }
  const std::string text =
      absl::StrCat(absl::StatusCodeToString(status.code()), ": ", message);
  PyErr_SetString(PyExc_RuntimeError, text.c_str());
}

}  // namespace

StatusError::StatusError(absl::Status status)
    : status_(std::move(status)), what_(status_.ToString()) {}

void RegisterStatusBindings(py::module_& m) {
  m.def(
      "set_error_factory",
      [](py::object factory) {
        if (!factory.is_none() && !PyCallable_Check(factory.ptr())) {
          throw py::type_error(
              "set_error_factory takes a callable (code, message) or None");
        }
        PyObject* old = g_error_factory;
        g_error_factory = factory.is_none() ? nullptr : factory.inc_ref().ptr();
        Py_XDECREF(old);
      },
      py::arg("factory"),
      "Sets the callable (code, message) -> exception used for recflow "
      "errors.");
  m.def(
      "error_code_name",
      [](int code) {
        return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
      },
      py::arg("code"),
      "absl's name of a status code: 3 -> 'INVALID_ARGUMENT'.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      SetPythonError(e.status());
    }
  });
}

}  // namespace python
}  // namespace recflow
