#include "recflow/runtime/session.h"

#include <algorithm>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_join.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/framework/function_instantiation.h"
#include "recflow/runtime/caching_allocator.h"
#include "recflow/runtime/call_frame.h"
#include "recflow/runtime/executor.h"
#include "recflow/runtime/feed_shape_check.h"
#include "recflow/runtime/function_library_runtime.h"

namespace recflow {

// What one feed/fetch/target signature needs at Run time.
struct Session::Signature {
  std::unique_ptr<Executor> executor;
  std::vector<std::string> feed_names;
  std::vector<DataType> feed_types;
  std::vector<PartialShape> feed_shapes;
};

// Note [Session function library]
// The session's LocalFunctionLibraryRuntime is a resource of its device, in
// the container kFunctionLibraryContainer (nothing else uses it), so that
// the device owns it and session.h stays as it was. It must outlive the
// other resources (a dataset may run its map function until it is gone) and
// every kernel (call kernels keep a pointer): ~Session drops the other
// containers first, then the cached executors, then the runtime's container.
namespace {

constexpr char kFunctionLibraryContainer[] = "_function_library";
constexpr char kFunctionLibraryName[] = "runtime";

struct FunctionLibraryResource : public ResourceBase {
  explicit FunctionLibraryResource(std::unique_ptr<LocalFunctionLibraryRuntime> r)
      : runtime(std::move(r)) {}
  std::string DebugString() const override {
    return absl::StrCat("FunctionLibraryRuntime(", runtime->ToProto().function_size(),
                        " functions, ", runtime->num_instantiations(), " instantiated)");
  }
  std::unique_ptr<LocalFunctionLibraryRuntime> runtime;
};

}  // namespace

LocalFunctionLibraryRuntime* SessionFunctionLibrary(const Session& session) {
  auto r = session.device()->resource_manager()->Lookup<FunctionLibraryResource>(
      kFunctionLibraryContainer, kFunctionLibraryName);
  return r.ok() ? (*r)->runtime.get() : nullptr;
}

Session::~Session() {
  if (device_ == nullptr) return;
  // Note [Session function library]. ResourceMgr lists resources as
  // "container/name (type): ..."; the container is the text before one of
  // the slashes (a container name may have slashes too), so cleaning every
  // such prefix drops every resource.
  ResourceMgr* rm = device_->resource_manager();
  absl::flat_hash_set<std::string> containers;
  for (const std::string& entry : rm->DebugStrings()) {
    for (size_t slash = entry.find('/'); slash != std::string::npos;
         slash = entry.find('/', slash + 1)) {
      containers.insert(entry.substr(0, slash));
    }
  }
  containers.erase(kFunctionLibraryContainer);
  for (const std::string& c : containers) rm->Cleanup(c);
  {
    MutexLock lock(&mu_);
    signatures_.clear();
  }
  rm->Cleanup(kFunctionLibraryContainer);
}

namespace {
// ScopedUncheckedFeedShapes alive on this thread.
thread_local int unchecked_feed_shapes_depth = 0;
}  // namespace

ScopedUncheckedFeedShapes::ScopedUncheckedFeedShapes() {
  ++unchecked_feed_shapes_depth;
}
ScopedUncheckedFeedShapes::~ScopedUncheckedFeedShapes() {
  --unchecked_feed_shapes_depth;
}
bool FeedShapesChecked() { return unchecked_feed_shapes_depth == 0; }

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const SessionOptions& options,
                                                         const tensorflow::GraphDef& graph_def) {
  auto s = std::unique_ptr<Session>(new Session);
  s->optimizer_options_ = options.optimizer;
  if (const char* env = std::getenv("RECFLOW_GRAPH_OPTIMIZER");
      env != nullptr && absl::string_view(env) == "off") {
    s->optimizer_options_ = GraphOptimizerOptions::Disabled();
  }
  const int cpus = NumSchedulableCPUs();
  const int inter = options.inter_op_threads > 0 ? options.inter_op_threads : cpus;
  const int intra = options.intra_op_threads > 0 ? options.intra_op_threads : cpus;
  RETURN_IF_ERROR(ValidateThreadCount("SessionOptions.inter_op_threads", inter));
  RETURN_IF_ERROR(ValidateThreadCount("SessionOptions.intra_op_threads", intra));
  ASSIGN_OR_RETURN(s->inter_op_pool_, ThreadPool::Create("recflow_inter", inter));
  if (intra > 1) {
    ASSIGN_OR_RETURN(s->intra_op_pool_, ThreadPool::Create("recflow_intra", intra));
    // A kernel splits its loops only while inter-op threads are idle.
    s->intra_op_pool_->SetPeerPool(s->inter_op_pool_.get());
  }
  Device::Options device_options;
  device_options.intra_op_pool = s->intra_op_pool_.get();
  // Kernel outputs come from the caching allocator: a step's big buffers
  // are reused by the next step instead of being page-faulted in anew (see
  // runtime/caching_allocator.h; RECFLOW_ALLOCATOR_CACHE_MB=0 turns it off).
  device_options.allocator = caching_cpu_allocator();
  s->device_ = std::make_unique<Device>(device_options);
  LocalFunctionLibraryRuntime::Options flr_options;
  flr_options.device = s->device_.get();
  flr_options.optimizer = s->optimizer_options_;
  RETURN_IF_ERROR(s->device_->resource_manager()->Create(
      kFunctionLibraryContainer, kFunctionLibraryName,
      std::make_shared<FunctionLibraryResource>(
          std::make_unique<LocalFunctionLibraryRuntime>(flr_options))));
  {
    MutexLock lock(&s->mu_);
    s->graph_ = std::make_shared<Graph>();
  }
  if (graph_def.node_size() > 0 || graph_def.library().function_size() > 0) {
    RETURN_IF_ERROR(s->Extend(graph_def));
  }
  return s;
}

absl::Status Session::Extend(const tensorflow::GraphDef& graph_def) {
  MutexLock lock(&mu_);
  tensorflow::GraphDef merged = graph_def_;
  for (const auto& node : graph_def.node()) *merged.add_node() = node;
  if (graph_def.has_versions()) *merged.mutable_versions() = graph_def.versions();
  if (graph_def.has_library()) {
    // Functions already present are skipped; a clashing redefinition fails.
    LocalFunctionLibraryRuntime* flr = SessionFunctionLibrary(*this);
    RETURN_IF_ERROR(flr->AddLibrary(graph_def.library()));
    *merged.mutable_library() = flr->ToProto();
  }
  auto graph = std::make_shared<Graph>();
  GraphConstructorOptions opts;
  if (merged.library().function_size() > 0) {
    // Nodes that call a library function by name (TF1's Defun) run as
    // StatefulPartitionedCall; graph_def_ keeps them as written.
    tensorflow::GraphDef rewritten = merged;
    RETURN_IF_ERROR(RewriteCallsByName(&rewritten));
    RETURN_IF_ERROR(ConvertGraphDefToGraph(opts, rewritten, graph.get()));
  } else {
    RETURN_IF_ERROR(ConvertGraphDefToGraph(opts, merged, graph.get()));
  }
  graph_def_ = std::move(merged);
  graph_ = std::move(graph);
  signatures_.clear();  // built against the old graph; rebuilt on demand
  return absl::OkStatus();
}

int Session::num_cached_executors() const {
  MutexLock lock(&mu_);
  return static_cast<int>(signatures_.size());
}

std::shared_ptr<const Graph> Session::graph() const {
  MutexLock lock(&mu_);
  return graph_;
}

namespace {

struct TensorRef {
  const Node* node;
  int index;
};

absl::StatusOr<TensorRef> ResolveTensor(const Graph& graph, const std::string& name,
                                        const char* what) {
  auto id = ParseTensorName(name);
  if (!id.ok() || id->IsControl()) {
    return errors::InvalidArgument(what, " '", name, "' is not a tensor name ('node' or 'node:i')");
  }
  const Node* n = graph.FindNode(id->node);
  if (n == nullptr) {
    return errors::NotFound(what, " '", name, "': no node named '", id->node, "' in the graph");
  }
  if (id->index >= n->num_outputs()) {
    return errors::InvalidArgument(what, " '", name, "': node '", n->name(), "' (", n->op(),
                                   ") has ", n->num_outputs(), " outputs");
  }
  return TensorRef{n, id->index};
}

std::string UniqueName(const Graph& graph, std::string base) {
  std::string name = base;
  for (int i = 1; graph.FindNode(name) != nullptr; ++i) name = absl::StrCat(base, "_", i);
  return name;
}

std::string TensorName(const Node* n, int index) {
  return index == 0 ? n->name() : absl::StrCat(n->name(), ":", index);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Session::Signature>> Session::GetOrCreateSignature(
    const std::vector<std::pair<std::string, Tensor>>& feeds,
    const std::vector<std::string>& fetches, const std::vector<std::string>& targets) {
  std::string key;
  for (const auto& f : feeds) absl::StrAppend(&key, f.first, ",");
  absl::StrAppend(&key, "->", absl::StrJoin(fetches, ","), "//", absl::StrJoin(targets, ","));

  std::shared_ptr<const Graph> graph;
  {
    MutexLock lock(&mu_);
    if (auto it = signatures_.find(key); it != signatures_.end()) return it->second;
    graph = graph_;
  }

  auto sig = std::make_shared<Signature>();
  // Feeds: (node id, output) -> argument index.
  absl::flat_hash_map<std::pair<int, int>, int> fed;
  for (size_t k = 0; k < feeds.size(); ++k) {
    ASSIGN_OR_RETURN(TensorRef t, ResolveTensor(*graph, feeds[k].first, "feed"));
    if (!fed.emplace(std::make_pair(t.node->id(), t.index), static_cast<int>(k)).second) {
      return errors::InvalidArgument("tensor '", feeds[k].first, "' is fed more than once");
    }
    sig->feed_names.push_back(feeds[k].first);
    sig->feed_types.push_back(BaseType(t.node->output_type(t.index)));
    sig->feed_shapes.push_back(t.node->output_shape(t.index));
    if (sig->feed_types.back() == DT_INVALID) {
      return errors::InvalidArgument("feed '", feeds[k].first, "': node '", t.node->name(),
                                     "' uses unregistered op '", t.node->op(),
                                     "', so its output dtype is unknown");
    }
  }
  std::vector<TensorRef> fetch_refs;
  for (const std::string& f : fetches) {
    ASSIGN_OR_RETURN(TensorRef t, ResolveTensor(*graph, f, "fetch"));
    fetch_refs.push_back(t);
  }
  std::vector<const Node*> target_nodes;
  for (const std::string& t : targets) {
    absl::string_view name = t;
    if (!name.empty() && name[0] == '^') name.remove_prefix(1);
    const Node* n = graph->FindNode(name);
    if (n == nullptr) {
      return errors::NotFound("target '", t, "': no node named '", name, "' in the graph");
    }
    target_nodes.push_back(n);
  }

  // A node whose only output is fed (a fed Placeholder) is replaced by its
  // _Arg: control edges out of it leave from the _Arg instead, so it does not
  // run (TensorFlow moves a fed node's control edges the same way). -1 when
  // `n` is not such a node.
  auto replacing_arg = [&](const Node* n) -> int {
    if (n->num_outputs() != 1) return -1;
    auto it = fed.find({n->id(), 0});
    return it == fed.end() ? -1 : static_cast<int>(it->second);
  };

  // Prune: walk back from fetches and targets; a fed tensor cuts the walk.
  std::vector<bool> keep(graph->num_nodes(), false);
  std::vector<const Node*> stack;
  auto visit = [&](const Node* n) {
    if (!keep[n->id()]) {
      keep[n->id()] = true;
      stack.push_back(n);
    }
  };
  for (const TensorRef& t : fetch_refs) {
    if (!fed.contains({t.node->id(), t.index})) visit(t.node);
  }
  for (const Node* n : target_nodes) visit(n);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge* e : n->in_edges()) {
      if (!e->IsControlEdge() && fed.contains({e->src->id(), e->src_output})) continue;
      if (e->IsControlEdge() && replacing_arg(e->src) >= 0) continue;
      visit(e->src);
    }
  }

  // Rewrite: fed tensors become _Arg nodes, fetches feed _Retval nodes.
  tensorflow::GraphDef def;
  *def.mutable_versions() = graph->versions();
  std::vector<std::string> arg_names(feeds.size());
  for (size_t k = 0; k < feeds.size(); ++k) {
    arg_names[k] = UniqueName(*graph, absl::StrCat("_arg_", k));
    tensorflow::NodeDef* arg = def.add_node();
    arg->set_name(arg_names[k]);
    arg->set_op("_Arg");
    SetAttrValue(sig->feed_types[k], &(*arg->mutable_attr())["T"]);
    SetAttrValue(static_cast<int64_t>(k), &(*arg->mutable_attr())["index"]);
    SetAttrValue(feeds[k].first, &(*arg->mutable_attr())["_feed_name"]);
  }
  auto source_name = [&](const Node* n, int index) {
    auto it = fed.find({n->id(), index});
    return it != fed.end() ? arg_names[it->second] : TensorName(n, index);
  };
  for (const auto& n : graph->nodes()) {
    if (!keep[n->id()]) continue;
    tensorflow::NodeDef* nd = def.add_node();
    *nd = n->def();
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge()) {
        const int arg = replacing_arg(e->src);
        nd->add_input(absl::StrCat("^", arg >= 0 ? arg_names[arg] : e->src->name()));
      } else {
        nd->add_input(source_name(e->src, e->src_output));
      }
    }
  }
  for (size_t k = 0; k < fetch_refs.size(); ++k) {
    tensorflow::NodeDef* ret = def.add_node();
    ret->set_name(UniqueName(*graph, absl::StrCat("_retval_", k)));
    ret->set_op("_Retval");
    ret->add_input(source_name(fetch_refs[k].node, fetch_refs[k].index));
    const DataType type = BaseType(fetch_refs[k].node->output_type(fetch_refs[k].index));
    if (type == DT_INVALID) {
      return errors::InvalidArgument("fetch '", fetches[k], "': node '",
                                     fetch_refs[k].node->name(), "' uses unregistered op '",
                                     fetch_refs[k].node->op(), "'");
    }
    SetAttrValue(type, &(*ret->mutable_attr())["T"]);
    SetAttrValue(static_cast<int64_t>(k), &(*ret->mutable_attr())["index"]);
  }

  GraphOptimizerStats stats;
  absl::Status optimized;
  if (optimizer_options_.AnyEnabled()) {
    optimized = OptimizeGraph(optimizer_options_, device_.get(), &def, &stats);
  }
  auto pruned = std::make_unique<Graph>();
  GraphConstructorOptions opts;
  RETURN_IF_ERROR(ConvertGraphDefToGraph(opts, def, pruned.get()));  // a bad signature fails here
  if (!optimized.ok()) {
    // `def` is still a valid graph (the passes that completed applied): run
    // it rather than fail the step over an optimization.
    LOG(WARNING) << "signature " << key << ": graph optimization stopped early, running the "
                 << "graph as far as it got: " << optimized;
  } else if (optimizer_options_.AnyEnabled()) {
    VLOG(1) << "signature " << key << ": " << stats.ToString();
  }
  Executor::Options exec_options;
  exec_options.device = device_.get();
  exec_options.inter_op_pool = inter_op_pool_.get();
  exec_options.function_library = SessionFunctionLibrary(*this);
  ASSIGN_OR_RETURN(sig->executor, Executor::Create(exec_options, std::move(pruned)));

  MutexLock lock(&mu_);
  if (graph_ != graph) return std::shared_ptr<const Signature>(std::move(sig));  // Extended meanwhile
  auto [it, inserted] = signatures_.emplace(key, std::move(sig));
  return it->second;
}

absl::Status Session::Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                          const std::vector<std::string>& fetches,
                          const std::vector<std::string>& targets, std::vector<Tensor>* outputs) {
  return Run(RunOptions(), feeds, fetches, targets, outputs, nullptr);
}

absl::Status Session::Run(const RunOptions& options,
                          const std::vector<std::pair<std::string, Tensor>>& feeds,
                          const std::vector<std::string>& fetches,
                          const std::vector<std::string>& targets, std::vector<Tensor>* outputs,
                          RunMetadata* metadata) {
  if (outputs != nullptr) outputs->clear();
  if (fetches.empty() && targets.empty()) {
    return errors::InvalidArgument("Run needs at least one fetch or target");
  }
  if (!fetches.empty() && outputs == nullptr) {
    return errors::InvalidArgument("Run with fetches needs an outputs vector");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Signature> sig,
                   GetOrCreateSignature(feeds, fetches, targets));
  std::vector<Tensor> args;
  args.reserve(feeds.size());
  const bool check_shapes = FeedShapesChecked();
  for (size_t k = 0; k < feeds.size(); ++k) {
    const Tensor& value = feeds[k].second;
    if (!value.IsInitialized()) {
      return errors::InvalidArgument("feed '", feeds[k].first, "' is an uninitialized tensor");
    }
    if (value.dtype() != sig->feed_types[k]) {
      return errors::InvalidArgument("feed '", feeds[k].first, "' has dtype ",
                                     DataTypeString(value.dtype()), " but the graph expects ",
                                     DataTypeString(sig->feed_types[k]));
    }
    if (check_shapes &&
        !sig->feed_shapes[k].IsCompatibleWith(PartialShape(value.shape()))) {
      return errors::InvalidArgument("cannot feed a value of shape ", value.shape().DebugString(),
                                     " for '", feeds[k].first, "', which has shape ",
                                     sig->feed_shapes[k].DebugString());
    }
    args.push_back(value);
  }
  FunctionCallFrame frame(std::move(args), static_cast<int>(fetches.size()));
  Executor::Args run_args;
  run_args.call_frame = &frame;
  run_args.step_id = next_step_id_.fetch_add(1, std::memory_order_relaxed);
  StepStatsCollector collector;
  if (options.trace) run_args.stats = &collector;
  absl::Status status = sig->executor->Run(run_args);
  if (options.trace && metadata != nullptr) {
    metadata->step_stats = collector.Take(run_args.step_id);
  }
  RETURN_IF_ERROR(status);
  if (outputs != nullptr) RETURN_IF_ERROR(frame.ConsumeRetvals(outputs));
  return absl::OkStatus();
}

}  // namespace recflow
