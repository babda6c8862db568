// Private to recflow/models: the toolkit the zoo's models are built with
// (embedding bags, dense layers, MLPs, variable bookkeeping) and the model
// registry. A model is one function from a ModelBuilder to its logits [B],
// registered with RECFLOW_REGISTER_MODEL at the bottom of its file
// (ctr_models.cc); BuildModel (model.cc) validates the config, looks the
// type up here and adds the loss, probabilities and training ops.
// docs/models.md ("Adding a model") walks through it.
//
// Initializers: ModelConfig::initializers per part (a sparse feature's own
// `initializer` for its embedding tables), all seeded from ModelConfig::seed
// with seed2 a fingerprint of the variable's full name, so a build is
// deterministic and adding a layer does not change the other variables'
// initial values.
//
// Not thread-safe (as Scope).
#ifndef RECFLOW_MODELS_MODEL_BUILDER_H_
#define RECFLOW_MODELS_MODEL_BUILDER_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/framework/scope.h"
#include "recflow/models/model.h"

namespace recflow::models::internal {

// The hash-table key of a feature's missing id (SparseFeatureConfig::missing
// "id"): INT64_MIN, which Criteo's hex ids ((field << 32) | value >= 0)
// never are.
inline constexpr int64_t kMissingKey = std::numeric_limits<int64_t>::min();

// ids mod num_buckets in [0, num_buckets) for any int64 ids: one FloorMod
// op (TensorFlow's semantics, exact for every int64).
// REQUIRES: num_buckets >= 1.
Output FloorModIds(const Scope& scope, Output ids, int64_t num_buckets);

// Builds one model: creates its variables under the model's scope and
// records them (embedding tables vs dense variables, the weights L2
// regularization applies to, the parameter count).
class ModelBuilder {
 public:
  // `trainable` false: hash tables are read in serve mode (never insert).
  ModelBuilder(const Scope& scope, const ModelConfig& config,
               const ModelInputs& inputs, bool trainable = true);

  const Scope& scope() const { return scope_; }
  const ModelConfig& config() const { return config_; }
  const ModelInputs& inputs() const { return inputs_; }
  int64_t num_dense() const {
    return static_cast<int64_t>(config_.dense_features.size());
  }
  int num_sparse() const {
    return static_cast<int>(config_.sparse_features.size());
  }
  // Sparse feature f's embedding width (its dim, or embedding_dim when 0;
  // a sequence_of feature has its target's).
  int64_t FeatureDim(int f) const;
  // The feature whose table f reads: its sequence_of target, else f.
  int TableFeature(int f) const;
  // The index of the sparse feature or dense column named `name`; -1 when
  // there is none.
  int SparseIndex(absl::string_view name) const;
  int DenseIndex(absl::string_view name) const;

  // The embedding bag [B, dim] of sparse feature f over the table
  // "<group>/<feature>": a variable [vocabulary_size, dim] read at ids mod
  // vocabulary_size, or for a hash_table feature a hash embedding table
  // keyed by the raw ids (serve mode when the build is not trainable); the
  // feature's combiner; an empty bag reads the feature's missing id
  // (missing: id; see HasMissingId) or zeros (missing: empty). One table per (group,
  // feature): a second call returns the same Output; a sequence_of feature
  // reads its target's table. EmbeddingBag, IdEmbeddings and WeightedBag
  // are the only ways to embedding tables (created once, in Table()).
  absl::StatusOr<Output> EmbeddingBag(int f, absl::string_view group,
                                      int64_t dim);
  // The rows of f's table "<group>/<TableFeature(f)>" at each of f's ids:
  // [nnz_f, dim] (ids mod vocabulary_size, or the hash table's rows).
  absl::StatusOr<Output> IdEmbeddings(int f, absl::string_view group,
                                      int64_t dim);
  // sum_j weights_j * row(id_j) over each example's ids of f: [B, dim],
  // with per-id `weights` float [nnz_f] (not cached).
  absl::StatusOr<Output> WeightedBag(int f, absl::string_view group,
                                     int64_t dim, Output weights);
  // Every sparse feature's EmbeddingBag in group "embedding" at its
  // FeatureDim: the shared field embeddings.
  absl::StatusOr<std::vector<Output>> FieldEmbeddings();
  // sum_f EmbeddingBag(f, "linear", 1): the first-order term over the
  // sparse features, [B, 1]; an invalid Output when there are none.
  absl::StatusOr<Output> SparseLinear();

  // Which part's initializer a kernel takes: a dense layer's
  // (initializers.kernel); the embeddings' for a kernel that maps features
  // into the embedding space (fm's dense projection, deepfm's dense
  // fields), so its output starts at the embeddings' scale; the
  // first-order weights' for a linear model's dense weights.
  enum class KernelInit { kDense, kEmbedding, kLinear };
  // A dense variable [in, out] (`kernel`, counted for L2 regularization) or
  // [size] (bias, initializers.bias).
  Output Kernel(const Scope& s, absl::string_view name, int64_t in, int64_t out,
                KernelInit init = KernelInit::kDense);
  Output Bias(const Scope& s, absl::string_view name, int64_t size);
  // activation(x W + b) for x [B, in]: [B, out]. `activation` is one of
  // relu, sigmoid, tanh, identity.
  Output Dense(absl::string_view name, Output x, int64_t in, int64_t out,
               absl::string_view activation);
  // Dense layers of `units` with config().activation; returns the last
  // one's output and sets *out_dim (x itself and in when units is empty).
  Output Mlp(absl::string_view name, Output x, int64_t in,
             const std::vector<int64_t>& units, int64_t* out_dim);
  // A linear layer to one unit, reshaped to [B]: x w + b.
  Output Logit(absl::string_view name, Output x, int64_t in);
  // [B, k] -> [B].
  Output ToVector(const Scope& s, Output x);

  // A model whose objective is not the sigmoid cross-entropy of its logits
  // sets its own loss (float scalar; only when inputs().labels is valid);
  // BuildModel adds the L2 term to it. Extra outputs and signatures go to
  // Model::outputs / Model::signatures.
  void SetLoss(Output loss) { loss_ = loss; }
  const Output& loss() const { return loss_; }
  void AddOutput(const std::string& name, Output out) { outputs_[name] = out; }
  void AddSignature(const std::string& name, ModelSignature sig) {
    signatures_[name] = std::move(sig);
  }
  const std::map<std::string, Output>& outputs() const { return outputs_; }
  const std::map<std::string, ModelSignature>& signatures() const {
    return signatures_;
  }

  // What the build created.
  const std::vector<Output>& embedding_variables() const {
    return embedding_variables_;
  }
  const std::vector<Output>& dense_variables() const {
    return dense_variables_;
  }
  const std::vector<Output>& regularized_weights() const {
    return regularized_weights_;
  }
  int64_t num_parameters() const { return num_parameters_; }
  const std::vector<Model::VariableSize>& variable_sizes() const { return variable_sizes_; }

 private:
  // A variable initialized by `initializer`, recorded as an embedding
  // variable (trained by the embedding optimizer) or a dense one.
  // `scale_shape` ([rows, dim]) is what the initializer's scale refers to
  // (default: the variable's first and last dimensions); `what` describes
  // it in messages (default: its name and shape). A shape or a model whose
  // parameter count overflows int64 sets an InvalidArgument on `s` and
  // returns an invalid Output.
  Output NewVariable(const Scope& s, absl::string_view name,
                     const std::vector<int64_t>& shape,
                     const InitializerConfig& initializer, bool embedding,
                     std::optional<std::pair<int64_t, int64_t>> scale_shape = std::nullopt,
                     std::string what = "");
  // The [rows, dim] of the first fixed embedding table ([1, embedding_dim]
  // without one): the scale of the kernels that take the embeddings'
  // initializer.
  std::pair<int64_t, int64_t> EmbeddingScaleShape() const;
  // The initializer of table feature t's table in `group`.
  const InitializerConfig& TableInitializer(int t, absl::string_view group) const;
  // Sparse feature f reads an empty bag as its missing id (missing: id, not
  // a sequence): row vocabulary_size of its fixed tables (which get one
  // extra row), key kMissingKey of its hash tables.
  bool HasMissingId(int f) const;
  // The table of feature t (a TableFeature) in `group` (created once).
  absl::StatusOr<Output> Table(int t, absl::string_view group, int64_t dim);
  const Scope& GroupScope(absl::string_view group);
  // A bag over f's table with the given ids/splits/weights/combiner.
  // Empty bags read the missing id when HasMissingId(f).
  absl::StatusOr<Output> BagOver(int f, const Scope& ls, Output table,
                                 Output weights, const std::string& combiner);
  const Scope scope_;
  const ModelConfig& config_;
  const ModelInputs& inputs_;
  const bool trainable_;
  std::map<std::string, Scope> group_scopes_;
  std::map<std::pair<std::string, int>, Output> bags_;
  std::map<std::pair<std::string, int>, Output> tables_;
  Output loss_;
  std::map<std::string, Output> outputs_;
  std::map<std::string, ModelSignature> signatures_;
  std::vector<Output> embedding_variables_;
  std::vector<Output> dense_variables_;
  std::vector<Output> regularized_weights_;
  int64_t num_parameters_ = 0;
  std::vector<Model::VariableSize> variable_sizes_;
};

// --- The registry
// -------------------------------------------------------------

// Returns the logits [B] of the model (float).
using ModelFn = std::function<absl::StatusOr<Output>(ModelBuilder& b)>;
// Checks what the model needs beyond the common checks of BuildModel
// (e.g. equal embedding widths); InvalidArgument naming the field.
using ModelCheckFn = std::function<absl::Status(const ModelConfig& config)>;

struct ModelDef {
  std::string name;
  ModelFn build;
  ModelCheckFn check;  // may be empty
  // The embedding group's default Adagrad learning rate (WithDefaults),
  // chosen on the quality bench's validation split.
  double embedding_learning_rate = 0.03;
  // The dense group's default Adam learning rate.
  double dense_learning_rate = 0.001;
};

// Registers a model type (at static-initialization time; names are unique).
bool RegisterModel(ModelDef def);
// nullptr when `type` is unknown.
const ModelDef* FindModel(absl::string_view type);
// The registered types, sorted by name.
std::vector<std::string> RegisteredModels();

// RECFLOW_REGISTER_MODEL(NAME, BUILD, CHECK[, EMBEDDING_LR[, DENSE_LR]])
#define RECFLOW_REGISTER_MODEL(NAME, BUILD, ...)       \
  static const bool recflow_model_registered_##BUILD = \
      ::recflow::models::internal::RegisterModel(      \
          ::recflow::models::internal::ModelDef{NAME, BUILD, __VA_ARGS__})

}  // namespace recflow::models::internal

#endif  // RECFLOW_MODELS_MODEL_BUILDER_H_
