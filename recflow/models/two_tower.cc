// The two-tower retrieval model on the zoo's toolkit (model_builder.h);
// docs/models.md gives the formula.
//
//   u = normalize(tower_u(user features)),  v = normalize(tower_i(item
//   features)), each tower: concat(its dense columns, its sparse features'
//   embeddings) -> MLP(hidden_units) -> a linear layer to tower_dim; both
//   [B, tower_dim], L2-normalised.
//   logits = <u_b, v_b> / temperature   (the score of each row's own pair)
//   loss   = in-batch softmax: for every clicked row b (label 1),
//            -log softmax_j(<u_b, v_j> / temperature)[b] over the batch's
//            items j; rows that were not clicked add no term of their own
//            but their items are negatives in every clicked row's softmax.
//            Mean over the clicked rows (0 when a batch has none).
// No logQ (sampling-bias) correction: popular items are over-penalised as
// negatives. probabilities = sigmoid(logits) rank rows like the score, but
// are not calibrated click probabilities (use the AUC, not the logloss).
// Signatures beside serving_default: "user_embedding" (user features -> u)
// and "item_embedding" (item features -> v); serving_default also returns
// "score" = <u, v>.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/models/model_builder.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/ops/reduction_ops.h"

namespace recflow::models::internal {
namespace {

// One tower: [B, tower_dim], L2-normalised rows.
absl::StatusOr<Output> Tower(ModelBuilder& b, const std::string& name,
                             const std::vector<std::string>& features) {
  const Scope s = b.scope().NewSubScope(absl::StrCat(name, "_inputs"));
  std::vector<Output> parts;
  std::vector<int32_t> columns;
  int64_t width = 0;
  for (const std::string& feature : features) {
    const int j = b.DenseIndex(feature);
    if (j >= 0) columns.push_back(j);
  }
  if (!columns.empty()) {
    parts.push_back(ops::GatherV2(
        s, b.inputs().dense,
        ops::Const(s, Tensor::FromVector<int32_t>(absl::MakeConstSpan(columns))),
        ops::Const(s, int32_t{1})));
    width += static_cast<int64_t>(columns.size());
  }
  for (const std::string& feature : features) {
    const int f = b.SparseIndex(feature);
    if (f < 0) continue;
    ASSIGN_OR_RETURN(Output e, b.EmbeddingBag(f, "embedding", b.FeatureDim(f)));
    parts.push_back(e);
    width += b.FeatureDim(f);
  }
  Output x = parts.size() == 1
                 ? parts[0]
                 : ops::ConcatV2(s, parts, ops::Const(s, int32_t{1}));
  x = b.Mlp(name, x, width, b.config().hidden_units, &width);
  x = b.Dense(absl::StrCat(name, "_out"), x, width, b.config().tower_dim,
              "identity");
  const Scope ns = b.scope().NewSubScope(absl::StrCat(name, "_normalize"));
  Output sq = ops::Sum(ns, ops::Square(ns, x), {1}, {.keep_dims = true});
  Output inv = ops::Rsqrt(ns, ops::Maximum(ns, sq, ops::Const(ns, 1e-12f)));
  Output out = ops::Mul(ns, x, inv);
  RETURN_IF_ERROR(b.scope().status());
  return out;
}

absl::StatusOr<Output> BuildTwoTower(ModelBuilder& b) {
  const ModelConfig& c = b.config();
  ASSIGN_OR_RETURN(Output u_raw, Tower(b, "user_tower", c.user_features));
  ASSIGN_OR_RETURN(Output v_raw, Tower(b, "item_tower", c.item_features));
  Output u = ops::Identity(b.scope().WithOpName("user_embedding"), u_raw);
  Output v = ops::Identity(b.scope().WithOpName("item_embedding"), v_raw);
  const Scope s = b.scope().NewSubScope("two_tower");
  const Output inv_t =
      ops::Const(s, static_cast<float>(1.0 / c.temperature));
  Output score = ops::Sum(s, ops::Mul(s, u, v), {1});
  b.AddOutput("score", ops::Identity(b.scope().WithOpName("score"), score));
  b.AddSignature("user_embedding", {c.user_features, {{"user_embedding", u}}});
  b.AddSignature("item_embedding", {c.item_features, {{"item_embedding", v}}});
  Output logits = ops::Mul(s, score, inv_t);
  const Output labels = b.inputs().labels;
  if (labels.valid()) {
    const Scope ls = b.scope().NewSubScope("in_batch_softmax");
    Output sim = ops::Mul(ls, ops::MatMul(ls, u, v, {.transpose_b = true}),
                          inv_t);  // [B, B]
    Output diagonal =
        ops::Range(ls, ops::Const(ls, int32_t{0}), ops::Size(ls, labels),
                   ops::Const(ls, int32_t{1}));
    Output ce =
        ops::SparseSoftmaxCrossEntropyWithLogits(ls, sim, diagonal).loss;
    Output positives = ops::Sum(ls, labels, {0});
    b.SetLoss(ops::RealDiv(
        ls, ops::Sum(ls, ops::Mul(ls, ce, labels), {0}),
        ops::Maximum(ls, positives, ops::Const(ls, 1.0f))));
  }
  RETURN_IF_ERROR(b.scope().status());
  return logits;
}

absl::Status CheckTwoTower(const ModelConfig& c) {
  auto known = [&](const std::string& name) {
    for (const std::string& d : c.dense_features) {
      if (d == name) return true;
    }
    for (const SparseFeatureConfig& f : c.sparse_features) {
      if (f.name == name) return true;
    }
    return false;
  };
  for (const auto& [field, list] :
       {std::pair<const char*, const std::vector<std::string>*>{
            "user_features", &c.user_features},
        {"item_features", &c.item_features}}) {
    if (list->empty()) {
      return errors::InvalidArgument(
          "model type 'two_tower' needs ", field,
          ": the names of the dense or sparse features of that tower");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      if (!known((*list)[i])) {
        return errors::InvalidArgument(
            field, "[", i, "]: '", (*list)[i],
            "' is not a dense or sparse feature of the config");
      }
    }
  }
  for (const std::string& name : c.user_features) {
    for (const std::string& other : c.item_features) {
      if (name == other) {
        return errors::InvalidArgument(
            "feature '", name,
            "' is in both user_features and item_features; a feature feeds "
            "one tower");
      }
    }
  }
  if (c.tower_dim <= 0) {
    return errors::InvalidArgument("tower_dim must be > 0, got ", c.tower_dim);
  }
  if (!(c.temperature > 0)) {
    return errors::InvalidArgument("temperature must be > 0, got ",
                                   c.temperature);
  }
  return absl::OkStatus();
}

}  // namespace

RECFLOW_REGISTER_MODEL("two_tower", BuildTwoTower, CheckTwoTower);

}  // namespace recflow::models::internal
