// A Dataset as a graph value: the DT_VARIANT scalar that TensorFlow's
// dataset ops (TensorSliceDataset, MapDataset, BatchDatasetV2 ...) pass
// from one to the next and that MakeIterator / OneShotIterator turn into an
// iterator (kernels/dataset_*_kernels.cc). The value is the immutable
// pipeline description (data::Dataset); iterating it never changes it, so a
// dataset tensor may feed several iterators.
#ifndef RECFLOW_DATA_DATASET_VARIANT_H_
#define RECFLOW_DATA_DATASET_VARIANT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/tensor.h"
#include "recflow/core/variant.h"
#include "recflow/data/dataset.h"

namespace recflow::data {

class DatasetVariant : public VariantValue {
 public:
  explicit DatasetVariant(Dataset dataset) : dataset_(std::move(dataset)) {}
  const Dataset& dataset() const { return dataset_; }
  std::string TypeName() const override { return "recflow::data::Dataset"; }
  std::string DebugString() const override;

 private:
  const Dataset dataset_;
};

// A scalar DT_VARIANT tensor holding `dataset`.
Tensor DatasetToTensor(Dataset dataset);

// The dataset in a scalar variant tensor. InvalidArgument naming `what`
// (e.g. "input_dataset") when the tensor is not a scalar variant holding a
// dataset.
absl::StatusOr<Dataset> DatasetFromTensor(const Tensor& t,
                                          absl::string_view what);

}  // namespace recflow::data

#endif  // RECFLOW_DATA_DATASET_VARIANT_H_
