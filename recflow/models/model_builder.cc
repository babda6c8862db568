#include "recflow/models/model_builder.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "recflow/core/fingerprint.h"
#include "recflow/core/mutex.h"
#include "recflow/core/status.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/embedding_ops.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/ops/initializers.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/train/variables.h"

namespace recflow::models::internal {
namespace {

enum VariableKind {
  kEmbeddingTable = 0,
  kKernel = 1,
  kBiasKind = 2,
  kProjection = 3
};
}  // namespace

Output FloorModIds(const Scope& scope, Output ids, int64_t num_buckets) {
  return ops::FloorMod(scope, ids, ops::Const(scope, num_buckets));
}

ModelBuilder::ModelBuilder(const Scope& scope, const ModelConfig& config,
                           const ModelInputs& inputs, bool trainable)
    : scope_(scope), config_(config), inputs_(inputs), trainable_(trainable) {}

int64_t ModelBuilder::FeatureDim(int f) const {
  const int64_t dim = config_.sparse_features[f].dim;
  return dim > 0 ? dim : config_.embedding_dim;
}

Output ModelBuilder::NewVariable(const Scope& s, absl::string_view name,
                                 const std::vector<int64_t>& shape, int kind) {
  const TensorShape tshape(absl::MakeConstSpan(shape));
  // seed2: a fingerprint of the sub-scope's prefix (the name of a throwaway
  // op in it) and the variable's name.
  const std::string where = s.GetUniqueNameForOp("init_seed");
  const ops::InitializerOptions init{
      .dtype = DT_FLOAT,
      .seed = static_cast<int64_t>(config_.seed),
      .seed2 = static_cast<int64_t>(
                   Fingerprint64(absl::StrCat(where, "/", name)) >> 2) |
               1};
  const Scope is = s.NewSubScope(absl::StrCat(name, "_init"));
  Output initial;
  switch (kind) {
    case kEmbeddingTable:
    case kProjection:
      initial = ops::TruncatedNormalInitializer(is, tshape, 0.0,
                                                kEmbeddingStddev, init);
      break;
    case kKernel:
      initial = ops::GlorotUniform(is, tshape, init);
      break;
    default:
      initial = ops::Zeros(is, tshape);
      break;
  }
  Output var =
      train::Variable(s, name, PartialShape(absl::MakeConstSpan(shape)),
                      DT_FLOAT, initial, {.use_resource = true});
  if (!var.valid()) return var;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  num_parameters_ += n;
  if (kind == kEmbeddingTable) {
    embedding_variables_.push_back(var);
  } else {
    dense_variables_.push_back(var);
  }
  return var;
}

absl::StatusOr<Output> ModelBuilder::EmbeddingBag(int f,
                                                  absl::string_view group,
                                                  int64_t dim) {
  const auto key = std::make_pair(std::string(group), f);
  if (auto it = bags_.find(key); it != bags_.end()) return it->second;
  const SparseFeatureConfig& feature = config_.sparse_features[f];
  auto gs = group_scopes_.find(std::string(group));
  if (gs == group_scopes_.end()) {
    gs = group_scopes_.emplace(std::string(group), scope_.NewSubScope(group))
             .first;
  }
  const Scope& s = gs->second;
  const Scope ls = s.NewSubScope(absl::StrCat(feature.name, "_lookup"));
  const SparseInput& in = inputs_.sparse[f];
  if (feature.hash_table) {
    // An unbounded table keyed by the raw ids; it carries the embedding
    // optimizer's slots, so its kind must be that optimizer.
    ops::HashEmbeddingTableAttrs attrs;
    attrs.dim = dim;
    attrs.optimizer = config_.embedding_optimizer.type;
    attrs.initial_accumulator_value =
        static_cast<float>(config_.embedding_optimizer.initial_accumulator_value);
    attrs.initializer = "truncated_normal";
    attrs.init_stddev = static_cast<float>(kEmbeddingStddev);
    attrs.seed = static_cast<int64_t>(
        Fingerprint64(absl::StrCat(config_.seed, "/", group, "/", feature.name)) >> 2);
    Output table = train::HashEmbeddingTable(s, feature.name, attrs);
    if (!table.valid()) return scope_.status();
    embedding_variables_.push_back(table);
    Output bag = ops::HashEmbeddingBag(
        ls, table, in.ids, in.row_splits, Output(),
        {.combiner = feature.combiner, .mode = trainable_ ? "train" : "serve"});
    RETURN_IF_ERROR(scope_.status());
    bags_.emplace(key, bag);
    return bag;
  }
  Output table = NewVariable(s, feature.name, {feature.vocabulary_size, dim},
                             kEmbeddingTable);
  Output ids =
      FloorModIds(ls.NewSubScope("bucket"), in.ids, feature.vocabulary_size);
  Output bag =
      ops::ResourceEmbeddingBag(ls, table, ids, in.row_splits, DT_FLOAT,
                                Output(), {.combiner = feature.combiner});
  RETURN_IF_ERROR(scope_.status());
  bags_.emplace(key, bag);
  return bag;
}

absl::StatusOr<std::vector<Output>> ModelBuilder::FieldEmbeddings() {
  std::vector<Output> out;
  for (int f = 0; f < num_sparse(); ++f) {
    ASSIGN_OR_RETURN(Output e, EmbeddingBag(f, "embedding", FeatureDim(f)));
    out.push_back(e);
  }
  return out;
}

absl::StatusOr<Output> ModelBuilder::SparseLinear() {
  std::vector<Output> terms;
  for (int f = 0; f < num_sparse(); ++f) {
    ASSIGN_OR_RETURN(Output e, EmbeddingBag(f, "linear", 1));
    terms.push_back(e);
  }
  if (terms.empty()) return Output();
  if (terms.size() == 1) return terms[0];
  return ops::AddN(scope_.NewSubScope("linear_sum"), terms);
}

Output ModelBuilder::Kernel(const Scope& s, absl::string_view name, int64_t in,
                            int64_t out, bool embedding_init) {
  Output w =
      NewVariable(s, name, {in, out}, embedding_init ? kProjection : kKernel);
  if (w.valid()) regularized_weights_.push_back(w);
  return w;
}

Output ModelBuilder::Bias(const Scope& s, absl::string_view name,
                          int64_t size) {
  return NewVariable(s, name, {size}, kBiasKind);
}

Output ModelBuilder::Dense(absl::string_view name, Output x, int64_t in,
                           int64_t out, absl::string_view activation) {
  const Scope s = scope_.NewSubScope(name);
  Output w = Kernel(s, "kernel", in, out);
  Output b = Bias(s, "bias", out);
  Output z = ops::BiasAdd(s, ops::MatMul(s, x, train::ReadValue(s, w)),
                          train::ReadValue(s, b));
  if (activation == "relu") return ops::Relu(s, z);
  if (activation == "sigmoid") return ops::Sigmoid(s, z);
  if (activation == "tanh") return ops::Tanh(s, z);
  return z;  // identity (BuildModel validated the name)
}

Output ModelBuilder::Mlp(absl::string_view name, Output x, int64_t in,
                         const std::vector<int64_t>& units, int64_t* out_dim) {
  for (size_t l = 0; l < units.size(); ++l) {
    x = Dense(absl::StrCat(name, "_", l), x, in, units[l], config_.activation);
    in = units[l];
  }
  *out_dim = in;
  return x;
}

Output ModelBuilder::Logit(absl::string_view name, Output x, int64_t in) {
  const Scope s = scope_.NewSubScope(name);
  Output w = Kernel(s, "kernel", in, 1);
  Output b = Bias(s, "bias", 1);
  Output z = ops::BiasAdd(s, ops::MatMul(s, x, train::ReadValue(s, w)),
                          train::ReadValue(s, b));
  return ToVector(s, z);
}

Output ModelBuilder::ToVector(const Scope& s, Output x) {
  return ops::Reshape(s, x, ops::Const(s, {int32_t{-1}}, TensorShape({1})));
}

// --- Registry --------------------------------------------------------------

namespace {

struct Registry {
  Mutex mu;
  std::map<std::string, ModelDef, std::less<>> models;
};

Registry& GetRegistry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

bool RegisterModel(ModelDef def) {
  Registry& r = GetRegistry();
  MutexLock lock(&r.mu);
  const std::string name = def.name;
  return r.models.emplace(name, std::move(def)).second;
}

const ModelDef* FindModel(absl::string_view type) {
  Registry& r = GetRegistry();
  MutexLock lock(&r.mu);
  auto it = r.models.find(type);
  return it == r.models.end() ? nullptr : &it->second;
}

std::vector<std::string> RegisteredModels() {
  Registry& r = GetRegistry();
  MutexLock lock(&r.mu);
  std::vector<std::string> names;
  for (const auto& [name, def] : r.models) names.push_back(name);
  return names;
}

}  // namespace recflow::models::internal
