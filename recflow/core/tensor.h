// Tensor: a dtype, a shape and a reference-counted buffer.
//
// Copying a Tensor is cheap: the copy shares the buffer (as TensorFlow's
// does). Slice() and Reshaped() share it too. Buffers come from an Allocator
// and are 64-byte aligned at their start. Elements of DT_STRING tensors are
// std::string objects and of DT_RESOURCE tensors ResourceHandle objects,
// constructed in place and destroyed with the buffer; every other dtype is
// plain bytes, left uninitialized by the constructor.
//
// Thread-safety: a Tensor object is a value; concurrent reads are safe.
// Writes into a shared buffer are the writer's responsibility (kernels write
// only into buffers they allocated, see RefCountIsOne()).
#ifndef RECFLOW_CORE_TENSOR_H_
#define RECFLOW_CORE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "recflow/core/allocator.h"
#include "recflow/core/dtype.h"
#include "recflow/core/logging.h"
#include "recflow/core/resource_handle.h"
#include "recflow/core/tensor_shape.h"

namespace recflow {

// The memory behind one or more Tensors. Owns `num_elements` elements of
// `dtype`, constructed (non-POD types) at creation and destroyed here.
class TensorBuffer {
 public:
  // Returns null when the allocator cannot provide the memory.
  static std::shared_ptr<TensorBuffer> Create(Allocator* allocator,
                                              DataType dtype,
                                              int64_t num_elements);
  ~TensorBuffer();
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;

  char* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }

 private:
  TensorBuffer() = default;

  Allocator* allocator_ = nullptr;  // Not owned.
  DataType dtype_ = DT_INVALID;
  int64_t num_elements_ = 0;
  char* data_ = nullptr;
  size_t size_bytes_ = 0;
};

class Tensor {
 public:
  // An uninitialized tensor (DT_INVALID, no buffer).
  Tensor() = default;
  // Allocates from the CPU allocator. If the memory cannot be had, the
  // tensor stays uninitialized (IsInitialized() is false) with the requested
  // dtype and shape; code that allocates from untrusted sizes uses Create().
  Tensor(DataType dtype, const TensorShape& shape);
  Tensor(Allocator* allocator, DataType dtype, const TensorShape& shape);

  // Like the constructor, but returns ResourceExhausted naming the size when
  // the buffer cannot be allocated, and rejects dtypes tensors cannot hold.
  static absl::StatusOr<Tensor> Create(DataType dtype, const TensorShape& shape,
                                       Allocator* allocator = cpu_allocator());

  template <typename T>
  static Tensor Scalar(T value) {
    Tensor t(DataTypeToEnum<T>::value, TensorShape());
    *t.data<T>() = std::move(value);
    return t;
  }
  // REQUIRES: values.size() == shape.num_elements().
  template <typename T>
  static Tensor FromVector(absl::Span<const T> values, const TensorShape& shape) {
    CHECK_EQ(static_cast<int64_t>(values.size()), shape.num_elements());
    Tensor t(DataTypeToEnum<T>::value, shape);
    T* dst = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) dst[i] = values[i];
    return t;
  }
  // A vector tensor [values.size()].
  template <typename T>
  static Tensor FromVector(absl::Span<const T> values) {
    return FromVector(values, TensorShape({static_cast<int64_t>(values.size())}));
  }
  template <typename T>
  static Tensor FromVector(std::initializer_list<T> values, const TensorShape& shape) {
    return FromVector(absl::Span<const T>(values.begin(), values.size()), shape);
  }

  DataType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int dims() const { return shape_.dims(); }
  int64_t dim_size(int d) const { return shape_.dim_size(d); }
  int64_t NumElements() const { return shape_.num_elements(); }
  // Bytes of element storage (sizeof(std::string) per element for strings).
  size_t TotalBytes() const;
  // True once the tensor has a buffer (or needs none: zero elements).
  bool IsInitialized() const {
    return dtype_ != DT_INVALID && (buf_ != nullptr || NumElements() == 0);
  }

  // Typed element access. REQUIRES: dtype() == DataTypeToEnum<T>::value.
  template <typename T>
  T* data() {
    DCHECK_EQ(DataTypeToEnum<T>::value, dtype_);
    return reinterpret_cast<T*>(raw_data());
  }
  template <typename T>
  const T* data() const {
    DCHECK_EQ(DataTypeToEnum<T>::value, dtype_);
    return reinterpret_cast<const T*>(raw_data());
  }
  template <typename T>
  absl::Span<T> flat() {
    return absl::Span<T>(data<T>(), NumElements());
  }
  template <typename T>
  absl::Span<const T> flat() const {
    return absl::Span<const T>(data<T>(), NumElements());
  }
  // REQUIRES: NumElements() == 1.
  template <typename T>
  T& scalar() {
    DCHECK_EQ(NumElements(), 1);
    return *data<T>();
  }
  template <typename T>
  const T& scalar() const {
    DCHECK_EQ(NumElements(), 1);
    return *data<T>();
  }
  char* raw_data() const {
    return buf_ == nullptr ? nullptr : buf_->data() + offset_;
  }

  // Rows [start, limit) along dimension 0, sharing this buffer.
  // REQUIRES: dims() >= 1 and 0 <= start <= limit <= dim_size(0).
  Tensor Slice(int64_t start, int64_t limit) const;
  // The same buffer viewed with another shape of the same element count.
  absl::StatusOr<Tensor> Reshaped(const TensorShape& shape) const;
  // A copy with a buffer of its own.
  Tensor DeepCopy() const;

  bool SharesBufferWith(const Tensor& other) const {
    return buf_ != nullptr && buf_ == other.buf_;
  }
  // True when no other Tensor shares the buffer, so writing is safe.
  bool RefCountIsOne() const { return buf_ != nullptr && buf_.use_count() == 1; }
  const std::shared_ptr<TensorBuffer>& buffer() const { return buf_; }

  // "Tensor<float [2,3]: 1 2 3 4 5 6>"; at most max_entries values, then "...".
  std::string DebugString(int max_entries = 10) const;
  // The values alone, e.g. "[1 2 3]".
  std::string SummarizeValue(int max_entries = 10) const;

 private:
  DataType dtype_ = DT_INVALID;
  TensorShape shape_;
  std::shared_ptr<TensorBuffer> buf_;
  size_t offset_ = 0;  // bytes from the buffer start (Slice)
};

// Bytes per element as stored in a Tensor's buffer (sizeof(std::string) for
// strings, sizeof(ResourceHandle) for resources).
size_t ElementStorageSize(DataType dtype);

// True when both tensors have the same dtype, shape and element values
// (bitwise for floats, so NaN == NaN).
bool TensorsEqual(const Tensor& a, const Tensor& b);

}  // namespace recflow

#endif  // RECFLOW_CORE_TENSOR_H_
