// Status helpers over absl::Status: early-return macros and error
// constructors that build their message from pieces, so call sites name the
// culprit without ceremony:
//
//   RETURN_IF_ERROR(ValidateShape(shape));
//   ASSIGN_OR_RETURN(Tensor t, ReadTensor(path));
//   return errors::InvalidArgument("node '", name, "': expected ", n, " inputs");
#ifndef RECFLOW_CORE_STATUS_H_
#define RECFLOW_CORE_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define RECFLOW_STATUS_CONCAT_INNER_(a, b) a##b
#define RECFLOW_STATUS_CONCAT_(a, b) RECFLOW_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` yields a non-OK status.
#define RETURN_IF_ERROR(expr)                                  \
  do {                                                         \
    ::absl::Status _recflow_status = (expr);                   \
    if (ABSL_PREDICT_FALSE(!_recflow_status.ok())) return _recflow_status; \
  } while (0)

// `lhs` receives the value of a StatusOr, or the enclosing function returns
// its error. `lhs` may declare a variable: ASSIGN_OR_RETURN(auto x, F());
#define ASSIGN_OR_RETURN(lhs, expr) \
  RECFLOW_ASSIGN_OR_RETURN_IMPL_(   \
      RECFLOW_STATUS_CONCAT_(_recflow_statusor_, __LINE__), lhs, expr)
#define RECFLOW_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)     \
  auto tmp = (expr);                                       \
  if (ABSL_PREDICT_FALSE(!tmp.ok())) return tmp.status(); \
  lhs = std::move(tmp).value()

namespace recflow {
namespace errors {

#define RECFLOW_DEFINE_ERROR_(Name)                                  \
  template <typename... Args>                                        \
  ::absl::Status Name(const Args&... args) {                         \
    return ::absl::Name##Error(::absl::StrCat(args...));             \
  }
RECFLOW_DEFINE_ERROR_(InvalidArgument)
RECFLOW_DEFINE_ERROR_(NotFound)
RECFLOW_DEFINE_ERROR_(AlreadyExists)
RECFLOW_DEFINE_ERROR_(FailedPrecondition)
RECFLOW_DEFINE_ERROR_(OutOfRange)
RECFLOW_DEFINE_ERROR_(Unimplemented)
RECFLOW_DEFINE_ERROR_(Internal)
RECFLOW_DEFINE_ERROR_(Unavailable)
RECFLOW_DEFINE_ERROR_(ResourceExhausted)
RECFLOW_DEFINE_ERROR_(Cancelled)
RECFLOW_DEFINE_ERROR_(DeadlineExceeded)
RECFLOW_DEFINE_ERROR_(PermissionDenied)
RECFLOW_DEFINE_ERROR_(DataLoss)
RECFLOW_DEFINE_ERROR_(Aborted)
RECFLOW_DEFINE_ERROR_(Unknown)
#undef RECFLOW_DEFINE_ERROR_

// Returns `status` with `context` put in front of its message, same code.
// OK stays OK.
inline ::absl::Status Annotate(const ::absl::Status& status,
                               absl::string_view context) {
  if (status.ok()) return status;
  return ::absl::Status(status.code(),
                        ::absl::StrCat(context, ": ", status.message()));
}

}  // namespace errors
}  // namespace recflow

#endif  // RECFLOW_CORE_STATUS_H_
