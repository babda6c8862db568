// DIN, the deep interest network (Zhou et al., KDD 2018), on the zoo's
// toolkit (model_builder.h); docs/models.md gives the formula.
//
// A behaviour sequence is a sparse feature with sequence_of = T: a ragged
// bag of item ids per example (ids [nnz] + row_splits [B + 1], the batch
// layout), read from T's embedding table. For each sequence:
//   q      = T's field embedding [B, D]             (the candidate item)
//   k_j    = the embedding of history id j [nnz, D]
//   q_j    = q of j's example [nnz, D]
//   a_j    = attention unit: MLP(attention_units) over [q_j, k_j, q_j - k_j,
//            q_j * k_j] -> one linear unit (no softmax, as the paper: the
//            weights keep the intensity of the user's interest)
//   pooled = sum_j a_j k_j per example [B, D]        (one weighted bag op)
// The ragged layout needs no padding and no mask: an empty history pools to
// zeros. The logit is mlp's over concat(dense, the non-sequence fields'
// embeddings, every sequence's pooled vector).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/models/model_builder.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/embedding_ops.h"
#include "recflow/ops/math_ops.h"

namespace recflow::models::internal {
namespace {

// The example index of every id of a ragged batch: [nnz] int64 from
// row_splits [B + 1]. recflow has no RowSplitsToSegmentIds op yet, so this
// borrows EmbeddingBagGrad: the gradient of a sum bag over the distinct ids
// 0..nnz-1 with respect to the table, given d/d output = each row's own
// index, is that index at every id (exact in float for B < 2^24).
Output SegmentIds(const Scope& s, Output row_splits, Output ids) {
  const Output zero = ops::Const(s, int64_t{0});
  const Output one = ops::Const(s, int64_t{1});
  Output nnz = ops::Size(s, ids, DT_INT64);
  Output positions = ops::Range(s, zero, nnz, one);
  Output rows = ops::Sub(s, ops::Size(s, row_splits, DT_INT64), one);
  Output row_index = ops::Reshape(
      s, ops::Cast(s, ops::Range(s, zero, rows, one), DT_FLOAT),
      ops::Const(s, {int32_t{-1}, int32_t{1}}, TensorShape({2})));
  ops::EmbeddingBagGradOutputs g = ops::EmbeddingBagGrad(
      s, row_index, positions, row_splits, Output(), {.combiner = "sum"});
  return ops::Reshape(s, ops::Cast(s, g.grad_rows, DT_INT64),
                      ops::Const(s, {int32_t{-1}}, TensorShape({1})));
}

// The attention-pooled history of sequence feature f: [B, D].
absl::StatusOr<Output> AttentionPool(ModelBuilder& b, int f) {
  const SparseFeatureConfig& seq = b.config().sparse_features[f];
  const int t = b.TableFeature(f);
  const int64_t d = b.FeatureDim(t);
  const std::string name = absl::StrCat("din_attention_", seq.name);
  const Scope s = b.scope().NewSubScope(name);
  ASSIGN_OR_RETURN(Output query, b.EmbeddingBag(t, "embedding", d));
  ASSIGN_OR_RETURN(Output keys, b.IdEmbeddings(f, "embedding", d));
  const SparseInput& in = b.inputs().sparse[f];
  Output q = ops::GatherV2(s, query, SegmentIds(s, in.row_splits, in.ids),
                           ops::Const(s, int32_t{0}));
  Output unit_in =
      ops::ConcatV2(s, {q, keys, ops::Sub(s, q, keys), ops::Mul(s, q, keys)},
                    ops::Const(s, int32_t{1}));
  int64_t width = 0;
  Output h = b.Mlp(name, unit_in, 4 * d, b.config().attention_units, &width);
  Output weights = b.Logit(absl::StrCat(name, "_weight"), h, width);  // [nnz]
  RETURN_IF_ERROR(b.scope().status());
  return b.WeightedBag(f, "embedding", d, weights);
}

absl::StatusOr<Output> BuildDin(ModelBuilder& b) {
  std::vector<Output> parts;
  int64_t width = 0;
  if (b.num_dense() > 0) {
    parts.push_back(b.inputs().dense);
    width += b.num_dense();
  }
  for (int f = 0; f < b.num_sparse(); ++f) {
    Output e;
    if (b.config().sparse_features[f].sequence_of.empty()) {
      ASSIGN_OR_RETURN(e, b.EmbeddingBag(f, "embedding", b.FeatureDim(f)));
    } else {
      ASSIGN_OR_RETURN(e, AttentionPool(b, f));
    }
    parts.push_back(e);
    width += b.FeatureDim(f);
  }
  const Scope cs = b.scope().NewSubScope("concat");
  Output x = parts.size() == 1
                 ? parts[0]
                 : ops::ConcatV2(cs, parts, ops::Const(cs, int32_t{1}));
  x = b.Mlp("mlp", x, width, b.config().hidden_units, &width);
  Output logit = b.Logit("mlp_logit", x, width);
  RETURN_IF_ERROR(b.scope().status());
  return logit;
}

absl::Status CheckDin(const ModelConfig& c) {
  bool any = false;
  for (const SparseFeatureConfig& f : c.sparse_features) {
    any |= !f.sequence_of.empty();
  }
  if (!any) {
    return errors::InvalidArgument(
        "model type 'din' attends over a behaviour sequence but no sparse "
        "feature has sequence_of (e.g. {name: H1, sequence_of: C1})");
  }
  for (size_t i = 0; i < c.attention_units.size(); ++i) {
    if (c.attention_units[i] <= 0) {
      return errors::InvalidArgument("attention_units[", i, "] is ",
                                     c.attention_units[i],
                                     "; every layer needs > 0 units");
    }
  }
  return absl::OkStatus();
}

}  // namespace

RECFLOW_REGISTER_MODEL("din", BuildDin, CheckDin);

}  // namespace recflow::models::internal
