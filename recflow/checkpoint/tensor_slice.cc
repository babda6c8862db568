#include "recflow/checkpoint/tensor_slice.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::checkpoint {

namespace ordered_code {

void WriteNumIncreasing(std::string* dest, uint64_t value) {
  unsigned char bytes[8];
  int n = 0;
  for (uint64_t v = value; v != 0; v >>= 8) bytes[n++] = static_cast<unsigned char>(v & 0xff);
  dest->push_back(static_cast<char>(n));
  while (n > 0) dest->push_back(static_cast<char>(bytes[--n]));
}

void WriteString(std::string* dest, absl::string_view s) {
  for (const char c : s) {
    if (c == '\0') {
      dest->append("\0\xff", 2);
    } else if (c == '\xff') {
      dest->append("\xff\0", 2);
    } else {
      dest->push_back(c);
    }
  }
  dest->append("\0\1", 2);
}

void WriteSignedNumIncreasing(std::string* dest, int64_t value) {
  // n bytes hold [-2^(7n-1), 2^(7n-1)), n = 1..10: the top n bits of the
  // field (sign and size bits) flip the sign-extended value's leading bits.
  const uint64_t magnitude = value < 0 ? ~static_cast<uint64_t>(value) : value;
  int bits = 0;  // significant bits of the magnitude
  for (uint64_t m = magnitude; m != 0; m >>= 1) ++bits;
  const int n = std::min(10, (bits + 1 + 6) / 7);
  // The value sign-extended to 10 bytes, big-endian.
  unsigned char field[10];
  const unsigned char sign = value < 0 ? 0xff : 0x00;
  field[0] = field[1] = sign;
  for (int i = 0; i < 8; ++i) {
    field[2 + i] = static_cast<unsigned char>(static_cast<uint64_t>(value) >> (56 - 8 * i));
  }
  unsigned char* out = field + 10 - n;
  // n header bits from the top of the n-byte field.
  for (int b = 0; b < n; ++b) out[b / 8] ^= static_cast<unsigned char>(0x80 >> (b % 8));
  dest->append(reinterpret_cast<const char*>(out), n);
}

}  // namespace ordered_code

std::string EncodeTensorNameSlice(absl::string_view name, const TensorSlice& slice) {
  std::string key;
  ordered_code::WriteNumIncreasing(&key, 0);  // every slice key starts so
  ordered_code::WriteString(&key, name);
  ordered_code::WriteNumIncreasing(&key, slice.size());
  for (const SliceExtent& e : slice) {
    ordered_code::WriteSignedNumIncreasing(&key, e.start);
    ordered_code::WriteSignedNumIncreasing(&key, e.length);
  }
  return key;
}

absl::StatusOr<TensorSlice> SliceFromProto(const tensorflow::TensorSliceProto& proto,
                                           const TensorShape& full, absl::string_view tensor,
                                           absl::string_view where) {
  const int rank = full.dims();
  TensorSlice slice(rank);  // no extents: the whole tensor
  if (proto.extent_size() != 0 && proto.extent_size() != rank) {
    return errors::DataLoss(where, ": tensor '", tensor, "' of shape ", full.DebugString(),
                            " lists a slice with ", proto.extent_size(),
                            " dimensions (corrupted)");
  }
  for (int d = 0; d < proto.extent_size(); ++d) {
    const auto& e = proto.extent(d);
    const bool whole = e.has_length_case() == tensorflow::TensorSliceProto::Extent::HAS_LENGTH_NOT_SET ||
                       e.length() == -1;
    const int64_t size = full.dim_size(d);
    if (whole) {
      if (e.start() != 0) {
        return errors::DataLoss(where, ": tensor '", tensor, "' lists a slice whose dimension ",
                                d, " starts at ", e.start(), " but spans the whole dimension "
                                "(corrupted)");
      }
      continue;
    }
    if (e.start() < 0 || e.length() < 0 || e.start() > size || e.length() > size - e.start()) {
      return errors::DataLoss(where, ": tensor '", tensor, "' of shape ", full.DebugString(),
                              " lists a slice [", e.start(), ", ", e.start(), " + ", e.length(),
                              ") of dimension ", d, ", outside the shape (corrupted)");
    }
    slice[d] = SliceExtent{e.start(), e.length()};
  }
  return slice;
}

std::string SliceDebugString(const TensorSlice& slice) {
  std::string out;
  for (const SliceExtent& e : slice) {
    if (!out.empty()) out += ":";
    out += e.length < 0 ? std::string("-") : absl::StrCat(e.start, ",", e.length);
  }
  return out;
}

TensorShape SliceShape(const TensorSlice& slice, const TensorShape& full) {
  std::vector<int64_t> dims(full.dims());
  for (int d = 0; d < full.dims(); ++d) {
    dims[d] = slice[d].length < 0 ? full.dim_size(d) : slice[d].length;
  }
  return TensorShape(absl::MakeConstSpan(dims));
}

void CopySliceInto(const Tensor& part, const TensorSlice& slice, Tensor* full) {
  const TensorShape& shape = full->shape();
  const int rank = shape.dims();
  if (part.NumElements() == 0) return;
  if (rank == 0) {
    if (full->dtype() == DT_STRING) {
      full->data<std::string>()[0] = part.data<std::string>()[0];
    } else {
      std::memcpy(full->raw_data(), part.raw_data(), part.TotalBytes());
    }
    return;
  }
  // Row-major strides of the full tensor, in elements.
  std::vector<int64_t> stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape.dim_size(d + 1);
  const int64_t run = part.dim_size(rank - 1);  // contiguous elements per row
  const int64_t rows = part.NumElements() / run;
  std::vector<int64_t> index(rank, 0);  // of the row within the part
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t start = slice[d].length < 0 ? 0 : slice[d].start;
      at += (start + index[d]) * stride[d];
    }
    if (full->dtype() == DT_STRING) {
      const std::string* src = part.data<std::string>() + r * run;
      std::string* dst = full->data<std::string>() + at;
      for (int64_t i = 0; i < run; ++i) dst[i] = src[i];
    } else {
      const size_t elem = DataTypeSize(full->dtype());
      std::memcpy(full->raw_data() + at * elem, part.raw_data() + r * run * elem, run * elem);
    }
    // Next row: odometer over all but the last dimension.
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[d] < part.dim_size(d)) break;
      index[d] = 0;
    }
  }
}

namespace {

// Start and length of dimension d of `slice` in a tensor of shape `full`,
// whole dimensions made explicit.
int64_t Start(const TensorSlice& slice, int d) { return slice[d].length < 0 ? 0 : slice[d].start; }
int64_t Length(const TensorSlice& slice, const TensorShape& full, int d) {
  return slice[d].length < 0 ? full.dim_size(d) : slice[d].length;
}

}  // namespace

bool IsFullSlice(const TensorSlice& slice, const TensorShape& full) {
  for (int d = 0; d < full.dims(); ++d) {
    if (slice[d].length >= 0 && (slice[d].start != 0 || slice[d].length != full.dim_size(d))) {
      return false;
    }
  }
  return true;
}

bool IntersectSlices(const TensorSlice& a, const TensorSlice& b, const TensorShape& full,
                     TensorSlice* out) {
  out->assign(full.dims(), SliceExtent{});
  for (int d = 0; d < full.dims(); ++d) {
    const int64_t start = std::max(Start(a, d), Start(b, d));
    const int64_t end =
        std::min(Start(a, d) + Length(a, full, d), Start(b, d) + Length(b, full, d));
    if (end <= start) return false;
    (*out)[d] = SliceExtent{start, end - start};
  }
  return true;
}

void CopySliceRegion(const Tensor& src, const TensorSlice& src_slice, const TensorSlice& region,
                     const TensorSlice& dst_slice, const TensorShape& full, Tensor* dst) {
  const int rank = full.dims();
  if (rank == 0) {
    if (dst->dtype() == DT_STRING) {
      dst->data<std::string>()[0] = src.data<std::string>()[0];
    } else {
      std::memcpy(dst->raw_data(), src.raw_data(), src.TotalBytes());
    }
    return;
  }
  // Row-major strides (in elements) of the source and destination blocks.
  std::vector<int64_t> src_stride(rank, 1), dst_stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) {
    src_stride[d] = src_stride[d + 1] * Length(src_slice, full, d + 1);
    dst_stride[d] = dst_stride[d + 1] * Length(dst_slice, full, d + 1);
  }
  int64_t rows = 1;
  for (int d = 0; d < rank; ++d) {
    if (Length(region, full, d) == 0) return;
    if (d < rank - 1) rows *= Length(region, full, d);
  }
  const int64_t run = Length(region, full, rank - 1);
  std::vector<int64_t> index(rank, 0);  // of the row within the region
  const size_t elem = dst->dtype() == DT_STRING ? 0 : DataTypeSize(dst->dtype());
  for (int64_t r = 0; r < rows; ++r) {
    int64_t from = 0, to = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t at = Start(region, d) + index[d];
      from += (at - Start(src_slice, d)) * src_stride[d];
      to += (at - Start(dst_slice, d)) * dst_stride[d];
    }
    if (dst->dtype() == DT_STRING) {
      const std::string* s = src.data<std::string>() + from;
      std::string* t = dst->data<std::string>() + to;
      for (int64_t i = 0; i < run; ++i) t[i] = s[i];
    } else {
      std::memcpy(dst->raw_data() + to * elem, src.raw_data() + from * elem, run * elem);
    }
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[d] < Length(region, full, d)) break;
      index[d] = 0;
    }
  }
}

void SliceToProto(const TensorSlice& slice, tensorflow::TensorSliceProto* proto) {
  proto->Clear();
  for (const SliceExtent& e : slice) {
    auto* extent = proto->add_extent();
    if (e.length >= 0) {
      extent->set_start(e.start);
      extent->set_length(e.length);
    }
  }
}

}  // namespace recflow::checkpoint
