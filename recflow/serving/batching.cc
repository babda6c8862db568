#include "recflow/serving/batching.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/dtype.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"

namespace recflow::serving {

struct BatchScheduler::Task {
  const Tensors* inputs = nullptr;  // the caller's; outlives the task
  int64_t rows = 0;
  RunFn run;
  Notification done;
  absl::Status status;
  Tensors outputs;
};

struct BatchScheduler::Batch {
  std::string model;
  std::vector<Task*> tasks;
  int64_t rows = 0;
  uint64_t open_micros = 0;  // when its first task arrived
};

absl::StatusOr<BatchingOptions> BatchingOptionsFromProto(
    const tensorflow::serving::BatchingParameters& params) {
  BatchingOptions options;
  if (params.has_max_batch_size())
    options.max_batch_size = params.max_batch_size().value();
  if (params.has_batch_timeout_micros())
    options.batch_timeout_micros = params.batch_timeout_micros().value();
  if (params.has_max_enqueued_batches())
    options.max_enqueued_batches = params.max_enqueued_batches().value();
  if (params.has_num_batch_threads()) {
    RETURN_IF_ERROR(
        ValidateThreadCount("batching parameters: num_batch_threads",
                            params.num_batch_threads().value()));
    options.num_batch_threads =
        static_cast<int>(params.num_batch_threads().value());
  }
  options.allowed_batch_sizes.assign(params.allowed_batch_sizes().begin(),
                                     params.allowed_batch_sizes().end());
  if (params.pad_variable_length_inputs()) {
    return errors::Unimplemented(
        "batching parameters: pad_variable_length_inputs is not supported");
  }
  return options;
}

namespace {

absl::Status Validate(const BatchingOptions& o) {
  if (o.max_batch_size < 1) {
    return errors::InvalidArgument(
        "batching parameters: max_batch_size must be >= 1, got ",
        o.max_batch_size);
  }
  if (o.batch_timeout_micros < 0 ||
      o.batch_timeout_micros > kMaxBatchTimeoutMicros) {
    return errors::InvalidArgument(
        "batching parameters: batch_timeout_micros is ", o.batch_timeout_micros,
        "; must be between 0 and ", kMaxBatchTimeoutMicros,
        " (one minute; a batch waits at most this long for more requests)");
  }
  if (o.max_enqueued_batches < 1) {
    return errors::InvalidArgument(
        "batching parameters: max_enqueued_batches must be >= 1, got ",
        o.max_enqueued_batches);
  }
  RETURN_IF_ERROR(ValidateThreadCount("batching parameters: num_batch_threads",
                                      o.num_batch_threads, /*min_threads=*/0));
  const auto& sizes = o.allowed_batch_sizes;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 1 || (i > 0 && sizes[i] <= sizes[i - 1])) {
      return errors::InvalidArgument(
          "batching parameters: allowed_batch_sizes must be positive and "
          "increasing; entry ",
          i, " is ", sizes[i]);
    }
  }
  if (!sizes.empty() && sizes.back() != o.max_batch_size) {
    return errors::InvalidArgument(
        "batching parameters: the last allowed_batch_sizes entry (",
        sizes.back(), ") must equal max_batch_size (", o.max_batch_size, ")");
  }
  return absl::OkStatus();
}

bool BatchableDtype(DataType dtype) {
  return dtype != DT_RESOURCE && dtype != DT_VARIANT && dtype != DT_INVALID;
}

// A queue-name suffix that separates tasks whose inputs cannot be merged.
std::string ShapeKey(const BatchScheduler::Tensors& inputs) {
  std::string key;
  for (const auto& [name, t] : inputs) {
    absl::StrAppend(&key, "|", name, ":", static_cast<int>(t.dtype()));
    for (int d = 1; d < t.dims(); ++d) absl::StrAppend(&key, ",", t.dim_size(d));
  }
  return key;
}

}  // namespace

Tensor ConcatRows(const std::vector<const Tensor*>& parts,
                  int64_t padded_rows) {
  const Tensor& first = *parts[0];
  TensorShape shape = first.shape();
  shape.set_dim(0, padded_rows);
  Tensor out(first.dtype(), shape);
  // Elements per row from the inner dims (a part may have 0 rows).
  int64_t row_elems = 1;
  for (int d = 1; d < first.dims(); ++d) row_elems *= first.dim_size(d);
  int64_t row = 0;
  auto copy_rows = [&](const Tensor& src, int64_t src_row, int64_t n) {
    if (first.dtype() == DT_STRING) {
      const std::string* s = src.data<std::string>() + src_row * row_elems;
      std::string* d = out.data<std::string>() + row * row_elems;
      std::copy(s, s + n * row_elems, d);
    } else {
      const size_t row_bytes = row_elems * ElementStorageSize(first.dtype());
      std::memcpy(out.raw_data() + row * row_bytes,
                  src.raw_data() + src_row * row_bytes, n * row_bytes);
    }
    row += n;
  };
  for (const Tensor* part : parts) copy_rows(*part, 0, part->dim_size(0));
  // Padding repeats the first row of the first part that has one.
  const Tensor* pad = nullptr;
  for (const Tensor* part : parts) {
    if (part->dim_size(0) > 0) {
      pad = part;
      break;
    }
  }
  while (pad != nullptr && row < padded_rows) copy_rows(*pad, 0, 1);
  return out;
}

namespace {

constexpr absl::string_view kIdsSuffix = "/ids";
constexpr absl::string_view kRowSplitsSuffix = "/row_splits";

// "F/row_splits" -> "F/ids"; empty when `name` is not a row_splits key.
std::string IdsKeyOf(absl::string_view name) {
  if (!absl::EndsWith(name, kRowSplitsSuffix)) return "";
  return absl::StrCat(name.substr(0, name.size() - kRowSplitsSuffix.size()), kIdsSuffix);
}

// A valid int64 [rows + 1] row_splits over `ids` (int64 [nnz]).
bool IsRaggedPair(const Tensor& splits, const Tensor& ids) {
  if (splits.dtype() != DT_INT64 || ids.dtype() != DT_INT64 || splits.dims() != 1 ||
      ids.dims() != 1 || splits.dim_size(0) < 1) {
    return false;
  }
  const int64_t* s = splits.data<int64_t>();
  const int64_t n = splits.dim_size(0);
  if (s[0] != 0 || s[n - 1] != ids.dim_size(0)) return false;
  for (int64_t i = 1; i < n; ++i) {
    if (s[i] < s[i - 1]) return false;
  }
  return true;
}

// The ids keys of `inputs` that pair with a row_splits key.
std::set<std::string> RaggedIdsKeys(const BatchScheduler::Tensors& inputs) {
  std::set<std::string> keys;
  for (const auto& [name, t] : inputs) {
    const std::string ids = IdsKeyOf(name);
    if (ids.empty()) continue;
    auto it = inputs.find(ids);
    if (it != inputs.end() && IsRaggedPair(t, it->second)) keys.insert(ids);
  }
  return keys;
}

// Concatenates row_splits, offsetting each part by the ids before it, then
// repeats the last split until there are padded_rows + 1 (empty bags).
Tensor ConcatRowSplits(const std::vector<const Tensor*>& parts, int64_t padded_rows) {
  Tensor out(DT_INT64, TensorShape({padded_rows + 1}));
  int64_t* d = out.data<int64_t>();
  int64_t at = 0, offset = 0;
  d[at++] = 0;
  for (const Tensor* part : parts) {
    const int64_t* s = part->data<int64_t>();
    const int64_t n = part->dim_size(0);
    for (int64_t i = 1; i < n; ++i) d[at++] = s[i] + offset;
    offset += s[n - 1];
  }
  while (at < padded_rows + 1) d[at++] = offset;
  return out;
}

}  // namespace

bool BatchScheduler::Batchable(const Tensors& inputs, int64_t* rows) {
  if (inputs.empty()) return false;
  const std::set<std::string> ragged_ids = RaggedIdsKeys(inputs);
  int64_t n = -1;
  for (const auto& [name, t] : inputs) {
    if (t.dims() < 1 || !BatchableDtype(t.dtype())) return false;
    if (ragged_ids.count(name) > 0) continue;  // its row_splits says the rows
    const int64_t r = ragged_ids.count(IdsKeyOf(name)) > 0 ? t.dim_size(0) - 1 : t.dim_size(0);
    if (n < 0) n = r;
    if (r != n) return false;
  }
  if (n < 1) return false;
  *rows = n;
  return true;
}

absl::StatusOr<std::unique_ptr<BatchScheduler>> BatchScheduler::Create(
    const BatchingOptions& options) {
  RETURN_IF_ERROR(Validate(options));
  std::unique_ptr<BatchScheduler> scheduler(new BatchScheduler(options));
  const int n = options.num_batch_threads > 0 ? options.num_batch_threads
                                              : NumSchedulableCPUs();
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::thread> t =
        StartThread("batch_worker", [s = scheduler.get()] { s->WorkerLoop(); });
    if (!t.ok()) {
      // The destructor stops and joins the threads started so far.
      return errors::Annotate(
          t.status(), absl::StrCat("batch scheduler started ", i, " of ", n,
                                   " threads (num_batch_threads)"));
    }
    scheduler->threads_.push_back(std::move(*t));
  }
  return scheduler;
}

BatchScheduler::BatchScheduler(const BatchingOptions& options)
    : options_(options) {
  if (options_.metrics != nullptr) {
    batch_size_ = options_.metrics->AddHistogram(
        "recflow_serving_batch_size",
        "Rows per batched run (before padding to an allowed batch size).",
        {"model"}, Histogram::PowersOfTwo(12));
    queue_depth_ = options_.metrics->AddGauge(
        "recflow_serving_batch_queue_depth",
        "Requests waiting in the batch queues.", {"model"});
  }
}

BatchScheduler::~BatchScheduler() {
  Shutdown();
  // Workers drain every queued batch before exiting; anything left (there is
  // nothing when every worker started) is failed.
  MutexLock lock(&mu_);
  for (auto& [key, queue] : queues_) {
    for (auto& batch : queue.batches) {
      for (Task* task : batch->tasks) {
        task->status = errors::Unavailable("the batch scheduler is shutting "
                                           "down; request for model ",
                                           queue.model, " was not run");
        task->done.Notify();
      }
    }
  }
  queues_.clear();
}

void BatchScheduler::Shutdown() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.notify_all();
  MutexLock lock(&join_mu_);
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void BatchScheduler::AddQueueDepth(const std::string& model, double delta) {
  if (queue_depth_ != nullptr) queue_depth_->Add({model}, delta);
}

int64_t BatchScheduler::PaddedSize(int64_t rows) const {
  for (int64_t size : options_.allowed_batch_sizes) {
    if (size >= rows) return size;
  }
  return rows;
}

absl::StatusOr<BatchScheduler::Tensors> BatchScheduler::Run(
    const std::string& queue, const std::string& model, const Tensors& inputs,
    RunFn run) {
  int64_t rows = 0;
  if (!Batchable(inputs, &rows)) return run(inputs);
  if (rows > options_.max_batch_size) {
    return errors::InvalidArgument(
        "request for model ", model, " has ", rows,
        " rows, more than the batching limit max_batch_size=",
        options_.max_batch_size, "; send at most that many per request");
  }
  Task task;
  task.inputs = &inputs;
  task.rows = rows;
  bool enqueued = false;
  {
    MutexLock lock(&mu_);
    if (!stop_) {
      Queue& q = queues_[queue + ShapeKey(inputs)];
      q.model = model;
      if (q.batches.empty() ||
          q.batches.back()->rows + rows > options_.max_batch_size) {
        if (static_cast<int64_t>(q.batches.size()) >=
            options_.max_enqueued_batches) {
          return errors::Unavailable("batch queue full for model ", model, ": ",
                                     q.batches.size(),
                                     " batches enqueued (max_enqueued_batches=",
                                     options_.max_enqueued_batches, ")");
        }
        auto batch = std::make_unique<Batch>();
        batch->model = model;
        batch->open_micros = options_.env->NowMicros();
        q.batches.push_back(std::move(batch));
      }
      task.run = std::move(run);
      Batch* batch = q.batches.back().get();
      batch->tasks.push_back(&task);
      batch->rows += rows;
      // Under mu_, so it always precedes the worker's decrement.
      AddQueueDepth(model, 1);
      enqueued = true;
    }
  }
  // Shut down: nobody waits for a batch to fill any more; run it now.
  if (!enqueued) return run(inputs);
  cv_.notify_all();
  task.done.WaitForNotification();
  if (!task.status.ok()) return task.status;
  return std::move(task.outputs);
}

void BatchScheduler::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_.native());
  for (;;) {
    const uint64_t now = options_.env->NowMicros();
    uint64_t next_deadline = std::numeric_limits<uint64_t>::max();
    auto best = queues_.end();
    for (auto it = queues_.begin(); it != queues_.end(); ++it) {
      const auto& batches = it->second.batches;
      if (batches.empty()) continue;
      const Batch& front = *batches.front();
      const uint64_t deadline = front.open_micros +
                                static_cast<uint64_t>(
                                    options_.batch_timeout_micros);
      const bool ready = stop_ || front.rows >= options_.max_batch_size ||
                         batches.size() > 1 || now >= deadline;
      if (ready) {
        if (best == queues_.end() ||
            front.open_micros < best->second.batches.front()->open_micros) {
          best = it;
        }
      } else {
        next_deadline = std::min(next_deadline, deadline);
      }
    }
    if (best != queues_.end()) {
      std::unique_ptr<Batch> batch = std::move(best->second.batches.front());
      best->second.batches.pop_front();
      if (best->second.batches.empty()) queues_.erase(best);
      lock.unlock();
      Process(batch.get());
      lock.lock();
      continue;
    }
    if (stop_) return;
    if (next_deadline == std::numeric_limits<uint64_t>::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_for(lock, std::chrono::microseconds(next_deadline - now));
    }
  }
}

void BatchScheduler::Process(Batch* batch) {
  AddQueueDepth(batch->model, -static_cast<double>(batch->tasks.size()));
  if (batch_size_ != nullptr) batch_size_->Observe({batch->model}, batch->rows);
  const int64_t padded = PaddedSize(batch->rows);
  auto finish_one_by_one = [&] {
    for (Task* task : batch->tasks) {
      auto out = task->run(*task->inputs);
      if (out.ok()) {
        task->outputs = std::move(*out);
      } else {
        task->status = std::move(out).status();
      }
      task->done.Notify();
    }
  };
  if (batch->tasks.size() == 1 && padded == batch->rows) {
    finish_one_by_one();
    return;
  }
  Tensors merged;
  const std::set<std::string> ragged_ids = RaggedIdsKeys(*batch->tasks[0]->inputs);
  for (const auto& [name, first] : *batch->tasks[0]->inputs) {
    std::vector<const Tensor*> parts;
    for (Task* task : batch->tasks) parts.push_back(&task->inputs->at(name));
    if (ragged_ids.count(name) > 0) {
      int64_t nnz = 0;
      for (const Tensor* p : parts) nnz += p->dim_size(0);
      merged.emplace(name, ConcatRows(parts, nnz));  // ids: no padding
    } else if (ragged_ids.count(IdsKeyOf(name)) > 0) {
      merged.emplace(name, ConcatRowSplits(parts, padded));
    } else {
      merged.emplace(name, ConcatRows(parts, padded));
    }
  }
  auto out = batch->tasks[0]->run(merged);
  if (!out.ok()) {
    // Each caller gets a Status of its own: a shared one would be
    // reference-counted across the callers' threads inside Debian's
    // abseil, where ThreadSanitizer cannot see the counting.
    for (Task* task : batch->tasks) {
      task->status = absl::Status(out.status().code(), out.status().message());
      task->done.Notify();
    }
    return;
  }
  for (const auto& [name, t] : *out) {
    if (t.dims() < 1 || t.dim_size(0) != padded) {
      finish_one_by_one();
      return;
    }
  }
  int64_t row = 0;
  for (Task* task : batch->tasks) {
    for (const auto& [name, t] : *out) {
      task->outputs.emplace(name, t.Slice(row, row + task->rows));
    }
    row += task->rows;
    task->done.Notify();
  }
}

}  // namespace recflow::serving
