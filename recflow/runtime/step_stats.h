// Per-kernel timing of one step, and its export as a Chrome trace-event
// JSON file (open it in Perfetto, https://ui.perfetto.dev, or
// chrome://tracing): one complete ("ph":"X") event per kernel on the thread
// that ran it, with thread-name metadata so pool threads show by name.
//
//   RunOptions opts;  opts.trace = true;
//   RunMetadata meta;
//   RETURN_IF_ERROR(session->Run(opts, feeds, fetches, targets, &out, &meta));
//   RETURN_IF_ERROR(WriteStringToFile(env, "step.json",
//                                     StepStatsToChromeTrace(meta.step_stats)));
//
// Collecting costs two clock reads and one locked append per kernel; a Run
// without tracing pays one null check per kernel.
#ifndef RECFLOW_RUNTIME_STEP_STATS_H_
#define RECFLOW_RUNTIME_STEP_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "recflow/core/mutex.h"

namespace recflow {

struct NodeExecStats {
  std::string node_name;
  std::string op;
  int64_t start_micros = 0;  // Since the Unix epoch.
  int64_t end_micros = 0;
  int thread_id = 0;         // Small per-process number of the thread.
  std::string thread_name;   // As the thread was named (pool name), or "".
};

struct StepStats {
  int64_t step_id = 0;
  std::vector<NodeExecStats> nodes;  // In completion order.
};

// Thread-safe sink the executor records into.
class StepStatsCollector {
 public:
  void Record(NodeExecStats stats);
  StepStats Take(int64_t step_id);

 private:
  Mutex mu_;
  std::vector<NodeExecStats> nodes_;
};

// Microseconds since the Unix epoch (a monotonic-enough wall clock for
// spans within a step).
int64_t NowMicrosForStats();
// The calling thread's small id and name (cached per thread).
int CurrentThreadIdForStats();
const std::string& CurrentThreadNameForStats();

// {"traceEvents": [...], "displayTimeUnit": "ms"} with one "X" event per
// node (name = node name, cat = op, args {op}), timestamps relative to the
// step's first kernel, and one "thread_name" metadata event per thread.
std::string StepStatsToChromeTrace(const StepStats& stats,
                                   absl::string_view process_name = "recflow");

struct RunOptions {
  bool trace = false;  // Collect per-kernel timings into RunMetadata.
};

struct RunMetadata {
  StepStats step_stats;
};

}  // namespace recflow

#endif  // RECFLOW_RUNTIME_STEP_STATS_H_
