// MonitoredSession: a Session that owns the training loop's chores, as
// TensorFlow 1.x's tf.compat.v1.train.MonitoredTrainingSession does.
//
//   MonitoredSessionOptions opts;
//   opts.checkpoint_dir = "/models/ctr";   // restore from here, save here
//   opts.save_checkpoint_steps = 1000;
//   std::vector<std::unique_ptr<SessionRunHook>> hooks;
//   hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(10000)));
//   hooks.push_back(std::make_unique<NanLossHook>("loss:0"));
//   ASSIGN_OR_RETURN(auto sess, MonitoredSession::Create(opts, graph_def, std::move(hooks)));
//   while (!sess->ShouldStop()) {
//     absl::Status s = sess->Run({}, {"loss:0"}, {"train_op"}, &out);
//     if (!s.ok() && !sess->ShouldStop()) return s;   // a real error
//   }
//   RETURN_IF_ERROR(sess->Close());                     // final checkpoint
//
// Create, in this order:
//   1. builds a Session over the graph (or takes the StepRunner given);
//   2. runs options.setup(session) (register input pipelines there, so their
//      positions are restored with the variables);
//   3. hooks' Begin();
//   4. creates the graph's hash embedding tables (runs their ops), runs the
//      runner's Start (a distributed worker starts or joins its cluster
//      there), then, as chief, restores the newest checkpoint of
//      checkpoint_dir when there is one (every variable, and the position of
//      every IteratorV2 the graph holds), else runs options.init_target
//      ("init" when the graph has it);
//   5. hooks' AfterCreateSession(session).
// Run(feeds, fetches, targets): every hook's BeforeRun may add fetches,
// feeds and targets and ask for a trace; one step runs it all, and fetches
// the global step after it in the same Session::Run (a read of it ordered
// after the step's increment of it); every hook's AfterRun sees its own
// fetched values and may request a stop. Hooks that persist state
// (SessionRunHook::SavesState: the checkpoint saver) run their AfterRun
// after the others. End of input (OutOfRange, from the step, e.g.
// IteratorGetNext past the last element, or from a hook's BeforeRun, e.g.
// FeedInputHook) stops the session: ShouldStop() becomes true and Run
// returns that status.
// A hook may stop the session before its first step (StopBeforeFirstStep:
// a restored run already at StopAtStepHook's last step): ShouldStop() is
// true right after Create. A session that completed no step (stopped
// before it, or its input ended at once: a restored run whose epochs are
// read) runs no End at Close: nothing happened, nothing is saved or
// evaluated; unless a hook holds state from before the session that is not
// saved yet (HasUnsavedState: a cluster's chief restarted after its workers
// trained past the newest checkpoint).
// Close(): reads the global step, then hooks' End(session, step) (the
// checkpoint saver saves the final step), then the session is closed. After
// a failure, Close keeps what a checkpoint can keep (Note [Saving after a
// failure]). A failed Create runs no End. Not thread-safe: one training loop
// per MonitoredSession.
//
// Note [Saving after a failure]
// TensorFlow's MonitoredSession runs no hook's end() after an exception, so
// everything since the last periodic checkpoint is lost. Here, after a
// failed step or hook (any error but the end of input), Close runs only the
// EndAfterFailure of the hooks that persist state (SavesState: the
// checkpoint saver, an InputPositionHook): the state after the last
// completed step is saved (unless a checkpoint of that step exists), so a run that stops on a data
// error, an evaluation error or a failed kernel resumes where it stopped.
// The failed step itself was cut short: a step that fails in its input
// (IteratorGetNext, the first node) applied nothing; one that fails in a
// kernel after some optimizer updates ran keeps those, as an asynchronous
// ps update would. The exception is a hook that marks the state unsafe
// (SessionRunContext::RequestStopKeepingLastCheckpoint; NanLossHook does on
// a NaN or infinite loss: the step's update has already applied NaN
// gradients): then no state-saving hook runs its AfterRun for that step,
// Close saves nothing and runs no End, and the last good checkpoint stays
// the newest.
#ifndef RECFLOW_TRAIN_MONITORED_SESSION_H_
#define RECFLOW_TRAIN_MONITORED_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/tensor.h"
#include "recflow/proto/graph.pb.h"
#include "recflow/runtime/session.h"
#include "recflow/runtime/step_stats.h"

namespace recflow::train {

using FeedList = std::vector<std::pair<std::string, Tensor>>;

// What a hook adds to the next step.
struct RunArgs {
  FeedList feeds;
  std::vector<std::string> fetches;
  std::vector<std::string> targets;
  bool trace = false;  // record per-kernel step stats (RunValues::metadata)
};

// What a hook gets back: the values of its own fetches, in order.
struct RunValues {
  std::vector<Tensor> results;
  const RunMetadata* metadata = nullptr;  // non-null when someone asked to trace
};

class SessionRunContext {
 public:
  SessionRunContext(Session* session, int64_t global_step)
      : session_(session), global_step_(global_step) {}
  Session* session() const { return session_; }
  // The global step: before the run in BeforeRun, after it in AfterRun (-1
  // when the graph has none).
  int64_t global_step() const { return global_step_; }
  void RequestStop() { stop_requested_ = true; }
  // Stops, and the state after this step must never be saved (it may hold
  // NaNs): Close saves nothing and runs no End (Note [Saving after a
  // failure]).
  void RequestStopKeepingLastCheckpoint() { stop_requested_ = keep_last_checkpoint_ = true; }
  bool stop_requested() const { return stop_requested_; }

 private:
  friend class MonitoredSession;
  Session* session_;
  int64_t global_step_;
  bool stop_requested_ = false;
  bool keep_last_checkpoint_ = false;
};

// A hook around the training loop (tf.train.SessionRunHook). An error from
// a hook stops the loop and is returned by the call that ran it.
class SessionRunHook {
 public:
  virtual ~SessionRunHook() = default;
  virtual absl::Status Begin() { return absl::OkStatus(); }
  virtual absl::Status AfterCreateSession(Session* session, int64_t global_step) {
    return absl::OkStatus();
  }
  // Asked after AfterCreateSession: true stops the session before any step
  // (ShouldStop() is then true at once, and Close runs no End).
  virtual bool StopBeforeFirstStep() const { return false; }
  virtual absl::Status BeforeRun(SessionRunContext* context, RunArgs* args) {
    return absl::OkStatus();
  }
  virtual absl::Status AfterRun(SessionRunContext* context, const RunValues& values) {
    return absl::OkStatus();
  }
  virtual absl::Status End(Session* session, int64_t global_step) { return absl::OkStatus(); }

  // Hooks that persist training state (a checkpoint, an input position)
  // return true: their AfterRun runs after the other hooks' and not after a
  // step a hook found unsafe, and after a failure Close runs their
  // EndAfterFailure instead of any End (Note [Saving after a failure]).
  virtual bool SavesState() const { return false; }
  // What a state-saving hook keeps after a failed step or hook; the global
  // step is the one the model holds now. Default: End.
  virtual absl::Status EndAfterFailure(Session* session, int64_t global_step) {
    return End(session, global_step);
  }
  // True when the state at `global_step` is not saved although this session
  // ran no step (a cluster's chief restarted after the workers trained past
  // its newest checkpoint): Close then runs every hook's End.
  virtual bool HasUnsavedState(int64_t global_step) const { return false; }
};

// What a MonitoredSession runs its steps on: by default a Session of its
// own (MonitoredSession::Create with a GraphDef); a distributed worker runs
// each step through the ps tasks instead (distributed/worker_session.h).
// Called from the training thread only.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // The session hooks, evaluations and the saver see; owned by the runner.
  virtual Session* session() const = 0;
  // Create's step 4, before the chief's restore or init: brings up state
  // that lives elsewhere (a distributed worker starts or joins its cluster).
  virtual absl::Status Start() { return absl::OkStatus(); }
  // One step: args' feeds, fetches and targets (a trace when args.trace,
  // into `metadata`). `results` receives the fetches' values, `global_step`
  // the global step after the step (-1 when there is none).
  virtual absl::Status Run(const RunArgs& args, std::vector<Tensor>* results,
                           RunMetadata* metadata, int64_t* global_step) = 0;
  // The global step now (-1 when there is none).
  virtual absl::StatusOr<int64_t> ReadGlobalStep() = 0;
};

struct MonitoredSessionOptions {
  SessionOptions session;  // for Create with a GraphDef
  // The chief initializes or restores the session's variables; others
  // (workers whose variables live elsewhere, whose StepRunner brings them
  // up) do not.
  bool is_chief = true;
  // Where checkpoints are restored from (the newest, by its `checkpoint`
  // state file) and saved to. Empty: no checkpoints.
  std::string checkpoint_dir;
  // Save every N global steps and/or every S seconds (0: not by that rule).
  // With both 0 and a checkpoint_dir, saves only at Close(). A
  // CheckpointSaverHook is added for these.
  int64_t save_checkpoint_steps = 0;
  double save_checkpoint_secs = 600;
  // Saver settings (directory is checkpoint_dir).
  int max_to_keep = 5;
  // What a checkpoint holds. Empty: GraphSaveables() of the graph (every
  // variable and input iterator).
  std::vector<checkpoint::Saveable> saveables;
  // A checkpoint's input position that another input pipeline saved (a
  // stage's entry missing, e.g. a model trained on files now following a
  // stream) fails the restore, unless this is set: then the model is
  // restored, the input starts at its beginning, and a warning says so.
  bool restart_input_if_state_does_not_fit = false;
  // Hash embedding tables (of the default saveables): full checkpoints
  // carry each table's hash index (TableBundleOptions::save_index), and the
  // restore maps a table that has one instead of inserting its rows
  // (open_in_place; embedding/mapped_rows.h): the first step starts at
  // once, and the rows a step touches are copied into the table as it goes.
  bool open_tables_in_place = false;
  // Added to those (state kept beside the model: an update publisher's
  // sequence, train/update_publisher.h).
  std::vector<checkpoint::Saveable> extra_saveables;
  // Run when there is no checkpoint to restore. Empty: "init" if the graph
  // has such a node, else nothing.
  std::string init_target;
  // Called right after the Session is created, before restore or init.
  std::function<absl::Status(Session*)> setup;
};

class MonitoredSession {
 public:
  static absl::StatusOr<std::unique_ptr<MonitoredSession>> Create(
      MonitoredSessionOptions options, const tensorflow::GraphDef& graph_def,
      std::vector<std::unique_ptr<SessionRunHook>> hooks = {});
  // Steps run on `runner` (options.session is not used).
  static absl::StatusOr<std::unique_ptr<MonitoredSession>> Create(
      MonitoredSessionOptions options, std::unique_ptr<StepRunner> runner,
      std::vector<std::unique_ptr<SessionRunHook>> hooks = {});
  ~MonitoredSession();

  // One step; see the file comment. `outputs` receives the caller's fetches.
  absl::Status Run(const FeedList& feeds, const std::vector<std::string>& fetches,
                   const std::vector<std::string>& targets, std::vector<Tensor>* outputs);
  bool ShouldStop() const { return should_stop_; }
  // Runs the hooks' End once, or after a failure what Note [Saving after a
  // failure] says. Idempotent; the destructor calls it.
  absl::Status Close();
  // Closes without running any hook's End (nothing is saved or evaluated):
  // for a caller that cannot end the run (a chief whose cluster is gone).
  void Abandon() { closed_ = should_stop_ = true; }

  Session* session() const { return runner_->session(); }
  StepRunner* runner() const { return runner_.get(); }
  // The Saver over checkpoint_dir (null without one).
  checkpoint::Saver* saver() const { return saver_.get(); }
  // The checkpoint restored by Create ("" when none was).
  const std::string& restored_from() const { return restored_from_; }
  // Non-empty when the directory's `checkpoint` state file could not be
  // used and restored_from() is the newest intact checkpoint found instead:
  // why (checkpoint::FindLatestCheckpoint's recovery line), for the caller
  // to show.
  const std::string& restore_recovery() const { return restore_recovery_; }
  // True when a hook marked the state after a step as never to be saved
  // (a NaN loss; Note [Saving after a failure]).
  bool state_unsafe_to_save() const { return unsafe_; }
  // True when a hook stopped the session before its first step.
  bool stopped_before_first_step() const { return stopped_before_first_step_; }
  // Steps completed by Run in this session.
  int64_t steps_run() const { return steps_run_; }
  // The global step as of the last step, or as Close read it (-1 when the
  // graph has none).
  int64_t global_step() const { return global_step_; }

 private:
  MonitoredSession() = default;
  static absl::StatusOr<std::unique_ptr<MonitoredSession>> CreateWithRunner(
      MonitoredSessionOptions options, std::unique_ptr<StepRunner> runner,
      std::vector<std::unique_ptr<SessionRunHook>> hooks);

  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<checkpoint::Saver> saver_;
  std::vector<std::unique_ptr<SessionRunHook>> hooks_;
  // hooks_ in AfterRun order: the others first, then those that save state.
  std::vector<size_t> after_run_order_;
  std::string restored_from_;
  std::string restore_recovery_;
  int64_t global_step_ = -1;
  bool should_stop_ = false;
  bool closed_ = false;
  bool started_ = false;  // Create completed
  bool stopped_before_first_step_ = false;
  int64_t steps_run_ = 0;  // completed Run calls
  bool failed_ = false;   // a step or hook failed (not end of input)
  bool unsafe_ = false;   // a hook asked to keep the last checkpoint (NaN)
};

// The saveables of a graph held in `session`: every variable created by
// train::Variable (and optimizer slots; the checkpoint key is the variable's
// node name, as TensorFlow's Saver names it), every hash embedding table
// made by train::HashEmbeddingTable (TableSaveable under the table node's
// name: keys, values, slots, frequencies, versions) and the position of
// every input pipeline read through an IteratorV2 node (key "<node>/iterator_state",
// a string scalar; restoring needs the pipeline registered first). Tables
// save and restore on the session's intra-op pool (when it has one), so
// the saveables must not outlive the session.
// restart_input_if_state_does_not_fit, open_tables_in_place: see
// MonitoredSessionOptions.
absl::StatusOr<std::vector<checkpoint::Saveable>> GraphSaveables(
    Session* session, bool restart_input_if_state_does_not_fit = false,
    bool open_tables_in_place = false);

// Creates the tables of the session graph's HashEmbeddingTableOp nodes
// (embedding::CreateGraphTables) so that they exist before a restore (a
// restore fills existing tables only). MonitoredSession::Create does
// this; call it before restoring with a Saver of your own.
absl::Status CreateHashTables(Session* session);

// Restores the graph's variables and hash tables in `session` from the
// checkpoint at `prefix` (full or incremental; `dir` is its directory), for
// sessions that only evaluate or export: input-pipeline positions are not
// restored, and nothing is saved (a Saver over `dir` does the restore, so
// temporary files of a crashed save there are cleaned up as usual).
absl::Status RestoreModel(Session* session, const std::string& dir, const std::string& prefix);

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_MONITORED_SESSION_H_
