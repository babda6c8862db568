#include "recflow/models/model_builder.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// The multiplier of an initializer's limit / stddev for a weight of `rows`
// rows and `dim` columns.
double InitScale(const InitializerConfig& c, int64_t rows, int64_t dim) {
  if (c.scale == "inverse_sqrt_rows") return 1.0 / std::sqrt(static_cast<double>(rows));
  if (c.scale == "inverse_sqrt_dim") return 1.0 / std::sqrt(static_cast<double>(dim));
  return 1.0;
}

// The nodes that produce a fixed-size weight's initial value (CheckConfig
// validated the type); `scale_shape` is the [rows, dim] its scale refers to.
Output InitialValue(const Scope& is, const TensorShape& shape, const InitializerConfig& c,
                    const std::pair<int64_t, int64_t>& scale_shape,
                    const ops::InitializerOptions& init) {
  const double k = InitScale(c, scale_shape.first, scale_shape.second);
  const std::string& t = c.type;
  if (t == "constant") return ops::Constant(is, shape, c.value);
  if (t == "uniform") return ops::UniformInitializer(is, shape, -c.limit * k, c.limit * k, init);
  if (t == "normal") return ops::NormalInitializer(is, shape, c.mean, c.stddev * k, init);
  if (t == "truncated_normal") {
    return ops::TruncatedNormalInitializer(is, shape, c.mean, c.stddev * k, init);
  }
  if (t == "glorot_uniform") return ops::GlorotUniform(is, shape, init);
  if (t == "glorot_normal") return ops::GlorotNormal(is, shape, init);
  if (t == "he_uniform") return ops::HeUniform(is, shape, init);
  if (t == "he_normal") return ops::HeNormal(is, shape, init);
  if (t == "lecun_uniform") return ops::LecunUniform(is, shape, init);
  if (t == "lecun_normal") return ops::LecunNormal(is, shape, init);
  return ops::Zeros(is, shape);
}

}  // namespace

Output FloorModIds(const Scope& scope, Output ids, int64_t num_buckets) {
  return ops::FloorMod(scope, ids, ops::Const(scope, num_buckets));
}

ModelBuilder::ModelBuilder(const Scope& scope, const ModelConfig& config,
                           const ModelInputs& inputs, bool trainable)
    : scope_(scope), config_(config), inputs_(inputs), trainable_(trainable) {}

int ModelBuilder::TableFeature(int f) const {
  const std::string& target = config_.sparse_features[f].sequence_of;
  if (target.empty()) return f;
  const int t = SparseIndex(target);
  return t < 0 ? f : t;  // BuildModel checked that the target exists
}

int ModelBuilder::SparseIndex(absl::string_view name) const {
  for (int f = 0; f < num_sparse(); ++f) {
    if (config_.sparse_features[f].name == name) return f;
  }
  return -1;
}

int ModelBuilder::DenseIndex(absl::string_view name) const {
  for (size_t j = 0; j < config_.dense_features.size(); ++j) {
    if (config_.dense_features[j] == name) return static_cast<int>(j);
  }
  return -1;
}

int64_t ModelBuilder::FeatureDim(int f) const {
  const int64_t dim = config_.sparse_features[TableFeature(f)].dim;
  return dim > 0 ? dim : config_.embedding_dim;
}

bool ModelBuilder::HasMissingId(int f) const {
  const SparseFeatureConfig& feature = config_.sparse_features[f];
  return feature.missing == "id" && feature.sequence_of.empty();
}

const InitializerConfig& ModelBuilder::TableInitializer(
    int t, absl::string_view group) const {
  if (group == "linear") return config_.initializers.linear;
  const SparseFeatureConfig& feature = config_.sparse_features[t];
  return feature.initializer ? *feature.initializer : config_.initializers.embedding;
}

std::pair<int64_t, int64_t> ModelBuilder::EmbeddingScaleShape() const {
  for (int f = 0; f < num_sparse(); ++f) {
    const SparseFeatureConfig& feature = config_.sparse_features[f];
    if (!feature.hash_table && feature.sequence_of.empty()) {
      return {feature.vocabulary_size + (HasMissingId(f) ? 1 : 0), FeatureDim(f)};
    }
  }
  return {1, config_.embedding_dim};
}

Output ModelBuilder::NewVariable(const Scope& s, absl::string_view name,
                                 const std::vector<int64_t>& shape,
                                 const InitializerConfig& initializer,
                                 bool embedding,
                                 std::optional<std::pair<int64_t, int64_t>> scale_shape,
                                 std::string what) {
  // The parameter count, checked: a config's sizes are the user's, and a
  // wrapped count would be reported as a small model.
  const std::string shape_text = absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
  const bool default_what = what.empty();
  if (default_what) what = absl::StrCat("variable '", name, "' ", shape_text);
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) {
      s.UpdateStatus(errors::InvalidArgument(
          what, " has more parameters than fit in int64; make the sizes that set it smaller"));
      return Output();
    }
  }
  int64_t total = 0;
  if (__builtin_add_overflow(num_parameters_, n, &total)) {
    s.UpdateStatus(errors::InvalidArgument(
        "the model's parameter count overflows int64 at ", what, " (", n, " parameters, after ",
        num_parameters_, "); make the model smaller"));
    return Output();
  }
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
  if (!scale_shape) scale_shape = {shape.empty() ? 1 : shape.front(), shape.empty() ? 1 : shape.back()};
  Output initial = InitialValue(is, tshape, initializer, *scale_shape, init);
  Output var =
      train::Variable(s, name, PartialShape(absl::MakeConstSpan(shape)),
                      DT_FLOAT, initial, {.use_resource = true});
  if (!var.valid()) return var;
  num_parameters_ = total;
  if (default_what) what = absl::StrCat("variable '", var.node()->name(), "' ", shape_text);
  variable_sizes_.push_back({var.node()->name(), std::move(what), n, embedding});
  if (embedding) {
    embedding_variables_.push_back(var);
  } else {
    dense_variables_.push_back(var);
  }
  return var;
}

const Scope& ModelBuilder::GroupScope(absl::string_view group) {
  auto gs = group_scopes_.find(std::string(group));
  if (gs == group_scopes_.end()) {
    gs = group_scopes_.emplace(std::string(group), scope_.NewSubScope(group))
             .first;
  }
  return gs->second;
}

absl::StatusOr<Output> ModelBuilder::Table(int t, absl::string_view group,
                                           int64_t dim) {
  const auto key = std::make_pair(std::string(group), t);
  if (auto it = tables_.find(key); it != tables_.end()) return it->second;
  const SparseFeatureConfig& feature = config_.sparse_features[t];
  const Scope& s = GroupScope(group);
  Output table;
  if (feature.hash_table) {
    // An unbounded table keyed by the raw ids; it carries the embedding
    // optimizer's slots, so its kind must be that optimizer.
    ops::HashEmbeddingTableAttrs attrs;
    attrs.dim = dim;
    attrs.optimizer = config_.embedding_optimizer.type;
    attrs.initial_accumulator_value =
        static_cast<float>(config_.embedding_optimizer.initial_accumulator_value);
    // CheckConfig allowed only the types and scales a table row can take.
    const InitializerConfig& init = TableInitializer(t, group);
    const double k = InitScale(init, 1, dim);
    attrs.initializer = init.type;
    attrs.init_value = static_cast<float>(init.value);
    attrs.init_minval = static_cast<float>(-init.limit * k);
    attrs.init_maxval = static_cast<float>(init.limit * k);
    attrs.init_mean = static_cast<float>(init.mean);
    attrs.init_stddev = static_cast<float>(init.stddev * k);
    attrs.seed = static_cast<int64_t>(
        Fingerprint64(absl::StrCat(config_.seed, "/", group, "/", feature.name)) >> 2);
    attrs.dram_budget_bytes = feature.dram_budget_mb << 20;
    attrs.cold_dir = feature.cold_dir;
    table = train::HashEmbeddingTable(s, feature.name, attrs);
    if (!table.valid()) return scope_.status();
    embedding_variables_.push_back(table);
  } else {
    // One more row for the missing id (HasMissingId: t is not a sequence).
    // (CheckConfig made sure the row count does not overflow.)
    const int64_t rows = feature.vocabulary_size + (HasMissingId(t) ? 1 : 0);
    table = NewVariable(
        s, feature.name, {rows, dim}, TableInitializer(t, group),
        /*embedding=*/true, std::nullopt,
        absl::StrCat("the ", group, " table of sparse feature '", feature.name, "' [",
                     rows, ", ", dim, "] (its vocabulary_size",
                     HasMissingId(t) ? " + 1 missing-id row" : "", " x ",
                     dim == 1 ? "1: first-order weights" : "dim", ")"));
  }
  RETURN_IF_ERROR(scope_.status());
  tables_.emplace(key, table);
  return table;
}

absl::StatusOr<Output> ModelBuilder::BagOver(int f, const Scope& ls,
                                             Output table, Output weights,
                                             const std::string& combiner) {
  const SparseFeatureConfig& owner = config_.sparse_features[TableFeature(f)];
  const SparseInput& in = inputs_.sparse[f];
  Output ids = in.ids, splits = in.row_splits;
  if (!owner.hash_table) {
    ids = FloorModIds(ls.NewSubScope("bucket"), ids, owner.vocabulary_size);
  }
  if (HasMissingId(f)) {
    // The missing id: the table's extra last row, or a reserved key.
    const int64_t missing = owner.hash_table ? kMissingKey : owner.vocabulary_size;
    ops::FillEmptyBagsOutputs filled =
        ops::FillEmptyBags(ls, ids, splits, ops::Const(ls, missing));
    ids = filled.ids;
    splits = filled.row_splits;
  }
  Output bag;
  if (owner.hash_table) {
    bag = ops::HashEmbeddingBag(
        ls, table, ids, splits, weights,
        {.combiner = combiner, .mode = trainable_ ? "train" : "serve"});
  } else {
    bag = ops::ResourceEmbeddingBag(ls, table, ids, splits, DT_FLOAT,
                                    weights, {.combiner = combiner});
  }
  RETURN_IF_ERROR(scope_.status());
  return bag;
}

absl::StatusOr<Output> ModelBuilder::EmbeddingBag(int f,
                                                  absl::string_view group,
                                                  int64_t dim) {
  const auto key = std::make_pair(std::string(group), f);
  if (auto it = bags_.find(key); it != bags_.end()) return it->second;
  ASSIGN_OR_RETURN(Output table, Table(TableFeature(f), group, dim));
  const SparseFeatureConfig& feature = config_.sparse_features[f];
  const Scope ls =
      GroupScope(group).NewSubScope(absl::StrCat(feature.name, "_lookup"));
  ASSIGN_OR_RETURN(Output bag,
                   BagOver(f, ls, table, Output(), feature.combiner));
  bags_.emplace(key, bag);
  return bag;
}

absl::StatusOr<Output> ModelBuilder::WeightedBag(int f,
                                                 absl::string_view group,
                                                 int64_t dim, Output weights) {
  ASSIGN_OR_RETURN(Output table, Table(TableFeature(f), group, dim));
  const Scope ls = GroupScope(group).NewSubScope(
      absl::StrCat(config_.sparse_features[f].name, "_weighted_lookup"));
  return BagOver(f, ls, table, weights, "sum");
}

absl::StatusOr<Output> ModelBuilder::IdEmbeddings(int f,
                                                  absl::string_view group,
                                                  int64_t dim) {
  ASSIGN_OR_RETURN(Output table, Table(TableFeature(f), group, dim));
  const SparseFeatureConfig& owner = config_.sparse_features[TableFeature(f)];
  const Scope ls = GroupScope(group).NewSubScope(
      absl::StrCat(config_.sparse_features[f].name, "_rows"));
  const SparseInput& in = inputs_.sparse[f];
  Output rows;
  if (owner.hash_table) {
    rows = ops::HashEmbeddingLookup(
        ls, table, in.ids,
        {.dim = dim, .mode = trainable_ ? "train" : "serve"});
  } else {
    Output ids =
        FloorModIds(ls.NewSubScope("bucket"), in.ids, owner.vocabulary_size);
    rows = ops::ResourceGather(ls, table, ids, DT_FLOAT);
  }
  RETURN_IF_ERROR(scope_.status());
  return rows;
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
                            int64_t out, KernelInit init) {
  const InitializersConfig& parts = config_.initializers;
  // A kernel into the embedding space starts at the embeddings' scale: a
  // scale by rows refers to the (first) table's rows, not the kernel's.
  Output w = NewVariable(s, name, {in, out},
                         init == KernelInit::kEmbedding ? parts.embedding
                         : init == KernelInit::kLinear  ? parts.linear
                                                        : parts.kernel,
                         /*embedding=*/false,
                         init == KernelInit::kEmbedding
                             ? std::optional(EmbeddingScaleShape())
                             : std::nullopt);
  if (w.valid()) regularized_weights_.push_back(w);
  return w;
}

Output ModelBuilder::Bias(const Scope& s, absl::string_view name,
                          int64_t size) {
  return NewVariable(s, name, {size}, config_.initializers.bias,
                     /*embedding=*/false);
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
