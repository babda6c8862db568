#include "recflow/runtime/function_library_runtime.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/framework/function_instantiation.h"
#include "recflow/runtime/call_frame.h"
#include "recflow/runtime/executor.h"

namespace recflow {

struct LocalFunctionLibraryRuntime::Item {
  std::string name;  // CanonicalCallName, for messages
  std::vector<DataType> arg_types;
  std::vector<DataType> ret_types;
  std::unique_ptr<Executor> executor;
};

namespace {

// The instantiations being built on this thread, innermost last: building
// one creates the kernels of its body, and a call kernel instantiates its
// callee right then, on this thread. Finding a function already on the
// stack means it calls itself.
struct Building {
  const void* runtime;
  std::string function;
};
thread_local std::vector<Building> building;

class BuildingScope {
 public:
  BuildingScope(const void* runtime, std::string function) {
    building.push_back({runtime, std::move(function)});
  }
  ~BuildingScope() { building.pop_back(); }
};

std::string SerializeDeterministic(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

// Same name and attrs (values compared exactly) give the same key.
std::string CacheKey(const tensorflow::NameAttrList& func) {
  std::vector<std::string> names;
  for (const auto& [name, value] : func.attr()) names.push_back(name);
  std::sort(names.begin(), names.end());
  std::string key = func.name();
  for (const std::string& name : names) {
    absl::StrAppend(&key, "\n", name, "=", SerializeDeterministic(func.attr().at(name)));
  }
  return key;
}

std::string TypesString(const std::vector<DataType>& types) {
  std::vector<std::string> parts;
  for (DataType t : types) parts.push_back(DataTypeString(t));
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

}  // namespace

LocalFunctionLibraryRuntime::LocalFunctionLibraryRuntime(const Options& options)
    : options_(options) {}

LocalFunctionLibraryRuntime::~LocalFunctionLibraryRuntime() = default;

absl::Status LocalFunctionLibraryRuntime::AddLibrary(
    const tensorflow::FunctionDefLibrary& library) {
  MutexLock lock(&mu_);
  tensorflow::FunctionDefLibrary merged = library_;
  RETURN_IF_ERROR(MergeFunctionLibrary(library, &merged));
  for (int i = library_.function_size(); i < merged.function_size(); ++i) {
    const tensorflow::FunctionDef& f = merged.function(i);
    functions_[f.signature().name()] = std::make_unique<tensorflow::FunctionDef>(f);
  }
  library_ = std::move(merged);
  return absl::OkStatus();
}

tensorflow::FunctionDefLibrary LocalFunctionLibraryRuntime::ToProto() const {
  MutexLock lock(&mu_);
  return library_;
}

const tensorflow::FunctionDef* LocalFunctionLibraryRuntime::Find(absl::string_view name) const {
  MutexLock lock(&mu_);
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : it->second.get();
}

absl::StatusOr<FunctionLibraryRuntime::Handle> LocalFunctionLibraryRuntime::Instantiate(
    const tensorflow::NameAttrList& func) {
  const std::string key = CacheKey(func);
  {
    MutexLock lock(&mu_);
    if (auto it = handles_.find(key); it != handles_.end()) return it->second;
  }
  const tensorflow::FunctionDef* fdef = Find(func.name());
  if (fdef == nullptr) {
    std::vector<std::string> names;
    {
      MutexLock lock(&mu_);
      for (const auto& f : library_.function()) names.push_back(f.signature().name());
    }
    std::sort(names.begin(), names.end());
    return errors::NotFound("function '", func.name(), "' is not in the graph's library (",
                            names.empty() ? "which is empty" : "it has: " +
                                                                   absl::StrJoin(names, ", "),
                            ")");
  }
  std::vector<std::string> chain;
  bool recursive = false;
  for (const Building& b : building) {
    if (b.runtime != this) continue;
    chain.push_back(b.function);
    recursive |= b.function == func.name();
  }
  if (recursive) {
    chain.push_back(func.name());
    return errors::InvalidArgument("function '", func.name(), "' calls itself (",
                                   absl::StrJoin(chain, " -> "),
                                   "); recursive functions are not supported");
  }
  BuildingScope scope(this, func.name());

  auto item = std::make_unique<Item>();
  item->name = CanonicalCallName(func);
  ASSIGN_OR_RETURN(InstantiatedFunction inst,
                   InstantiateFunction(*fdef, func.attr(), [this](absl::string_view name) {
                     return Find(name);
                   }));
  item->arg_types = std::move(inst.arg_types);
  item->ret_types = std::move(inst.ret_types);
  if (options_.optimizer.AnyEnabled()) {
    // As in a session: a pass that stops early leaves a valid graph to run.
    GraphOptimizerStats stats;
    absl::Status s = OptimizeGraph(options_.optimizer, options_.device, &inst.graph, &stats);
    if (!s.ok()) VLOG(1) << "function " << item->name << ": optimization stopped early: " << s;
  }
  auto graph = std::make_unique<Graph>();
  GraphConstructorOptions opts;
  opts.allow_unknown_ops = false;
  RETURN_IF_ERROR(errors::Annotate(ConvertGraphDefToGraph(opts, inst.graph, graph.get()),
                                   absl::StrCat("function '", item->name, "'")));
  Executor::Options exec_options;
  exec_options.device = options_.device;
  exec_options.inter_op_pool = nullptr;  // the body runs on the caller's thread
  exec_options.function_library = this;
  auto executor = Executor::Create(exec_options, std::move(graph));
  if (!executor.ok()) {
    return errors::Annotate(executor.status(), absl::StrCat("function '", item->name, "'"));
  }
  item->executor = *std::move(executor);

  MutexLock lock(&mu_);
  // Another thread may have built the same call meanwhile: keep the first.
  if (auto it = handles_.find(key); it != handles_.end()) return it->second;
  const Handle handle = static_cast<Handle>(items_.size());
  items_.push_back(std::move(item));
  handles_[key] = handle;
  return handle;
}

const LocalFunctionLibraryRuntime::Item* LocalFunctionLibraryRuntime::GetItem(
    Handle handle) const {
  MutexLock lock(&mu_);
  if (handle < 0 || handle >= static_cast<Handle>(items_.size())) return nullptr;
  return items_[handle].get();
}

const std::vector<DataType>& LocalFunctionLibraryRuntime::ArgTypes(Handle handle) const {
  static const auto* const kEmpty = new std::vector<DataType>;
  const Item* item = GetItem(handle);
  return item == nullptr ? *kEmpty : item->arg_types;
}

const std::vector<DataType>& LocalFunctionLibraryRuntime::RetTypes(Handle handle) const {
  static const auto* const kEmpty = new std::vector<DataType>;
  const Item* item = GetItem(handle);
  return item == nullptr ? *kEmpty : item->ret_types;
}

absl::Status LocalFunctionLibraryRuntime::Run(Handle handle, std::vector<Tensor> args,
                                              std::vector<Tensor>* rets) {
  const Item* item = GetItem(handle);
  if (item == nullptr) {
    return errors::InvalidArgument("function handle ", handle, " was not made by Instantiate");
  }
  bool types_ok = args.size() == item->arg_types.size();
  for (size_t i = 0; types_ok && i < args.size(); ++i) {
    types_ok = args[i].IsInitialized() && args[i].dtype() == item->arg_types[i];
  }
  if (!types_ok) {
    std::vector<DataType> given;
    for (const Tensor& t : args) given.push_back(t.IsInitialized() ? t.dtype() : DT_INVALID);
    return errors::InvalidArgument("function '", item->name, "' takes ", item->arg_types.size(),
                                   " argument(s) ", TypesString(item->arg_types),
                                   " but was called with ", args.size(), " ",
                                   TypesString(given));
  }
  FunctionCallFrame frame(std::move(args), static_cast<int>(item->ret_types.size()));
  Executor::Args run_args;
  run_args.call_frame = &frame;
  run_args.step_id = next_step_id_.fetch_add(1, std::memory_order_relaxed);
  absl::Status s = item->executor->Run(run_args);
  if (!s.ok()) return errors::Annotate(s, absl::StrCat("function '", item->name, "'"));
  return frame.ConsumeRetvals(rets);
}

int LocalFunctionLibraryRuntime::num_instantiations() const {
  MutexLock lock(&mu_);
  return static_cast<int>(items_.size());
}

absl::StatusOr<tensorflow::GraphDef> LocalFunctionLibraryRuntime::InstantiatedGraph(
    Handle handle) const {
  const Item* item = GetItem(handle);
  if (item == nullptr) return errors::InvalidArgument("unknown function handle ", handle);
  tensorflow::GraphDef def;
  item->executor->graph().ToGraphDef(&def);
  return def;
}

}  // namespace recflow
