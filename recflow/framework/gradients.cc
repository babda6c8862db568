#include "recflow/framework/gradients.h"

#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"

namespace recflow {

Output OpInput(const Node& node, int i) {
  const Edge* e = node.input_edge(i);
  DCHECK(e != nullptr);
  return e == nullptr ? Output() : Output(e->src, e->src_output);
}

GradientRegistry* GradientRegistry::Global() {
  static GradientRegistry* const registry = new GradientRegistry;
  return registry;
}

absl::Status GradientRegistry::Register(const std::string& op, GradFunc fn) {
  MutexLock lock(&mu_);
  if (fns_.count(op) > 0) return errors::AlreadyExists("a gradient for op '", op, "' is already registered");
  fns_[op] = std::make_unique<GradFunc>(std::move(fn));
  return absl::OkStatus();
}

absl::Status GradientRegistry::RegisterNoGradient(const std::string& op) {
  MutexLock lock(&mu_);
  if (fns_.count(op) > 0) return errors::AlreadyExists("a gradient for op '", op, "' is already registered");
  fns_[op] = nullptr;
  return absl::OkStatus();
}

absl::StatusOr<const GradFunc*> GradientRegistry::Lookup(const std::string& op) const {
  MutexLock lock(&mu_);
  auto it = fns_.find(op);
  if (it == fns_.end()) return errors::NotFound("no gradient is registered for op '", op, "'");
  return it->second.get();
}

std::vector<std::string> GradientRegistry::ListOps() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [op, fn] : fns_) out.push_back(op);
  return out;
}

absl::Status GradientRegistry::RegisterSparse(const std::string& op, SparseGradFunc fn) {
  MutexLock lock(&mu_);
  if (sparse_fns_.count(op) > 0) {
    return errors::AlreadyExists("a sparse gradient for op '", op, "' is already registered");
  }
  sparse_fns_[op] = std::make_unique<SparseGradFunc>(std::move(fn));
  return absl::OkStatus();
}

const SparseGradFunc* GradientRegistry::LookupSparse(const std::string& op) const {
  MutexLock lock(&mu_);
  auto it = sparse_fns_.find(op);
  return it == sparse_fns_.end() ? nullptr : it->second.get();
}

namespace register_gradient {
GradientRegistrar::GradientRegistrar(const char* op, GradFunc fn) {
  absl::Status s = GradientRegistry::Global()->Register(op, std::move(fn));
  if (!s.ok()) OpRegistry::Global()->RecordRegistrationError(std::string(s.message()));
}
GradientRegistrar::GradientRegistrar(const char* op) {
  absl::Status s = GradientRegistry::Global()->RegisterNoGradient(op);
  if (!s.ok()) OpRegistry::Global()->RecordRegistrationError(std::string(s.message()));
}
SparseGradientRegistrar::SparseGradientRegistrar(const char* op, SparseGradFunc fn) {
  absl::Status s = GradientRegistry::Global()->RegisterSparse(op, std::move(fn));
  if (!s.ok()) OpRegistry::Global()->RecordRegistrationError(std::string(s.message()));
}
}  // namespace register_gradient

namespace {

Output SimpleOp(const Scope& scope, const char* op, std::vector<Output> inputs, bool list_input) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  if (list_input) {
    b.Input(std::move(inputs));
  } else {
    for (Output& in : inputs) b.Input(in);
  }
  return Output(scope.AddNode(b));
}

Output ConstOp(const Scope& scope, const Tensor& value) {
  NodeBuilder b(scope.GetUniqueNameForOp("Const"), "Const");
  b.Attr("value", value).Attr("dtype", value.dtype());
  return Output(scope.AddNode(b));
}

Output CastOp(const Scope& scope, const Output& x, DataType dtype) {
  if (!x.valid() || BaseType(x.type()) == dtype) return x;
  NodeBuilder b(scope.GetUniqueNameForOp("Cast"), "Cast");
  b.Input(x).Attr("DstT", dtype);
  return Output(scope.AddNode(b));
}

// The sum of `terms` (one node; the term itself when there is one).
Output SumTerms(const Scope& scope, const std::vector<Output>& terms) {
  if (terms.size() == 1) return terms[0];
  return SimpleOp(scope, "AddN", terms, /*list_input=*/true);
}

// ConcatV2 of `parts` on axis 0 (the part itself when there is one).
Output Concat0(const Scope& scope, const std::vector<Output>& parts) {
  if (parts.size() == 1) return parts[0];
  NodeBuilder b(scope.GetUniqueNameForOp("ConcatV2"), "ConcatV2");
  b.Input(parts).Input(ConstOp(scope, Tensor::Scalar<int32_t>(0)));
  return Output(scope.AddNode(b));
}

// Sparse terms summed by concatenation; indices in int64 when their dtypes
// differ.
IndexedSlices ConcatSlices(const Scope& scope, const std::vector<IndexedSlices>& terms) {
  if (terms.size() == 1) return terms[0];
  bool mixed = false;
  for (const IndexedSlices& t : terms) {
    mixed |= BaseType(t.indices.type()) != BaseType(terms[0].indices.type());
  }
  std::vector<Output> values, indices;
  for (const IndexedSlices& t : terms) {
    values.push_back(t.values);
    indices.push_back(mixed ? CastOp(scope, t.indices, DT_INT64) : t.indices);
  }
  IndexedSlices out;
  out.values = Concat0(scope, values);
  out.indices = Concat0(scope, indices);
  out.dense_shape = terms[0].dense_shape;
  return out;
}

// The sum of `terms` as one gradient: sparse when every term is sparse
// (and `keep_sparse`), else dense with the sparse terms densified.
GradientValue SumGradients(const Scope& scope, const std::vector<GradientValue>& terms,
                           bool keep_sparse) {
  std::vector<IndexedSlices> sparse;
  std::vector<Output> dense;
  for (const GradientValue& g : terms) {
    if (g.is_sparse()) {
      sparse.push_back(g.sparse);
    } else if (g.dense.valid()) {
      dense.push_back(g.dense);
    }
  }
  if (sparse.empty() && dense.empty()) return GradientValue();
  if (dense.empty() && keep_sparse) return GradientValue(ConcatSlices(scope, sparse));
  for (const IndexedSlices& s : sparse) dense.push_back(IndexedSlicesToDense(scope, s));
  return GradientValue(SumTerms(scope, dense));
}

using Key = std::pair<const Node*, int>;  // a node's output

// The backward pass behind both APIs. With `sparse`, sparse gradient
// functions are used and gradients stay sparse (Note [sparse gradients]).
absl::Status Backprop(const Scope& outer, const std::vector<Output>& ys,
                      const std::vector<Output>& xs, const std::vector<Output>& grad_ys,
                      bool sparse, std::vector<GradientValue>* grad_xs) {
  RETURN_IF_ERROR(outer.status());
  if (!grad_ys.empty() && grad_ys.size() != ys.size()) {
    return errors::InvalidArgument("AddSymbolicGradients: ", ys.size(), " ys but ", grad_ys.size(),
                                   " grad_ys");
  }
  for (const Output& o : ys) {
    if (!o.valid()) return errors::InvalidArgument("AddSymbolicGradients: a y is an invalid Output");
  }
  for (const Output& o : xs) {
    if (!o.valid()) return errors::InvalidArgument("AddSymbolicGradients: an x is an invalid Output");
  }
  const Scope scope = outer.NewSubScope("gradients");
  const Graph& graph = *scope.graph();
  const int n = graph.num_nodes();

  // Nodes on a data path from some x to some y.
  std::vector<bool> from_x(n, false), to_y(n, false);
  std::deque<const Node*> queue;
  for (const Output& x : xs) {
    if (!from_x[x.node()->id()]) {
      from_x[x.node()->id()] = true;
      queue.push_back(x.node());
    }
  }
  while (!queue.empty()) {
    const Node* node = queue.front();
    queue.pop_front();
    for (const Edge* e : node->out_edges()) {
      if (!e->IsControlEdge() && !from_x[e->dst->id()]) {
        from_x[e->dst->id()] = true;
        queue.push_back(e->dst);
      }
    }
  }
  for (const Output& y : ys) {
    if (!to_y[y.node()->id()]) {
      to_y[y.node()->id()] = true;
      queue.push_back(y.node());
    }
  }
  while (!queue.empty()) {
    const Node* node = queue.front();
    queue.pop_front();
    for (const Edge* e : node->in_edges()) {
      if (!e->IsControlEdge() && !to_y[e->src->id()]) {
        to_y[e->src->id()] = true;
        queue.push_back(e->src);
      }
    }
  }
  // Nodes added from here on (the OnesLike seeds below, the gradient
  // functions' nodes) get ids >= n and are never on the path.
  auto on_path = [&](const Node* node) {
    const int id = node->id();
    return id < n && from_x[id] && to_y[id];
  };

  // Pending: gradients a node still waits for (one per data edge to an
  // on-path consumer).
  std::vector<int> pending(n, 0);
  for (const auto& node : graph.nodes()) {
    if (!on_path(node.get())) continue;
    for (const Edge* e : node->out_edges()) {
      if (!e->IsControlEdge() && on_path(e->dst)) ++pending[node->id()];
    }
  }
  absl::flat_hash_map<Key, std::vector<GradientValue>> backprops;
  for (size_t k = 0; k < ys.size(); ++k) {
    Output g = grad_ys.empty() ? SimpleOp(scope, "OnesLike", {ys[k]}, false) : grad_ys[k];
    RETURN_IF_ERROR(scope.status());
    backprops[{ys[k].node(), ys[k].index()}].push_back(g);
  }
  std::deque<const Node*> ready;
  std::vector<bool> queued(n, false);
  for (const auto& node : graph.nodes()) {
    if (on_path(node.get()) && pending[node->id()] == 0) {
      ready.push_back(node.get());
      queued[node->id()] = true;
    }
  }
  // Nodes added by gradient functions get ids >= n; they are never on path.
  while (!ready.empty()) {
    const Node* node = ready.front();
    ready.pop_front();
    bool has_path_input = false;
    for (const Edge* e : node->in_edges()) {
      if (!e->IsControlEdge() && on_path(e->src)) has_path_input = true;
    }
    if (has_path_input) {
      auto fn = GradientRegistry::Global()->Lookup(node->op());
      if (!fn.ok()) {
        return errors::NotFound("no gradient is registered for op '", node->op(), "' (node '",
                                node->name(),
                                "'), which lies on a path from the xs to the ys; register one "
                                "with REGISTER_GRADIENT_OP or, if nothing differentiable flows "
                                "through it, REGISTER_NO_GRADIENT_OP");
      }
      const SparseGradFunc* sparse_fn =
          sparse ? GradientRegistry::Global()->LookupSparse(node->op()) : nullptr;
      std::vector<GradientValue> grad_inputs;
      if (sparse && node->op() == "Identity" && node->num_outputs() == 1) {
        // An Identity passes any gradient through, sparse ones included.
        auto it = backprops.find({node, 0});
        if (it != backprops.end() && !it->second.empty()) {
          grad_inputs.push_back(SumGradients(scope, it->second, /*keep_sparse=*/true));
        } else {
          grad_inputs.push_back(GradientValue());
        }
        RETURN_IF_ERROR(scope.status());
      } else if (*fn != nullptr) {
        std::vector<Output> grad_outputs;
        for (int i = 0; i < node->num_outputs(); ++i) {
          auto it = backprops.find({node, i});
          if (it != backprops.end() && !it->second.empty()) {
            grad_outputs.push_back(SumGradients(scope, it->second, /*keep_sparse=*/false).dense);
          } else {
            grad_outputs.push_back(SimpleOp(scope, "ZerosLike", {OpOutput(*node, i)}, false));
          }
        }
        RETURN_IF_ERROR(scope.status());
        const Scope grad_scope = scope.NewSubScope(node->name() + "_grad");
        absl::Status s;
        if (sparse_fn != nullptr) {
          s = (*sparse_fn)(grad_scope, *node, grad_outputs, &grad_inputs);
        } else {
          std::vector<Output> dense_inputs;
          s = (**fn)(grad_scope, *node, grad_outputs, &dense_inputs);
          for (const Output& o : dense_inputs) grad_inputs.emplace_back(o);
        }
        if (s.ok()) s = grad_scope.status();
        if (!s.ok()) {
          return errors::Annotate(s, absl::StrCat("gradient of node '", node->name(), "' (",
                                                  node->op(), ")"));
        }
        if (static_cast<int>(grad_inputs.size()) != node->num_inputs()) {
          return errors::Internal("gradient function of op ", node->op(), " returned ",
                                  grad_inputs.size(), " gradients for ", node->num_inputs(),
                                  " inputs");
        }
      }
      for (int i = 0; i < static_cast<int>(grad_inputs.size()); ++i) {
        const Edge* e = node->input_edge(i);
        if (e != nullptr && grad_inputs[i].valid() && on_path(e->src)) {
          backprops[{e->src, e->src_output}].push_back(grad_inputs[i]);
        }
      }
    }
    for (const Edge* e : node->in_edges()) {
      if (e->IsControlEdge() || !on_path(e->src)) continue;
      if (--pending[e->src->id()] == 0 && !queued[e->src->id()]) {
        queued[e->src->id()] = true;
        ready.push_back(e->src);
      }
    }
  }
  grad_xs->clear();
  for (const Output& x : xs) {
    auto it = backprops.find({x.node(), x.index()});
    if (it == backprops.end() || it->second.empty()) {
      grad_xs->push_back(GradientValue());
    } else {
      grad_xs->push_back(SumGradients(scope, it->second, /*keep_sparse=*/sparse));
    }
  }
  return scope.status();
}

}  // namespace

Output IndexedSlicesToDense(const Scope& scope, const IndexedSlices& slices) {
  if (!scope.ok()) return Output();
  if (!slices.valid() || !slices.indices.valid() || !slices.dense_shape.valid()) {
    scope.UpdateStatus(errors::InvalidArgument(
        "IndexedSlicesToDense: the slices need values, indices and dense_shape"));
    return Output();
  }
  const Scope s = scope.NewSubScope("IndexedSlicesToDense");
  Output num_segments;
  const Tensor* shape = slices.dense_shape.index() == 0
                            ? slices.dense_shape.node()->constant_value()
                            : nullptr;
  if (shape != nullptr && shape->NumElements() >= 1) {
    const int64_t rows = shape->dtype() == DT_INT32 ? shape->flat<int32_t>()[0]
                                                    : shape->flat<int64_t>()[0];
    num_segments = ConstOp(s, Tensor::Scalar<int64_t>(rows));
  } else {
    NodeBuilder b(s.GetUniqueNameForOp("GatherV2"), "GatherV2");
    b.Input(slices.dense_shape)
        .Input(ConstOp(s, Tensor::Scalar<int32_t>(0)))
        .Input(ConstOp(s, Tensor::Scalar<int32_t>(0)));
    num_segments = Output(s.AddNode(b));
  }
  NodeBuilder b(s.GetUniqueNameForOp("UnsortedSegmentSum"), "UnsortedSegmentSum");
  b.Input(slices.values).Input(slices.indices).Input(num_segments);
  return Output(s.AddNode(b));
}

absl::Status AddSymbolicGradients(const Scope& outer, const std::vector<Output>& ys,
                                  const std::vector<Output>& xs, std::vector<Output>* grad_xs) {
  return AddSymbolicGradients(outer, ys, xs, {}, grad_xs);
}

absl::Status AddSymbolicGradients(const Scope& outer, const std::vector<Output>& ys,
                                  const std::vector<Output>& xs,
                                  const std::vector<Output>& grad_ys,
                                  std::vector<Output>* grad_xs) {
  std::vector<GradientValue> grads;
  RETURN_IF_ERROR(Backprop(outer, ys, xs, grad_ys, /*sparse=*/false, &grads));
  grad_xs->clear();
  for (const GradientValue& g : grads) grad_xs->push_back(g.dense);
  return absl::OkStatus();
}

absl::Status AddSymbolicGradientsSparse(const Scope& outer, const std::vector<Output>& ys,
                                        const std::vector<Output>& xs,
                                        const std::vector<Output>& grad_ys,
                                        std::vector<GradientValue>* grad_xs) {
  return Backprop(outer, ys, xs, grad_ys, /*sparse=*/true, grad_xs);
}

}  // namespace recflow
