#include "recflow/train/monitored_session.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/embedding/graph_tables.h"
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

absl::StatusOr<std::unique_ptr<MonitoredSession>> MonitoredSession::Create(
    MonitoredSessionOptions options, const tensorflow::GraphDef& graph_def,
    std::vector<std::unique_ptr<SessionRunHook>> hooks) {
  std::unique_ptr<MonitoredSession> ms(new MonitoredSession);
  ASSIGN_OR_RETURN(ms->session_, Session::Create(options.session, graph_def));
  std::shared_ptr<const Graph> graph = ms->session_->graph();
  if (auto gs = GetGlobalStep(*graph); gs.ok()) {
    ms->global_step_tensor_ = absl::StrCat(gs->node()->name(), ":", gs->index());
    if (IsResourceVariable(*gs)) {
      // A handle: read it through a ReadVariableOp added for the purpose.
      tensorflow::GraphDef read;
      auto* n = read.add_node();
      n->set_name(absl::StrCat(gs->node()->name(), "/monitored_read"));
      n->set_op("ReadVariableOp");
      n->add_input(ms->global_step_tensor_);
      (*n->mutable_attr())["dtype"].set_type(static_cast<tensorflow::DataType>(VariableDtype(*gs)));
      RETURN_IF_ERROR(ms->session_->Extend(read));
      ms->global_step_tensor_ = n->name() + ":0";
    }
  }
  if (options.setup) RETURN_IF_ERROR(options.setup(ms->session_.get()));
  // Create the hash embedding tables (their ops make them from their attrs)
  // so that a restore has tables to fill.
  RETURN_IF_ERROR(CreateHashTables(ms->session_.get()));

  if (!options.checkpoint_dir.empty()) {
    std::vector<checkpoint::Saveable> saveables = std::move(options.saveables);
    if (saveables.empty()) {
      ASSIGN_OR_RETURN(saveables, GraphSaveables(ms->session_.get()));
    }
    checkpoint::SaverOptions so;
    so.directory = options.checkpoint_dir;
    so.max_to_keep = options.max_to_keep;
    ASSIGN_OR_RETURN(ms->saver_, checkpoint::Saver::Create(so, std::move(saveables)));
    if (options.save_checkpoint_steps > 0 || options.save_checkpoint_secs > 0 ||
        options.is_chief) {
      hooks.push_back(std::make_unique<CheckpointSaverHook>(
          ms->saver_.get(), options.save_checkpoint_steps, options.save_checkpoint_secs));
      ms->checkpoint_saver_hook_ = hooks.back().get();
    }
  }
  ms->hooks_ = std::move(hooks);
  for (auto& hook : ms->hooks_) RETURN_IF_ERROR(hook->Begin());

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
        RETURN_IF_ERROR(ms->session_->Run({}, {}, {init}, &unused));
      }
    }
  }
  ASSIGN_OR_RETURN(ms->global_step_, ms->ReadGlobalStep());
  for (auto& hook : ms->hooks_) {
    RETURN_IF_ERROR(hook->AfterCreateSession(ms->session_.get(), ms->global_step_));
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

absl::StatusOr<int64_t> MonitoredSession::ReadGlobalStep() {
  if (global_step_tensor_.empty()) return int64_t{-1};
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session_->Run({}, {global_step_tensor_}, {}, &out));
  if (out[0].dtype() == DT_INT64) return out[0].scalar<int64_t>();
  if (out[0].dtype() == DT_INT32) return int64_t{out[0].scalar<int32_t>()};
  return errors::InvalidArgument("global step ", global_step_tensor_, " has dtype ",
                                 DataTypeString(out[0].dtype()), "; expected int64 or int32");
}

absl::Status MonitoredSession::Run(const FeedList& feeds, const std::vector<std::string>& fetches,
                                   const std::vector<std::string>& targets,
                                   std::vector<Tensor>* outputs) {
  if (closed_) return errors::FailedPrecondition("Run on a closed MonitoredSession");
  SessionRunContext ctx(session_.get(), global_step_);
  std::vector<RunArgs> extra(hooks_.size());
  RunArgs all{feeds, fetches, targets, false};
  std::vector<size_t> offsets(hooks_.size());
  for (size_t i = 0; i < hooks_.size(); ++i) {
    if (absl::Status hs = hooks_[i]->BeforeRun(&ctx, &extra[i]); !hs.ok()) {
      should_stop_ = failed_ = true;
      return hs;
    }
    offsets[i] = all.fetches.size();
    for (auto& f : extra[i].feeds) all.feeds.push_back(f);
    for (auto& f : extra[i].fetches) all.fetches.push_back(f);
    for (auto& t : extra[i].targets) all.targets.push_back(t);
    all.trace |= extra[i].trace;
  }
  RunOptions run_options;
  run_options.trace = all.trace;
  RunMetadata metadata;
  std::vector<Tensor> results;
  absl::Status s = session_->Run(run_options, all.feeds, all.fetches, all.targets, &results,
                                 all.trace ? &metadata : nullptr);
  if (absl::IsOutOfRange(s)) {
    should_stop_ = true;  // end of input
    return s;
  }
  if (!s.ok()) {
    should_stop_ = failed_ = true;
    return s;
  }
  absl::StatusOr<int64_t> step = ReadGlobalStep();
  if (!step.ok()) {
    should_stop_ = failed_ = true;
    return step.status();
  }
  global_step_ = *step;
  ctx.global_step_ = global_step_;
  outputs->assign(results.begin(), results.begin() + fetches.size());
  for (size_t i = 0; i < hooks_.size(); ++i) {
    // The state after a step a hook found unsafe (a NaN loss) is never
    // saved, not even by the periodic rule (the session's saver hook comes
    // after the caller's hooks).
    if (unsafe_ && hooks_[i].get() == checkpoint_saver_hook_) continue;
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
  if (failed_) {
    if (checkpoint_saver_hook_ == nullptr) return absl::OkStatus();
    // The step the variables hold now (a failed step may have moved it).
    const int64_t step = ReadGlobalStep().value_or(global_step_);
    return checkpoint_saver_hook_->End(session_.get(), step);
  }
  if (steps_run_ == 0) return absl::OkStatus();  // nothing happened: nothing to end
  absl::Status first;
  for (auto& hook : hooks_) {
    absl::Status s = hook->End(session_.get(), global_step_);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

}  // namespace recflow::train
