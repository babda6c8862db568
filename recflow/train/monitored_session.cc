#include "recflow/train/monitored_session.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/checkpoint/checkpoint_state.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/embedding/graph_tables.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/resource_mgr.h"
#include "recflow/core/logging.h"
#include "recflow/train/global_step.h"
#include "recflow/train/hooks.h"
#include "recflow/train/table_saveable.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

checkpoint::Saveable IteratorSaveable(ResourceMgr* rm, const Node& node,
                                      bool restart_input_if_state_does_not_fit) {
  ResourceLocation where = NodeResourceLocation(node.def(), rm->default_container());
  auto find = [rm, where]() {
    return rm->Lookup<data::IteratorResource>(where.container, where.name);
  };
  return checkpoint::TensorSaveable(
      absl::StrCat(node.name(), "/iterator_state"),
      [find]() -> absl::StatusOr<Tensor> {
        ASSIGN_OR_RETURN(auto it, find());
        ASSIGN_OR_RETURN(std::string bytes, it->SaveToString());
        return Tensor::Scalar<std::string>(std::move(bytes));
      },
      [find, restart_input_if_state_does_not_fit,
       name = node.name()](const Tensor& t) -> absl::Status {
        if (t.dtype() != DT_STRING || t.NumElements() != 1) {
          return errors::InvalidArgument("iterator state must be a string scalar, got ",
                                         DataTypeString(t.dtype()), " ",
                                         t.shape().DebugString());
        }
        ASSIGN_OR_RETURN(auto it, find());
        absl::Status s = it->RestoreFromString(t.scalar<std::string>());
        // A position of another pipeline (NotFound: a stage's entry is
        // missing), when allowed: the input starts afresh.
        if (s.ok() || !restart_input_if_state_does_not_fit || !absl::IsNotFound(s)) return s;
        LOG(WARNING) << "the checkpoint's position of input '" << name
                     << "' is not one of this input pipeline (" << s.message()
                     << "): the model is restored and the input starts at its beginning";
        return it->Restart();
      });
}

}  // namespace

absl::StatusOr<std::vector<checkpoint::Saveable>> GraphSaveables(
    Session* session, bool restart_input_if_state_does_not_fit, bool open_tables_in_place) {
  std::shared_ptr<const Graph> graph = session->graph();
  ResourceMgr* rm = session->device()->resource_manager();
  std::vector<checkpoint::Saveable> out;
  for (const Output& var : GlobalVariables(*graph)) {
    checkpoint::VarRef ref;
    ref.checkpoint_key = VariableName(var);
    ResourceLocation where = NodeResourceLocation(var.node()->def(), rm->default_container());
    ref.container = std::move(where.container);
    ref.name = std::move(where.name);
    ref.dtype = VariableDtype(var);
    ref.shape = VariableShape(var);
    out.push_back(checkpoint::VarSaveable(rm, std::move(ref)));
  }
  // Every HashEmbeddingTableOp node, the set CreateHashTables creates (not
  // only tables made by train::HashEmbeddingTable: imported graphs too).
  ASSIGN_OR_RETURN(std::vector<embedding::TableNode> tables, embedding::FindGraphTables(*graph, *rm));
  for (embedding::TableNode& table : tables) {
    TableRef ref;
    ref.checkpoint_key = table.node;
    ref.container = std::move(table.container);
    ref.name = std::move(table.name);
    // Saves and restores run between steps: the session's intra-op pool is
    // idle then, and copies the table's chunks in parallel.
    TableSaveableOptions options;
    options.pool = session->device()->intra_op_pool();
    options.save_index = open_tables_in_place;
    options.open_in_place = open_tables_in_place;
    out.push_back(TableSaveable(rm, std::move(ref), options));
  }
  for (const auto& node : graph->nodes()) {
    if (node->op() == "IteratorV2") {
      out.push_back(IteratorSaveable(rm, *node, restart_input_if_state_does_not_fit));
    }
  }
  return out;
}

absl::Status CreateHashTables(Session* session) {
  return embedding::CreateGraphTables(*session->graph(), session->device()->resource_manager())
      .status();
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

// Steps on a Session of its own. The global step after a step is read in
// the step's own Session::Run: Create adds to the graph, for every increment
// of the global step (an AssignAdd of it: what Minimize and the zoo's "train"
// run), a read of the global step with a control input on that increment.
// A step whose targets and fetches run exactly one increment (found once per
// signature, walking the graph as Session prunes it) fetches that read: it
// runs after the increment, and adds nothing else to the step. Other steps
// (none, or several increments) read it with a second run afterwards.
class LocalStepRunner : public StepRunner {
 public:
  static absl::StatusOr<std::unique_ptr<LocalStepRunner>> Create(
      const SessionOptions& options, const tensorflow::GraphDef& graph_def) {
    std::unique_ptr<LocalStepRunner> r(new LocalStepRunner);
    const tensorflow::NodeDef* gs = nullptr;
    for (const auto& n : graph_def.node()) {
      auto mark = n.attr().find(internal::kGlobalStepAttr);
      if (mark != n.attr().end() && mark->second.b()) gs = &n;
    }
    if (gs == nullptr) {
      ASSIGN_OR_RETURN(r->session_, Session::Create(options, graph_def));
      return r;
    }
    tensorflow::GraphDef def = graph_def;
    const std::string gs_node = gs->name();
    const bool resource = gs->op() == "VarHandleOp";
    const tensorflow::AttrValue dtype = gs->attr().at("dtype");
    auto add_read = [&](const std::string& name, const std::string& after) {
      tensorflow::NodeDef* n = def.add_node();
      n->set_name(name);
      n->set_op(resource ? "ReadVariableOp" : "Identity");
      n->add_input(gs_node);
      (*n->mutable_attr())[resource ? "dtype" : "T"] = dtype;
      if (!after.empty()) n->add_input("^" + after);
      return name + ":0";
    };
    r->read_ = add_read(gs_node + "/monitored_read", "");
    const int num_nodes = def.node_size();
    for (int i = 0; i < num_nodes; ++i) {
      const tensorflow::NodeDef& n = def.node(i);
      if ((n.op() != "AssignAdd" && n.op() != "AssignAddVariableOp") || n.input_size() == 0) {
        continue;
      }
      absl::string_view var = n.input(0);
      var = var.substr(0, var.find(':'));
      if (var != gs_node) continue;
      const std::string increment = n.name();
      r->read_after_[increment] =
          add_read(absl::StrCat(gs_node, "/read_after_step_", r->read_after_.size()), increment);
    }
    ASSIGN_OR_RETURN(r->session_, Session::Create(options, def));
    return r;
  }

  Session* session() const override { return session_.get(); }

  absl::Status Run(const RunArgs& args, std::vector<Tensor>* results, RunMetadata* metadata,
                   int64_t* global_step) override {
    const std::string* read = read_.empty() ? nullptr : &ReadAfter(args);
    RunOptions options;
    options.trace = args.trace;
    if (read == nullptr || read->empty()) {
      RETURN_IF_ERROR(session_->Run(options, args.feeds, args.fetches, args.targets, results,
                                    args.trace ? metadata : nullptr));
      if (read == nullptr) {
        *global_step = -1;
        return absl::OkStatus();
      }
      ASSIGN_OR_RETURN(*global_step, ReadGlobalStep());  // the step runs no single increment
      return absl::OkStatus();
    }
    std::vector<std::string> fetches = args.fetches;
    fetches.push_back(*read);
    RETURN_IF_ERROR(session_->Run(options, args.feeds, fetches, args.targets, results,
                                  args.trace ? metadata : nullptr));
    ASSIGN_OR_RETURN(*global_step, ScalarStep(results->back(), read_));
    results->pop_back();
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> ReadGlobalStep() override {
    if (read_.empty()) return int64_t{-1};
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session_->Run({}, {read_}, {}, &out));
    return ScalarStep(out[0], read_);
  }

 private:
  LocalStepRunner() = default;

  // The read after the one increment `args` run ("" when they run none or
  // several), found once per set of feeds, fetches and targets.
  const std::string& ReadAfter(const RunArgs& args) {
    std::string key = absl::StrJoin(args.targets, ",");
    absl::StrAppend(&key, "|", absl::StrJoin(args.fetches, ","), "|");
    for (const auto& feed : args.feeds) absl::StrAppend(&key, feed.first, ",");
    auto [it, inserted] = read_for_.try_emplace(std::move(key));
    if (!inserted) return it->second;
    // Walk back from the targets and the fetched tensors, as Session prunes:
    // a fed tensor cuts the walk (and a fetched one that is fed runs nothing).
    absl::flat_hash_set<std::string> fed;
    for (const auto& feed : args.feeds) fed.insert(CanonicalTensor(feed.first));
    std::shared_ptr<const Graph> graph = session_->graph();
    std::vector<const Node*> stack;
    auto push = [&](const std::string& name) {
      if (const Node* n = graph->FindNode(name); n != nullptr) stack.push_back(n);
    };
    for (const std::string& t : args.targets) push(absl::StartsWith(t, "^") ? t.substr(1) : t);
    for (const std::string& f : args.fetches) {
      if (!fed.contains(CanonicalTensor(f))) push(f.substr(0, f.find(':')));
    }
    absl::flat_hash_set<const Node*> seen;
    std::vector<const std::string*> found;
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (auto r = read_after_.find(n->name()); r != read_after_.end()) found.push_back(&r->second);
      for (const Edge* e : n->in_edges()) {
        if (!e->IsControlEdge() &&
            fed.contains(absl::StrCat(e->src->name(), ":", e->src_output))) {
          continue;
        }
        stack.push_back(e->src);
      }
    }
    if (found.size() == 1) it->second = *found[0];
    return it->second;
  }

  // "x" -> "x:0".
  static std::string CanonicalTensor(absl::string_view name) {
    return name.find(':') == absl::string_view::npos ? absl::StrCat(name, ":0")
                                                     : std::string(name);
  }

  std::unique_ptr<Session> session_;
  std::string read_;  // a plain read of the global step; "" when the graph has none
  absl::flat_hash_map<std::string, std::string> read_after_;  // increment -> its read
  absl::flat_hash_map<std::string, std::string> read_for_;    // run signature -> read
};

}  // namespace

namespace {

// Note [A damaged newest checkpoint]
// FindLatestCheckpoint checks a checkpoint's files, not its bytes: a data
// file damaged on disk (a bad sector, a torn copy) shows only when the
// restore checks each tensor's crc32c. Then the run resumes from the newest
// older checkpoint that restores, saying so (the recovery line), instead
// of failing on every restart while good checkpoints sit beside the bad
// one. Only DataLoss falls back: a missing tensor or a shape mismatch means
// the graph changed, which an older checkpoint does not fix. Each failed
// attempt may have assigned some variables; the one that succeeds assigns
// them all again.
absl::StatusOr<std::string> RestoreNewestGood(checkpoint::Saver* saver, const std::string& dir,
                                              const checkpoint::LatestCheckpointInfo& latest,
                                              std::string* restored_from) {
  absl::Status first = saver->Restore(latest.prefix);
  if (first.ok() || !absl::IsDataLoss(first)) {
    RETURN_IF_ERROR(first);
    *restored_from = latest.prefix;
    return latest.recovery;
  }
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(auto all, checkpoint::ListCheckpoints(env, dir, saver->options().basename));
  std::vector<std::string> damaged = {Basename(latest.prefix)};
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::string& prefix = it->second;
    if (prefix == latest.prefix || !checkpoint::CheckCheckpointIntact(env, prefix).ok()) continue;
    absl::Status s = saver->Restore(prefix);
    if (s.ok()) {
      *restored_from = prefix;
      return absl::StrCat(absl::StrJoin(damaged, ", "), " could not be restored (",
                          first.message(), "); resumed from ", Basename(prefix),
                          ", the newest checkpoint that restores");
    }
    if (!absl::IsDataLoss(s)) return s;
    damaged.push_back(Basename(prefix));
  }
  return errors::DataLoss(first.message(), "; no older checkpoint in ", dir,
                          " restores either (", absl::StrJoin(damaged, ", "),
                          " tried). Move the damaged checkpoints away to start over.");
}

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
      ASSIGN_OR_RETURN(saveables,
                       GraphSaveables(session, options.restart_input_if_state_does_not_fit,
                                  options.open_tables_in_place));
    }
    for (checkpoint::Saveable& extra : options.extra_saveables) {
      saveables.push_back(std::move(extra));
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
        ASSIGN_OR_RETURN(std::string recovery,
                         RestoreNewestGood(ms->saver_.get(), options.checkpoint_dir, *latest,
                                           &ms->restored_from_));
        ms->restore_recovery_ = std::move(recovery);
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
