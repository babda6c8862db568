#include "recflow/core/tensor.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/core/variant.h"

namespace recflow {

size_t ElementStorageSize(DataType dtype) {
  switch (dtype) {
    case DT_STRING:
      return sizeof(std::string);
    case DT_RESOURCE:
      return sizeof(ResourceHandle);
    case DT_VARIANT:
      return sizeof(Variant);
    default:
      return DataTypeSize(dtype);
  }
}

std::shared_ptr<TensorBuffer> TensorBuffer::Create(Allocator* allocator,
                                                   DataType dtype,
                                                   int64_t num_elements) {
  const size_t elem = ElementStorageSize(dtype);
  if (elem == 0 || num_elements < 0) return nullptr;
  if (num_elements > 0 &&
      static_cast<uint64_t>(num_elements) > SIZE_MAX / elem) {
    return nullptr;
  }
  const size_t bytes = elem * static_cast<size_t>(num_elements);
  void* p = allocator->AllocateRaw(kAllocatorAlignment, bytes);
  if (p == nullptr) return nullptr;
  std::shared_ptr<TensorBuffer> buf(new TensorBuffer);
  buf->allocator_ = allocator;
  buf->dtype_ = dtype;
  buf->num_elements_ = num_elements;
  buf->data_ = static_cast<char*>(p);
  buf->size_bytes_ = bytes;
  if (dtype == DT_STRING) {
    auto* s = reinterpret_cast<std::string*>(p);
    for (int64_t i = 0; i < num_elements; ++i) new (s + i) std::string();
  } else if (dtype == DT_RESOURCE) {
    auto* r = reinterpret_cast<ResourceHandle*>(p);
    for (int64_t i = 0; i < num_elements; ++i) new (r + i) ResourceHandle();
  } else if (dtype == DT_VARIANT) {
    auto* v = reinterpret_cast<Variant*>(p);
    for (int64_t i = 0; i < num_elements; ++i) new (v + i) Variant();
  }
  return buf;
}

TensorBuffer::~TensorBuffer() {
  if (dtype_ == DT_STRING) {
    auto* s = reinterpret_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) s[i].~basic_string();
  } else if (dtype_ == DT_RESOURCE) {
    auto* r = reinterpret_cast<ResourceHandle*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) r[i].~ResourceHandle();
  } else if (dtype_ == DT_VARIANT) {
    auto* v = reinterpret_cast<Variant*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) v[i].~Variant();
  }
  allocator_->DeallocateRaw(data_, size_bytes_);
}

Tensor::Tensor(DataType dtype, const TensorShape& shape)
    : Tensor(cpu_allocator(), dtype, shape) {}

Tensor::Tensor(Allocator* allocator, DataType dtype, const TensorShape& shape)
    : dtype_(dtype), shape_(shape) {
  buf_ = TensorBuffer::Create(allocator, dtype, shape.num_elements());
}

absl::StatusOr<Tensor> Tensor::Create(DataType dtype, const TensorShape& shape,
                                      Allocator* allocator) {
  if (ElementStorageSize(dtype) == 0) {
    return errors::InvalidArgument("cannot allocate a tensor of dtype ",
                                   DataTypeString(dtype));
  }
  Tensor t(allocator, dtype, shape);
  if (t.buf_ == nullptr) {
    return errors::ResourceExhausted(
        "out of memory allocating a ", DataTypeString(dtype), " tensor of shape ",
        shape.DebugString(), " (", shape.num_elements(), " elements x ",
        ElementStorageSize(dtype), " bytes) from allocator ", allocator->Name());
  }
  return t;
}

size_t Tensor::TotalBytes() const {
  return ElementStorageSize(dtype_) * static_cast<size_t>(NumElements());
}

Tensor Tensor::Slice(int64_t start, int64_t limit) const {
  DCHECK_GE(dims(), 1);
  DCHECK_LE(0, start);
  DCHECK_LE(start, limit);
  DCHECK_LE(limit, dim_size(0));
  Tensor t = *this;
  const int64_t row = dim_size(0) == 0 ? 0 : NumElements() / dim_size(0);
  t.shape_.set_dim(0, limit - start);
  t.offset_ += static_cast<size_t>(start * row) * ElementStorageSize(dtype_);
  return t;
}

absl::StatusOr<Tensor> Tensor::Reshaped(const TensorShape& shape) const {
  if (shape.num_elements() != NumElements()) {
    return errors::InvalidArgument("cannot reshape a tensor of shape ",
                                   shape_.DebugString(), " (", NumElements(),
                                   " elements) to ", shape.DebugString(), " (",
                                   shape.num_elements(), " elements)");
  }
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::DeepCopy() const {
  if (!IsInitialized()) return *this;
  Tensor t(dtype_, shape_);
  if (dtype_ == DT_STRING) {
    auto src = flat<std::string>();
    auto dst = t.flat<std::string>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  } else if (dtype_ == DT_RESOURCE) {
    auto src = flat<ResourceHandle>();
    auto dst = t.flat<ResourceHandle>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  } else if (dtype_ == DT_VARIANT) {
    auto src = flat<Variant>();
    auto dst = t.flat<Variant>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  } else if (TotalBytes() > 0) {
    std::memcpy(t.raw_data(), raw_data(), TotalBytes());
  }
  return t;
}

namespace {

template <typename T>
void AppendValue(std::string* out, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    absl::StrAppend(out, v ? "true" : "false");
  } else if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, half>) {
    absl::StrAppend(out, static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, std::complex<float>> ||
                       std::is_same_v<T, std::complex<double>>) {
    absl::StrAppend(out, "(", v.real(), ",", v.imag(), ")");
  } else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>) {
    absl::StrAppend(out, static_cast<int>(v));
  } else {
    absl::StrAppend(out, v);
  }
}

}  // namespace

std::string Tensor::SummarizeValue(int max_entries) const {
  if (!IsInitialized()) return "<uninitialized>";
  const int64_t n = NumElements();
  const int64_t shown = std::min<int64_t>(n, max_entries);
  std::string out = "[";
  for (int64_t i = 0; i < shown; ++i) {
    if (i > 0) out += ' ';
    if (dtype_ == DT_STRING) {
      absl::StrAppend(&out, "\"", data<std::string>()[i], "\"");
    } else if (dtype_ == DT_RESOURCE) {
      out += data<ResourceHandle>()[i].DebugString();
    } else if (dtype_ == DT_VARIANT) {
      out += data<Variant>()[i].DebugString();
    } else {
      DispatchPodType(dtype_, [&]<typename T>() {
        AppendValue(&out, reinterpret_cast<const T*>(raw_data())[i]);
      });
    }
  }
  if (shown < n) out += "...";
  out += "]";
  return out;
}

std::string Tensor::DebugString(int max_entries) const {
  return absl::StrCat("Tensor<", DataTypeString(dtype_), " ",
                      shape_.DebugString(), ": ", SummarizeValue(max_entries),
                      ">");
}

bool TensorsEqual(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (!a.IsInitialized() || !b.IsInitialized()) {
    return a.IsInitialized() == b.IsInitialized();
  }
  if (a.dtype() == DT_STRING) {
    auto x = a.flat<std::string>();
    auto y = b.flat<std::string>();
    return std::equal(x.begin(), x.end(), y.begin());
  }
  if (a.dtype() == DT_RESOURCE) {
    auto x = a.flat<ResourceHandle>();
    auto y = b.flat<ResourceHandle>();
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i].container() != y[i].container() || x[i].name() != y[i].name()) {
        return false;
      }
    }
    return true;
  }
  if (a.dtype() == DT_VARIANT) {
    auto x = a.flat<Variant>();
    auto y = b.flat<Variant>();
    return std::equal(x.begin(), x.end(), y.begin());
  }
  return a.TotalBytes() == 0 ||
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

}  // namespace recflow
