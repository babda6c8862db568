// Minimal logging and assertion macros.
//
//   LOG(INFO) << "loaded " << n << " rows";      // also WARNING, ERROR, FATAL
//   LOG_IF(WARNING, n == 0) << "empty table";
//   VLOG(2) << "step " << step;                   // only if RECFLOW_VLOG >= 2
//   CHECK(ptr != nullptr) << "more context";      // aborts the process
//   CHECK_EQ(a.size(), b.size());                 // prints both values
//   CHECK_OK(env->CreateDir(dir));                // prints the status
//   DCHECK_LT(i, n);                              // no code under NDEBUG
//
// Each message is written to stderr as one line with a short prefix:
//
//   I1130 11:54:03.123456 executor.cc:42] message
//
// (severity letter, local month, day and time with microseconds, base name
// of the source file and line), as glog does.
// LOG(FATAL) and failed CHECKs write their message and then call abort().
//
// CHECKs are for broken internal invariants only. Bad user input, bad files
// and failed I/O are reported as absl::Status (see CONVENTIONS.md); a kernel
// never crashes the process on bad data.
//
// Environment variables, read once at first use:
//   RECFLOW_VLOG=N            enables VLOG(n) for n <= N (default 0: none).
//   RECFLOW_MIN_LOG_LEVEL=N   drops LOG messages below severity N
//                             (0=INFO, 1=WARNING, 2=ERROR; FATAL always
//                             prints). Default 0.
//
// Cost when disabled: a VLOG or DCHECK that is off evaluates none of its
// stream arguments; a disabled VLOG is one relaxed atomic load and a compare.
// CHECK_op evaluates each argument exactly once. Integer comparisons in
// CHECK_op are exact across signedness (CHECK_LT(-1, size_t{3}) passes).
//
// Thread-safety: all macros may be used from any thread; each message is
// emitted with a single write, so lines from different threads do not
// interleave.

#ifndef RECFLOW_CORE_LOGGING_H_
#define RECFLOW_CORE_LOGGING_H_

#include <atomic>
#include <concepts>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace recflow {

enum class LogSeverity : int {
  kInfo = 0,
  kWarning = 1,
  kError = 2,
  kFatal = 3,
};

// Overrides RECFLOW_VLOG for the rest of the process (tests, command-line
// flags).
void SetVlogLevel(int level);

// Overrides RECFLOW_MIN_LOG_LEVEL for the rest of the process.
void SetMinLogLevel(LogSeverity severity);

// Implementation details follow; use the macros.
namespace logging_internal {

// Accumulates one message and writes it to stderr when destroyed.
class LogMessage {
 public:
  LogMessage(const char* file, int line, LogSeverity severity);
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage();

  std::ostream& stream() { return stream_; }

 protected:
  void Emit();

 private:
  const char* file_;
  int line_;
  LogSeverity severity_;
  std::ostringstream stream_;
};

// Writes its message, then aborts. Takes ownership of `check_message`
// (may be null), which is written first.
class LogMessageFatal : public LogMessage {
 public:
  LogMessageFatal(const char* file, int line);
  LogMessageFatal(const char* file, int line, std::string* check_message);
  [[noreturn]] ~LogMessageFatal();
};

// Turns `cond ? (void)0 : Voidify() & stream << ...` into a void expression;
// `&` binds more loosely than `<<` and more tightly than `?:`.
struct Voidify {
  void operator&(std::ostream&) {}
};

int ReadVlogLevelFromEnv();

inline std::atomic<int>& VlogLevel() {
  static std::atomic<int> level{ReadVlogLevelFromEnv()};
  return level;
}

// Integer types that std::cmp_less and friends accept.
template <typename T>
concept CmpInteger =
    std::is_integral_v<T> && !std::is_same_v<T, bool> &&
    !std::is_same_v<T, char> && !std::is_same_v<T, wchar_t> &&
    !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> &&
    !std::is_same_v<T, char32_t>;

#define RECFLOW_LOGGING_INTERNAL_DEFINE_CMP(name, op, std_cmp) \
  template <typename A, typename B>                            \
  inline bool name(const A& a, const B& b) {                   \
    if constexpr (CmpInteger<A> && CmpInteger<B>) {            \
      return std::std_cmp(a, b);                               \
    } else {                                                   \
      return a op b;                                           \
    }                                                          \
  }
RECFLOW_LOGGING_INTERNAL_DEFINE_CMP(CmpEQ, ==, cmp_equal)
RECFLOW_LOGGING_INTERNAL_DEFINE_CMP(CmpNE, !=, cmp_not_equal)
RECFLOW_LOGGING_INTERNAL_DEFINE_CMP(CmpLT, <, cmp_less)
RECFLOW_LOGGING_INTERNAL_DEFINE_CMP(CmpLE, <=, cmp_less_equal)
RECFLOW_LOGGING_INTERNAL_DEFINE_CMP(CmpGT, >, cmp_greater)
RECFLOW_LOGGING_INTERNAL_DEFINE_CMP(CmpGE, >=, cmp_greater_equal)
#undef RECFLOW_LOGGING_INTERNAL_DEFINE_CMP

// Streams `v` for a CHECK_op failure message.
template <typename T>
void PrintCheckValue(std::ostream& os, const T& v) {
  if constexpr (std::is_same_v<T, char> || std::is_same_v<T, signed char> ||
                std::is_same_v<T, unsigned char>) {
    os << "'" << v << "' (" << static_cast<int>(v) << ")";
  } else if constexpr (std::is_enum_v<T>) {
    os << static_cast<std::underlying_type_t<T>>(v);
  } else if constexpr (requires { os << v; }) {
    os << v;
  } else {
    os << "(unprintable value)";
  }
}

// Builds "a op b (va vs. vb)". Out of line in spirit: only failures call it.
template <typename A, typename B>
[[gnu::noinline, gnu::cold]] std::string* MakeCheckOpString(
    const A& a, const B& b, const char* expr_text) {
  std::ostringstream os;
  os << "Check failed: " << expr_text << " (";
  PrintCheckValue(os, a);
  os << " vs. ";
  PrintCheckValue(os, b);
  os << ") ";
  return new std::string(os.str());
}

#define RECFLOW_LOGGING_INTERNAL_DEFINE_CHECK_OP(name, cmp)            \
  template <typename A, typename B>                                    \
  inline std::string* name(const A& a, const B& b, const char* text) { \
    if (ABSL_PREDICT_TRUE(cmp(a, b))) return nullptr;                  \
    return MakeCheckOpString(a, b, text);                              \
  }
RECFLOW_LOGGING_INTERNAL_DEFINE_CHECK_OP(CheckEQ, CmpEQ)
RECFLOW_LOGGING_INTERNAL_DEFINE_CHECK_OP(CheckNE, CmpNE)
RECFLOW_LOGGING_INTERNAL_DEFINE_CHECK_OP(CheckLT, CmpLT)
RECFLOW_LOGGING_INTERNAL_DEFINE_CHECK_OP(CheckLE, CmpLE)
RECFLOW_LOGGING_INTERNAL_DEFINE_CHECK_OP(CheckGT, CmpGT)
RECFLOW_LOGGING_INTERNAL_DEFINE_CHECK_OP(CheckGE, CmpGE)
#undef RECFLOW_LOGGING_INTERNAL_DEFINE_CHECK_OP

std::string* MakeCheckOkString(const absl::Status& status,
                               const char* expr_text);

inline std::string* CheckOk(const absl::Status& status, const char* expr_text) {
  if (ABSL_PREDICT_TRUE(status.ok())) return nullptr;
  return MakeCheckOkString(status, expr_text);
}

template <typename T>
inline std::string* CheckOk(const absl::StatusOr<T>& status_or,
                            const char* expr_text) {
  return CheckOk(status_or.status(), expr_text);
}

}  // namespace logging_internal

// True if VLOG(level) messages are emitted.
inline bool VlogIsOn(int level) {
  return level <= logging_internal::VlogLevel().load(std::memory_order_relaxed);
}

}  // namespace recflow

// ---------------------------------------------------------------------------
// LOG

#define RECFLOW_LOGGING_INTERNAL_INFO                         \
  ::recflow::logging_internal::LogMessage(__FILE__, __LINE__, \
                                          ::recflow::LogSeverity::kInfo)
#define RECFLOW_LOGGING_INTERNAL_WARNING                      \
  ::recflow::logging_internal::LogMessage(__FILE__, __LINE__, \
                                          ::recflow::LogSeverity::kWarning)
#define RECFLOW_LOGGING_INTERNAL_ERROR                        \
  ::recflow::logging_internal::LogMessage(__FILE__, __LINE__, \
                                          ::recflow::LogSeverity::kError)
#define RECFLOW_LOGGING_INTERNAL_FATAL \
  ::recflow::logging_internal::LogMessageFatal(__FILE__, __LINE__)

// severity is one of INFO, WARNING, ERROR, FATAL.
#define LOG(severity) RECFLOW_LOGGING_INTERNAL_##severity.stream()

#define LOG_IF(severity, condition) \
  !(condition) ? (void)0            \
               : ::recflow::logging_internal::Voidify() & LOG(severity)

#define VLOG_IS_ON(level) (::recflow::VlogIsOn(level))

#define VLOG(level) LOG_IF(INFO, VLOG_IS_ON(level))

// ---------------------------------------------------------------------------
// CHECK

#define CHECK(condition)                                                   \
  ABSL_PREDICT_TRUE(condition)                                             \
  ? (void)0                                                                \
  : ::recflow::logging_internal::Voidify() &                               \
          ::recflow::logging_internal::LogMessageFatal(__FILE__, __LINE__) \
                  .stream()                                                \
              << "Check failed: " #condition " "

#define RECFLOW_LOGGING_INTERNAL_CHECK_OP(name, op, a, b)                    \
  while (std::string* recflow_check_op_result =                              \
             ::recflow::logging_internal::name((a), (b), #a " " #op " " #b)) \
  ::recflow::logging_internal::LogMessageFatal(__FILE__, __LINE__,           \
                                               recflow_check_op_result)      \
      .stream()

#define CHECK_EQ(a, b) RECFLOW_LOGGING_INTERNAL_CHECK_OP(CheckEQ, ==, a, b)
#define CHECK_NE(a, b) RECFLOW_LOGGING_INTERNAL_CHECK_OP(CheckNE, !=, a, b)
#define CHECK_LT(a, b) RECFLOW_LOGGING_INTERNAL_CHECK_OP(CheckLT, <, a, b)
#define CHECK_LE(a, b) RECFLOW_LOGGING_INTERNAL_CHECK_OP(CheckLE, <=, a, b)
#define CHECK_GT(a, b) RECFLOW_LOGGING_INTERNAL_CHECK_OP(CheckGT, >, a, b)
#define CHECK_GE(a, b) RECFLOW_LOGGING_INTERNAL_CHECK_OP(CheckGE, >=, a, b)

// Accepts an absl::Status or an absl::StatusOr<T>.
#define CHECK_OK(status)                                                \
  while (std::string* recflow_check_ok_result =                         \
             ::recflow::logging_internal::CheckOk((status), #status))   \
  ::recflow::logging_internal::LogMessageFatal(__FILE__, __LINE__,      \
                                               recflow_check_ok_result) \
      .stream()

// ---------------------------------------------------------------------------
// DCHECK: CHECK in debug builds; under NDEBUG the arguments are type-checked
// but never evaluated, and the code is removed.

#ifndef NDEBUG
#define DCHECK(condition) CHECK(condition)
#define DCHECK_EQ(a, b) CHECK_EQ(a, b)
#define DCHECK_NE(a, b) CHECK_NE(a, b)
#define DCHECK_LT(a, b) CHECK_LT(a, b)
#define DCHECK_LE(a, b) CHECK_LE(a, b)
#define DCHECK_GT(a, b) CHECK_GT(a, b)
#define DCHECK_GE(a, b) CHECK_GE(a, b)
#define DCHECK_OK(status) CHECK_OK(status)
#else
#define DCHECK(condition) \
  while (false) CHECK(condition)
#define DCHECK_EQ(a, b) \
  while (false) CHECK_EQ(a, b)
#define DCHECK_NE(a, b) \
  while (false) CHECK_NE(a, b)
#define DCHECK_LT(a, b) \
  while (false) CHECK_LT(a, b)
#define DCHECK_LE(a, b) \
  while (false) CHECK_LE(a, b)
#define DCHECK_GT(a, b) \
  while (false) CHECK_GT(a, b)
#define DCHECK_GE(a, b) \
  while (false) CHECK_GE(a, b)
#define DCHECK_OK(status) \
  while (false) CHECK_OK(status)
#endif  // NDEBUG

#endif  // RECFLOW_CORE_LOGGING_H_
