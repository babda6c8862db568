// Optimizer: gradients, slots, the apply loop and the train op, and the
// updates built from the optimizer's OptimizerSpec. The specs of the named
// optimizers are in optimizers.cc.
#include "recflow/train/optimizer.h"

#include <algorithm>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/sparse_ops.h"
#include "recflow/train/global_step.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

// A scalar Const of `dtype` holding `value`.
absl::StatusOr<Output> ScalarConst(const Scope& scope, DataType dtype,
                                   double value) {
  switch (dtype) {
    case DT_FLOAT:
      return ops::Const(scope, static_cast<float>(value));
    case DT_DOUBLE:
      return ops::Const(scope, value);
    case DT_INT32:
      return ops::Const(scope, static_cast<int32_t>(value));
    case DT_INT64:
      return ops::Const(scope, static_cast<int64_t>(value));
    default:
      return errors::InvalidArgument(
          "optimizers handle float and double variables, not ",
          DataTypeString(dtype));
  }
}

// `value` converted to `dtype` when it differs.
Output CastTo(const Scope& scope, Output value, DataType dtype) {
  if (BaseType(value.type()) == dtype) return value;
  return ops::Cast(scope, value, dtype);
}

}  // namespace

Output Hyperparameter::ToTensor(const Scope& scope, DataType dtype) const {
  if (!scope.ok()) return Output();
  if (!is_constant()) {
    if (BaseType(tensor_.type()) == dtype) return tensor_;
    return ops::Cast(scope, tensor_, dtype);
  }
  auto c = ScalarConst(scope, dtype, value_);
  if (!c.ok()) {
    scope.UpdateStatus(c.status());
    return Output();
  }
  return *c;
}

absl::StatusOr<Output> Optimizer::Minimize(const Scope& scope, Output loss,
                                           std::vector<Output> var_list,
                                           Output global_step) {
  ASSIGN_OR_RETURN(std::vector<GradAndVar> grads_and_vars,
                   ComputeGradients(scope, loss, std::move(var_list),
                                    {.keep_sparse = true}));
  return ApplyGradients(scope, grads_and_vars, global_step);
}

namespace {

// Sparse terms summed by concatenation (indices in int64 when their dtypes
// differ).
IndexedSlices ConcatSlices(const Scope& scope,
                           const std::vector<IndexedSlices>& terms) {
  if (terms.size() == 1) return terms[0];
  bool mixed = false;
  for (const IndexedSlices& t : terms) {
    mixed |= BaseType(t.indices.type()) != BaseType(terms[0].indices.type());
  }
  std::vector<Output> values, indices;
  for (const IndexedSlices& t : terms) {
    values.push_back(t.values);
    indices.push_back(mixed && BaseType(t.indices.type()) != DT_INT64
                          ? ops::Cast(scope, t.indices, DT_INT64)
                          : t.indices);
  }
  const Output axis = ops::Const(scope, int32_t{0});
  return {ops::ConcatV2(scope, values, axis), ops::ConcatV2(scope, indices, axis),
          terms[0].dense_shape};
}

// A variable or a hash embedding table.
absl::Status CheckIsVariableOrTable(const Output& var) {
  if (IsHashTable(var)) return absl::OkStatus();
  if (var.valid() && CheckIsVariable(var).ok()) return absl::OkStatus();
  if (!var.valid()) {
    return errors::InvalidArgument(
        "expected a variable, got an invalid Output");
  }
  return errors::InvalidArgument(
      "'", var.name(), "' (", var.node()->op(),
      ") is not a variable; expected the output of a VariableV2, "
      "VarHandleOp or HashEmbeddingTableOp node");
}

// True when `indices` are distinct by construction (EmbeddingBagGrad's
// unique ids), so the merge of duplicates before a sparse update (of a
// table or a variable) can be skipped.
bool DistinctIds(const Output& indices) {
  return indices.node() != nullptr && indices.index() == 0 &&
         indices.node()->op() == "EmbeddingBagGrad";
}

}  // namespace

absl::StatusOr<std::vector<GradAndVar>> Optimizer::ComputeGradients(
    const Scope& scope, Output loss, std::vector<Output> var_list,
    const ComputeGradientsOptions& options) const {
  RETURN_IF_ERROR(scope.status());
  if (!loss.valid())
    return errors::InvalidArgument(name(), ": the loss is an invalid Output");
  if (var_list.empty()) {
    var_list = TrainableVariables(*scope.graph());
    if (var_list.empty()) {
      return errors::InvalidArgument(
          name(),
          ": the graph has no trainable variables (create them with "
          "train::Variable) and no var_list was given");
    }
  }
  // What to differentiate: a ref variable itself, or every read of a
  // resource variable and the handle (for ResourceGather and the like).
  std::vector<Output> xs;
  std::vector<std::pair<size_t, size_t>>
      ranges;  // per variable: [begin, end) in xs
  for (const Output& var : var_list) {
    RETURN_IF_ERROR(CheckIsVariableOrTable(var));
    const size_t begin = xs.size();
    if (IsResourceVariable(var) || IsHashTable(var)) {
      for (const Edge* e : var.node()->out_edges()) {
        if (!e->IsControlEdge() && e->dst->op() == "ReadVariableOp")
          xs.push_back(Output(e->dst));
      }
      xs.push_back(var);
    } else {
      xs.push_back(var);
    }
    ranges.emplace_back(begin, xs.size());
  }
  std::vector<GradientValue> grads;
  RETURN_IF_ERROR(AddSymbolicGradientsSparse(scope, {loss}, xs, {}, &grads));
  std::vector<GradAndVar> out;
  for (size_t i = 0; i < var_list.size(); ++i) {
    std::vector<Output> dense;
    std::vector<IndexedSlices> sparse;
    for (size_t k = ranges[i].first; k < ranges[i].second; ++k) {
      if (grads[k].is_sparse()) {
        sparse.push_back(grads[k].sparse);
      } else if (grads[k].dense.valid()) {
        dense.push_back(grads[k].dense);
      }
    }
    GradAndVar gv{.grad = Output(), .var = var_list[i]};
    const Scope grad_scope = scope.NewSubScope("gradients");
    if (IsHashTable(var_list[i])) {
      // Always sparse: an unbounded table has no dense form.
      if (!dense.empty()) {
        return errors::InvalidArgument(
            name(), ": hash embedding table '", VariableName(var_list[i]),
            "' received a dense gradient ('", dense[0].name(),
            "'); only its lookup ops (HashEmbeddingBag, HashEmbeddingLookup) "
            "may consume the handle in a differentiated path");
      }
      if (!sparse.empty()) gv.sparse_grad = ConcatSlices(grad_scope, sparse);
      RETURN_IF_ERROR(scope.status());
      out.push_back(gv);
      continue;
    }
    if (!sparse.empty() && dense.empty() && options.keep_sparse) {
      gv.sparse_grad = ConcatSlices(grad_scope, sparse);
    } else {
      // Dense: a dense consumer, or the caller wants dense gradients.
      for (const IndexedSlices& s : sparse) {
        dense.push_back(IndexedSlicesToDense(grad_scope, s));
      }
      if (dense.size() == 1) {
        gv.grad = dense[0];
      } else if (dense.size() > 1) {
        gv.grad = ops::AddN(grad_scope, dense);
      }
    }
    RETURN_IF_ERROR(scope.status());
    out.push_back(gv);
  }
  return out;
}

absl::StatusOr<Output> Optimizer::ApplyGradients(
    const Scope& scope, const std::vector<GradAndVar>& grads_and_vars,
    Output global_step) {
  RETURN_IF_ERROR(scope.status());
  std::vector<GradAndVar> todo;
  std::vector<std::string> all_names;
  std::set<std::string> seen;
  for (const GradAndVar& gv : grads_and_vars) {
    RETURN_IF_ERROR(CheckIsVariableOrTable(gv.var));
    const std::string& var_name = VariableName(gv.var);
    if (!seen.insert(var_name).second) {
      return errors::InvalidArgument(name(), ": variable '", var_name,
                                     "' appears twice in grads_and_vars");
    }
    all_names.push_back(var_name);
    if (gv.grad.valid() && gv.sparse_grad.valid()) {
      return errors::InvalidArgument(
          name(), ": variable '", var_name,
          "' has both a dense and a sparse gradient; give one");
    }
    if (!gv.grad.valid() && !gv.sparse_grad.valid()) continue;
    if (IsHashTable(gv.var)) {
      if (gv.grad.valid()) {
        return errors::InvalidArgument(
            name(), ": hash embedding table '", var_name,
            "' has a dense gradient; a table takes sparse gradients "
            "(IndexedSlices of raw int64 ids and float rows)");
      }
      if (!gv.sparse_grad.indices.valid() ||
          BaseType(gv.sparse_grad.indices.type()) != DT_INT64 ||
          BaseType(gv.sparse_grad.values.type()) != DT_FLOAT) {
        return errors::InvalidArgument(
            name(), ": the sparse gradient of hash embedding table '", var_name,
            "' must have int64 indices and float values");
      }
      todo.push_back(gv);
      continue;
    }
    const DataType dtype = VariableDtype(gv.var);
    if (dtype != DT_FLOAT && dtype != DT_DOUBLE) {
      return errors::InvalidArgument(
          name(), ": variable '", var_name, "' has dtype ",
          DataTypeString(dtype),
          "; optimizers update float and double variables");
    }
    const Output& values = gv.grad.valid() ? gv.grad : gv.sparse_grad.values;
    if (BaseType(values.type()) != dtype) {
      return errors::InvalidArgument(
          name(), ": the gradient '", values.name(), "' of variable '",
          var_name, "' is ", DataTypeString(BaseType(values.type())),
          " but the variable is ", DataTypeString(dtype));
    }
    if (gv.sparse_grad.valid() && !gv.sparse_grad.indices.valid()) {
      return errors::InvalidArgument(name(),
                                     ": the sparse gradient of variable '",
                                     var_name, "' has no indices");
    }
    todo.push_back(gv);
  }
  if (todo.empty()) {
    return errors::InvalidArgument(
        name(), ": no gradients provided for any variable: [",
        absl::StrJoin(all_names, ", "),
        "]; check that the loss depends on them through differentiable ops");
  }
  if (global_step.valid()) {
    RETURN_IF_ERROR(
        errors::Annotate(CheckIsVariable(global_step), "global_step"));
    const DataType gs_dtype = VariableDtype(global_step);
    if (gs_dtype != DT_INT64 && gs_dtype != DT_INT32) {
      return errors::InvalidArgument("global_step '", global_step.name(),
                                     "' must be int64 or int32, not ",
                                     DataTypeString(gs_dtype));
    }
  }

  // Slots and non-slot variables, named from the caller's scope.
  std::vector<Output> vars;
  for (const GradAndVar& gv : todo) {
    if (IsHashTable(gv.var)) continue;  // the table holds its slots
    vars.push_back(gv.var);
    if (slots_.count(VariableName(gv.var)) == 0) {
      slots_[VariableName(gv.var)];  // created (possibly with no slots)
      RETURN_IF_ERROR(CreateSlots(scope, gv.var));
    }
  }
  if (non_slots_.empty() && !vars.empty()) {
    RETURN_IF_ERROR(CreateNonSlotVariables(scope, vars));
  }
  RETURN_IF_ERROR(scope.status());

  // The updates, under "<name()>/".
  const Scope opt_scope = scope.NewSubScope(name());
  apply_scope_ = &opt_scope;
  hyper_cache_.clear();
  absl::Cleanup reset = [this] {
    apply_scope_ = nullptr;
    hyper_cache_.clear();
  };
  // Every update waits for every gradient. A TF1 ref variable is read when
  // each consumer runs, so an update that ran as soon as its own gradient
  // existed could change a weight that a backward MatMul of a lower layer
  // has yet to read (a race, and nondeterministic training). Every read that
  // feeds a gradient is an ancestor of it, so after all gradients no read is
  // pending.
  std::vector<Output> all_grads;
  for (const GradAndVar& gv : todo) {
    if (gv.grad.valid()) {
      all_grads.push_back(gv.grad);
    } else {
      all_grads.push_back(gv.sparse_grad.values);
      all_grads.push_back(gv.sparse_grad.indices);
    }
  }
  const Scope after_grads = opt_scope.WithControlDependencies(all_grads);
  // The step of the table updates (see the class comment), made once.
  Output table_step;
  std::vector<Output> updates;
  for (const GradAndVar& gv : todo) {
    const Scope update_scope =
        after_grads.NewSubScope("update_" + VariableName(gv.var));
    Output update;
    if (IsHashTable(gv.var)) {
      if (!table_step.valid()) {
        const Scope step_scope = opt_scope.NewSubScope("table_step");
        if (global_step.valid()) {
          Output gs = ReadValue(step_scope, global_step);
          if (BaseType(gs.type()) != DT_INT64) {
            gs = ops::Cast(step_scope, gs, DT_INT64);
          }
          table_step =
              ops::Add(step_scope, gs, ops::Const(step_scope, int64_t{1}));
        } else {
          table_step = ops::Const(step_scope, int64_t{0});
        }
      }
      IndexedSlices merged = gv.sparse_grad;
      if (!DistinctIds(merged.indices)) {
        ops::UniqueOutputs unique = ops::Unique(update_scope, merged.indices);
        merged.values =
            ops::UnsortedSegmentSum(update_scope, merged.values, unique.idx,
                                    ops::Size(update_scope, unique.y));
        merged.indices = unique.y;
      }
      RETURN_IF_ERROR(scope.status());
      ASSIGN_OR_RETURN(update,
                       ApplyTable(update_scope, merged, gv.var, table_step));
    } else if (gv.grad.valid()) {
      ASSIGN_OR_RETURN(update, ApplyDense(update_scope, gv.grad, gv.var));
    } else {
      // TensorFlow's _apply_sparse_duplicate_indices: one row per index
      // (not needed when the indices are distinct by construction).
      const IndexedSlices& g = gv.sparse_grad;
      IndexedSlices merged = g;
      if (!DistinctIds(g.indices)) {
        ops::UniqueOutputs unique = ops::Unique(update_scope, g.indices);
        merged = IndexedSlices{
            ops::UnsortedSegmentSum(update_scope, g.values, unique.idx,
                                    ops::Size(update_scope, unique.y)),
            unique.y, g.dense_shape};
      }
      RETURN_IF_ERROR(scope.status());
      ASSIGN_OR_RETURN(update, ApplySparse(update_scope, merged, gv.var));
    }
    RETURN_IF_ERROR(scope.status());
    updates.push_back(update);
  }
  ASSIGN_OR_RETURN(std::vector<Output> deps, Finish(opt_scope, updates));
  if (global_step.valid()) {
    deps.push_back(IncrementGlobalStep(opt_scope.WithControlDependencies(deps),
                                       global_step));
  }
  RETURN_IF_ERROR(scope.status());
  NodeBuilder b(scope.GetUniqueNameForOp(name()), "NoOp");
  for (const Output& d : deps) b.ControlInput(d.node());
  Node* train_op = scope.AddNode(b);
  RETURN_IF_ERROR(scope.status());
  return Output(train_op);
}

// --- The updates, from the spec ----------------------------------------------

absl::Status Optimizer::CheckRequirements(bool table) const {
  for (const OptimizerSpec::Requirement& r : spec_.requirements) {
    if (table && !r.for_tables) continue;
    if (r.value.is_constant() && !r.holds(r.value.value())) {
      return errors::InvalidArgument(name(), ": ", r.what, " must be ", r.rule,
                                     ", got ", r.value.value());
    }
  }
  return absl::OkStatus();
}

absl::Status Optimizer::CreateSlots(const Scope& scope, const Output& var) {
  RETURN_IF_ERROR(CheckRequirements(/*table=*/false));
  for (const OptimizerSpec::Slot& slot : spec_.slots) {
    RETURN_IF_ERROR(
        CreateSlot(scope, var, slot.name, slot.initial_value).status());
  }
  return absl::OkStatus();
}

absl::Status Optimizer::CreateNonSlotVariables(
    const Scope& scope, const std::vector<Output>& vars) {
  if (spec_.non_slots.empty()) return absl::OkStatus();
  // As TensorFlow: in the dtype (and here the style) of the first variable
  // by name.
  const Output& first = *std::min_element(
      vars.begin(), vars.end(), [](const Output& a, const Output& b) {
        return VariableName(a) < VariableName(b);
      });
  const DataType dtype = VariableDtype(first);
  const bool resource = IsResourceVariable(first);
  std::vector<Output> created;
  for (const OptimizerSpec::NonSlot& n : spec_.non_slots) {
    ASSIGN_OR_RETURN(
        Output var,
        CreateNonSlotVariable(scope, n.name, dtype, resource, n.initial_value));
    created.push_back(var);
  }
  non_slots_ = std::move(created);
  return absl::OkStatus();
}

absl::StatusOr<Output> Optimizer::AddUpdate(
    const Scope& scope, const std::string& op,
    const std::vector<OptimizerSpec::Input>& inputs,
    const std::vector<std::pair<std::string, bool>>& attrs, const Output& var,
    DataType dtype, const Output& grad, const Output& indices,
    const Output& step) {
  using Kind = OptimizerSpec::Input::Kind;
  std::vector<Output> values;
  for (const OptimizerSpec::Input& in : inputs) {
    switch (in.kind) {
      case Kind::kVariable:
        values.push_back(var);
        break;
      case Kind::kSlot: {
        Output slot = GetSlot(var, in.name);
        if (!slot.valid()) {
          return errors::InvalidArgument(name(), ": ", op, " takes slot '",
                                         in.name,
                                         "', which the spec does not define");
        }
        values.push_back(slot);
        break;
      }
      case Kind::kNonSlot: {
        Output non_slot = GetNonSlot(in.name);
        if (!non_slot.valid()) {
          return errors::InvalidArgument(name(), ": ", op,
                                         " takes non-slot variable '", in.name,
                                         "', which the spec does not define");
        }
        values.push_back(CastTo(scope, ReadValue(scope, non_slot), dtype));
        break;
      }
      case Kind::kHyper: {
        ASSIGN_OR_RETURN(Output h, Hyper(in.name, dtype));
        values.push_back(h);
        break;
      }
      case Kind::kGrad:
        values.push_back(grad);
        break;
      case Kind::kIndices:
        values.push_back(indices);
        break;
      case Kind::kStep:
        values.push_back(step);
        break;
    }
  }
  RETURN_IF_ERROR(scope.status());
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (const Output& v : values) b.Input(v);
  for (const auto& [attr, value] : attrs) b.Attr(attr, value);
  Node* node = scope.AddNode(b);
  RETURN_IF_ERROR(scope.status());
  return Output(node);
}

absl::StatusOr<Output> Optimizer::ApplyDense(const Scope& scope,
                                             const Output& grad,
                                             const Output& var) {
  const bool resource = IsResourceVariable(var);
  return AddUpdate(scope, (resource ? "Resource" : "") + spec_.dense.op,
                   spec_.dense.inputs, spec_.dense.attrs, var,
                   VariableDtype(var), grad, Output(), Output());
}

absl::StatusOr<Output> Optimizer::ApplySparse(const Scope& scope,
                                              const IndexedSlices& grad,
                                              const Output& var) {
  if (!spec_.sparse_update) {
    Output dense = IndexedSlicesToDense(scope, grad);
    RETURN_IF_ERROR(scope.status());
    return ApplyDense(scope, dense, var);
  }
  // The dense op's inputs with the indices after the gradient.
  std::vector<OptimizerSpec::Input> inputs;
  for (const OptimizerSpec::Input& in : spec_.dense.inputs) {
    inputs.push_back(in);
    if (in.kind == OptimizerSpec::Input::Kind::kGrad) {
      inputs.push_back({OptimizerSpec::Input::Kind::kIndices});
    }
  }
  const bool resource = IsResourceVariable(var);
  return AddUpdate(scope,
                   (resource ? "ResourceSparse" : "Sparse") + spec_.dense.op,
                   inputs, spec_.dense.attrs, var, VariableDtype(var),
                   grad.values, grad.indices, Output());
}

absl::StatusOr<Output> Optimizer::ApplyTable(const Scope& scope,
                                             const IndexedSlices& grad,
                                             const Output& table,
                                             const Output& step) {
  if (spec_.table.op.empty()) {
    return errors::Unimplemented(
        name(), " cannot update hash embedding table '", VariableName(table),
        "': ", spec_.table_unsupported);
  }
  RETURN_IF_ERROR(CheckRequirements(/*table=*/true));
  return AddUpdate(scope, spec_.table.op, spec_.table.inputs, spec_.table.attrs,
                   table, DT_FLOAT, grad.values, grad.indices, step);
}

absl::StatusOr<std::vector<Output>> Optimizer::Finish(
    const Scope& scope, std::vector<Output> update_ops) {
  if (non_slots_.empty()) return update_ops;  // none, or only tables so far
  // value *= multiplier, after every update has read it.
  const Scope after = scope.WithControlDependencies(update_ops);
  const DataType dtype = VariableDtype(non_slots_[0]);
  std::vector<Output> multipliers;
  for (const OptimizerSpec::NonSlot& n : spec_.non_slots) {
    ASSIGN_OR_RETURN(Output m, Hyper(n.multiply_by, dtype));
    multipliers.push_back(m);
  }
  auto numbered = [](const char* base, size_t i) {
    return i == 0 ? std::string(base) : absl::StrCat(base, "_", i);
  };
  std::vector<Output> next;
  for (size_t i = 0; i < non_slots_.size(); ++i) {
    next.push_back(ops::Mul(after.WithOpName(numbered("mul", i)),
                            ReadValue(after, non_slots_[i]), multipliers[i]));
  }
  for (size_t i = 0; i < non_slots_.size(); ++i) {
    update_ops.push_back(AssignValue(after.WithOpName(numbered("Assign", i)),
                                     non_slots_[i], next[i]));
  }
  RETURN_IF_ERROR(scope.status());
  return update_ops;
}

std::vector<std::string> Optimizer::GetSlotNames() const {
  std::vector<std::string> names;
  for (const OptimizerSpec::Slot& slot : spec_.slots)
    names.push_back(slot.name);
  return names;
}

Output Optimizer::GetNonSlot(const std::string& name) const {
  for (size_t i = 0; i < non_slots_.size(); ++i) {
    if (spec_.non_slots[i].name == name) return non_slots_[i];
  }
  return Output();
}

Output Optimizer::GetSlot(const Output& var,
                          const std::string& slot_name) const {
  if (!var.valid()) return Output();
  auto it = slots_.find(VariableName(var));
  if (it == slots_.end()) return Output();
  auto slot = it->second.find(slot_name);
  return slot == it->second.end() ? Output() : slot->second;
}

absl::StatusOr<Output> Optimizer::CreateSlot(const Scope& scope,
                                             const Output& var,
                                             const std::string& slot_name,
                                             double value) {
  const PartialShape shape = VariableShape(var);
  const std::string& var_name = VariableName(var);
  if (!shape.IsFullyDefined()) {
    return errors::InvalidArgument(name(), ": cannot create slot '", slot_name,
                                   "' of variable '", var_name, "': its shape ",
                                   shape.DebugString(),
                                   " is not fully defined");
  }
  const DataType dtype = VariableDtype(var);
  const std::string relative = var_name + "/" + name();
  // The initial value under "<var>/<name>/Initializer/".
  const Scope init_scope =
      scope.NewSubScope(relative).NewSubScope("Initializer");
  const char* kind = value == 0 ? "zeros" : "Const";
  Output dims =
      ops::Const(init_scope.WithOpName(std::string(kind) + "/shape_as_tensor"),
                 Tensor::FromVector<int64_t>(shape.dims()));
  ASSIGN_OR_RETURN(
      Output fill_value,
      ScalarConst(init_scope.WithOpName(std::string(kind) + "/value"), dtype,
                  value));
  Output init = ops::Fill(init_scope.WithOpName(kind), dims, fill_value);
  Output slot = internal::CreateVariable(
      scope, scope.GetUniqueNameForOp(relative), shape, dtype, init,
      {.trainable = false, .use_resource = IsResourceVariable(var)});
  RETURN_IF_ERROR(scope.status());
  slots_[var_name][slot_name] = slot;
  init_ops_.push_back(
      Output(scope.graph()->FindNode(slot.node()->name() + "/Assign")));
  return slot;
}

absl::StatusOr<Output> Optimizer::CreateNonSlotVariable(const Scope& scope,
                                                        const std::string& name,
                                                        DataType dtype,
                                                        bool use_resource,
                                                        double value) {
  ASSIGN_OR_RETURN(
      Output init,
      ScalarConst(scope.NewSubScope(name).WithOpName("initial_value"), dtype,
                  value));
  Output var = internal::CreateVariable(
      scope, scope.GetUniqueNameForOp(name), PartialShape({}), dtype, init,
      {.trainable = false, .use_resource = use_resource});
  RETURN_IF_ERROR(scope.status());
  init_ops_.push_back(
      Output(scope.graph()->FindNode(var.node()->name() + "/Assign")));
  return var;
}

absl::StatusOr<Output> Optimizer::Hyper(const std::string& hyper_name,
                                        DataType dtype) {
  DCHECK(apply_scope_ != nullptr);
  auto key = std::make_pair(hyper_name, dtype);
  auto it = hyper_cache_.find(key);
  if (it != hyper_cache_.end()) return it->second;
  auto h = spec_.hypers.find(hyper_name);
  if (h == spec_.hypers.end()) {
    return errors::InvalidArgument(
        name(), ": the optimizer's spec has no hyperparameter '", hyper_name,
        "'");
  }
  Output t = h->second.ToTensor(apply_scope_->WithOpName(hyper_name), dtype);
  RETURN_IF_ERROR(apply_scope_->status());
  hyper_cache_[key] = t;
  return t;
}

}  // namespace recflow::train
