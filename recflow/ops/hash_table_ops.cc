// The hash embedding table op family: definitions, shape functions and
// builder helpers (see hash_table_ops.h). recflow's own ops.
#include "recflow/ops/hash_table_ops.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/op_registry.h"
#include "recflow/ops/array_ops.h"

namespace recflow {
namespace {

absl::Status TableHandleShape(InferenceContext* c) {
  c->set_output(0, PartialShape(absl::Span<const int64_t>()));
  return absl::OkStatus();
}

// Input 0 must be a scalar handle.
absl::Status CheckHandle(InferenceContext* c) {
  auto s = c->WithRank(0, 0);
  if (!s.ok()) {
    return errors::InvalidArgument(
        "table must be a scalar resource handle, "
        "but has shape ",
        c->input(0).DebugString());
  }
  return absl::OkStatus();
}

absl::Status HashEmbeddingBagShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckHandle(c));
  int64_t dim = 0;
  RETURN_IF_ERROR(c->GetAttr("dim", &dim));
  const PartialShape ids = c->input(1), splits = c->input(2),
                     weights = c->input(3);
  if (!ids.unknown_rank() && ids.rank() != 1) {
    return errors::InvalidArgument("ids must be a vector [N], but has shape ",
                                   ids.DebugString());
  }
  if (!splits.unknown_rank() && splits.rank() != 1) {
    return errors::InvalidArgument(
        "row_splits must be a vector [B + 1], but has shape ",
        splits.DebugString());
  }
  if (!weights.unknown_rank() && weights.rank() != 1) {
    return errors::InvalidArgument(
        "per_id_weights must be a vector [N] or empty, but has shape ",
        weights.DebugString());
  }
  int64_t batch = kUnknownDim;
  if (!splits.unknown_rank() && splits.dim(0) >= 0) {
    if (splits.dim(0) == 0) {
      return errors::InvalidArgument(
          "row_splits must have at least one element (B + 1), but has shape "
          "[0]");
    }
    batch = splits.dim(0) - 1;
  }
  if (!weights.unknown_rank() && !ids.unknown_rank() && weights.dim(0) > 0 &&
      ids.dim(0) >= 0 && weights.dim(0) != ids.dim(0)) {
    return errors::InvalidArgument("per_id_weights ", weights.DebugString(),
                                   " must be empty or match ids ",
                                   ids.DebugString());
  }
  c->set_output(0, PartialShape({batch, dim >= 1 ? dim : kUnknownDim}));
  return absl::OkStatus();
}

absl::Status HashEmbeddingLookupShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckHandle(c));
  int64_t dim = 0;
  RETURN_IF_ERROR(c->GetAttr("dim", &dim));
  const PartialShape ids = c->input(1);
  if (ids.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<int64_t> dims(ids.dims().begin(), ids.dims().end());
  dims.push_back(dim >= 1 ? dim : kUnknownDim);
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

// table, ids [U], grad [U, dim], then scalars.
absl::Status HashTableApplyShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckHandle(c));
  const PartialShape ids = c->input(1), grad = c->input(2);
  if (!ids.unknown_rank() && ids.rank() != 1) {
    return errors::InvalidArgument("ids must be a vector [U], but has shape ",
                                   ids.DebugString());
  }
  if (!grad.unknown_rank() && grad.rank() != 2) {
    return errors::InvalidArgument(
        "grad must be a matrix [U, dim], but has shape ", grad.DebugString());
  }
  if (!ids.unknown_rank() && !grad.unknown_rank() && ids.dim(0) >= 0 &&
      grad.dim(0) >= 0 && ids.dim(0) != grad.dim(0)) {
    return errors::InvalidArgument("grad ", grad.DebugString(),
                                   " must have one row per id (ids ",
                                   ids.DebugString(), ")");
  }
  const OpRegistrationData* reg = OpRegistry::Global()->Find(c->op());
  for (int i = 3; i < c->num_inputs(); ++i) {
    const PartialShape& s = c->input(i);
    if (!s.unknown_rank() && s.rank() != 0) {
      const std::string name =
          reg != nullptr && i < reg->op_def.input_arg_size()
              ? reg->op_def.input_arg(i).name()
              : absl::StrCat("input ", i);
      return errors::InvalidArgument(name, " must be a scalar, but has shape ",
                                     s.DebugString());
    }
  }
  return absl::OkStatus();
}

// HashTableExport: keys [n], values [n, dim], slots [n, ?, dim], then
// frequencies and versions [n].
absl::Status HashTableExportShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckHandle(c));
  int64_t dim = 0;
  RETURN_IF_ERROR(c->GetAttr("dim", &dim));
  const int64_t d = dim >= 1 ? dim : kUnknownDim;
  c->set_output(0, PartialShape({kUnknownDim}));
  c->set_output(1, PartialShape({kUnknownDim, d}));
  c->set_output(2, PartialShape({kUnknownDim, kUnknownDim, d}));
  c->set_output(3, PartialShape({kUnknownDim}));
  c->set_output(4, PartialShape({kUnknownDim}));
  return absl::OkStatus();
}

// HashTableImport: the five tensors of HashTableExport, one row each.
absl::Status HashTableImportShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckHandle(c));
  static constexpr struct {
    const char* name;
    int rank;
  } kInputs[] = {{"keys", 1}, {"values", 2}, {"slots", 3}, {"frequencies", 1},
                 {"versions", 1}};
  int64_t rows = kUnknownDim;
  std::string rows_from;
  for (int i = 0; i < 5; ++i) {
    const PartialShape& s = c->input(i + 1);
    if (s.unknown_rank()) continue;
    if (s.rank() != kInputs[i].rank) {
      return errors::InvalidArgument(kInputs[i].name, " must have rank ",
                                     kInputs[i].rank, ", but has shape ",
                                     s.DebugString());
    }
    if (s.dim(0) < 0) continue;
    if (rows >= 0 && s.dim(0) != rows) {
      return errors::InvalidArgument(kInputs[i].name, " ", s.DebugString(),
                                     " must have one row per key, as ",
                                     rows_from, " (", rows, " rows)");
    }
    rows = s.dim(0);
    rows_from = kInputs[i].name;
  }
  const PartialShape& values = c->input(2);
  const PartialShape& slots = c->input(3);
  if (!values.unknown_rank() && !slots.unknown_rank() && values.dim(1) >= 0 &&
      slots.dim(2) >= 0 && values.dim(1) != slots.dim(2)) {
    return errors::InvalidArgument("slots ", slots.DebugString(),
                                   " must have values' dim (values ",
                                   values.DebugString(), ")");
  }
  return absl::OkStatus();
}

absl::Status HashTableEvictShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckHandle(c));
  const PartialShape& step = c->input(1);
  if (!step.unknown_rank() && step.rank() != 0) {
    return errors::InvalidArgument("step must be a scalar, but has shape ",
                                   step.DebugString());
  }
  c->set_output(0, PartialShape(absl::Span<const int64_t>()));
  return absl::OkStatus();
}

absl::Status HashTableSizeShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckHandle(c));
  c->set_output(0, PartialShape(absl::Span<const int64_t>()));
  return absl::OkStatus();
}

// HashTablePrefetch: a table handle and ids of any shape; no outputs.
absl::Status HashTablePrefetchShape(InferenceContext* c) { return CheckHandle(c); }

}  // namespace

REGISTER_OP("HashEmbeddingTableOp")
    .Output("table: resource")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("dim: int >= 1")
    .Attr("optimizer: {'sgd', 'adagrad', 'adam', 'ftrl'} = 'sgd'")
    .Attr("initial_accumulator_value: float = 0.1")
    .Attr(
        "initializer: {'zeros', 'constant', 'uniform', 'normal', "
        "'truncated_normal'} = 'uniform'")
    .Attr("init_value: float = 0.0")
    .Attr("init_minval: float = -0.05")
    .Attr("init_maxval: float = 0.05")
    .Attr("init_mean: float = 0.0")
    .Attr("init_stddev: float = 0.05")
    .Attr("seed: int = 0")
    .Attr("num_shards: int = 16")
    .Attr("default_value: list(float) = []")
    .Attr("admission: {'always', 'count', 'probability'} = 'always'")
    .Attr("admission_min_count: int = 1")
    .Attr("admission_probability: float = 1.0")
    .Attr("sketch_width: int = 1048576")
    .Attr("sketch_depth: int = 4")
    .Attr("max_age_steps: int = 0")
    .Attr("min_frequency: int = 0")
    .Attr("nonfinite_gradients: {'skip_row', 'apply', 'error'} = 'skip_row'")
    .Attr("dram_budget_bytes: int = 0")
    .Attr("cold_dir: string = ''")
    .Attr("frequency_half_life_steps: int = 1000")
    .SetIsStateful()
    .SetShapeFn(TableHandleShape)
    .Doc(
        "A handle to the hash embedding table container/shared_name, created "
        "from the attrs on first use (recflow's op).\n\n"
        "An unbounded table keyed by raw int64 ids, with the optimizer's "
        "slots per row, admission and eviction (embedding/"
        "hash_embedding_table.h). A later op asking for the same name must "
        "agree on dim and optimizer.");

REGISTER_OP("HashEmbeddingBag")
    .Input("table: resource")
    .Input("ids: int64")
    .Input("row_splits: int64")
    .Input("per_id_weights: float")
    .Output("output: float")
    .Attr("dim: int >= 1")
    .Attr("combiner: {'sum', 'mean', 'sqrtn'} = 'mean'")
    .Attr("mode: {'train', 'serve'} = 'train'")
    .SetIsStateful()
    .SetShapeFn(HashEmbeddingBagShape)
    .Doc(
        "Looks up and combines hash-table rows for each example of a ragged "
        "batch (recflow's op).\n\n"
        "output[b] = combine(rows of ids[row_splits[b]:row_splits[b+1]]) with "
        "per-id weights (empty per_id_weights means 1): sum, mean or sqrtn; "
        "an empty bag is zeros. mode 'train' inserts admitted ids, 'serve' "
        "never writes (absent ids read the default row). [B, dim].");

REGISTER_OP("HashEmbeddingLookup")
    .Input("table: resource")
    .Input("ids: int64")
    .Output("output: float")
    .Attr("dim: int >= 1")
    .Attr("mode: {'train', 'serve'} = 'train'")
    .SetIsStateful()
    .SetShapeFn(HashEmbeddingLookupShape)
    .Doc(
        "The hash-table rows of ids: ids.shape + [dim] (recflow's op). mode "
        "as HashEmbeddingBag.");

REGISTER_OP("HashTableApplyGradientDescent")
    .Input("table: resource")
    .Input("ids: int64")
    .Input("grad: float")
    .Input("lr: float")
    .Input("step: int64")
    .SetIsStateful()
    .SetShapeFn(HashTableApplyShape)
    .Doc(
        "w -= lr * grad on the table rows of distinct ids; their version "
        "becomes step (recflow's op).");

REGISTER_OP("HashTableApplyAdagrad")
    .Input("table: resource")
    .Input("ids: int64")
    .Input("grad: float")
    .Input("lr: float")
    .Input("epsilon: float")
    .Input("step: int64")
    .SetIsStateful()
    .SetShapeFn(HashTableApplyShape)
    .Doc(
        "Adagrad on the table rows of distinct ids: accum += g^2; w -= lr * "
        "g / (sqrt(accum) + epsilon) (recflow's op).");

REGISTER_OP("HashTableApplyAdam")
    .Input("table: resource")
    .Input("ids: int64")
    .Input("grad: float")
    .Input("lr: float")
    .Input("beta1: float")
    .Input("beta2: float")
    .Input("epsilon: float")
    .Input("step: int64")
    .SetIsStateful()
    .SetShapeFn(HashTableApplyShape)
    .Doc(
        "Lazy Adam on the table rows of distinct ids, bias-corrected with "
        "beta^step as TensorFlow's Adam (recflow's op).");

REGISTER_OP("HashTableApplyFtrl")
    .Input("table: resource")
    .Input("ids: int64")
    .Input("grad: float")
    .Input("lr: float")
    .Input("l1: float")
    .Input("l2: float")
    .Input("l2_shrinkage: float")
    .Input("lr_power: float")
    .Input("step: int64")
    .SetIsStateful()
    .SetShapeFn(HashTableApplyShape)
    .Doc(
        "FTRL-proximal (TensorFlow's ApplyFtrlV2) on the table rows of "
        "distinct ids (recflow's op).");

REGISTER_OP("HashTableExport")
    .Input("table: resource")
    .Output("keys: int64")
    .Output("values: float")
    .Output("slots: float")
    .Output("frequencies: int64")
    .Output("versions: int64")
    .Attr("dim: int >= 1")
    .SetIsStateful()
    .SetShapeFn(HashTableExportShape)
    .Doc(
        "Every row of the table, sorted by id (recflow's op; TensorFlow's "
        "LookupTableExportV2 for hash embedding tables).\n\n"
        "keys int64 [n], values float [n, dim], slots float [n, num_slots, "
        "dim] (the optimizer's slots, the table's SlotNames() order), "
        "frequencies and versions int64 [n]: the tensors a checkpoint holds "
        "under K/keys, K/values, ... (embedding/table_bundle.h). Copies the "
        "whole table into memory.");

REGISTER_OP("HashTableImport")
    .Input("table: resource")
    .Input("keys: int64")
    .Input("values: float")
    .Input("slots: float")
    .Input("frequencies: int64")
    .Input("versions: int64")
    .SetIsStateful()
    .SetShapeFn(HashTableImportShape)
    .Doc(
        "Replaces the table's rows with the given ones (recflow's op; "
        "TensorFlow's LookupTableImportV2 for hash embedding tables).\n\n"
        "The tensors of HashTableExport. slots may have 0 slots ([n, 0, dim]: "
        "the rows' slots start at their initial values). The table is "
        "cleared first (rows, admission sketches, clock); a tensor that does "
        "not fit the table is InvalidArgument naming it, and the table is "
        "left empty.");

REGISTER_OP("HashTableEvict")
    .Input("table: resource")
    .Input("step: int64")
    .Output("num_evicted: int64")
    .SetIsStateful()
    .SetShapeFn(HashTableEvictShape)
    .Doc(
        "Removes the rows the table's eviction attrs select at `step` "
        "(recflow's op): step - version > max_age_steps, or frequency < "
        "min_frequency. step <= 0 means the table's clock (its last update's "
        "step). Returns the number of rows removed.");

REGISTER_OP("HashTablePrefetch")
    .Input("table: resource")
    .Input("ids: int64")
    .SetIsStateful()
    .SetShapeFn(HashTablePrefetchShape)
    .Doc(
        "Moves the rows of `ids` (any shape) that sit in a tiered table's "
        "cold tier or mapped base into memory, so a lookup that follows finds "
        "them there (recflow's op; HashEmbeddingTable::Prefetch). Run it on "
        "the next batch's ids while the current step runs. Does nothing for "
        "a table that is not tiered.");

REGISTER_OP("HashTableSize")
    .Input("table: resource")
    .Output("size: int64")
    .SetIsStateful()
    .SetShapeFn(HashTableSizeShape)
    .Doc(
        "The number of rows of the table (recflow's op; TensorFlow's "
        "LookupTableSizeV2 for hash embedding tables).");

namespace ops {

Output HashEmbeddingTableOp(const Scope& scope,
                            const HashEmbeddingTableAttrs& a) {
  if (!scope.ok()) return Output();
  NodeBuilder b(scope.GetUniqueNameForOp("HashEmbeddingTableOp"),
                "HashEmbeddingTableOp");
  SetHashEmbeddingTableAttrs(b, a);
  return Output(scope.AddNode(b));
}

NodeBuilder& SetHashEmbeddingTableAttrs(NodeBuilder& b,
                                        const HashEmbeddingTableAttrs& a) {
  return b.Attr("container", a.container)
      .Attr("shared_name", a.shared_name)
      .Attr("dim", a.dim)
      .Attr("optimizer", a.optimizer)
      .Attr("initial_accumulator_value", a.initial_accumulator_value)
      .Attr("initializer", a.initializer)
      .Attr("init_value", a.init_value)
      .Attr("init_minval", a.init_minval)
      .Attr("init_maxval", a.init_maxval)
      .Attr("init_mean", a.init_mean)
      .Attr("init_stddev", a.init_stddev)
      .Attr("seed", a.seed)
      .Attr("num_shards", a.num_shards)
      .Attr("default_value", absl::Span<const float>(a.default_value))
      .Attr("admission", a.admission)
      .Attr("admission_min_count", a.admission_min_count)
      .Attr("admission_probability", a.admission_probability)
      .Attr("sketch_width", a.sketch_width)
      .Attr("sketch_depth", a.sketch_depth)
      .Attr("max_age_steps", a.max_age_steps)
      .Attr("min_frequency", a.min_frequency)
      .Attr("nonfinite_gradients", a.nonfinite_gradients)
      .Attr("dram_budget_bytes", a.dram_budget_bytes)
      .Attr("cold_dir", a.cold_dir)
      .Attr("frequency_half_life_steps", a.frequency_half_life_steps);
}

int64_t HashTableDim(const Output& table) {
  const Node* node = table.node();
  while (node != nullptr && node->op() == "Identity") {
    const Edge* in = node->input_edge(0);
    node = in == nullptr ? nullptr : in->src;
  }
  int64_t dim = -1;
  if (node == nullptr || node->op() != "HashEmbeddingTableOp" ||
      !GetNodeAttr(AttrSlice(node->def()), "dim", &dim).ok()) {
    return -1;
  }
  return dim;
}

namespace {

// attrs.dim, or the table node's dim; records an error when neither is known.
int64_t DimFor(const Scope& scope, const Output& table, int64_t dim,
               const char* op) {
  if (dim >= 1) return dim;
  dim = HashTableDim(table);
  if (dim < 1) {
    scope.UpdateStatus(errors::InvalidArgument(
        op, ": set attrs.dim; the table '", table.name(),
        "' is not a HashEmbeddingTableOp whose dim could be read"));
  }
  return dim;
}

}  // namespace

Output HashEmbeddingBag(const Scope& scope, Output table, Output ids,
                        Output row_splits, Output per_id_weights,
                        const HashEmbeddingBagAttrs& attrs) {
  if (!scope.ok()) return Output();
  const int64_t dim = DimFor(scope, table, attrs.dim, "HashEmbeddingBag");
  if (!scope.ok()) return Output();
  Output w = per_id_weights.valid() ? per_id_weights
                                    : Const(scope.NewSubScope("no_weights"),
                                            Tensor(DT_FLOAT, TensorShape({0})));
  NodeBuilder b(scope.GetUniqueNameForOp("HashEmbeddingBag"),
                "HashEmbeddingBag");
  b.Input(table)
      .Input(ids)
      .Input(row_splits)
      .Input(w)
      .Attr("dim", dim)
      .Attr("combiner", attrs.combiner)
      .Attr("mode", attrs.mode);
  return Output(scope.AddNode(b));
}

Output HashEmbeddingLookup(const Scope& scope, Output table, Output ids,
                           const HashEmbeddingLookupAttrs& attrs) {
  if (!scope.ok()) return Output();
  const int64_t dim = DimFor(scope, table, attrs.dim, "HashEmbeddingLookup");
  if (!scope.ok()) return Output();
  NodeBuilder b(scope.GetUniqueNameForOp("HashEmbeddingLookup"),
                "HashEmbeddingLookup");
  b.Input(table).Input(ids).Attr("dim", dim).Attr("mode", attrs.mode);
  return Output(scope.AddNode(b));
}

namespace {

Output ApplyNode(const Scope& scope, const char* op,
                 const std::vector<Output>& inputs) {
  if (!scope.ok()) return Output();
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (const Output& in : inputs) b.Input(in);
  return Output(scope.AddNode(b));
}

}  // namespace

Output HashTableApplyGradientDescent(const Scope& scope, Output table,
                                     Output ids, Output grad, Output lr,
                                     Output step) {
  return ApplyNode(scope, "HashTableApplyGradientDescent",
                   {table, ids, grad, lr, step});
}

Output HashTableApplyAdagrad(const Scope& scope, Output table, Output ids,
                             Output grad, Output lr, Output epsilon,
                             Output step) {
  return ApplyNode(scope, "HashTableApplyAdagrad",
                   {table, ids, grad, lr, epsilon, step});
}

Output HashTableApplyAdam(const Scope& scope, Output table, Output ids,
                          Output grad, Output lr, Output beta1, Output beta2,
                          Output epsilon, Output step) {
  return ApplyNode(scope, "HashTableApplyAdam",
                   {table, ids, grad, lr, beta1, beta2, epsilon, step});
}

Output HashTableApplyFtrl(const Scope& scope, Output table, Output ids,
                          Output grad, Output lr, Output l1, Output l2,
                          Output l2_shrinkage, Output lr_power, Output step) {
  return ApplyNode(
      scope, "HashTableApplyFtrl",
      {table, ids, grad, lr, l1, l2, l2_shrinkage, lr_power, step});
}

}  // namespace ops
}  // namespace recflow
