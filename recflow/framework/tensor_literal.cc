#include "recflow/framework/tensor_literal.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/core/text_scanner.h"

namespace recflow {
namespace {

class LiteralParser {
 public:
  explicit LiteralParser(absl::string_view text) : in_(text) {}

  absl::StatusOr<TensorLiteral> Parse() {
    TensorLiteral out;
    RETURN_IF_ERROR(Value(0, &out));
    if (!in_.AtEnd()) return in_.Error("unexpected text after the value");
    out.shape = Shape();
    return out;
  }

 private:
  // Parses a value at nesting `depth`, checking that lists are rectangular.
  absl::Status Value(size_t depth, TensorLiteral* out) {
    if (in_.AtEnd()) return in_.Error("expected a number, a string or '['");
    if (depth > 32) return in_.Error("lists nested too deeply");
    if (in_.Consume('[')) {
      int64_t n = 0;
      if (!in_.Consume(']')) {
        while (true) {
          RETURN_IF_ERROR(Value(depth + 1, out));
          ++n;
          if (in_.Consume(',')) continue;
          if (in_.Consume(']')) break;
          return in_.Error("expected ',' or ']'");
        }
      }
      return SetDim(depth, n);
    }
    if (!scalar_seen_) {
      scalar_seen_ = true;
      scalar_depth_ = depth;
      for (size_t d = depth; d < dims_.size(); ++d) {
        if (dims_[d] != -1)
          return in_.Error(
              "ragged nested list (a number where a list was seen)");
      }
    } else if (depth != scalar_depth_) {
      return in_.Error("ragged nested list (numbers at different depths)");
    }
    if (in_.Peek('"') || in_.Peek('\'') ||
        ((in_.Peek('b') || in_.Peek('B')) && in_.Rest().size() > 1 &&
         (in_.Rest()[1] == '"' || in_.Rest()[1] == '\''))) {
      if (!out->values.empty()) {
        return in_.Error("a string among numbers");
      }
      std::string str;
      RETURN_IF_ERROR(QuotedString(&str));
      out->strings.push_back(std::move(str));
      return absl::OkStatus();
    }
    if (!out->strings.empty()) return in_.Error("a number among strings");
    const std::string token(in_.Token(",]"));
    long double v = 0;
    if (token == "true" || token == "True") {
      v = 1;
    } else if (token == "false" || token == "False") {
      v = 0;
    } else {
      char* stop = nullptr;
      errno = 0;
      v = std::strtold(token.c_str(), &stop);
      if (token.empty() || stop != token.c_str() + token.size()) {
        return in_.Error(absl::StrCat("'", token, "' is not a number"));
      }
    }
    out->values.push_back(v);
    in_.Skip(token.size());
    return absl::OkStatus();
  }
  // A Python string literal: '...' or "...", optionally b-prefixed, with
  // the escapes \\ \' \" \n \r \t \0 and \xHH.
  absl::Status QuotedString(std::string* out) {
    absl::string_view rest = in_.Rest();
    size_t i = 0;
    if (rest[i] == 'b' || rest[i] == 'B') ++i;
    const char quote = rest[i++];
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    while (true) {
      if (i >= rest.size()) return in_.Error("unterminated string");
      const char c = rest[i++];
      if (c == quote) break;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (i >= rest.size()) return in_.Error("unterminated string");
      const char e = rest[i++];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case '0': out->push_back('\0'); break;
        case '\\': case '\'': case '"': out->push_back(e); break;
        case 'x': {
          if (i + 1 >= rest.size() || hex(rest[i]) < 0 || hex(rest[i + 1]) < 0) {
            return in_.Error("\\x needs two hex digits");
          }
          out->push_back(static_cast<char>(hex(rest[i]) * 16 + hex(rest[i + 1])));
          i += 2;
          break;
        }
        default:
          return in_.Error(absl::StrCat("unknown escape '\\", std::string(1, e), "'"));
      }
    }
    in_.Skip(i);
    return absl::OkStatus();
  }
  absl::Status SetDim(size_t depth, int64_t n) {
    if (scalar_seen_ && depth >= scalar_depth_) {
      return in_.Error("ragged nested list (a list where a number was seen)");
    }
    if (dims_.size() <= depth) dims_.resize(depth + 1, -1);
    if (dims_[depth] == -1) {
      dims_[depth] = n;
    } else if (dims_[depth] != n) {
      return in_.Error(absl::StrCat("ragged nested list (lengths ",
                                    dims_[depth], " and ", n, " at depth ",
                                    depth, ")"));
    }
    return absl::OkStatus();
  }
  // The shape of what was parsed; an empty innermost list has size 0.
  std::vector<int64_t> Shape() const {
    std::vector<int64_t> s = dims_;
    if (scalar_seen_) s.resize(scalar_depth_);
    for (int64_t& d : s) d = std::max<int64_t>(d, 0);
    return s;
  }

  TextScanner in_;
  bool scalar_seen_ = false;
  size_t scalar_depth_ = 0;
  std::vector<int64_t> dims_;  // -1: not seen yet
};

absl::StatusOr<long double> ValueOf(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_FLOAT: return t.flat<float>()[i];
    case DT_DOUBLE: return t.flat<double>()[i];
    case DT_HALF: return static_cast<float>(t.flat<half>()[i]);
    case DT_BFLOAT16: return static_cast<float>(t.flat<bfloat16>()[i]);
    case DT_INT8: return t.flat<int8_t>()[i];
    case DT_INT16: return t.flat<int16_t>()[i];
    case DT_INT32: return t.flat<int32_t>()[i];
    case DT_INT64: return t.flat<int64_t>()[i];
    case DT_UINT8: return t.flat<uint8_t>()[i];
    case DT_UINT16: return t.flat<uint16_t>()[i];
    case DT_UINT32: return t.flat<uint32_t>()[i];
    case DT_UINT64: return t.flat<uint64_t>()[i];
    case DT_BOOL: return t.flat<bool>()[i] ? 1 : 0;
    default:
      return errors::Unimplemented("dtype ", DataTypeString(t.dtype()));
  }
}

// Stores integral `v` as element i of `t` (an integer dtype T), refusing a
// value that is not integral or out of T's range.
template <typename T>
absl::Status SetInteger(long double v, absl::string_view what, Tensor* t,
                        int64_t i) {
  if (v != std::floor(v) ||
      v < static_cast<long double>(std::numeric_limits<T>::min()) ||
      v > static_cast<long double>(std::numeric_limits<T>::max())) {
    return errors::InvalidArgument(what, " is ", DataTypeString(t->dtype()),
                                   " but value ", static_cast<double>(v),
                                   " is not an integer in range");
  }
  t->flat<T>()[i] = static_cast<T>(v);
  return absl::OkStatus();
}

absl::Status SetElement(long double v, absl::string_view what, Tensor* t,
                        int64_t i) {
  switch (t->dtype()) {
    case DT_FLOAT: t->flat<float>()[i] = static_cast<float>(v); break;
    case DT_DOUBLE: t->flat<double>()[i] = static_cast<double>(v); break;
    case DT_HALF: t->flat<half>()[i] = half(static_cast<float>(v)); break;
    case DT_BFLOAT16:
      t->flat<bfloat16>()[i] = bfloat16(static_cast<float>(v));
      break;
    case DT_INT8: return SetInteger<int8_t>(v, what, t, i);
    case DT_INT16: return SetInteger<int16_t>(v, what, t, i);
    case DT_INT32: return SetInteger<int32_t>(v, what, t, i);
    case DT_INT64: return SetInteger<int64_t>(v, what, t, i);
    case DT_UINT8: return SetInteger<uint8_t>(v, what, t, i);
    case DT_UINT16: return SetInteger<uint16_t>(v, what, t, i);
    case DT_UINT32: return SetInteger<uint32_t>(v, what, t, i);
    case DT_UINT64: return SetInteger<uint64_t>(v, what, t, i);
    case DT_BOOL: t->flat<bool>()[i] = v != 0; break;
    case DT_STRING:
      return errors::InvalidArgument(what, " is string but the value is a "
                                     "number; quote it (\"...\" or b\"...\")");
    default:
      return errors::Unimplemented(
          what, " is ", DataTypeString(t->dtype()),
          ", which cannot be given as a literal (numbers, bools and strings "
          "can)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TensorLiteral> ParseTensorLiteral(absl::string_view text) {
  return LiteralParser(text).Parse();
}

absl::StatusOr<TensorLiteral> TensorLiteralFromTensor(const Tensor& t) {
  TensorLiteral a;
  for (int i = 0; i < t.shape().dims(); ++i)
    a.shape.push_back(t.shape().dim_size(i));
  if (t.dtype() == DT_STRING) {
    auto flat = t.flat<std::string>();
    a.strings.assign(flat.begin(), flat.end());
    return a;
  }
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    ASSIGN_OR_RETURN(long double v, ValueOf(t, i));
    a.values.push_back(v);
  }
  return a;
}

absl::StatusOr<Tensor> TensorLiteralToTensor(const TensorLiteral& a,
                                             DataType dtype,
                                             const PartialShape& want,
                                             absl::string_view what,
                                             bool* reshaped) {
  if (reshaped != nullptr) *reshaped = false;
  TensorShape shape(absl::MakeConstSpan(a.shape));
  const int64_t n = static_cast<int64_t>(a.strings.empty() ? a.values.size()
                                                           : a.strings.size());
  if (a.shape.size() <= 1 && want.rank() >= 0 &&
      !want.IsCompatibleWith(PartialShape(shape))) {
    int unknown = 0;
    int64_t known = 1;
    for (int d = 0; d < want.rank(); ++d) {
      if (want.dim(d) < 0) {
        ++unknown;
      } else {
        known *= want.dim(d);
      }
    }
    if (unknown <= 1 && known > 0 && n % known == 0 &&
        (unknown == 1 || n == known)) {
      std::vector<int64_t> dims(want.dims().begin(), want.dims().end());
      for (int64_t& d : dims) {
        if (d < 0) d = n / known;
      }
      shape = TensorShape(absl::MakeConstSpan(dims));
      if (reshaped != nullptr) *reshaped = true;
    }
  }
  Tensor t(dtype, shape);
  if (!a.strings.empty()) {
    if (dtype != DT_STRING) {
      return errors::InvalidArgument(what, " is ", DataTypeString(dtype),
                                     " but the value holds strings");
    }
    auto flat = t.flat<std::string>();
    for (int64_t i = 0; i < n; ++i) flat[i] = a.strings[i];
    return t;
  }
  for (int64_t i = 0; i < n; ++i) {
    RETURN_IF_ERROR(SetElement(a.values[i], what, &t, i));
  }
  return t;
}

}  // namespace recflow
