// LookupTable: the resource behind HashTableV2 (TensorFlow's HashTable in
// lookup_table_op.h), an immutable key -> value map filled once by an
// initializer op and then only read. Keys int32, int64 or string; values
// int32, int64, float, double, bool or string. Created in the session's
// ResourceMgr by HashTableV2 (kernels/lookup_table_kernels.cc).
//
// Thread-safe (one mutex; Find holds it while it looks up a batch).
#ifndef RECFLOW_KERNELS_LOOKUP_TABLE_H_
#define RECFLOW_KERNELS_LOOKUP_TABLE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/core/resource_handle.h"
#include "recflow/core/tensor.h"

namespace recflow {

class LookupTable : public ResourceBase {
 public:
  // InvalidArgument for key or value dtypes the table cannot hold.
  static absl::StatusOr<std::shared_ptr<LookupTable>> Create(DataType key_dtype,
                                                             DataType value_dtype);

  virtual DataType key_dtype() const = 0;
  virtual DataType value_dtype() const = 0;
  virtual bool is_initialized() const = 0;
  // Entries (0 before initialization).
  virtual int64_t size() const = 0;

  // Fills the table with keys[i] -> values[i] (vectors of one length and
  // the table's dtypes; InvalidArgument otherwise) and marks it
  // initialized. A key given twice with different values is
  // FailedPrecondition naming it (the same value twice is fine), and the
  // table stays uninitialized. Once initialized: the same entries again
  // are OK, others FailedPrecondition "Table was already initialized with
  // different data." (TensorFlow's InitializableLookupTable::Initialize).
  virtual absl::Status Initialize(const Tensor& keys, const Tensor& values) = 0;

  // values[...] = the value of keys[...] or default_value (a scalar of the
  // value dtype). FailedPrecondition "Table not initialized." before
  // initialization; InvalidArgument for wrong dtypes.
  virtual absl::StatusOr<Tensor> Find(const Tensor& keys, const Tensor& default_value) const = 0;
};

}  // namespace recflow

#endif  // RECFLOW_KERNELS_LOOKUP_TABLE_H_
