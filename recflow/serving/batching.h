// Request batching for the model server: a shared batch scheduler in the
// manner of TF Serving's SharedBatchScheduler + BatchingSession, configured
// by its BatchingParameters (--batching_parameters_file).
//
//   ASSIGN_OR_RETURN(auto scheduler, BatchScheduler::Create(options));
//   // From many request threads at once:
//   ASSIGN_OR_RETURN(auto outputs,
//       scheduler->Run("half_plus_two/123/serving_default", "half_plus_two",
//                      {{"x", x}},   // x is [n, 1]: n rows
//                      [&](const std::map<std::string, Tensor>& batch) {
//                        return RunSignature(bundle, "serving_default", batch);
//                      }));
//   // outputs["y"] holds exactly this caller's n rows.
//
// Semantics:
//   - One queue per (queue name, input keys, dtypes and dims after the
//     first). The caller's queue name must identify what `run` computes (the
//     server uses model, version, signature and output filter), so tasks in
//     one queue can share a run. A task is one call's inputs; its size is
//     their dim 0, which every input must share (a call whose inputs are
//     scalars, disagree on dim 0, have 0 rows, or hold non-numeric,
//     non-string dtypes is run at once, unbatched). Ragged features, as
//     recflow exports take them, batch too: a pair "F/ids" int64 [nnz] +
//     "F/row_splits" int64 [rows + 1] (starting at 0, non-decreasing,
//     ending at nnz) is `rows` rows; the ids are concatenated and
//     the row_splits offset by the ids before them (padding rows are empty
//     bags).
//   - A queue holds at most max_enqueued_batches batches of at most
//     max_batch_size rows; a task goes into the newest batch when it fits,
//     else opens a new batch. When that would exceed max_enqueued_batches the
//     call fails at once with Unavailable ("batch queue full for model M: N
//     batches enqueued"). A task larger than max_batch_size fails with
//     InvalidArgument naming the limit (TF Serving's behaviour without
//     enable_large_batch_splitting; not split).
//   - A batch is run when it is full, when a newer batch exists behind it,
//     or batch_timeout_micros after its first task arrived, by one of
//     num_batch_threads threads (oldest ready batch first across queues).
//   - Inputs are concatenated along dim 0 and, when allowed_batch_sizes is
//     set, padded up to the next allowed size by repeating the first row;
//     `run` of the batch's first task runs once; every output is split back
//     along dim 0. When an output has no batch dimension (a scalar, or dim 0
//     different from the batch's rows) the batch's tasks are re-run one by
//     one, unbatched, so every caller still gets exactly its own answer.
//   - pad_variable_length_inputs is not implemented (Create refuses it).
//
// Metrics (when options.metrics is set): histogram
// recflow_serving_batch_size{model} (rows per run, before padding) and gauge
// recflow_serving_batch_queue_depth{model} (tasks waiting).
//
// Shutdown. Shutdown() runs every queued batch at once, without waiting for
// its timeout, and joins the batch threads; Run calls made after it began
// run at once, unbatched. A server calls it first when it stops, so that
// requests waiting for a batch are answered instead of holding the
// shutdown up for batch_timeout_micros. The destructor calls it.
//
// Thread-safe. REQUIRES: no Run call starts after the destructor begins.
#ifndef RECFLOW_SERVING_BATCHING_H_
#define RECFLOW_SERVING_BATCHING_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"
#include "recflow/core/tensor.h"
#include "recflow/proto/session_bundle_config.pb.h"
#include "recflow/serving/metrics.h"

namespace recflow::serving {

// The longest batch_timeout_micros accepted: one minute. TF Serving sets no
// bound; its examples use a few milliseconds. A batch that waits longer than
// any client would is a mistake (e.g. 9223372036854775807 meaning "never").
inline constexpr int64_t kMaxBatchTimeoutMicros = 60'000'000;

struct BatchingOptions {
  // Defaults are TF Serving's SharedBatchScheduler defaults.
  int64_t max_batch_size = 1000;
  int64_t batch_timeout_micros = 0;  // 0 .. kMaxBatchTimeoutMicros
  int64_t max_enqueued_batches = 10;
  int num_batch_threads = 0;  // 0: one per schedulable CPU
  // Increasing; the last must equal max_batch_size. Empty: no padding.
  std::vector<int64_t> allowed_batch_sizes;
  MetricsRegistry* metrics = nullptr;  // Not owned; may be null.
  Env* env = Env::Default();           // the clock. Not owned.
};

// Options from TF Serving's BatchingParameters (unset fields keep the
// defaults above). InvalidArgument for num_batch_threads above kMaxThreads;
// Unimplemented for pad_variable_length_inputs. The other values are
// checked by BatchScheduler::Create, which refuses them naming the field
// (batch_timeout_micros above kMaxBatchTimeoutMicros, allowed_batch_sizes
// not increasing or not ending at max_batch_size, ...).
absl::StatusOr<BatchingOptions> BatchingOptionsFromProto(
    const tensorflow::serving::BatchingParameters& params);

class BatchScheduler {
 public:
  using Tensors = std::map<std::string, Tensor>;
  using RunFn = std::function<absl::StatusOr<Tensors>(const Tensors& inputs)>;

  // InvalidArgument naming the field when the options are out of range or
  // inconsistent (see BatchingOptionsFromProto); ResourceExhausted when a batch thread cannot
  // start.
  static absl::StatusOr<std::unique_ptr<BatchScheduler>> Create(
      const BatchingOptions& options);
  ~BatchScheduler();

  // Runs the queued batches now and joins the batch threads (see the top of
  // this file). Idempotent; may be called from any thread but a batch
  // thread.
  void Shutdown();

  // Runs `inputs` as part of a batch (see the top of this file); blocks until
  // its outputs are ready. `model` names the model in errors and metrics.
  absl::StatusOr<Tensors> Run(const std::string& queue,
                              const std::string& model, const Tensors& inputs,
                              RunFn run);

  // Whether `inputs` can join a batch, and its size (rows) when it can.
  static bool Batchable(const Tensors& inputs, int64_t* rows);

  const BatchingOptions& options() const { return options_; }

  // Implementation details follow.
 private:
  struct Task;
  struct Batch;
  struct Queue {
    std::string model;
    std::deque<std::unique_ptr<Batch>> batches;
  };

  explicit BatchScheduler(const BatchingOptions& options);
  void WorkerLoop();
  void Process(Batch* batch);
  int64_t PaddedSize(int64_t rows) const;
  void AddQueueDepth(const std::string& model, double delta);

  const BatchingOptions options_;
  Histogram* batch_size_ = nullptr;  // Not owned.
  Gauge* queue_depth_ = nullptr;     // Not owned.
  Mutex mu_;
  std::condition_variable cv_;  // batches added, or stopping
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, Queue> queues_ ABSL_GUARDED_BY(mu_);
  Mutex join_mu_;                     // serializes Shutdown's joins
  std::vector<std::thread> threads_;  // filled by Create, joined by Shutdown
};

// Concatenates tensors of one dtype along dim 0, then repeats the first
// row until there are `padded_rows` rows (>= the sum). REQUIRES: the same
// dtype (numeric or string) and dims after the first; at least one tensor.
Tensor ConcatRows(const std::vector<const Tensor*>& parts, int64_t padded_rows);

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_BATCHING_H_
