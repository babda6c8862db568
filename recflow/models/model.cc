// BuildModel: config checks, the registered model's logits, then the loss,
// probabilities and the per-group training ops (model.h).
#include "recflow/models/model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"
#include "recflow/core/system_memory.h"
#include "recflow/models/model_builder.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/train/global_step.h"
#include "recflow/train/learning_rate.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

namespace recflow::models {
namespace {

using internal::ModelBuilder;

absl::Status CheckOptimizer(const OptimizerConfig& o, absl::string_view field) {
  if (o.type != "sgd" && o.type != "adagrad" && o.type != "adam" &&
      o.type != "ftrl") {
    return errors::InvalidArgument(field, ".type: unknown optimizer '", o.type,
                                   "'; one of sgd, adagrad, adam, ftrl");
  }
  if (!(o.learning_rate > 0)) {
    return errors::InvalidArgument(field, ".learning_rate must be > 0, got ",
                                   o.learning_rate);
  }
  if (o.type == "adagrad" && o.epsilon <= 0 &&
      !(o.initial_accumulator_value > 0)) {
    return errors::InvalidArgument(
        field,
        ".initial_accumulator_value must be > 0 for adagrad without an "
        "epsilon (TensorFlow 1's rule divides by sqrt(accumulator)), got ",
        o.initial_accumulator_value, "; set epsilon > 0 (PyTorch: 1e-10) to "
        "start the accumulator at 0");
  }
  if (o.type == "adagrad" && !(o.initial_accumulator_value >= 0)) {
    return errors::InvalidArgument(
        field, ".initial_accumulator_value must be >= 0 for adagrad, got ",
        o.initial_accumulator_value);
  }
  if (o.type == "ftrl" && !(o.initial_accumulator_value >= 0)) {
    return errors::InvalidArgument(
        field, ".initial_accumulator_value must be >= 0 for ftrl, got ",
        o.initial_accumulator_value);
  }
  if (o.type == "adam" && !(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 &&
                            o.beta2 < 1)) {
    return errors::InvalidArgument(
        field, ": adam needs beta1 and beta2 in [0, 1) and epsilon >= 0, got ",
        "beta1 ", o.beta1, ", beta2 ", o.beta2, ", epsilon ", o.epsilon);
  }
  if (o.type == "ftrl" && !(o.l1 >= 0 && o.l2 >= 0)) {
    return errors::InvalidArgument(field,
                                   ": ftrl needs l1 >= 0 and l2 >= 0, got l1 ",
                                   o.l1, ", l2 ", o.l2);
  }
  if (o.schedule == "constant") {
  } else if (o.schedule == "exponential_decay") {
    if (o.decay_steps <= 0 || !(o.decay_rate > 0)) {
      return errors::InvalidArgument(field,
                                     ".schedule exponential_decay needs "
                                     "decay_steps > 0 and decay_rate > 0, got ",
                                     "decay_steps ", o.decay_steps,
                                     ", decay_rate ", o.decay_rate);
    }
  } else if (o.schedule == "linear_warmup") {
    if (o.warmup_steps <= 0) {
      return errors::InvalidArgument(
          field, ".schedule linear_warmup needs warmup_steps > 0, got ",
          o.warmup_steps);
    }
  } else {
    return errors::InvalidArgument(
        field, ".schedule: unknown schedule '", o.schedule,
        "'; one of constant, exponential_decay, linear_warmup");
  }
  return absl::OkStatus();
}

absl::Status CheckUnits(const std::vector<int64_t>& units,
                        absl::string_view field) {
  if (static_cast<int64_t>(units.size()) > kMaxLayers) {
    return errors::InvalidArgument(field, " has ", units.size(), " layers; at most ",
                                   kMaxLayers);
  }
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i] <= 0) {
      return errors::InvalidArgument(field, "[", i, "] is ", units[i],
                                     "; every layer needs > 0 units");
    }
  }
  return absl::OkStatus();
}

// `table`: the initializer of a table (hash tables take fewer types).
absl::Status CheckInitializer(const InitializerConfig& i, absl::string_view field,
                              bool hash_table) {
  const std::vector<std::string>& types = InitializerTypes();
  // The types a hash table row can start from (no fans: no row count).
  const std::vector<std::string> row_types(types.begin(), types.begin() + 5);
  if (std::find(types.begin(), types.end(), i.type) == types.end()) {
    return errors::InvalidArgument(field, ".type: unknown initializer '", i.type, "'; one of ",
                                   absl::StrJoin(types, ", "));
  }
  if (i.scale != "none" && i.scale != "inverse_sqrt_rows" && i.scale != "inverse_sqrt_dim") {
    return errors::InvalidArgument(field, ".scale: unknown scale '", i.scale,
                                   "'; one of none, inverse_sqrt_rows, inverse_sqrt_dim");
  }
  if (!(std::isfinite(i.value) && std::isfinite(i.mean) && i.limit >= 0 &&
        std::isfinite(i.limit) && i.stddev >= 0 && std::isfinite(i.stddev))) {
    return errors::InvalidArgument(field, ": value and mean must be finite, limit and stddev "
                                   "finite and >= 0");
  }
  if (hash_table && std::find(row_types.begin(), row_types.end(), i.type) == row_types.end()) {
    return errors::InvalidArgument(field, ": a hash table's rows start from zeros, constant, "
                                   "uniform, normal or truncated_normal, not '", i.type,
                                   "' (a variance-scaling type needs the table's row count)");
  }
  if (hash_table && i.scale == "inverse_sqrt_rows") {
    return errors::InvalidArgument(field, ".scale: a hash table has no row count, so "
                                   "inverse_sqrt_rows does not apply (use inverse_sqrt_dim "
                                   "or a fixed limit / stddev)");
  }
  return absl::OkStatus();
}

absl::Status CheckConfig(const ModelConfig& c, const BuildOptions& options) {
  const internal::ModelDef* def = internal::FindModel(c.type);
  if (def == nullptr) {
    return errors::InvalidArgument(
        "type: unknown model type '", c.type, "'; one of ",
        absl::StrJoin(internal::RegisteredModels(), ", "));
  }
  if (c.dense_features.empty() && c.sparse_features.empty()) {
    return errors::InvalidArgument(
        "dense_features and sparse_features are both empty: model '", c.type,
        "' needs at least one feature");
  }
  if (c.embedding_dim <= 0) {
    return errors::InvalidArgument("embedding_dim must be > 0, got ",
                                   c.embedding_dim);
  }
  std::set<std::string> names;
  for (size_t f = 0; f < c.sparse_features.size(); ++f) {
    const SparseFeatureConfig& s = c.sparse_features[f];
    const std::string field =
        absl::StrCat("sparse_features[", f, "] (", s.name, ")");
    if (s.name.empty()) {
      return errors::InvalidArgument("sparse_features[", f, "].name is empty");
    }
    if (!names.insert(s.name).second) {
      return errors::InvalidArgument(field, ".name: feature '", s.name,
                                     "' is listed twice");
    }
    if (s.dim < 0) {
      return errors::InvalidArgument(
          field, ".dim must be > 0 (or 0 for embedding_dim), got ", s.dim);
    }
    if (!s.sequence_of.empty()) {
      const auto target = std::find_if(
          c.sparse_features.begin(), c.sparse_features.end(),
          [&](const SparseFeatureConfig& t) { return t.name == s.sequence_of; });
      if (target == c.sparse_features.end() || s.sequence_of == s.name) {
        return errors::InvalidArgument(
            field, ".sequence_of: '", s.sequence_of,
            "' is not another sparse feature of the config");
      }
      if (!target->sequence_of.empty()) {
        return errors::InvalidArgument(
            field, ".sequence_of: '", s.sequence_of,
            "' is itself a sequence (of '", target->sequence_of,
            "'); name the item feature");
      }
      if (s.dim != 0 && s.dim != (target->dim > 0 ? target->dim : c.embedding_dim)) {
        return errors::InvalidArgument(
            field, ".dim is ", s.dim, " but a sequence reads the table of '",
            s.sequence_of, "'; leave dim at 0");
      }
    } else if (!s.hash_table && s.vocabulary_size <= 0) {
      return errors::InvalidArgument(
          field,
          ".vocabulary_size must be > 0 unless hash_table is "
          "set, got ",
          s.vocabulary_size);
    } else if (!s.hash_table && s.missing == "id" &&
               s.vocabulary_size == std::numeric_limits<int64_t>::max()) {
      // The table gets one more row for the missing id.
      return errors::InvalidArgument(field, ".vocabulary_size ", s.vocabulary_size,
                                     " + 1 missing-id row overflows int64");
    }
    if (s.combiner != "sum" && s.combiner != "mean" && s.combiner != "sqrtn") {
      return errors::InvalidArgument(field, ".combiner: unknown combiner '",
                                     s.combiner, "'; one of sum, mean, sqrtn");
    }
    if (s.missing != "empty" && s.missing != "id") {
      return errors::InvalidArgument(field, ".missing: unknown choice '", s.missing,
                                     "'; one of empty, id");
    }
    // Sequences read their target's table and keep an empty history empty.
    const bool hash = s.hash_table;
    if (s.sequence_of.empty()) {
      RETURN_IF_ERROR(CheckInitializer(
          s.initializer ? *s.initializer : c.initializers.embedding,
          s.initializer ? absl::StrCat(field, ".initializer") : "initializers.embedding",
          hash));
      RETURN_IF_ERROR(CheckInitializer(c.initializers.linear, "initializers.linear", hash));
    }
  }
  RETURN_IF_ERROR(CheckInitializer(c.initializers.embedding, "initializers.embedding", false));
  RETURN_IF_ERROR(CheckInitializer(c.initializers.linear, "initializers.linear", false));
  RETURN_IF_ERROR(CheckInitializer(c.initializers.kernel, "initializers.kernel", false));
  RETURN_IF_ERROR(CheckInitializer(c.initializers.bias, "initializers.bias", false));
  std::set<std::string> dense_names;
  for (size_t j = 0; j < c.dense_features.size(); ++j) {
    if (!dense_names.insert(c.dense_features[j]).second) {
      return errors::InvalidArgument("dense_features[", j, "]: feature '",
                                     c.dense_features[j], "' is listed twice");
    }
  }
  RETURN_IF_ERROR(CheckUnits(c.hidden_units, "hidden_units"));
  RETURN_IF_ERROR(CheckUnits(c.bottom_units, "bottom_units"));
  RETURN_IF_ERROR(CheckUnits(c.attention_units, "attention_units"));
  if (c.cross_layers > kMaxLayers) {
    return errors::InvalidArgument("cross_layers is ", c.cross_layers, "; at most ", kMaxLayers);
  }
  if (c.activation != "relu" && c.activation != "sigmoid" &&
      c.activation != "tanh" && c.activation != "identity") {
    return errors::InvalidArgument("activation: unknown activation '",
                                   c.activation,
                                   "'; one of relu, sigmoid, tanh, identity");
  }
  if (!(c.l2_regularization >= 0)) {
    return errors::InvalidArgument("l2_regularization must be >= 0, got ",
                                   c.l2_regularization);
  }
  if (options.trainable) {
    RETURN_IF_ERROR(
        CheckOptimizer(c.embedding_optimizer, "embedding_optimizer"));
    RETURN_IF_ERROR(CheckOptimizer(c.dense_optimizer, "dense_optimizer"));
  }
  if (def->check) RETURN_IF_ERROR(def->check(c));
  return absl::OkStatus();
}

absl::Status CheckInputs(const ModelConfig& c, const ModelInputs& in,
                         const BuildOptions& options) {
  if (in.sparse.size() != c.sparse_features.size()) {
    return errors::InvalidArgument("inputs have ", in.sparse.size(),
                                   " sparse features but the config lists ",
                                   c.sparse_features.size());
  }
  for (size_t f = 0; f < in.sparse.size(); ++f) {
    if (!in.sparse[f].ids.valid() || !in.sparse[f].row_splits.valid()) {
      return errors::InvalidArgument("inputs of sparse feature '",
                                     c.sparse_features[f].name,
                                     "' (ids, row_splits) are not set");
    }
  }
  if (!c.dense_features.empty()) {
    if (!in.dense.valid()) {
      return errors::InvalidArgument(
          "the config lists ", c.dense_features.size(),
          " dense features but inputs.dense is not set");
    }
    const PartialShape shape = in.dense.shape();
    const int64_t n = static_cast<int64_t>(c.dense_features.size());
    if (shape.rank() == 2 && shape.dim(1) >= 0 && shape.dim(1) != n) {
      return errors::InvalidArgument("inputs.dense is ", shape.DebugString(),
                                     " but the config lists ", n,
                                     " dense features");
    }
  }
  if (options.trainable && !in.labels.valid()) {
    return errors::InvalidArgument(
        "inputs.labels is not set (a trainable model needs labels)");
  }
  return absl::OkStatus();
}

// The learning rate of an optimizer group, following its schedule.
train::Hyperparameter LearningRate(const Scope& scope, const OptimizerConfig& o,
                                   Output global_step, absl::string_view name) {
  if (o.schedule == "exponential_decay") {
    return ops::Identity(
        scope.WithOpName(name),
        train::ExponentialDecay(scope.NewSubScope(name), o.learning_rate,
                                global_step, o.decay_steps, o.decay_rate));
  }
  if (o.schedule == "linear_warmup") {
    return ops::Identity(
        scope.WithOpName(name),
        train::LinearWarmup(scope.NewSubScope(name), o.learning_rate,
                            global_step, o.warmup_steps));
  }
  return o.learning_rate;
}

std::unique_ptr<train::Optimizer> MakeOptimizer(const OptimizerConfig& o,
                                                train::Hyperparameter lr) {
  if (o.type == "sgd") {
    return std::make_unique<train::GradientDescentOptimizer>(
        train::GradientDescentOptions{.learning_rate = lr});
  }
  if (o.type == "adagrad") {
    return std::make_unique<train::AdagradOptimizer>(train::AdagradOptions{
        .learning_rate = lr,
        .initial_accumulator_value = o.initial_accumulator_value,
        .epsilon = std::max(o.epsilon, 0.0)});
  }
  if (o.type == "ftrl") {
    return std::make_unique<train::FtrlOptimizer>(train::FtrlOptions{
        .learning_rate = lr,
        .initial_accumulator_value = o.initial_accumulator_value,
        .l1_regularization_strength = o.l1,
        .l2_regularization_strength = o.l2});
  }
  return std::make_unique<train::AdamOptimizer>(
      train::AdamOptions{.learning_rate = lr,
                         .beta1 = o.beta1,
                         .beta2 = o.beta2,
                         .epsilon = o.epsilon < 0 ? 1e-8 : o.epsilon,
                         .lazy_sparse = o.lazy});
}

// Gradients once (sparse kept sparse), each group applied with its own
// optimizer, then one global-step increment after every update, grouped
// under the NoOp "train".
absl::StatusOr<Output> BuildTrainOp(const Scope& scope, const ModelConfig& c,
                                    Model* m) {
  m->global_step = train::GetOrCreateGlobalStep(scope);
  RETURN_IF_ERROR(scope.status());
  const Scope opt_scope = scope.NewSubScope("optimizer");
  auto emb_opt =
      MakeOptimizer(c.embedding_optimizer,
                    LearningRate(opt_scope, c.embedding_optimizer,
                                 m->global_step, "embedding_learning_rate"));
  auto dense_opt = MakeOptimizer(
      c.dense_optimizer, LearningRate(opt_scope, c.dense_optimizer,
                                      m->global_step, "dense_learning_rate"));
  std::vector<Output> vars = m->embedding_variables;
  vars.insert(vars.end(), m->dense_variables.begin(), m->dense_variables.end());
  ASSIGN_OR_RETURN(
      std::vector<train::GradAndVar> grads,
      dense_opt->ComputeGradients(scope.NewSubScope("gradients"), m->loss, vars,
                                  {.keep_sparse = true}));
  std::set<std::string> tables;
  for (const Output& v : m->embedding_variables)
    tables.insert(v.node()->name());
  std::vector<train::GradAndVar> emb_grads, dense_grads;
  bool emb_any = false, dense_any = false;
  for (train::GradAndVar& g : grads) {
    const bool has = g.grad.valid() || g.sparse_grad.valid();
    if (tables.count(g.var.node()->name())) {
      emb_any |= has;
      emb_grads.push_back(std::move(g));
    } else {
      dense_any |= has;
      dense_grads.push_back(std::move(g));
    }
  }
  std::vector<Output> updates;
  if (emb_any) {
    ASSIGN_OR_RETURN(Output u, emb_opt->ApplyGradients(scope, emb_grads));
    updates.push_back(u);
  }
  if (dense_any) {
    ASSIGN_OR_RETURN(Output u, dense_opt->ApplyGradients(scope, dense_grads));
    updates.push_back(u);
  }
  Output increment = train::IncrementGlobalStep(
      opt_scope.WithControlDependencies(updates), m->global_step);
  updates.push_back(increment);
  Output train_op =
      ops::NoOp(scope.WithOpName("train").WithControlDependencies(updates));
  RETURN_IF_ERROR(scope.status());
  return train_op;
}

}  // namespace

ModelInputs Placeholders(const Scope& scope, const ModelConfig& config) {
  ModelInputs in;
  in.labels = ops::Placeholder(scope.WithOpName("labels"), DT_FLOAT,
                               PartialShape({-1}));
  in.dense = ops::Placeholder(
      scope.WithOpName("dense"), DT_FLOAT,
      PartialShape({-1, static_cast<int64_t>(config.dense_features.size())}));
  for (const SparseFeatureConfig& f : config.sparse_features) {
    SparseInput s;
    s.ids = ops::Placeholder(scope.WithOpName(absl::StrCat(f.name, "/ids")),
                             DT_INT64, PartialShape({-1}));
    s.row_splits =
        ops::Placeholder(scope.WithOpName(absl::StrCat(f.name, "/row_splits")),
                         DT_INT64, PartialShape({-1}));
    in.sparse.push_back(s);
  }
  return in;
}

const std::vector<std::string>& InitializerTypes() {
  // The row kinds first: a hash table takes the first five.
  static const auto* v = new std::vector<std::string>{
      "zeros",         "constant",      "uniform",    "normal",
      "truncated_normal", "glorot_uniform", "glorot_normal", "he_uniform",
      "he_normal",     "lecun_uniform", "lecun_normal"};
  return *v;
}

ModelConfig WithDefaults(const ModelConfig& c) {
  ModelConfig out = c;
  for (OptimizerConfig* o : {&out.embedding_optimizer, &out.dense_optimizer}) {
    if (o->learning_rate != 0) continue;  // a negative one is an error
    const internal::ModelDef* def = internal::FindModel(c.type);
    if (o == &out.embedding_optimizer && o->type == "adagrad" && def != nullptr) {
      o->learning_rate = def->embedding_learning_rate;
    } else if (o == &out.dense_optimizer && o->type == "adam" && def != nullptr) {
      o->learning_rate = def->dense_learning_rate;
    } else {
      // TensorFlow's / Keras's defaults where they have one.
      o->learning_rate = o->type == "adam" ? 0.001 : o->type == "sgd" ? 0.01
                         : o->type == "ftrl" ? 0.05 : 0.01;
    }
  }
  return out;
}

absl::StatusOr<Model> BuildModel(const Scope& scope, const ModelConfig& given,
                                 const ModelInputs& inputs,
                                 const BuildOptions& options) {
  RETURN_IF_ERROR(scope.status());
  const ModelConfig config = WithDefaults(given);
  RETURN_IF_ERROR(CheckConfig(config, options));
  RETURN_IF_ERROR(CheckInputs(config, inputs, options));
  const internal::ModelDef* def = internal::FindModel(config.type);

  ModelBuilder b(scope, config, inputs, options.trainable);
  ASSIGN_OR_RETURN(Output raw_logits, def->build(b));
  RETURN_IF_ERROR(scope.status());

  Model m;
  m.logits = ops::Identity(scope.WithOpName("logits"), raw_logits);
  m.probabilities = ops::Sigmoid(scope.WithOpName("probabilities"), m.logits);
  m.embedding_variables = b.embedding_variables();
  m.dense_variables = b.dense_variables();
  m.num_parameters = b.num_parameters();
  m.variable_sizes = b.variable_sizes();
  m.outputs = b.outputs();
  m.signatures = b.signatures();
  if (inputs.labels.valid()) {
    const Scope ls = scope.NewSubScope("loss_terms");
    Output ce = b.loss().valid()
                    ? b.loss()
                    : ops::Mean(ls,
                                ops::SigmoidCrossEntropyWithLogits(
                                    ls, m.logits, inputs.labels),
                                {0});
    if (config.l2_regularization > 0 && !b.regularized_weights().empty()) {
      std::vector<Output> l2;
      for (const Output& w : b.regularized_weights()) {
        l2.push_back(ops::L2Loss(ls, train::ReadValue(ls, w)));
      }
      Output penalty = ops::Mul(
          ls, l2.size() == 1 ? l2[0] : ops::AddN(ls, l2),
          ops::Const(ls, static_cast<float>(config.l2_regularization)));
      m.loss = ops::AddV2(scope.WithOpName("loss"), ce, penalty);
    } else {
      m.loss = ops::Identity(scope.WithOpName("loss"), ce);
    }
  }
  RETURN_IF_ERROR(scope.status());
  if (options.trainable) {
    ASSIGN_OR_RETURN(m.train_op, BuildTrainOp(scope, config, &m));
  }
  return m;
}

std::map<std::string, train::ExportSignature> ServingSignatures(
    const ModelConfig& config, const ModelInputs& inputs, const Model& model) {
  auto add_features = [&](const std::vector<std::string>& names,
                          train::ExportSignature* sig) {
    for (size_t i = 0; i < config.sparse_features.size(); ++i) {
      const std::string& name = config.sparse_features[i].name;
      if (std::find(names.begin(), names.end(), name) == names.end()) continue;
      sig->inputs[name + "/ids"] = inputs.sparse[i].ids;
      sig->inputs[name + "/row_splits"] = inputs.sparse[i].row_splits;
    }
    for (const std::string& d : config.dense_features) {
      if (std::find(names.begin(), names.end(), d) != names.end()) {
        sig->inputs["dense"] = inputs.dense;
      }
    }
  };
  std::map<std::string, train::ExportSignature> sigs;
  train::ExportSignature& def = sigs["serving_default"];
  def.inputs["dense"] = inputs.dense;
  std::vector<std::string> all;
  for (const SparseFeatureConfig& f : config.sparse_features) all.push_back(f.name);
  add_features(all, &def);
  def.outputs["probabilities"] = model.probabilities;
  def.outputs["logits"] = model.logits;
  for (const auto& [name, out] : model.outputs) def.outputs[name] = out;
  for (const auto& [name, extra] : model.signatures) {
    train::ExportSignature& sig = sigs[name];
    add_features(extra.features, &sig);
    sig.outputs = extra.outputs;
  }
  return sigs;
}

namespace {

// Float32 slots per parameter of each optimizer (sgd none; adagrad its
// accumulator; adam m and v; ftrl its accumulator and linear term).
int OptimizerSlots(const std::string& type) {
  if (type == "adagrad") return 1;
  if (type == "adam" || type == "ftrl") return 2;
  return 0;
}

}  // namespace

MemoryEstimate EstimateParameterMemory(const ModelConfig& config, const Model& model,
                                       bool trainable) {
  constexpr double kFloat = 4;
  MemoryEstimate e;
  const int emb_slots = trainable ? OptimizerSlots(config.embedding_optimizer.type) : 0;
  const int dense_slots = trainable ? OptimizerSlots(config.dense_optimizer.type) : 0;
  double emb_params = 0, dense_params = 0;
  for (const Model::VariableSize& v : model.variable_sizes) {
    e.parameters += v.num_elements;  // BuildModel checked that the sum fits.
    (v.embedding ? emb_params : dense_params) += static_cast<double>(v.num_elements);
  }
  // Dense parameters get a gradient as large as themselves; embedding
  // gradients are sparse (the batch's rows).
  e.bytes = emb_params * kFloat * (1 + emb_slots) +
            dense_params * kFloat * (1 + dense_slots + (trainable ? 1 : 0));
  auto part = [&](const char* name, double params, int slots, const std::string& type,
                  bool gradient) {
    std::string s = absl::StrCat(static_cast<int64_t>(params), " ", name,
                                 " parameters x (4 bytes");
    if (slots > 0) absl::StrAppend(&s, " + ", slots * 4, " for ", type, "'s slots");
    if (gradient) absl::StrAppend(&s, " + 4 for the gradient");
    return s + ")";
  };
  std::vector<std::string> parts;
  if (emb_params > 0) {
    parts.push_back(part("embedding", emb_params, emb_slots, config.embedding_optimizer.type,
                         false));
  }
  if (dense_params > 0) {
    parts.push_back(
        part("dense", dense_params, dense_slots, config.dense_optimizer.type, trainable));
  }
  e.detail = absl::StrJoin(parts, " + ");
  return e;
}

absl::Status CheckModelFitsMemory(const ModelConfig& config, const Model& model, bool trainable,
                                  int64_t memory_bytes) {
  if (memory_bytes <= 0) return absl::OkStatus();
  const MemoryEstimate e = EstimateParameterMemory(config, model, trainable);
  if (e.bytes <= static_cast<double>(memory_bytes)) return absl::OkStatus();
  // The largest variables, with what sizes them.
  std::vector<const Model::VariableSize*> largest;
  for (const Model::VariableSize& v : model.variable_sizes) largest.push_back(&v);
  const size_t shown = std::min<size_t>(3, largest.size());
  std::partial_sort(largest.begin(), largest.begin() + shown, largest.end(),
                    [](const auto* a, const auto* b) { return a->num_elements > b->num_elements; });
  std::vector<std::string> names;
  for (size_t i = 0; i < shown; ++i) {
    names.push_back(absl::StrCat(largest[i]->what, ": ", largest[i]->num_elements,
                                 " parameters"));
  }
  return errors::ResourceExhausted(
      "model '", config.type, "' cannot fit in memory: ", trainable ? "training" : "running",
      " it needs at least ", HumanBytes(e.bytes), " for its ", e.parameters,
      " fixed-size parameters (", e.detail, "), but this machine has ",
      HumanBytes(static_cast<double>(memory_bytes)),
      " of physical memory. The largest: ", absl::StrJoin(names, "; "),
      ". Make them smaller (features' vocabulary_size and dim, model.embedding_dim, "
      "hidden_units, bottom_units, cross_layers), use hash_table features, or train "
      "with parameter servers (docs/distributed.md)");
}

std::vector<std::string> ModelTypes() {
  // The zoo's order (model.h), then any other registered type.
  std::vector<std::string> types = {"lr",     "fm",     "mlp",
                                    "wide_deep", "deepfm", "dcn_v2",
                                    "dlrm",   "din",    "two_tower"};
  for (const std::string& t : internal::RegisteredModels()) {
    bool listed = false;
    for (const std::string& k : types) listed |= k == t;
    if (!listed) types.push_back(t);
  }
  return types;
}

}  // namespace recflow::models
