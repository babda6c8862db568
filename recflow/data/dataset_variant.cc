#include "recflow/data/dataset_variant.h"

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::data {

std::string DatasetVariant::DebugString() const {
  return absl::StrCat("Dataset(", dataset_.DebugString(), ")");
}

Tensor DatasetToTensor(Dataset dataset) {
  Tensor t(DT_VARIANT, TensorShape());
  t.scalar<Variant>() =
      Variant(std::make_shared<const DatasetVariant>(std::move(dataset)));
  return t;
}

absl::StatusOr<Dataset> DatasetFromTensor(const Tensor& t,
                                          absl::string_view what) {
  if (t.dtype() != DT_VARIANT || t.dims() != 0 || !t.IsInitialized()) {
    return errors::InvalidArgument(what, " must be a scalar variant holding a "
                                   "dataset, got ", DataTypeString(t.dtype()),
                                   " ", t.shape().DebugString());
  }
  const Variant& v = t.scalar<Variant>();
  const DatasetVariant* d = v.get<DatasetVariant>();
  if (d == nullptr) {
    return errors::InvalidArgument(what, " must hold a dataset, got a variant "
                                   "holding ", v.TypeName());
  }
  return d->dataset();
}

}  // namespace recflow::data
