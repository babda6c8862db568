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
    if (in_.AtEnd()) return in_.Error("expected a number or '['");
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
    case DT_FLOAT:
      return t.flat<float>()[i];
    case DT_DOUBLE:
      return t.flat<double>()[i];
    case DT_INT32:
      return t.flat<int32_t>()[i];
    case DT_INT64:
      return t.flat<int64_t>()[i];
    case DT_BOOL:
      return t.flat<bool>()[i] ? 1 : 0;
    default:
      return errors::Unimplemented("dtype ", DataTypeString(t.dtype()));
  }
}

}  // namespace

absl::StatusOr<TensorLiteral> ParseTensorLiteral(absl::string_view text) {
  return LiteralParser(text).Parse();
}

absl::StatusOr<TensorLiteral> TensorLiteralFromTensor(const Tensor& t) {
  TensorLiteral a;
  for (int i = 0; i < t.shape().dims(); ++i)
    a.shape.push_back(t.shape().dim_size(i));
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
  const int64_t n = static_cast<int64_t>(a.values.size());
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
  for (int64_t i = 0; i < n; ++i) {
    const long double v = a.values[i];
    const bool integral = v == std::floor(v);
    switch (dtype) {
      case DT_FLOAT:
        t.flat<float>()[i] = static_cast<float>(v);
        break;
      case DT_DOUBLE:
        t.flat<double>()[i] = static_cast<double>(v);
        break;
      case DT_INT32:
      case DT_INT64: {
        const long double lo = dtype == DT_INT32
                                   ? std::numeric_limits<int32_t>::min()
                                   : std::numeric_limits<int64_t>::min();
        const long double hi = dtype == DT_INT32
                                   ? std::numeric_limits<int32_t>::max()
                                   : std::numeric_limits<int64_t>::max();
        if (!integral || v < lo || v > hi) {
          return errors::InvalidArgument(what, " is ", DataTypeString(dtype),
                                         " but value ", static_cast<double>(v),
                                         " is not an integer in range");
        }
        if (dtype == DT_INT32) {
          t.flat<int32_t>()[i] = static_cast<int32_t>(v);
        } else {
          t.flat<int64_t>()[i] = static_cast<int64_t>(v);
        }
        break;
      }
      case DT_BOOL:
        t.flat<bool>()[i] = v != 0;
        break;
      default:
        return errors::Unimplemented(
            what, " is ", DataTypeString(dtype),
            "; only float, double, int32, int64 and bool inputs can be "
            "given as literals");
    }
  }
  return t;
}

}  // namespace recflow
