#include "recflow/kernels/lookup_table.h"

#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/mutex.h"
#include "recflow/core/status.h"

namespace recflow {
namespace {

template <typename T>
std::string Show(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else {
    return absl::StrCat(v);
  }
}

template <typename K, typename V>
class HashTable final : public LookupTable {
 public:
  DataType key_dtype() const override { return DataTypeToEnum<K>::value; }
  DataType value_dtype() const override { return DataTypeToEnum<V>::value; }
  bool is_initialized() const override {
    MutexLock lock(&mu_);
    return initialized_;
  }
  int64_t size() const override {
    MutexLock lock(&mu_);
    return initialized_ ? static_cast<int64_t>(map_.size()) : 0;
  }
  std::string DebugString() const override {
    return absl::StrCat("HashTable(", DataTypeString(key_dtype()), " -> ",
                        DataTypeString(value_dtype()), ", ", size(), " entries)");
  }

  absl::Status Initialize(const Tensor& keys, const Tensor& values) override {
    if (keys.dtype() != key_dtype() || values.dtype() != value_dtype()) {
      return errors::InvalidArgument("table of ", DataTypeString(key_dtype()), " -> ",
                                     DataTypeString(value_dtype()), " given keys of ",
                                     DataTypeString(keys.dtype()), " and values of ",
                                     DataTypeString(values.dtype()));
    }
    if (keys.dims() != 1) {
      return errors::InvalidArgument("Keys must be a vector, but received shape ",
                                     keys.shape().DebugString());
    }
    if (values.dims() != 1) {
      return errors::InvalidArgument("Values must be a vector, but received shape ",
                                     values.shape().DebugString());
    }
    if (keys.NumElements() != values.NumElements()) {
      return errors::InvalidArgument("Keys and values must have the same size ",
                                     keys.NumElements(), " vs ", values.NumElements());
    }
    const K* k = keys.data<K>();
    const V* v = values.data<V>();
    const int64_t n = keys.NumElements();
    MutexLock lock(&mu_);
    if (initialized_) {
      bool same = static_cast<int64_t>(map_.size()) <= n;
      for (int64_t i = 0; same && i < n; ++i) {
        auto it = map_.find(k[i]);
        same = it != map_.end() && it->second == v[i];
      }
      if (!same) return errors::FailedPrecondition("Table was already initialized with different data.");
      return absl::OkStatus();
    }
    absl::flat_hash_map<K, V> map;
    map.reserve(n);
    for (int64_t i = 0; i < n; ++i) {
      auto [it, inserted] = map.try_emplace(k[i], v[i]);
      if (!inserted && !(it->second == v[i])) {
        return errors::FailedPrecondition("HashTable has different value for same key. Key ",
                                          Show(k[i]), " has ", Show(it->second),
                                          " and trying to add value ", Show(v[i]));
      }
    }
    map_ = std::move(map);
    initialized_ = true;
    return absl::OkStatus();
  }

  absl::StatusOr<Tensor> Find(const Tensor& keys, const Tensor& default_value) const override {
    if (keys.dtype() != key_dtype()) {
      return errors::InvalidArgument("Key must be type ", DataTypeString(key_dtype()),
                                     " but got ", DataTypeString(keys.dtype()));
    }
    if (default_value.dtype() != value_dtype()) {
      return errors::InvalidArgument("Default value must be type ",
                                     DataTypeString(value_dtype()), " but got ",
                                     DataTypeString(default_value.dtype()));
    }
    if (default_value.dims() != 0) {
      return errors::InvalidArgument("Expected shape [] for argument 'default_value', got ",
                                     default_value.shape().DebugString());
    }
    MutexLock lock(&mu_);
    if (!initialized_) return errors::FailedPrecondition("Table not initialized.");
    ASSIGN_OR_RETURN(Tensor out, Tensor::Create(value_dtype(), keys.shape()));
    const K* k = keys.data<K>();
    V* o = out.data<V>();
    const V& dflt = default_value.data<V>()[0];
    for (int64_t i = 0; i < keys.NumElements(); ++i) {
      auto it = map_.find(k[i]);
      o[i] = it == map_.end() ? dflt : it->second;
    }
    return out;
  }

 private:
  mutable Mutex mu_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<K, V> map_ ABSL_GUARDED_BY(mu_);
};

template <typename K>
absl::StatusOr<std::shared_ptr<LookupTable>> CreateWithKey(DataType value_dtype) {
  switch (value_dtype) {
    case DT_INT32: return std::shared_ptr<LookupTable>(new HashTable<K, int32_t>());
    case DT_INT64: return std::shared_ptr<LookupTable>(new HashTable<K, int64_t>());
    case DT_FLOAT: return std::shared_ptr<LookupTable>(new HashTable<K, float>());
    case DT_DOUBLE: return std::shared_ptr<LookupTable>(new HashTable<K, double>());
    case DT_BOOL: return std::shared_ptr<LookupTable>(new HashTable<K, bool>());
    case DT_STRING: return std::shared_ptr<LookupTable>(new HashTable<K, std::string>());
    default:
      return errors::InvalidArgument("a lookup table cannot hold values of type ",
                                     DataTypeString(value_dtype),
                                     "; it holds int32, int64, float, double, bool and string");
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<LookupTable>> LookupTable::Create(DataType key_dtype,
                                                                 DataType value_dtype) {
  switch (key_dtype) {
    case DT_INT32: return CreateWithKey<int32_t>(value_dtype);
    case DT_INT64: return CreateWithKey<int64_t>(value_dtype);
    case DT_STRING: return CreateWithKey<std::string>(value_dtype);
    default:
      return errors::InvalidArgument("a lookup table cannot have keys of type ",
                                     DataTypeString(key_dtype),
                                     "; its keys are int32, int64 or string");
  }
}

}  // namespace recflow
