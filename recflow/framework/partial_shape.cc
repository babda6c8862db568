#include "recflow/framework/partial_shape.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "recflow/core/status.h"

namespace recflow {

PartialShape::PartialShape(std::initializer_list<int64_t> dims)
    : unknown_rank_(false), dims_(dims.begin(), dims.end()) {}

PartialShape::PartialShape(absl::Span<const int64_t> dims)
    : unknown_rank_(false), dims_(dims.begin(), dims.end()) {}

PartialShape::PartialShape(const TensorShape& shape)
    : PartialShape(shape.dim_sizes()) {}

PartialShape PartialShape::UnknownDims(int rank) {
  PartialShape s;
  s.unknown_rank_ = false;
  s.dims_.assign(rank, kUnknownDim);
  return s;
}

absl::StatusOr<PartialShape> PartialShape::FromProto(
    const tensorflow::TensorShapeProto& proto) {
  if (proto.unknown_rank()) {
    if (proto.dim_size() > 0) {
      return errors::InvalidArgument(
          "TensorShapeProto has unknown_rank set and ", proto.dim_size(),
          " dims; it must have none");
    }
    return PartialShape();
  }
  PartialShape s;
  s.unknown_rank_ = false;
  for (const auto& d : proto.dim()) {
    if (d.size() < -1) {
      return errors::InvalidArgument("TensorShapeProto has dimension ",
                                     d.size(), "; sizes must be >= -1");
    }
    s.dims_.push_back(d.size());
  }
  return s;
}

absl::StatusOr<PartialShape> PartialShape::Parse(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text == "?") return PartialShape();
  if (!absl::ConsumePrefix(&text, "[") || !absl::ConsumeSuffix(&text, "]")) {
    return errors::InvalidArgument("cannot parse shape '", text,
                                   "': expected '[d0,d1,...]' or '?'");
  }
  PartialShape s;
  s.unknown_rank_ = false;
  if (absl::StripAsciiWhitespace(text).empty()) return s;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int64_t d;
    if (part == "?") {
      d = kUnknownDim;
    } else if (!absl::SimpleAtoi(part, &d) || d < -1) {
      return errors::InvalidArgument("cannot parse dimension '", part,
                                     "' in shape '[", text, "]'");
    }
    s.dims_.push_back(d);
  }
  return s;
}

void PartialShape::ToProto(tensorflow::TensorShapeProto* proto) const {
  proto->Clear();
  if (unknown_rank_) {
    proto->set_unknown_rank(true);
    return;
  }
  for (int64_t d : dims_) proto->add_dim()->set_size(d);
}

bool PartialShape::IsFullyDefined() const {
  if (unknown_rank_) return false;
  for (int64_t d : dims_) {
    if (d < 0) return false;
  }
  return true;
}

int64_t PartialShape::num_elements() const {
  if (!IsFullyDefined()) return -1;
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

bool PartialShape::IsCompatibleWith(const PartialShape& other) const {
  return Merge(other).ok();
}

absl::StatusOr<PartialShape> PartialShape::Merge(const PartialShape& other) const {
  if (unknown_rank_) return other;
  if (other.unknown_rank_) return *this;
  if (dims_.size() != other.dims_.size()) {
    return errors::InvalidArgument("shapes ", DebugString(), " and ",
                                   other.DebugString(),
                                   " have different ranks");
  }
  PartialShape out = *this;
  for (size_t i = 0; i < dims_.size(); ++i) {
    const int64_t a = dims_[i], b = other.dims_[i];
    if (a >= 0 && b >= 0 && a != b) {
      return errors::InvalidArgument("shapes ", DebugString(), " and ",
                                     other.DebugString(), " differ in dimension ",
                                     i, " (", a, " vs ", b, ")");
    }
    out.dims_[i] = a >= 0 ? a : b;
  }
  return out;
}

std::string PartialShape::DebugString() const {
  if (unknown_rank_) return "?";
  return absl::StrCat("[",
                      absl::StrJoin(dims_, ",",
                                    [](std::string* out, int64_t d) {
                                      if (d < 0) {
                                        out->append("?");
                                      } else {
                                        absl::StrAppend(out, d);
                                      }
                                    }),
                      "]");
}

}  // namespace recflow
