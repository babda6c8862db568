// The model zoo: CTR models built as graphs from a declarative config.
//
//   models::ModelConfig config = ...;            // config.h parses it from YAML
//   models::ModelInputs in = models::Placeholders(root, config);
//   ASSIGN_OR_RETURN(models::Model m, models::BuildModel(root, config, in));
//   // m.logits [B]: the click logit; m.loss: mean sigmoid cross-entropy
//   // against in.labels; m.train_op: one optimizer step (per parameter
//   // group), incrementing the global step.
//
// Inputs follow the batch layout of recflow/data/batch.h: labels float [B],
// dense float [B, num_dense], and per sparse feature int64 ids [nnz] +
// int64 row_splits [B + 1] (a bag of ids per example; Criteo's fields hold
// one id or none).
//
// Models (ModelConfig::type):
//   lr         logistic regression: a 1-dim embedding per sparse feature
//              (summed) + a linear layer over the dense features + bias
//   fm         factorization machine: lr + the pairwise term
//              0.5 * sum_k((sum_i v_ik)^2 - sum_i v_ik^2) over the fields'
//              embeddings and the dense features (fm_dense: each its own
//              field x_j v_j, one projected vector, or none)
//   mlp        concat(dense, every field's embedding) -> MLP -> logit
//   wide_deep  lr (wide) + mlp (deep), logits summed
//   deepfm     fm + mlp sharing the embeddings (with fm_dense "fields" the
//              MLP reads the dense fields' vectors), logits summed
//   dcn_v2     concat(dense, embeddings) = x0 -> cross layers
//              x_{l+1} = x0 * (W_l x_l + b_l) + x_l -> concat with an MLP
//              over x0 (parallel form) -> logit
//   dlrm       bottom MLP over dense -> a dim-sized vector; dot products of
//              every pair of (bottom output, field embeddings) (and of
//              each with itself when self_interaction) -> concat
//              with the bottom output -> top MLP -> logit
//   din        deep interest network (din.cc): for each behaviour sequence
//              (a sparse feature with sequence_of = T), the attention unit
//              MLP(attention_units) over [q, k, q-k, q*k] gives each history
//              id k a weight (no softmax, as the paper) against the query q
//              = T's embedding; the weighted sum of the history embeddings
//              replaces the sequence's bag in mlp's input -> MLP -> logit
//   two_tower  (two_tower.cc) user tower over user_features and item tower
//              over item_features: embeddings (+ dense columns) -> MLP
//              (hidden_units) -> tower_dim -> L2-normalised u, v; logits =
//              <u, v> / temperature; loss: in-batch softmax (each clicked
//              row's item against every item of the batch); extra
//              signatures "user_embedding" and "item_embedding"
//
// Every sparse feature's embedding is an embedding bag (ids -> combiner over
// the example's ids) over either a fixed-vocabulary table (a resource
// variable [vocabulary_size, dim]; ids are taken modulo vocabulary_size, as
// hashing into buckets does) or a hash embedding table (unbounded ids).
// An empty bag (a missing value) reads the feature's own "missing" id
// (SparseFeatureConfig::missing "id", the default) or zeros ("empty"). A hash table carries the embedding optimizer's
// slots (its optimizer is optimizer.embedding's type), is trained with the
// embedding group, is left out of num_parameters (it grows with the data),
// and is read in serve mode (never inserting) when !options.trainable.
// docs/models.md gives each
// model's formula, the initializers, the variable names and how to add a
// model.
#ifndef RECFLOW_MODELS_MODEL_H_
#define RECFLOW_MODELS_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/framework/scope.h"
#include "recflow/train/saved_model_export.h"

namespace recflow::models {

// The most layers one MLP (hidden_units, bottom_units, attention_units) or
// dcn_v2's cross_layers may have. CTR models use a handful; each layer adds
// dozens of graph nodes (forward, gradients, optimizer), so 100000 layers
// would take minutes and gigabytes to build before the first step.
inline constexpr int64_t kMaxLayers = 1024;

// How a weight starts. `type`:
//   zeros, constant (value), uniform U(-limit, limit), normal N(mean, stddev),
//   truncated_normal (N(mean, stddev) cut at two stddevs, TensorFlow's),
//   glorot_uniform, glorot_normal, he_uniform, he_normal, lecun_uniform,
//   lecun_normal (Keras's variance-scaling family, over the weight's fans;
//   fixed-size weights only).
// `scale` multiplies limit and stddev: "none", "inverse_sqrt_rows" (1 /
// sqrt(rows of the table): DLRM's reference tables use uniform, limit 1) or
// "inverse_sqrt_dim" (1 / sqrt(dim): TensorFlow's embedding_column uses
// truncated_normal, stddev 1). A hash table has no row count, so it takes
// neither inverse_sqrt_rows nor the variance-scaling types.
struct InitializerConfig {
  std::string type = "zeros";
  double value = 0;      // constant
  double limit = 0.05;   // uniform
  double mean = 0;       // normal, truncated_normal
  double stddev = 0.05;  // normal, truncated_normal
  std::string scale = "none";
};

// InitializerConfig::type's values, the five a hash table row takes first.
const std::vector<std::string>& InitializerTypes();

// The initializers of each part of a model (docs/models.md explains the
// defaults: large sparse tables want small embeddings and first-order
// weights at zero, so that ids seen once or never add no noise).
struct InitializersConfig {
  // Field embeddings (every table of width > 1, fm's dense projection, the
  // "missing" rows); a sparse feature's own `initializer` overrides it.
  InitializerConfig embedding = {.type = "uniform", .limit = 0.01};
  // First-order weights: the width-1 tables of lr, fm, wide_deep, deepfm
  // and their dense weights ("<part>/dense_weights").
  InitializerConfig linear = {.type = "zeros"};
  InitializerConfig kernel = {.type = "glorot_uniform"};  // dense layers
  InitializerConfig bias = {.type = "zeros"};
};

struct SparseFeatureConfig {
  std::string name;             // the batch layout's feature name ("C1")
  int64_t vocabulary_size = 0;  // > 0: fixed table of that many rows
  bool hash_table = false;      // true: a hash embedding table (no vocabulary)
  int64_t dim = 0;              // 0: ModelConfig::embedding_dim
  std::string combiner = "sum";  // sum | mean | sqrtn
  // Non-empty: a behaviour sequence (an ordered bag) of the items of the
  // sparse feature named here (the "target", e.g. the candidate item C1).
  // It reads the target's embedding table (its vocabulary_size, hash_table
  // and dim; this feature's own are ignored); din attends over it with the
  // target's embedding as the query, the other models pool it with
  // `combiner` like any bag.
  std::string sequence_of;
  // An example without ids (a missing value): "id" reads the feature's
  // "missing" id, a learned row of its own in each of its tables (the last
  // row, vocabulary_size, of a fixed table, which gets vocabulary_size + 1
  // rows; the key INT64_MIN of a hash table); "empty" reads zeros. A
  // sequence's empty history always reads zeros.
  std::string missing = "id";
  // Set: this feature's embedding table starts so instead of
  // ModelConfig::initializers.embedding (its first-order weights keep
  // initializers.linear).
  std::optional<InitializerConfig> initializer;
  // Hash tables only: > 0 keeps at most this many MiB of the table in
  // memory and its other rows in files under cold_dir (embedding.md,
  // "Tiers"); 0 keeps every row in memory.
  int64_t dram_budget_mb = 0;
  std::string cold_dir;
};

struct OptimizerConfig {
  std::string type = "adam";  // sgd | adagrad | adam | ftrl
  double learning_rate = 0.001;  // 0: the default (WithDefaults)
  double initial_accumulator_value = 0.1;  // adagrad, ftrl
  double beta1 = 0.9, beta2 = 0.999;       // adam
  // adam: added to sqrt(v) (TensorFlow's and PyTorch's 1e-8 when < 0);
  // adagrad: var -= lr * g / (sqrt(accum) + epsilon) (0, the default:
  // TensorFlow 1's rule; PyTorch's is 1e-10 with the accumulator at 0).
  double epsilon = -1;
  // adam on embedding tables: true updates only the batch's rows (lazy
  // Adam: TensorFlow Addons' LazyAdam, PyTorch's SparseAdam); false decays
  // every row's moments each step (TensorFlow 1's and PyTorch's Adam).
  bool lazy = true;
  double l1 = 0, l2 = 0;                              // ftrl
  // Learning-rate schedule: "constant" | "exponential_decay" |
  // "linear_warmup" (over warmup_steps) ...
  std::string schedule = "constant";
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;
  double decay_rate = 1.0;
};

struct ModelConfig {
  std::string type;  // lr | fm | mlp | wide_deep | deepfm | dcn_v2 | dlrm | din | two_tower
  std::vector<std::string> dense_features;  // names, in the dense column order
  std::vector<SparseFeatureConfig> sparse_features;
  int64_t embedding_dim = 16;
  std::vector<int64_t> hidden_units = {256, 128};  // the MLP (deep part, top MLP)
  std::vector<int64_t> bottom_units = {64};        // dlrm's bottom MLP (+ embedding_dim)
  int64_t cross_layers = 2;                        // dcn_v2
  // fm, deepfm: how the dense features enter the factorization machine.
  //   "fields": the paper's form (DeepFM, Guo et al. 2017): dense feature j
  //     is a field of its own, the vector x_j * v_j (v_j a learned
  //     embedding, the variable "dense_fields/kernel" [num_dense, dim]); these
  //     vectors join the FM and replace the raw dense columns in the DNN.
  //   "projection": one more FM vector, dense [B, n] x W [n, dim]; the DNN
  //     reads the raw dense columns.
  //   "none": the FM is over the sparse fields only; the DNN reads the raw
  //     dense columns (dense features only as MLP inputs).
  std::string fm_dense = "fields";
  // dlrm: the interaction also takes each vector's dot with itself
  // (<v_i, v_i>, the diagonal of the Gram matrix; the reference's
  // --arch-interaction-itself).
  bool self_interaction = false;
  std::vector<int64_t> attention_units = {36};     // din's attention unit MLP (then 1)
  // two_tower: the features of each tower (names of dense or sparse
  // features of the config; a feature is in at most one tower), the towers'
  // output width and the softmax temperature.
  std::vector<std::string> user_features;
  std::vector<std::string> item_features;
  int64_t tower_dim = 32;
  double temperature = 0.05;
  std::string activation = "relu";                 // relu | sigmoid | tanh | identity
  double l2_regularization = 0;                    // on the dense weights
  uint64_t seed = 1;                               // initializers
  InitializersConfig initializers;
  // PyTorch's Adagrad (accumulator from 0, epsilon 1e-10): its first step moves a
  // row by about learning_rate whatever the gradient's scale (a mean loss over a
  // batch of 4096 gives a rare id a gradient near 1e-4; TensorFlow 1's
  // accumulator of 0.1 then moves it by 1e-4 * lr / 0.3). learning_rate 0:
  // the model type's default (WithDefaults).
  OptimizerConfig embedding_optimizer = {.type = "adagrad",
                                         .learning_rate = 0,
                                         .initial_accumulator_value = 0,
                                         .epsilon = 1e-10};
  OptimizerConfig dense_optimizer = {.type = "adam", .learning_rate = 0};
};

// The graph inputs for a batch.
struct SparseInput {
  Output ids;         // int64 [nnz]
  Output row_splits;  // int64 [B + 1]
};
struct ModelInputs {
  Output labels;  // float [B]
  Output dense;   // float [B, num_dense]
  std::vector<SparseInput> sparse;  // in config.sparse_features order
};

// Placeholders named "labels", "dense", "<feature>/ids",
// "<feature>/row_splits" (what a serving signature feeds).
ModelInputs Placeholders(const Scope& scope, const ModelConfig& config);

// An extra serving signature of a model (two_tower's "user_embedding"):
// the config features it reads ("dense" is fed when any dense feature is
// listed; per sparse feature F, "F/ids" and "F/row_splits") and its outputs.
struct ModelSignature {
  std::vector<std::string> features;
  std::map<std::string, Output> outputs;
};

struct Model {
  Output logits;         // float [B]
  Output probabilities;  // float [B], sigmoid(logits), named "probabilities"
  Output loss;           // float scalar, named "loss": mean sigmoid CE (+ l2);
                         // two_tower: the in-batch softmax loss (+ l2)
  Output train_op;       // a target named "train"; invalid if !trainable
  Output global_step;    // the graph's (created if none); invalid if !trainable
  std::vector<Output> embedding_variables;  // tables (variables or hash tables)
  std::vector<Output> dense_variables;      // every other trainable variable
  int64_t num_parameters = 0;               // fixed-size parameters (tables included)
  // Every fixed-size variable (hash tables are not: they grow with the
  // data), for the memory estimate.
  struct VariableSize {
    std::string name;      // the variable's node name
    std::string what;      // what it is, naming the config keys that size it
    int64_t num_elements;  // its parameters
    bool embedding;        // trained by the embedding optimizer
  };
  std::vector<VariableSize> variable_sizes;
  // Model-specific outputs for serving_default beside probabilities and
  // logits (two_tower: "score" = <u, v>), and extra signatures by name.
  std::map<std::string, Output> outputs;
  std::map<std::string, ModelSignature> signatures;
};

struct BuildOptions {
  bool trainable = true;  // add loss gradients, optimizers and "train"
};

// `c` with every learning rate left at 0 (unset) filled in: the embedding group's
// Adagrad and the dense group's Adam take the model type's measured defaults
// (docs/models.md, "Quality against the references": Adagrad 0.03, 0.01 for
// deepfm; Adam 0.001, 0.01 for lr, 0.003 for dlrm and dcn_v2), any other
// optimizer TensorFlow's or Keras's default (adam 0.001, sgd 0.01, adagrad
// 0.01, ftrl 0.05). BuildModel builds WithDefaults(config).
ModelConfig WithDefaults(const ModelConfig& c);

// Builds the model under `scope`. InvalidArgument naming the field for a
// config that cannot be built (unknown type, no features, a sparse feature
// with neither vocabulary_size nor hash_table, dim <= 0, more than
// kMaxLayers layers, a table or a parameter count that overflows int64,
// ...). Building allocates no parameter: CheckModelFitsMemory can refuse a
// model that would not fit before a session initializes it.
absl::StatusOr<Model> BuildModel(const Scope& scope, const ModelConfig& config,
                                 const ModelInputs& inputs, const BuildOptions& options = {});

// The signatures `recflow export` writes for a model built on
// Placeholders(scope, config): "serving_default" (inputs "dense" and, per
// sparse feature F, "F/ids" and "F/row_splits"; outputs "probabilities",
// "logits" and the model's Model::outputs) and every Model::signatures
// entry (inputs: "dense" when it lists a dense feature, and its sparse
// features' ids and row_splits).
std::map<std::string, train::ExportSignature> ServingSignatures(
    const ModelConfig& config, const ModelInputs& inputs, const Model& model);

// The memory a model's fixed-size parameters take in one process, estimated
// from Model::variable_sizes before any is allocated: 4 bytes per float32
// weight, plus (trainable) 4 per slot of its group's optimizer (sgd 0,
// adagrad 1, adam 2, ftrl 2) and 4 for the dense gradient of each dense
// parameter. A lower bound: hash tables (they grow with the data), the
// activations of a batch, the input pipeline and the runtime come on top.
struct MemoryEstimate {
  int64_t parameters = 0;
  double bytes = 0;  // double: a huge config must not overflow the estimate
  std::string detail;  // "10 parameters x (4 bytes + 8 for adam's slots) + ..."
};
MemoryEstimate EstimateParameterMemory(const ModelConfig& config, const Model& model,
                                       bool trainable);

// ResourceExhausted when EstimateParameterMemory exceeds `memory_bytes` (the
// machine's, PhysicalMemoryBytes()), naming the estimate, the memory and the
// largest variables with the config keys that size them; OK when
// memory_bytes is 0 (unknown). For a model that one process holds whole
// (local training, evaluation), not for a ps-distributed one.
absl::Status CheckModelFitsMemory(const ModelConfig& config, const Model& model, bool trainable,
                                  int64_t memory_bytes);

// The model types BuildModel knows.
std::vector<std::string> ModelTypes();

}  // namespace recflow::models

#endif  // RECFLOW_MODELS_MODEL_H_
