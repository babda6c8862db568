// Test-only: teaches GoogleTest to print Debian absl's string_view (its own
// class, not std::string_view) as text instead of a list of characters, so
// a failed HasSubstr on status.message() shows the message. The build
// force-includes this into the test binaries.
#ifndef RECFLOW_CORE_TESTING_GTEST_PRINTERS_H_
#define RECFLOW_CORE_TESTING_GTEST_PRINTERS_H_

#include <ostream>

#include "absl/strings/string_view.h"

namespace absl {
ABSL_NAMESPACE_BEGIN
inline void PrintTo(string_view s, std::ostream* os) { *os << '"' << s << '"'; }
ABSL_NAMESPACE_END
}  // namespace absl

#endif  // RECFLOW_CORE_TESTING_GTEST_PRINTERS_H_
