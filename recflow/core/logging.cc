#include "recflow/core/logging.h"

#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace recflow {
namespace logging_internal {
namespace {

int ReadIntFromEnv(const char* name, int default_value) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return default_value;
  char* end = nullptr;
  errno = 0;
  long parsed = std::strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0') return default_value;
  if (parsed > 1000) parsed = 1000;
  if (parsed < -1000) parsed = -1000;
  return static_cast<int>(parsed);
}

std::atomic<int>& MinLogLevel() {
  static std::atomic<int> level{ReadIntFromEnv("RECFLOW_MIN_LOG_LEVEL", 0)};
  return level;
}

const char* BaseName(const char* file) {
  const char* slash = std::strrchr(file, '/');
  return slash == nullptr ? file : slash + 1;
}

// Writes all of `data` to stderr with as few write(2) calls as possible (one,
// in practice), so concurrent messages do not interleave.
void WriteToStderr(const std::string& data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // Nowhere left to report the failure.
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

int ReadVlogLevelFromEnv() { return ReadIntFromEnv("RECFLOW_VLOG", 0); }

LogMessage::LogMessage(const char* file, int line, LogSeverity severity)
    : file_(file), line_(line), severity_(severity) {}

LogMessage::~LogMessage() { Emit(); }

void LogMessage::Emit() {
  if (severity_ != LogSeverity::kFatal &&
      static_cast<int>(severity_) <
          MinLogLevel().load(std::memory_order_relaxed)) {
    return;
  }
  static constexpr char kLetters[] = {'I', 'W', 'E', 'F'};
  int index = static_cast<int>(severity_);
  char letter = (index >= 0 && index < 4) ? kLetters[index] : '?';

  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm_time;
  time_t seconds = tv.tv_sec;
  localtime_r(&seconds, &tm_time);

  char prefix[128];
  int len = std::snprintf(
      prefix, sizeof(prefix), "%c%02d%02d %02d:%02d:%02d.%06ld %s:%d] ", letter,
      tm_time.tm_mon + 1, tm_time.tm_mday, tm_time.tm_hour, tm_time.tm_min,
      tm_time.tm_sec, static_cast<long>(tv.tv_usec), BaseName(file_), line_);
  std::string message;
  if (len > 0) {
    message.assign(prefix, std::min<size_t>(len, sizeof(prefix) - 1));
  }
  message += stream_.str();
  if (message.empty() || message.back() != '\n') message += '\n';
  WriteToStderr(message);
}

LogMessageFatal::LogMessageFatal(const char* file, int line)
    : LogMessage(file, line, LogSeverity::kFatal) {}

LogMessageFatal::LogMessageFatal(const char* file, int line,
                                 std::string* check_message)
    : LogMessage(file, line, LogSeverity::kFatal) {
  if (check_message != nullptr) {
    stream() << *check_message;
    delete check_message;
  }
}

LogMessageFatal::~LogMessageFatal() {
  Emit();
  std::abort();
}

std::string* MakeCheckOkString(const absl::Status& status,
                               const char* expr_text) {
  std::string* result = new std::string("Check failed: ");
  result->append(expr_text);
  result->append(" is OK (");
  result->append(status.ToString());
  result->append(") ");
  return result;
}

}  // namespace logging_internal

void SetVlogLevel(int level) {
  logging_internal::VlogLevel().store(level, std::memory_order_relaxed);
}

void SetMinLogLevel(LogSeverity severity) {
  logging_internal::MinLogLevel().store(static_cast<int>(severity),
                                        std::memory_order_relaxed);
}

}  // namespace recflow
