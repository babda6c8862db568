// Errors across the Python binding.
//
// Binding code reports a recflow absl::Status by throwing StatusError; the
// translator that RegisterStatusBindings installs turns it into the Python
// exception TensorFlow raises for that code (tf.errors.InvalidArgumentError,
// NotFoundError, OutOfRangeError, ...; the classes live in
// recflow/framework/errors.py, which hands their factory to the module with
// _pywrap.set_error_factory at import). Until a factory is set (the module
// used on its own), a StatusError becomes a RuntimeError whose message starts
// with the code's name.
//
// Plain Python misuse (a wrong argument type, an index out of range) throws
// pybind11's TypeError / ValueError / IndexError directly. Exceptions stay
// inside recflow/python: no recflow module below ever sees one.
#ifndef RECFLOW_PYTHON_PY_STATUS_H_
#define RECFLOW_PYTHON_PY_STATUS_H_

#include <pybind11/pybind11.h>

#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace recflow {
namespace python {

class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status);
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  absl::Status status_;
  std::string what_;
};

// REQUIRES (both): called with the GIL held or not; they only throw.
inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}
template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) throw StatusError(value.status());
  return std::move(value).value();
}

// Installs the translator and the module functions set_error_factory and
// error_code_name.
void RegisterStatusBindings(pybind11::module_& m);

}  // namespace python
}  // namespace recflow

#endif  // RECFLOW_PYTHON_PY_STATUS_H_
