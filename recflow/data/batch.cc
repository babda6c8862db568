#include "recflow/data/batch.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"

namespace recflow::data {
namespace {

absl::StatusOr<int> SparseIndex(const BatchSchema& schema,
                                absl::string_view feature) {
  int index = 2;
  for (const SparseFeatureSpec& f : schema.sparse) {
    if (f.name == feature) return index;
    index += f.weighted ? 3 : 2;
  }
  std::vector<std::string> known;
  for (const SparseFeatureSpec& f : schema.sparse) known.push_back(f.name);
  return errors::NotFound("no sparse feature '", feature,
                          "' in the batch schema; it has: ",
                          known.empty() ? "(none)" : absl::StrJoin(known, ", "));
}

absl::Status CheckComponent(const Tensor& t, DataType dtype, int rank,
                            absl::string_view name) {
  if (t.dtype() != dtype || t.dims() != rank) {
    return errors::InvalidArgument(
        "batch component '", name, "' must be ", DataTypeString(dtype),
        " of rank ", rank, ", got ", DataTypeString(t.dtype()), " of shape ",
        t.shape().DebugString());
  }
  return absl::OkStatus();
}

}  // namespace

int BatchSchema::num_components() const {
  int n = 2;
  for (const SparseFeatureSpec& f : sparse) n += f.weighted ? 3 : 2;
  return n;
}

absl::StatusOr<int> BatchSchema::IdsIndex(absl::string_view feature) const {
  return SparseIndex(*this, feature);
}

absl::StatusOr<int> BatchSchema::RowSplitsIndex(
    absl::string_view feature) const {
  ASSIGN_OR_RETURN(int ids, SparseIndex(*this, feature));
  return ids + 1;
}

absl::StatusOr<int> BatchSchema::WeightsIndex(absl::string_view feature) const {
  ASSIGN_OR_RETURN(int ids, SparseIndex(*this, feature));
  for (const SparseFeatureSpec& f : sparse) {
    if (f.name == feature) return f.weighted ? ids + 2 : -1;
  }
  return -1;
}

std::vector<DataType> BatchSchema::dtypes() const {
  std::vector<DataType> out = {DT_FLOAT, DT_FLOAT};
  for (const SparseFeatureSpec& f : sparse) {
    out.push_back(DT_INT64);
    out.push_back(DT_INT64);
    if (f.weighted) out.push_back(DT_FLOAT);
  }
  return out;
}

std::vector<std::string> BatchSchema::component_names() const {
  std::vector<std::string> out = {"labels", "dense"};
  for (const SparseFeatureSpec& f : sparse) {
    out.push_back(f.name + "/ids");
    out.push_back(f.name + "/row_splits");
    if (f.weighted) out.push_back(f.name + "/weights");
  }
  return out;
}

Element Batch::ToElement() const {
  Element e;
  e.reserve(2 + 3 * sparse.size());
  e.push_back(labels);
  e.push_back(dense);
  for (const SparseBatch& s : sparse) {
    e.push_back(s.ids);
    e.push_back(s.row_splits);
    if (s.weights.dtype() != DT_INVALID) e.push_back(s.weights);
  }
  return e;
}

absl::StatusOr<Batch> Batch::FromElement(const BatchSchema& schema,
                                         const Element& element) {
  if (static_cast<int>(element.size()) != schema.num_components()) {
    return errors::InvalidArgument(
        "batch element has ", element.size(), " components, the schema (",
        absl::StrJoin(schema.component_names(), ", "), ") needs ",
        schema.num_components());
  }
  Batch b;
  b.labels = element[0];
  b.dense = element[1];
  b.batch_size = b.labels.dims() == 1 ? b.labels.dim_size(0) : 0;
  size_t i = 2;
  for (const SparseFeatureSpec& f : schema.sparse) {
    SparseBatch s;
    s.ids = element[i++];
    s.row_splits = element[i++];
    if (f.weighted) s.weights = element[i++];
    b.sparse.push_back(std::move(s));
  }
  RETURN_IF_ERROR(b.Validate(schema));
  return b;
}

absl::Status Batch::Validate(const BatchSchema& schema) const {
  RETURN_IF_ERROR(CheckComponent(labels, DT_FLOAT, 1, "labels"));
  RETURN_IF_ERROR(CheckComponent(dense, DT_FLOAT, 2, "dense"));
  if (labels.dim_size(0) != batch_size || dense.dim_size(0) != batch_size ||
      dense.dim_size(1) != static_cast<int64_t>(schema.dense_names.size())) {
    return errors::InvalidArgument(
        "batch of ", batch_size, " with ", schema.dense_names.size(),
        " dense features has labels ", labels.shape().DebugString(),
        " and dense ", dense.shape().DebugString());
  }
  if (sparse.size() != schema.sparse.size()) {
    return errors::InvalidArgument("batch has ", sparse.size(),
                                   " sparse features, the schema ",
                                   schema.sparse.size());
  }
  for (size_t f = 0; f < sparse.size(); ++f) {
    const SparseBatch& s = sparse[f];
    const std::string& name = schema.sparse[f].name;
    RETURN_IF_ERROR(CheckComponent(s.ids, DT_INT64, 1, name + "/ids"));
    RETURN_IF_ERROR(
        CheckComponent(s.row_splits, DT_INT64, 1, name + "/row_splits"));
    if (s.row_splits.dim_size(0) != batch_size + 1) {
      return errors::InvalidArgument("'", name, "/row_splits' has ",
                                     s.row_splits.dim_size(0),
                                     " entries for a batch of ", batch_size);
    }
    const int64_t* splits = s.row_splits.data<int64_t>();
    const int64_t nnz = s.ids.dim_size(0);
    if (splits[0] != 0 || splits[batch_size] != nnz) {
      return errors::InvalidArgument("'", name, "/row_splits' must run from 0 to ",
                                     nnz, " (the number of ids), got ",
                                     splits[0], "..", splits[batch_size]);
    }
    for (int64_t b = 0; b < batch_size; ++b) {
      if (splits[b + 1] < splits[b]) {
        return errors::InvalidArgument("'", name,
                                       "/row_splits' decreases at row ", b);
      }
    }
    if (schema.sparse[f].weighted) {
      RETURN_IF_ERROR(CheckComponent(s.weights, DT_FLOAT, 1, name + "/weights"));
      if (s.weights.dim_size(0) != nnz) {
        return errors::InvalidArgument("'", name, "/weights' has ",
                                       s.weights.dim_size(0), " entries for ",
                                       nnz, " ids");
      }
    } else if (s.weights.dtype() != DT_INVALID) {
      return errors::InvalidArgument("feature '", name,
                                     "' is unweighted but the batch has weights");
    }
  }
  return absl::OkStatus();
}

}  // namespace recflow::data
