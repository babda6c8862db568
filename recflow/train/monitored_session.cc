#include "recflow/train/monitored_session.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/core/logging.h"
#include "recflow/train/global_step.h"
#include "recflow/train/hooks.h"
#include "recflow/train/table_saveable.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

// A string attr of a node, "" when absent.
std::string StringAttr(const Node& node, const std::string& name) {
  std::string value;
  if (!GetNodeAttr(AttrSlice(node.def()), name, &value).ok()) return "";
  return value;
}

checkpoint::Saveable IteratorSaveable(ResourceMgr* rm, const Node& node) {
  std::string container = StringAttr(node, "container");
  std::string name = StringAttr(node, "shared_name");
  if (container.empty()) container = rm->default_container();
  if (name.empty()) name = node.name();
  auto find = [rm, container, name]() {
    return rm->Lookup<data::IteratorResource>(container, name);
  };
  return checkpoint::TensorSaveable(
      absl::StrCat(node.name(), "/iterator_state"),
      [find]() -> absl::StatusOr<Tensor> {
        ASSIGN_OR_RETURN(auto it, find());
        ASSIGN_OR_RETURN(std::string bytes, it->SaveToString());
        return Tensor::Scalar<std::string>(std::move(bytes));
      },
      [find](const Tensor& t) -> absl::Status {
        if (t.dtype() != DT_STRING || t.NumElements() != 1) {
          return errors::InvalidArgument("iterator state must be a string scalar, got ",
                                         DataTypeString(t.dtype()), " ",
                                         t.shape().DebugString());
        }
        ASSIGN_OR_RETURN(auto it, find());
        return it->RestoreFromString(t.scalar<std::string>());
      });
}

}  // namespace

absl::StatusOr<std::vector<checkpoint::Saveable>> GraphSaveables(Session* session) {
  std::shared_ptr<const Graph> graph = session->graph();
  ResourceMgr* rm = session->device()->resource_manager();
  std::vector<checkpoint::Saveable> out;
  for (const Output& var : GlobalVariables(*graph)) {
    checkpoint::VarRef ref;
    ref.checkpoint_key = VariableName(var);
    ref.container = StringAttr(*var.node(), "container");
    ref.name = StringAttr(*var.node(), "shared_name");
    if (ref.name.empty()) ref.name = var.node()->name();
    ref.dtype = VariableDtype(var);
    ref.shape = VariableShape(var);
    out.push_back(checkpoint::VarSaveable(rm, std::move(ref)));
  }
  for (const Output& table : HashTables(*graph)) {
    TableRef ref;
    ref.checkpoint_key = table.node()->name();
    ref.container = StringAttr(*table.node(), "container");
    ref.name = StringAttr(*table.node(), "shared_name");
    if (ref.name.empty()) ref.name = table.node()->name();
    // Saves and restores run between steps: the session's intra-op pool is
    // idle then, and copies the table's chunks in parallel.
    TableSaveableOptions options;
    options.pool = session->device()->intra_op_pool();
    out.push_back(TableSaveable(rm, std::move(ref), options));
  }
  for (const auto& node : graph->nodes()) {
    if (node->op() == "IteratorV2") out.push_back(IteratorSaveable(rm, *node));
  }
  return out;
}

absl::Status CreateHashTables(Session* session) {
  std::vector<std::string> targets;
  for (const Output& t : HashTables(*session->graph())) targets.push_back(t.node()->name());
  if (targets.empty()) return absl::OkStatus();
  std::vector<Tensor> unused;
  return session->Run({}, {}, targets, &unused);
}

absl::Status RestoreModel(Session* session, const std::string& dir, const std::string& prefix) {
  RETURN_IF_ERROR(CreateHashTables(session));
  ASSIGN_OR_RETURN(std::vector<checkpoint::Saveable> all, GraphSaveables(session));
  std::vector<checkpoint::Saveable> model;
  for (auto& s : all) {
    if (!absl::EndsWith(s.name, "/iterator_state")) model.push_back(std::move(s));
  }
  checkpoint::SaverOptions so;
  so.directory = dir;
  so.adopt_directory = false;  // the trainer may be saving there
  ASSIGN_OR_RETURN(auto saver, checkpoint::Saver::Create(so, std::move(model)));
  return saver->Restore(prefix);
}

namespace {

absl::StatusOr<int64_t> ScalarStep(const Tensor& t, const std::string& name) {
  if (t.dtype() == DT_INT64 && t.NumElements() == 1) return t.flat<int64_t>()[0];
  if (t.dtype() == DT_INT32 && t.NumElements() == 1) return int64_t{t.flat<int32_t>()[0]};
  return errors::InvalidArgument("global step ", name, " is ", DataTypeString(t.dtype()), " ",
                                 t.shape().DebugString(), "; expected an int64 or int32 scalar");
}

// Steps on a Session of its own. The global step is read in the step's own
// Session::Run by a node added for the purpose (once per set of targets and
// fetches): a read of the global step with control inputs on the step's
// targets and fetched nodes, so it sees the step's increment.
class LocalStepRunner : public StepRunner {
 public:
  static absl::StatusOr<std::unique_ptr<LocalStepRunner>> Create(
      const SessionOptions& options, const tensorflow::GraphDef& graph_def) {
    std::unique_ptr<LocalStepRunner> r(new LocalStepRunner);
    ASSIGN_OR_RETURN(r->session_, Session::Create(options, graph_def));
    if (auto gs = GetGlobalStep(*r->session_->graph()); gs.ok()) {
      r->global_step_node_ = gs->node()->name();
      r->global_step_name_ = absl::StrCat(gs->node()->name(), ":", gs->index());
      r->global_step_dtype_ = VariableDtype(*gs);
      r->global_step_is_resource_ = IsResourceVariable(*gs);
    }
    return r;
  }

  Session* session() const override { return session_.get(); }

  absl::Status Run(const RunArgs& args, std::vector<Tensor>* results, RunMetadata* metadata,
                   int64_t* global_step) override {
    std::vector<std::string> fetches = args.fetches;
    std::string read;
    if (!global_step_name_.empty()) {
      ASSIGN_OR_RETURN(read, ReadAfter(args));
      fetches.push_back(read);
    }
    RunOptions options;
    options.trace = args.trace;
    RETURN_IF_ERROR(session_->Run(options, args.feeds, fetches, args.targets, results,
                                  args.trace ? metadata : nullptr));
    *global_step = -1;
    if (!read.empty()) {
      ASSIGN_OR_RETURN(*global_step, ScalarStep(results->back(), global_step_name_));
      results->pop_back();
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> ReadGlobalStep() override {
    if (global_step_name_.empty()) return int64_t{-1};
    ASSIGN_OR_RETURN(std::string read, ReadAfter({}));
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session_->Run({}, {read}, {}, &out));
    return ScalarStep(out[0], global_step_name_);
  }

 private:
  LocalStepRunner() = default;

  // The node reading the global step after `args`' targets and fetched
  // nodes (those not fed: a control edge to a fed node would run it).
  absl::StatusOr<std::string> ReadAfter(const RunArgs& args) {
    std::vector<std::string> after = args.targets;
    for (const std::string& f : args.fetches) {
      absl::string_view node = f;
      if (!node.empty() && node[0] == '^') node.remove_prefix(1);
      node = node.substr(0, node.find(':'));
      bool fed = false;
      for (const auto& [name, value] : args.feeds) {
        fed = fed || absl::string_view(name).substr(0, name.find(':')) == node;
      }
      if (!fed) after.emplace_back(node);
    }
    std::sort(after.begin(), after.end());
    after.erase(std::unique(after.begin(), after.end()), after.end());
    const std::string key = absl::StrJoin(after, ",");
    if (auto it = reads_.find(key); it != reads_.end()) return it->second;
    tensorflow::GraphDef def;
    auto* n = def.add_node();
    n->set_name(absl::StrCat(global_step_node_, "/read_after_step_", reads_.size()));
    n->add_input(global_step_name_);
    const DataType dtype = global_step_dtype_;
    if (global_step_is_resource_) {
      n->set_op("ReadVariableOp");
      (*n->mutable_attr())["dtype"].set_type(static_cast<tensorflow::DataType>(dtype));
    } else {
      n->set_op("Identity");
      (*n->mutable_attr())["T"].set_type(static_cast<tensorflow::DataType>(dtype));
    }
    for (const std::string& a : after) n->add_input(absl::StrCat("^", a));
    RETURN_IF_ERROR(session_->Extend(def));
    return reads_[key] = n->name() + ":0";
  }

  std::unique_ptr<Session> session_;
  // The graph's global step (Extend replaces the graph: names, not nodes).
  std::string global_step_node_;
  std::string global_step_name_;  // "node:index"; "" when the graph has none
  DataType global_step_dtype_ = DT_INT64;
  bool global_step_is_resource_ = false;
  absl::flat_hash_map<std::string, std::string> reads_;  // sorted nodes -> read
};

}  // namespace

absl::StatusOr<std::unique_ptr<MonitoredSession>> MonitoredSession::Create(
    MonitoredSessionOptions options, const tensorflow::GraphDef& graph_def,
    std::vector<std::unique_ptr<SessionRunHook>> hooks) {
  ASSIGN_OR_RETURN(std::unique_ptr<LocalStepRunner> runner,
                   LocalStepRunner::Create(options.session, graph_def));
  return CreateWithRunner(std::move(options), std::move(runner), std::move(hooks));
}

absl::StatusOr<std::unique_ptr<MonitoredSession>> MonitoredSession::Create(
    MonitoredSessionOptions options, std::unique_ptr<StepRunner> runner,
    std::vector<std::unique_ptr<SessionRunHook>> hooks) {
  if (runner == nullptr) return errors::InvalidArgument("MonitoredSession: no step runner");
  return CreateWithRunner(std::move(options), std::move(runner), std::move(hooks));
}

absl::StatusOr<std::unique_ptr<MonitoredSession>> MonitoredSession::CreateWithRunner(
    MonitoredSessionOptions options, std::unique_ptr<StepRunner> runner,
    std::vector<std::unique_ptr<SessionRunHook>> hooks) {
  std::unique_ptr<MonitoredSession> ms(new MonitoredSession);
  ms->runner_ = std::move(runner);
  Session* session = ms->runner_->session();
  std::shared_ptr<const Graph> graph = session->graph();
  if (options.setup) RETURN_IF_ERROR(options.setup(session));
  // Create the hash embedding tables (their ops make them from their attrs)
  // so that a restore has tables to fill.
  RETURN_IF_ERROR(CreateHashTables(session));

  if (!options.checkpoint_dir.empty()) {
    std::vector<checkpoint::Saveable> saveables = std::move(options.saveables);
    if (saveables.empty()) {
      ASSIGN_OR_RETURN(saveables, GraphSaveables(session));
    }
    checkpoint::SaverOptions so;
    so.directory = options.checkpoint_dir;
    so.max_to_keep = options.max_to_keep;
    ASSIGN_OR_RETURN(ms->saver_, checkpoint::Saver::Create(so, std::move(saveables)));
    if (options.save_checkpoint_steps > 0 || options.save_checkpoint_secs > 0 ||
        options.is_chief) {
      hooks.push_back(std::make_unique<CheckpointSaverHook>(
          ms->saver_.get(), options.save_checkpoint_steps, options.save_checkpoint_secs));
    }
  }
  ms->hooks_ = std::move(hooks);
  for (size_t i = 0; i < ms->hooks_.size(); ++i) {
    if (!ms->hooks_[i]->SavesState()) ms->after_run_order_.push_back(i);
  }
  for (size_t i = 0; i < ms->hooks_.size(); ++i) {
    if (ms->hooks_[i]->SavesState()) ms->after_run_order_.push_back(i);
  }
  for (auto& hook : ms->hooks_) RETURN_IF_ERROR(hook->Begin());

  RETURN_IF_ERROR(ms->runner_->Start());
  if (options.is_chief) {
    bool restored = false;
    if (ms->saver_ != nullptr) {
      auto latest = checkpoint::FindLatestCheckpoint(Env::Default(), options.checkpoint_dir,
                                                     ms->saver_->options().basename);
      if (latest.ok()) {
        RETURN_IF_ERROR(ms->saver_->Restore(latest->prefix));
        ms->restored_from_ = latest->prefix;
        ms->restore_recovery_ = latest->recovery;
        restored = true;
      } else if (!absl::IsNotFound(latest.status())) {
        return latest.status();  // never a fresh start beside checkpoints
      }
    }
    if (!restored) {
      std::string init = options.init_target;
      if (init.empty() && graph->FindNode("init") != nullptr) init = "init";
      if (!init.empty()) {
        std::vector<Tensor> unused;
        RETURN_IF_ERROR(session->Run({}, {}, {init}, &unused));
      }
    }
  }
  ASSIGN_OR_RETURN(ms->global_step_, ms->runner_->ReadGlobalStep());
  for (auto& hook : ms->hooks_) {
    RETURN_IF_ERROR(hook->AfterCreateSession(session, ms->global_step_));
  }
  for (auto& hook : ms->hooks_) {
    if (hook->StopBeforeFirstStep()) ms->should_stop_ = ms->stopped_before_first_step_ = true;
  }
  ms->started_ = true;
  return ms;
}

MonitoredSession::~MonitoredSession() {
  if (started_ && !closed_) {
    absl::Status s = Close();
    if (!s.ok()) LOG(WARNING) << "MonitoredSession closed with an error: " << s;
  }
}

absl::Status MonitoredSession::Run(const FeedList& feeds, const std::vector<std::string>& fetches,
                                   const std::vector<std::string>& targets,
                                   std::vector<Tensor>* outputs) {
  if (closed_) return errors::FailedPrecondition("Run on a closed MonitoredSession");
  SessionRunContext ctx(session(), global_step_);
  std::vector<RunArgs> extra(hooks_.size());
  RunArgs all{feeds, fetches, targets, false};
  std::vector<size_t> offsets(hooks_.size());
  for (size_t i = 0; i < hooks_.size(); ++i) {
    if (absl::Status hs = hooks_[i]->BeforeRun(&ctx, &extra[i]); !hs.ok()) {
      should_stop_ = true;
      if (!absl::IsOutOfRange(hs)) failed_ = true;  // a hook feeding the input may end it
      return hs;
    }
    offsets[i] = all.fetches.size();
    for (auto& f : extra[i].feeds) all.feeds.push_back(std::move(f));
    for (auto& f : extra[i].fetches) all.fetches.push_back(f);
    for (auto& t : extra[i].targets) all.targets.push_back(std::move(t));
    all.trace |= extra[i].trace;
  }
  RunMetadata metadata;
  std::vector<Tensor> results;
  int64_t step = -1;
  absl::Status s = runner_->Run(all, &results, &metadata, &step);
  if (absl::IsOutOfRange(s)) {
    should_stop_ = true;  // end of input
    return s;
  }
  if (!s.ok()) {
    should_stop_ = failed_ = true;
    return s;
  }
  global_step_ = step;
  ctx.global_step_ = global_step_;
  outputs->assign(results.begin(), results.begin() + fetches.size());
  for (size_t i : after_run_order_) {
    // The state after a step a hook found unsafe (a NaN loss) is never
    // saved, not even by the periodic rule.
    if (unsafe_ && hooks_[i]->SavesState()) continue;
    RunValues values;
    values.results.assign(results.begin() + offsets[i],
                          results.begin() + offsets[i] + extra[i].fetches.size());
    values.metadata = all.trace ? &metadata : nullptr;
    absl::Status hs = hooks_[i]->AfterRun(&ctx, values);
    unsafe_ |= ctx.keep_last_checkpoint_;
    if (!hs.ok()) {
      should_stop_ = failed_ = true;
      return hs;
    }
  }
  if (ctx.stop_requested()) should_stop_ = true;
  ++steps_run_;
  return absl::OkStatus();
}

absl::Status MonitoredSession::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  should_stop_ = true;
  // Note [Saving after a failure].
  if (!started_ || unsafe_) return absl::OkStatus();
  // The step the model holds now (a failed step may have moved it; in a
  // cluster, other workers have).
  const int64_t step = runner_->ReadGlobalStep().value_or(global_step_);
  global_step_ = step;
  absl::Status first;
  if (failed_) {
    for (auto& hook : hooks_) {
      if (!hook->SavesState()) continue;
      absl::Status s = hook->EndAfterFailure(session(), step);
      if (first.ok() && !s.ok()) first = s;
    }
    return first;
  }
  bool unsaved = steps_run_ > 0;
  for (auto& hook : hooks_) unsaved = unsaved || hook->HasUnsavedState(step);
  if (!unsaved) return absl::OkStatus();  // nothing happened: nothing to end
  for (auto& hook : hooks_) {
    absl::Status s = hook->End(session(), step);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

}  // namespace recflow::train
