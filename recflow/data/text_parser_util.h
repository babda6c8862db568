// Internal helpers of the text parsers (text_parsers.h): number parsing
// without allocation, line and field naming for errors, bad-record
// reporting. Not a public interface; include only from recflow/data.

#ifndef RECFLOW_DATA_TEXT_PARSER_UTIL_H_
#define RECFLOW_DATA_TEXT_PARSER_UTIL_H_

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "recflow/core/tensor.h"
#include "recflow/data/dataset.h"
#include "recflow/data/text_parsers.h"

namespace recflow::data::text_internal {

constexpr std::array<uint8_t, 256> MakeHexTable() {
  std::array<uint8_t, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = 0xFF;
  for (int i = 0; i < 10; ++i) t['0' + i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 6; ++i) {
    t['a' + i] = static_cast<uint8_t>(10 + i);
    t['A' + i] = static_cast<uint8_t>(10 + i);
  }
  return t;
}
// Value of a hex digit ('0'-'9', 'a'-'f', 'A'-'F'), 0xFF for other bytes.
inline constexpr std::array<uint8_t, 256> kHexValue = MakeHexTable();

inline bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Removes one trailing '\r'.
inline absl::string_view StripCr(absl::string_view s) {
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

inline absl::string_view TrimBlanks(absl::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

// A decimal int64: optional '+' or '-', then 1+ digits, nothing else.
// False on anything else or overflow.
inline bool ParseInt64(absl::string_view s, int64_t* out) {
  const char* p = s.data();
  const char* end = p + s.size();
  bool neg = false;
  if (p < end && (*p == '-' || *p == '+')) neg = *p++ == '-';
  if (p == end) return false;
  if (end - p <= 18) {  // Cannot overflow.
    uint64_t v = 0;
    for (; p < end; ++p) {
      const unsigned d = static_cast<unsigned>(*p) - '0';
      if (d > 9) return false;
      v = v * 10 + d;
    }
    *out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return true;
  }
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(p, end, v);
  if (ec != std::errc() || ptr != end) return false;
  const uint64_t limit = neg ? (uint64_t{1} << 63) : (uint64_t{1} << 63) - 1;
  if (v > limit) return false;
  *out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

// A finite decimal number ("1", "-2.5", "+3e-2", ".5"): optional sign,
// no spaces, no inf/nan, no hex floats. False otherwise, also when the
// value overflows float.
inline bool ParseFiniteFloat(absl::string_view s, float* out) {
  const char* p = s.data();
  const char* end = p + s.size();
  if (p < end && *p == '+') {
    ++p;
    if (p < end && *p == '-') return false;
  }
  if (p == end) return false;
  float v;
  auto [ptr, ec] = std::from_chars(p, end, v, std::chars_format::general);
  if (ec != std::errc() || ptr != end || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// How a bad line is described: reason tag, the 0-based field (column)
// index or -1 for the whole line, the offending text and a short
// explanation. Built cheaply in the hot loop; formatted only if reported.
struct LineError {
  const char* reason = nullptr;
  int field = -1;
  absl::string_view text;
  const char* expected = "";  // "expected ..." explanation
  int64_t count = 0;          // wrong_field_count: fields found
};

// At most 64 bytes of `s`, C-escaped, with "..." when truncated.
std::string ShowText(absl::string_view s);

// "path:LINE" from origins, or "row R of the batch" when there are none.
std::string LineName(absl::Span<const absl::string_view> origins, int64_t row);

// InvalidArgument when origins is neither empty nor lines.size() long.
absl::Status CheckOrigins(absl::string_view format, size_t num_lines,
                          size_t num_origins);

// Reports a bad line per `opts` (HandleBadRecord with the message
//   "<format> line <where>, field <i> (<name>): <reason>: <expected>: '<text>'"
// ): OK means drop the line and go on.
absl::Status ReportBadLine(const BadRecordOptions& opts,
                           absl::string_view format,
                           absl::Span<const absl::string_view> origins,
                           int64_t row, absl::string_view field_name,
                           const LineError& error);

// Copies `v` into a new tensor [v.size()].
template <typename T>
absl::StatusOr<Tensor> VectorToTensor(const std::vector<T>& v) {
  auto t = Tensor::Create(DataTypeToEnum<T>::value,
                          TensorShape({static_cast<int64_t>(v.size())}));
  if (!t.ok()) return t.status();
  if (!v.empty()) std::copy(v.begin(), v.end(), t->template data<T>());
  return t;
}

}  // namespace recflow::data::text_internal

#endif  // RECFLOW_DATA_TEXT_PARSER_UTIL_H_
