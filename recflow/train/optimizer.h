// Optimizers: graph builders that turn a loss into a train op, as
// TensorFlow 1.x's tf.compat.v1.train.Optimizer family does.
//
//   Output gs = train::CreateGlobalStep(root);
//   train::AdamOptimizer opt({.learning_rate = 0.01});
//   ASSIGN_OR_RETURN(Output train_op, opt.Minimize(root, loss, {}, gs));
//   Output init = train::GlobalVariablesInitializer(root);
//   // run "init" once, then train_op once per step.
//
// Minimize = ComputeGradients (symbolic autodiff, framework/gradients.h) +
// ApplyGradients, which creates each variable's slots (zero- or
// value-filled variables named as TensorFlow names them: "<var>/Adam",
// "<var>/Adam_1", "<var>/Momentum", ...), one fused apply op per variable
// (ops/training_ops.h: ApplyAdam or ResourceApplyAdam, ...) and a NoOp
// named after the optimizer ("Adam") that groups the updates, the
// optimizer's own bookkeeping (Adam's beta powers) and, when a global step
// is given, its increment (which runs after every update, so schedules see
// the step the update was made at).
//
// Variables may be TF1 refs (VariableV2) or resource handles (VarHandleOp),
// mixed; slots take the style of their variable. Gradients of a resource
// variable are taken with respect to its ReadVariableOp outputs and to the
// handle itself (what ResourceGather and ResourceEmbeddingBag read), and
// summed.
//
// Sparse gradients (framework/gradients.h, Note [sparse gradients]):
// Minimize keeps the gradients of embedding lookups (GatherV2 on axis 0,
// ResourceGather, EmbeddingBag, ResourceEmbeddingBag) sparse, and
// ApplyGradients applies a sparse gradient as TensorFlow 1.x does: it sums
// the rows of duplicate indices (Unique + UnsortedSegmentSum) and updates
// only those rows with one sparse apply op (ops/sparse_training_ops.h:
// SparseApplyMomentum, SparseApplyAdagrad, SparseApplyFtrl(V2), recflow's
// SparseApplyGradientDescent and lazy SparseApplyAdam, or their Resource*
// forms). Rows the batch did not touch, and their slots, stay as they are.
// A variable whose gradient is partly dense (it is also used densely) gets
// one dense gradient and a dense update.
// Slots need variables with fully defined shapes. Names are under the scope
// passed in (pass the root scope for TensorFlow's names).
//
// Hash embedding tables (train::HashEmbeddingTable in variables.h, or any
// HashEmbeddingTableOp output) may be in var_list and are found by an empty
// var_list when trainable. Their gradient is always sparse (IndexedSlices of
// raw ids, ops/hash_table_grad.cc), also with keep_sparse = false, since an
// unbounded table has no dense form. ApplyGradients merges duplicate ids
// (skipped when the ids come straight from EmbeddingBagGrad, already unique)
// and emits the optimizer's table op: HashTableApplyGradientDescent,
// HashTableApplyAdagrad (epsilon 0, as ApplyAdagrad), HashTableApplyAdam
// (lazy, whatever lazy_sparse says), HashTableApplyFtrl(V2 semantics);
// Momentum, AdamW and other optimizers give Unimplemented naming the
// optimizer and the table. No slot variables are created for a table: each
// row carries the slots of the optimizer the table was created for (the
// table's own initial_accumulator_value applies, not the optimizer's). The
// update's step input is global_step + 1 when a global step is given (the
// rows' versions and eviction ages then count global steps, and Adam's bias
// correction uses t = global_step + 1, as the beta powers of dense
// variables do), else 0 (the table's clock + 1: its own update count).
//
// Slot and non-slot variables are created through train::Variable, so
// GlobalVariablesInitializer() initializes them; InitOps() lists this
// optimizer's own initializers.
//
// Every optimizer is data: an OptimizerSpec names its hyperparameters,
// slots, non-slot variables and update ops (dense, sparse, table), and one
// generic code path (Optimizer) builds the graph from it, choosing the ref
// or resource form per variable. The classes at the end of this file only
// turn their options into a spec (GradientDescentSpec, AdamSpec, ...): a new
// optimizer is a new spec, not new graph-building code.
//
// An Optimizer may be applied several times (to several var lists); slots
// are created once per variable. Not thread-safe: build from one thread.
#ifndef RECFLOW_TRAIN_OPTIMIZER_H_
#define RECFLOW_TRAIN_OPTIMIZER_H_

#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/scope.h"

namespace recflow::train {

// A hyperparameter: a number, or a scalar Output (a learning-rate schedule,
// a placeholder). Converted to the dtype of the variable it updates.
class Hyperparameter {
 public:
  template <typename N, std::enable_if_t<std::is_arithmetic_v<N>, int> = 0>
  Hyperparameter(N value) : value_(static_cast<double>(value)) {}  // NOLINT
  Hyperparameter(Output tensor) : tensor_(tensor) {}               // NOLINT

  bool is_constant() const { return !tensor_.valid(); }
  // REQUIRES: is_constant().
  double value() const { return value_; }
  const Output& tensor() const { return tensor_; }
  // A scalar of `dtype`: a Const, or the Output (Cast when its dtype differs).
  Output ToTensor(const Scope& scope, DataType dtype) const;

 private:
  double value_ = 0;
  Output tensor_;
};

// A variable and its gradient: dense (`grad`), sparse (`sparse_grad`,
// IndexedSlices over the variable's first dimension) or none (both
// invalid, when no gradient reaches the variable). Never both.
struct GradAndVar {
  Output grad;  // NoGradient() (invalid) when no gradient reaches the variable
  Output var;   // a VariableV2 ref or VarHandleOp handle
  IndexedSlices sparse_grad = {};
};

struct ComputeGradientsOptions {
  // Keep sparse gradients sparse (GradAndVar::sparse_grad). Off by default
  // so that code written for dense gradients (clip.h's ClipByGlobalNorm)
  // sees every gradient in `grad`: the sparse ones are then densified with
  // UnsortedSegmentSum. Minimize turns it on.
  bool keep_sparse = false;
};

// What an optimizer is, as data: its hyperparameters, slots and non-slot
// variables, the ops that update a variable, the rows of a variable and the
// rows of a hash table, and the bounds its constant hyperparameters must
// respect. Optimizer builds every update from it, one code path for all:
//   - a dense gradient: `dense.op` ("ApplyAdam"), or "Resource" + it
//     ("ResourceApplyAdam") for a resource variable;
//   - a sparse gradient: "Sparse" + dense.op ("SparseApplyAdam",
//     "ResourceSparseApplyAdam"), whose inputs are the dense op's with the
//     indices right after the gradient (TensorFlow's convention); or, with
//     sparse_update false, the dense op on the densified gradient;
//   - a hash table: `table.op` ("HashTableApplyAdam"), or Unimplemented
//     naming the optimizer, the table and `table_unsupported` when empty.
// The inputs of each op are made in their order, so the graph (node names
// included) follows from the spec. The *Spec functions below describe
// recflow's optimizers.
struct OptimizerSpec {
  // One input of an update op.
  struct Input {
    enum class Kind {
      kVariable,  // the variable (ref or handle), or the table handle
      kSlot,      // the variable's slot `name`
      kNonSlot,   // the value of the non-slot variable `name`, cast to the
                  // variable's dtype
      kHyper,     // hyperparameter `name` as a scalar of the variable's dtype
                  // (float for a table), made once per ApplyGradients call
      kGrad,      // the gradient, or the rows of a sparse one
      kIndices,   // the rows of a sparse gradient (a table's distinct ids)
      kStep,      // the step of a table update (see Optimizer)
    };
    Kind kind;
    std::string name = {};
  };
  struct UpdateOp {
    std::string op;                  // empty: no such update
    std::vector<Input> inputs = {};  // in the op's order
    std::vector<std::pair<std::string, bool>> attrs = {};
  };
  struct Slot {
    std::string name;  // GetSlot's key ("m", "accumulator", ...)
    double initial_value = 0.0;
  };
  // A scalar variable shared by every variable the optimizer updates.
  struct NonSlot {
    std::string name;  // "beta1_power": also the variable's name
    double initial_value = 0.0;
    // After every step's updates: value *= this hyperparameter.
    std::string multiply_by;
  };
  // A bound on a constant hyperparameter (a tensor is not checked): unless
  // holds(value), InvalidArgument "<name>: <what> must be <rule>, got
  // <value>". Checked before the slots of each variable are created, and,
  // with for_tables, before each table update.
  struct Requirement {
    std::string what;
    Hyperparameter value;
    std::string rule;
    bool (*holds)(double);
    bool for_tables = false;
  };

  // "Adam", "Momentum", ...: the train op's name, the slot suffix and the
  // scope of the updates.
  std::string name;
  // By name ("learning_rate", "beta1", ...).
  std::map<std::string, Hyperparameter> hypers;
  // Created in this order, "<var>/<name>", "<var>/<name>_1", ...
  std::vector<Slot> slots;
  // Created once, at the first ApplyGradients that updates a variable, in
  // the dtype and style (ref or resource) of the first variable by name.
  std::vector<NonSlot> non_slots;
  UpdateOp dense;
  bool sparse_update = true;
  UpdateOp table;
  std::string table_unsupported =
      "tables are trained by GradientDescent, Adagrad, Adam and Ftrl";
  std::vector<Requirement> requirements;
};

// An optimizer described by an OptimizerSpec (see the file comment for what
// it builds). The classes below are the named ones, each a spec.
class Optimizer {
 public:
  explicit Optimizer(OptimizerSpec spec) : spec_(std::move(spec)) {}
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "Adam", "Momentum", ...: the train op's name and the slot suffix.
  const std::string& name() const { return spec_.name; }
  const OptimizerSpec& spec() const { return spec_; }

  // ComputeGradients (keeping sparse gradients sparse) + ApplyGradients.
  // `var_list` empty: every trainable variable (TrainableVariables).
  // `global_step` (optional) is incremented once per run of the returned
  // train op.
  absl::StatusOr<Output> Minimize(const Scope& scope, Output loss,
                                  std::vector<Output> var_list = {},
                                  Output global_step = Output());

  // The gradient of `loss` for each variable (invalid where none flows).
  // InvalidArgument when a var_list entry is not a variable or the list is
  // empty and the graph has no trainable variables.
  absl::StatusOr<std::vector<GradAndVar>> ComputeGradients(
      const Scope& scope, Output loss, std::vector<Output> var_list = {},
      const ComputeGradientsOptions& options = {}) const;

  // Applies the gradients (pairs with no gradient are skipped;
  // InvalidArgument naming the variables when none has one) and returns the
  // train op. Sparse gradients get their duplicate indices summed and a
  // sparse update.
  absl::StatusOr<Output> ApplyGradients(
      const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
      Output global_step = Output());

  // Initializers of the slot and non-slot variables created so far.
  const std::vector<Output>& InitOps() const { return init_ops_; }
  // The slot `slot_name` of `var` ("m", "v", "momentum", "accumulator",
  // "accum", "linear"), or an invalid Output.
  Output GetSlot(const Output& var, const std::string& slot_name) const;
  // The slot names this optimizer creates, in creation order.
  std::vector<std::string> GetSlotNames() const;
  // The non-slot variable `name` ("beta1_power"), or an invalid Output
  // before the first ApplyGradients that updates a variable.
  Output GetNonSlot(const std::string& name) const;

 private:
  // Checks spec_.requirements (those for tables only, with `table`).
  absl::Status CheckRequirements(bool table) const;
  // Checks the requirements and creates the slots of `var`.
  absl::Status CreateSlots(const Scope& scope, const Output& var);
  // Creates the non-slot variables once, given every variable of the first
  // ApplyGradients call that updates variables.
  absl::Status CreateNonSlotVariables(const Scope& scope,
                                      const std::vector<Output>& vars);
  // The update of one variable by a dense gradient.
  absl::StatusOr<Output> ApplyDense(const Scope& scope, const Output& grad,
                                    const Output& var);
  // The update of the rows grad.indices (unique: ApplyGradients sums
  // duplicates first) of one variable.
  absl::StatusOr<Output> ApplySparse(const Scope& scope,
                                     const IndexedSlices& grad,
                                     const Output& var);
  // The update of the rows grad.indices (distinct raw ids, int64) of the hash
  // table `table`, with gradient rows grad.values (float [U, dim]) and `step`
  // (int64 scalar, see the file comment).
  absl::StatusOr<Output> ApplyTable(const Scope& scope,
                                    const IndexedSlices& grad,
                                    const Output& table, const Output& step);
  // The node of op `op` with `inputs` and `attrs`, for `var` of `dtype`.
  absl::StatusOr<Output> AddUpdate(
      const Scope& scope, const std::string& op,
      const std::vector<OptimizerSpec::Input>& inputs,
      const std::vector<std::pair<std::string, bool>>& attrs, const Output& var,
      DataType dtype, const Output& grad, const Output& indices,
      const Output& step);
  // The bookkeeping after the updates (non-slots multiplied); returns what
  // the train op groups.
  absl::StatusOr<std::vector<Output>> Finish(const Scope& scope,
                                             std::vector<Output> update_ops);
  // A slot of `var` filled with `value`, named "<var>/<name()>[_k]",
  // registered under `slot_name`.
  absl::StatusOr<Output> CreateSlot(const Scope& scope, const Output& var,
                                    const std::string& slot_name, double value);
  // A scalar variable `name` of `dtype` initialized to `value`, not trainable.
  absl::StatusOr<Output> CreateNonSlotVariable(const Scope& scope,
                                               const std::string& name,
                                               DataType dtype,
                                               bool use_resource, double value);
  // The hyperparameter `hyper_name` of the spec as a scalar of `dtype`, made
  // once per ApplyGradients call and dtype (named "<name()>/<hyper_name>").
  absl::StatusOr<Output> Hyper(const std::string& hyper_name, DataType dtype);

  const OptimizerSpec spec_;
  // var node name -> slot name -> slot variable.
  std::map<std::string, std::map<std::string, Output>> slots_;
  // spec_.non_slots' variables, in order (empty until created).
  std::vector<Output> non_slots_;
  std::vector<Output> init_ops_;
  // Valid during ApplyGradients.
  const Scope* apply_scope_ = nullptr;  // Not owned.
  std::map<std::pair<std::string, DataType>, Output> hyper_cache_;
};

// --- The optimizers ----------------------------------------------------------

struct GradientDescentOptions {
  Hyperparameter learning_rate = 0.01;
  bool use_locking = false;
  std::string name = "GradientDescent";
};
// var -= learning_rate * grad (ApplyGradientDescent; sparse:
// SparseApplyGradientDescent; tables: HashTableApplyGradientDescent).
OptimizerSpec GradientDescentSpec(const GradientDescentOptions& options);
class GradientDescentOptimizer : public Optimizer {
 public:
  explicit GradientDescentOptimizer(const GradientDescentOptions& options)
      : Optimizer(GradientDescentSpec(options)) {}
  explicit GradientDescentOptimizer(Hyperparameter learning_rate)
      : GradientDescentOptimizer(
            GradientDescentOptions{.learning_rate = learning_rate}) {}
};

struct MomentumOptions {
  Hyperparameter learning_rate = 0.01;
  Hyperparameter momentum = 0.9;
  bool use_nesterov = false;
  bool use_locking = false;
  std::string name = "Momentum";
};
// ApplyMomentum (sparse: SparseApplyMomentum, which leaves the momentum of
// untouched rows as it is); slot "momentum" ("<var>/Momentum"), zeros. No
// table update.
OptimizerSpec MomentumSpec(const MomentumOptions& options);
class MomentumOptimizer : public Optimizer {
 public:
  explicit MomentumOptimizer(const MomentumOptions& options)
      : Optimizer(MomentumSpec(options)) {}
};

struct AdagradOptions {
  Hyperparameter learning_rate = 0.01;
  // >= 0; 0 only with epsilon > 0 (else a zero gradient divides 0 by 0).
  double initial_accumulator_value = 0.1;
  // 0: TensorFlow 1's rule, var -= lr * g / sqrt(accum) (ApplyAdagrad);
  // > 0: var -= lr * g / (sqrt(accum) + epsilon) (ApplyAdagradV2: Keras's
  // rule; PyTorch's, whose defaults are accumulator 0 and epsilon 1e-10).
  double epsilon = 0.0;
  bool use_locking = false;
  std::string name = "Adagrad";
};
// ApplyAdagrad or ApplyAdagradV2 (sparse: SparseApplyAdagrad(V2), applied
// once per distinct row with the batch's summed gradient; tables:
// HashTableApplyAdagrad); slot "accumulator" ("<var>/Adagrad"), filled with
// initial_accumulator_value.
OptimizerSpec AdagradSpec(const AdagradOptions& options);
class AdagradOptimizer : public Optimizer {
 public:
  explicit AdagradOptimizer(const AdagradOptions& options)
      : Optimizer(AdagradSpec(options)) {}
};

struct AdamOptions {
  Hyperparameter learning_rate = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  Hyperparameter epsilon = 1e-8;
  bool use_nesterov = false;
  bool use_locking = false;
  std::string name = "Adam";
  // Sparse gradients: lazy Adam (SparseApplyAdam: m, v and var change only
  // in the rows of the batch, as TensorFlow Addons' LazyAdam), or, when
  // false, the dense update of the densified gradient (every row's moments
  // decay, exactly TensorFlow 1.x's Adam, at the cost of a dense pass).
  bool lazy_sparse = true;
};
// ApplyAdam (tables: HashTableApplyAdam, always lazy); slots "m" and "v"
// ("<var>/Adam", "<var>/Adam_1"), zeros, and non-slot variables
// "beta1_power" / "beta2_power" (initialized to beta1 / beta2, multiplied
// by them after every step's updates), in the dtype and style of the first
// variable by name.
OptimizerSpec AdamSpec(const AdamOptions& options);
class AdamOptimizer : public Optimizer {
 public:
  explicit AdamOptimizer(const AdamOptions& options = {})
      : Optimizer(AdamSpec(options)) {}
  // The beta power variables (invalid before the first ApplyGradients).
  Output beta1_power() const { return GetNonSlot("beta1_power"); }
  Output beta2_power() const { return GetNonSlot("beta2_power"); }

 protected:
  // For AdamW: same slots and bookkeeping, another update.
  explicit AdamOptimizer(OptimizerSpec spec) : Optimizer(std::move(spec)) {}
};

struct AdamWOptions {
  Hyperparameter learning_rate = 0.001;
  // Decoupled: each step var -= learning_rate * weight_decay * var.
  Hyperparameter weight_decay = 0.004;
  double beta1 = 0.9;
  double beta2 = 0.999;
  Hyperparameter epsilon = 1e-7;
  bool use_nesterov = false;
  bool use_locking = false;
  std::string name = "AdamW";
};
// Adam with decoupled weight decay (Loshchilov & Hutter; tf.keras AdamW),
// as one fused op per variable: recflow's ApplyAdamW. Slots and beta powers
// as AdamOptimizer ("<var>/AdamW", "<var>/AdamW_1"). Sparse gradients are
// densified (the decay applies to every row); no table update.
OptimizerSpec AdamWSpec(const AdamWOptions& options);
class AdamWOptimizer : public AdamOptimizer {
 public:
  explicit AdamWOptimizer(const AdamWOptions& options = {})
      : AdamOptimizer(AdamWSpec(options)) {}
};

struct FtrlOptions {
  Hyperparameter learning_rate = 0.01;
  Hyperparameter learning_rate_power = -0.5;  // <= 0
  double initial_accumulator_value = 0.1;     // >= 0
  Hyperparameter l1_regularization_strength = 0.0;
  Hyperparameter l2_regularization_strength = 0.0;
  // Online L2 shrinkage (ApplyFtrlV2); a constant 0 uses ApplyFtrl, as
  // TensorFlow does.
  Hyperparameter l2_shrinkage_regularization_strength = 0.0;
  bool use_locking = false;
  std::string name = "Ftrl";
};
// FTRL-proximal (sparse: SparseApplyFtrl(V2); tables: HashTableApplyFtrl,
// ApplyFtrlV2's rule); slots "accum" ("<var>/Ftrl", filled with
// initial_accumulator_value) and "linear" ("<var>/Ftrl_1", zeros).
OptimizerSpec FtrlSpec(const FtrlOptions& options);
class FtrlOptimizer : public Optimizer {
 public:
  explicit FtrlOptimizer(const FtrlOptions& options)
      : Optimizer(FtrlSpec(options)) {}
};

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_OPTIMIZER_H_
