#include "recflow/core/json_writer.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recflow/core/logging.h"

namespace recflow {
namespace {

// The length of the valid UTF-8 sequence starting at s[i] (2 to 4), or 0
// when s[i] (>= 0x80) does not start one.
int Utf8SequenceLength(absl::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  int len = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (int k = 1; k < len; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;  // overlong, beyond Unicode, or a surrogate
  }
  return len;
}

// True for the ASCII bytes copied as they are.
inline bool Plain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

template <typename T>
void AppendFloating(T v, std::string* out) {
  if (std::isnan(v)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(v)) {
    out->append(v < 0 ? "-Infinity" : "Infinity");
    return;
  }
  // "%g" (6 significant digits) reads back exactly when the shortest form
  // that reads back has at most 6 significant digits; count them there
  // (to_chars' shortest form is fast; parsing back would not be).
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  int digits = 0, pending_zeros = 0;
  bool leading = true;
  for (const char* p = buf; p < r.ptr && *p != 'e'; ++p) {
    if (*p < '0' || *p > '9') continue;
    if (*p == '0') {
      if (!leading) ++pending_zeros;
      continue;
    }
    leading = false;
    digits += pending_zeros + 1;
    pending_zeros = 0;
  }
  r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general,
                    digits <= 6 ? 6 : std::numeric_limits<T>::max_digits10);
  const absl::string_view s(buf, r.ptr - buf);
  out->append(s.data(), s.size());
  if (s.find('.') == absl::string_view::npos &&
      s.find('e') == absl::string_view::npos) {
    out->append(".0");
  }
}

}  // namespace

void AppendJsonString(absl::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // Copy a run of plain ASCII at once.
    size_t run = i;
    while (run < n && Plain(static_cast<unsigned char>(s[run]))) ++run;
    if (run > i) {
      out->append(s.data() + i, run - i);
      i = run;
      if (i == n) break;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        default:  // the other control characters
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
      }
      ++i;
      continue;
    }
    const int len = Utf8SequenceLength(s, i);
    if (len > 0) {
      out->append(s.data() + i, len);
      i += len;
    } else {
      out->append("\xEF\xBF\xBD");  // U+FFFD
      ++i;
    }
  }
  out->push_back('"');
}

void AppendJsonDouble(double value, std::string* out) { AppendFloating(value, out); }
void AppendJsonFloat(float value, std::string* out) { AppendFloating(value, out); }

JsonWriter::JsonWriter(std::string* out, const Options& options)
    : out_(out), options_(options) {}

void JsonWriter::NewLine(size_t depth) {
  out_->push_back('\n');
  out_->append(depth * options_.indent, ' ');
}

void JsonWriter::Separate() {
  if (stack_.empty()) return;
  Frame& f = stack_.back();
  if (!f.empty) {
    if (f.multiline || options_.style == Style::kCompact) {
      out_->push_back(',');
    } else {
      out_->append(", ");
    }
  }
  f.empty = false;
  if (f.multiline) NewLine(stack_.size());
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  DCHECK(stack_.empty() || !stack_.back().object)
      << "JsonWriter: a value in an object needs a Key first";
  Separate();
}

JsonWriter& JsonWriter::Begin(char open, bool object, Layout layout) {
  BeforeValue();
  out_->push_back(open);
  stack_.push_back({object, layout == Layout::kMultiline, true});
  return *this;
}

JsonWriter& JsonWriter::End(char close, bool object) {
  DCHECK(!stack_.empty() && stack_.back().object == object && !after_key_)
      << "JsonWriter: unbalanced " << close;
  const Frame f = stack_.back();
  stack_.pop_back();
  if (f.multiline && !f.empty) NewLine(stack_.size());
  out_->push_back(close);
  return *this;
}

JsonWriter& JsonWriter::BeginObject(Layout layout) { return Begin('{', true, layout); }
JsonWriter& JsonWriter::EndObject() { return End('}', true); }
JsonWriter& JsonWriter::BeginArray(Layout layout) { return Begin('[', false, layout); }
JsonWriter& JsonWriter::EndArray() { return End(']', false); }

JsonWriter& JsonWriter::Key(absl::string_view key) {
  DCHECK(!stack_.empty() && stack_.back().object && !after_key_)
      << "JsonWriter: Key outside an object";
  Separate();
  AppendJsonString(key, out_);
  out_->append(options_.style == Style::kCompact ? ":" : ": ");
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(absl::string_view value) {
  BeforeValue();
  AppendJsonString(value, out_);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  absl::StrAppend(out_, value);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  absl::StrAppend(out_, value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  BeforeValue();
  AppendFloating(value, out_);
  return *this;
}

JsonWriter& JsonWriter::Float(float value) {
  BeforeValue();
  AppendFloating(value, out_);
  return *this;
}

JsonWriter& JsonWriter::Double(double value, int significant_digits) {
  if (!std::isfinite(value)) return Double(value);
  BeforeValue();
  absl::StrAppendFormat(out_, "%.*g", significant_digits, value);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_->append(value ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_->append("null");
  return *this;
}

JsonWriter& JsonWriter::Raw(absl::string_view json) {
  BeforeValue();
  out_->append(json.data(), json.size());
  return *this;
}

}  // namespace recflow
