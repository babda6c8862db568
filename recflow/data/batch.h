// The batch layout every parser produces and the rest of recflow consumes
// (embedding lookups, models, the IteratorGetNext graph face).
//
// For a batch of B examples with n dense features and sparse features
// f_1..f_k:
//   labels          float [B]
//   dense           float [B, n]      (n may be 0: shape [B, 0])
//   for each sparse feature f (in FeatureSchema order):
//     ids           int64 [nnz_f]     all ids of the batch, row after row
//     row_splits    int64 [B + 1]     row b holds ids[row_splits[b] :
//                                      row_splits[b+1]]; row_splits[0] == 0,
//                                      non-decreasing, row_splits[B] == nnz_f
//     weights       float [nnz_f]     only when the feature is weighted
// A missing value is an empty row (no ids), never a sentinel id.
//
// As an Element (recflow/data/dataset.h) the components come in exactly
// that order: labels, dense, then ids, row_splits[, weights] per sparse
// feature. BatchSchema gives the positions by name.

#ifndef RECFLOW_DATA_BATCH_H_
#define RECFLOW_DATA_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/core/tensor.h"
#include "recflow/data/dataset.h"

namespace recflow::data {

struct SparseFeatureSpec {
  std::string name;
  bool weighted = false;
};

// Names and order of the features of a batch.
struct BatchSchema {
  std::vector<std::string> dense_names;  // n names, column order of `dense`.
  std::vector<SparseFeatureSpec> sparse;

  int num_components() const;
  // Component index of labels (0), dense (1), and of a sparse feature's
  // ids / row_splits / weights (-1 when unweighted). NotFound naming the
  // feature and listing the known ones.
  absl::StatusOr<int> IdsIndex(absl::string_view feature) const;
  absl::StatusOr<int> RowSplitsIndex(absl::string_view feature) const;
  absl::StatusOr<int> WeightsIndex(absl::string_view feature) const;
  std::vector<DataType> dtypes() const;
  std::vector<std::string> component_names() const;  // "labels", "dense",
                                                     // "f/ids", "f/row_splits"...
};

struct SparseBatch {
  Tensor ids;         // int64 [nnz]
  Tensor row_splits;  // int64 [B + 1]
  Tensor weights;     // float [nnz], or an empty Tensor() when unweighted
};

struct Batch {
  int64_t batch_size = 0;
  Tensor labels;  // float [B]
  Tensor dense;   // float [B, n]
  std::vector<SparseBatch> sparse;  // in BatchSchema::sparse order

  Element ToElement() const;
  // InvalidArgument naming the component when the element does not match
  // the schema (count, dtype, rank, row_splits consistency).
  static absl::StatusOr<Batch> FromElement(const BatchSchema& schema,
                                           const Element& element);
  // Checks dtypes, shapes and row_splits invariants against the schema.
  absl::Status Validate(const BatchSchema& schema) const;
};

}  // namespace recflow::data

#endif  // RECFLOW_DATA_BATCH_H_
