// Map (sequential and parallel, order-preserving) and Prefetch.
// Save semantics of the parallel ones: Note [Saving the parallel stages] in
// dataset.h.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/mutex.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/data/dataset.h"
#include "recflow/data/dataset_internal.h"

namespace recflow::data::internal {
namespace {

// ---------------------------------------------------------------------------
// Map

absl::Status MapStatus(int num_parallel_calls,
                       const std::vector<DataType>& dtypes,
                       const std::vector<PartialShape>& shapes) {
  if (num_parallel_calls != -1) {
    RETURN_IF_ERROR(errors::Annotate(
        ValidateThreadCount("num_parallel_calls", num_parallel_calls),
        "Map (or -1 for one per CPU)"));
  }
  return CheckSignature(dtypes, shapes, "Map");
}

class MapDataset : public UnaryDataset {
 public:
  MapDataset(DatasetPtr input, MapFn fn, int num_parallel_calls,
             std::vector<DataType> dtypes, std::vector<PartialShape> shapes)
      : UnaryDataset(std::move(input),
                     MapStatus(num_parallel_calls, dtypes, shapes)),
        fn_(std::move(fn)),
        num_parallel_calls_(num_parallel_calls == -1 ? NumSchedulableCPUs()
                                                     : num_parallel_calls),
        dtypes_(std::move(dtypes)),
        shapes_(std::move(shapes)) {
    if (!dtypes_.empty() && shapes_.empty()) {
      shapes_.assign(dtypes_.size(), PartialShape::Unknown());
    }
  }

  std::string Name() const override { return "Map"; }
  std::string StageString() const override {
    return num_parallel_calls_ > 1
               ? absl::StrCat("Map(parallel=", num_parallel_calls_, ")")
               : "Map";
  }
  const std::vector<DataType>& output_dtypes() const override {
    return dtypes_;
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return shapes_;
  }

  int num_parallel_calls() const { return num_parallel_calls_; }
  absl::StatusOr<Element> Call(Element in) const {
    ASSIGN_OR_RETURN(Element out, fn_(std::move(in)));
    RETURN_IF_ERROR(CheckElement(out, dtypes_, shapes_, "Map"));
    return out;
  }

 protected:
  std::unique_ptr<IteratorBase> MakeStageIterator(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;

 private:
  MapFn fn_;
  const int num_parallel_calls_;
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
};

class MapIterator : public StageIterator<MapDataset> {
 public:
  MapIterator(std::shared_ptr<const MapDataset> ds,
              std::shared_ptr<const IteratorContext> ctx, std::string prefix)
      : StageIterator(std::move(ds), std::move(ctx), std::move(prefix)) {
    input_ = MakeInput();
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    Element in;
    RETURN_IF_ERROR(input_->GetNext(&in, end_of_sequence));
    out->clear();
    if (*end_of_sequence) return absl::OkStatus();
    ASSIGN_OR_RETURN(*out, ds_->Call(std::move(in)));
    return absl::OkStatus();
  }
  absl::Status Save(IteratorState* state) override {
    return input_->Save(state);
  }
  absl::Status Restore(const IteratorState& state) override {
    return input_->Restore(state);
  }

 private:
  std::unique_ptr<IteratorBase> input_;
};

// One call of the parallel map, in input order.
struct MapCall {
  enum State { kQueued, kRunning, kDone };
  State state = kQueued;  // Guarded by MapShared::mu.
  Element input;          // Moved out by whoever claims the call.
  absl::Status status;    // The result, once kDone.
  Element output;
};

struct MapShared {
  Mutex mu;
  std::condition_variable done;
  bool cancelled = false;  // Guarded by mu.
};

// Runs `call` unless another thread claimed it first. The pool's closures
// hold shared_ptrs to all three, so they may run after the iterator is gone
// (they then find `cancelled` and do nothing).
void RunMapCall(const MapDataset& ds, MapShared& shared, MapCall* call) {
  Element in;
  {
    MutexLock lock(&shared.mu);
    if (call->state != MapCall::kQueued) return;
    if (shared.cancelled) {
      call->state = MapCall::kDone;
      call->status = errors::Cancelled("Map: the iterator was destroyed");
      shared.done.notify_all();
      return;
    }
    call->state = MapCall::kRunning;
    in = std::move(call->input);
  }
  absl::StatusOr<Element> result = ds.Call(std::move(in));
  MutexLock lock(&shared.mu);
  call->state = MapCall::kDone;
  if (result.ok()) {
    call->output = std::move(*result);
  } else {
    call->status = result.status();
  }
  shared.done.notify_all();
}

// Keeps up to num_parallel_calls calls in flight on IteratorContext's
// thread_pool (or a pool of its own) and yields their results in input
// order. The input is read on the caller's thread. A caller waiting for a
// call that has not started runs it itself, so it never waits for a busy
// pool (and a pool thread may call GetNext).
class ParallelMapIterator : public StageIterator<MapDataset> {
 public:
  ParallelMapIterator(std::shared_ptr<const MapDataset> ds,
                      std::shared_ptr<const IteratorContext> ctx,
                      std::string prefix)
      : StageIterator(std::move(ds), std::move(ctx), std::move(prefix)),
        shared_(std::make_shared<MapShared>()) {
    input_ = MakeInput();
    pool_ = ctx_->thread_pool;
    if (pool_ == nullptr) {
      absl::StatusOr<std::unique_ptr<ThreadPool>> pool =
          ThreadPool::Create("rf_map", ds_->num_parallel_calls());
      if (pool.ok()) {
        own_pool_ = std::move(*pool);
      } else {
        start_error_ = pool.status();  // Returned by GetNext.
      }
      pool_ = own_pool_.get();
    }
  }

  ~ParallelMapIterator() override {
    {
      MutexLock lock(&shared_->mu);
      shared_->cancelled = true;
    }
    // Calls already running finish; queued ones become no-ops.
    for (const std::shared_ptr<MapCall>& call : calls_) Wait(call.get(), false);
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    RETURN_IF_ERROR(start_error_);
    Fill();
    if (calls_.empty()) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    std::shared_ptr<MapCall> call = std::move(calls_.front());
    calls_.pop_front();
    Wait(call.get(), true);
    Fill();  // Keep the pool busy while the caller uses this element.
    RETURN_IF_ERROR(call->status);
    *out = std::move(call->output);
    return absl::OkStatus();
  }

  absl::Status Save(IteratorState* state) override {
    std::vector<Result> results(calls_.size());
    std::vector<const Result*> ptrs;
    for (size_t i = 0; i < calls_.size(); ++i) {
      Wait(calls_[i].get(), true);
      results[i].status = calls_[i]->status;
      results[i].element = calls_[i]->output;
      ptrs.push_back(&results[i]);
    }
    SaveResults(state, Key("results"), ptrs);
    return SaveInput(state, input_.get());
  }

  absl::Status Restore(const IteratorState& state) override {
    for (const std::shared_ptr<MapCall>& call : calls_) Wait(call.get(), true);
    calls_.clear();
    ASSIGN_OR_RETURN(std::vector<Result> results,
                     RestoreResults(state, Key("results")));
    for (Result& r : results) {
      auto call = std::make_shared<MapCall>();
      call->state = MapCall::kDone;
      call->status = r.status;
      call->output = std::move(r.element);
      calls_.push_back(std::move(call));
    }
    return RestoreInput(state, &input_);
  }

 private:
  // Pulls input elements and schedules calls until the window is full. An
  // input error takes a place in the window (it is returned in position)
  // and stops this round.
  void Fill() {
    while (input_ != nullptr &&
           calls_.size() < static_cast<size_t>(ds_->num_parallel_calls())) {
      auto call = std::make_shared<MapCall>();
      bool end = false;
      absl::Status s = input_->GetNext(&call->input, &end);
      if (s.ok() && end) {
        input_.reset();
        return;
      }
      if (!s.ok()) {
        call->state = MapCall::kDone;
        call->status = std::move(s);
        calls_.push_back(std::move(call));
        return;
      }
      calls_.push_back(call);
      pool_->Schedule([ds = ds_, shared = shared_, call] {
        RunMapCall(*ds, *shared, call.get());
      });
    }
  }

  // Waits until `call` is done; with `run`, first runs it here if no thread
  // has started it.
  void Wait(MapCall* call, bool run) {
    std::unique_lock<std::mutex> lock(shared_->mu.native());
    if (call->state == MapCall::kQueued) {
      if (!run) return;  // Never started: nothing to wait for.
      lock.unlock();
      RunMapCall(*ds_, *shared_, call);
      lock.lock();
    }
    shared_->done.wait(lock, [call] { return call->state == MapCall::kDone; });
  }

  std::shared_ptr<MapShared> shared_;
  std::unique_ptr<ThreadPool> own_pool_;        // When the context has no pool.
  absl::Status start_error_;                    // The pool could not start.
  ThreadPool* pool_;                            // Not owned (or own_pool_).
  std::unique_ptr<IteratorBase> input_;         // Null once exhausted.
  std::deque<std::shared_ptr<MapCall>> calls_;  // In input order.
};

std::unique_ptr<IteratorBase> MapDataset::MakeStageIterator(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  if (num_parallel_calls_ > 1) {
    return std::make_unique<ParallelMapIterator>(SharedSelf(this),
                                                 std::move(ctx), prefix);
  }
  return std::make_unique<MapIterator>(SharedSelf(this), std::move(ctx),
                                       prefix);
}

// ---------------------------------------------------------------------------
// Prefetch

class PrefetchDataset : public UnaryDataset {
 public:
  PrefetchDataset(DatasetPtr input, int64_t buffer_size)
      : UnaryDataset(std::move(input),
                     buffer_size >= 1 ? absl::OkStatus()
                                      : errors::InvalidArgument(
                                            "Prefetch: buffer_size is ",
                                            buffer_size, "; must be >= 1")),
        buffer_size_(buffer_size) {}
  std::string Name() const override { return "Prefetch"; }
  std::string StageString() const override {
    return absl::StrCat("Prefetch(", buffer_size_, ")");
  }
  const std::vector<DataType>& output_dtypes() const override {
    return input()->output_dtypes();
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return input()->output_shapes();
  }
  size_t buffer_size() const { return static_cast<size_t>(buffer_size_); }

 protected:
  std::unique_ptr<IteratorBase> MakeStageIterator(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;

 private:
  const int64_t buffer_size_;
};

// A producer thread (started by the first GetNext) keeps up to buffer_size
// results (elements, errors, the end) ready.
class PrefetchIterator : public StageIterator<PrefetchDataset> {
 public:
  PrefetchIterator(std::shared_ptr<const PrefetchDataset> ds,
                   std::shared_ptr<const IteratorContext> ctx,
                   std::string prefix)
      : StageIterator(std::move(ds), std::move(ctx), std::move(prefix)) {
    input_ = MakeInput();
  }

  ~PrefetchIterator() override { Stop(); }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    if (!thread_.joinable()) {
      ASSIGN_OR_RETURN(thread_, StartThread("rf_prefetch", [this] { Produce(); }));
    }
    std::unique_lock<std::mutex> lock(mu_.native());
    cv_.wait(lock, [this] { return !buffer_.empty(); });
    if (buffer_.front().end) {  // Stays: the end is sticky.
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    Result r = std::move(buffer_.front());
    buffer_.pop_front();
    cv_.notify_all();
    lock.unlock();
    RETURN_IF_ERROR(r.status);
    *out = std::move(r.element);
    return absl::OkStatus();
  }

  absl::Status Save(IteratorState* state) override {
    std::unique_lock<std::mutex> lock(mu_.native());
    paused_ = true;
    cv_.wait(lock, [this] { return !busy_; });
    std::vector<const Result*> ptrs;
    for (const Result& r : buffer_) ptrs.push_back(&r);
    SaveResults(state, Key("buffer"), ptrs);
    // The producer waits for !paused_ and so does not touch the input.
    absl::Status s = input_->Save(state);
    paused_ = false;
    cv_.notify_all();
    return s;
  }

  absl::Status Restore(const IteratorState& state) override {
    Stop();
    ASSIGN_OR_RETURN(std::vector<Result> results,
                     RestoreResults(state, Key("buffer")));
    {
      MutexLock lock(&mu_);
      buffer_.clear();
      input_end_ = false;
      for (Result& r : results) {
        input_end_ = input_end_ || r.end;
        buffer_.push_back(std::move(r));
      }
    }
    return input_->Restore(state);
  }

 private:
  void Produce() {
    std::unique_lock<std::mutex> lock(mu_.native());
    while (true) {
      cv_.wait(lock, [this] {
        return cancelled_ ||
               (!paused_ && !input_end_ && buffer_.size() < ds_->buffer_size());
      });
      if (cancelled_) return;
      busy_ = true;
      lock.unlock();
      Result r;
      r.status = input_->GetNext(&r.element, &r.end);
      if (!r.status.ok()) r.end = false;
      lock.lock();
      busy_ = false;
      input_end_ = r.end;
      buffer_.push_back(std::move(r));
      cv_.notify_all();
    }
  }

  // Stops and joins the producer; the buffer stays.
  void Stop() {
    if (!thread_.joinable()) return;
    {
      MutexLock lock(&mu_);
      cancelled_ = true;
      cv_.notify_all();
    }
    thread_.join();
    MutexLock lock(&mu_);
    cancelled_ = false;
  }

  std::unique_ptr<IteratorBase> input_;  // Used by the producer, or when
                                         // it is paused or stopped.
  std::thread thread_;
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Result> buffer_;  // Guarded by mu_.
  bool cancelled_ = false;     // Guarded by mu_.
  bool paused_ = false;        // Guarded by mu_.
  bool busy_ = false;          // Guarded by mu_: the producer is in GetNext.
  bool input_end_ = false;     // Guarded by mu_.
};

std::unique_ptr<IteratorBase> PrefetchDataset::MakeStageIterator(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  return std::make_unique<PrefetchIterator>(SharedSelf(this), std::move(ctx),
                                            prefix);
}

}  // namespace

DatasetPtr NewMapDataset(DatasetPtr input, MapFn fn, int num_parallel_calls,
                         std::vector<DataType> out_dtypes,
                         std::vector<PartialShape> out_shapes) {
  return std::make_shared<MapDataset>(std::move(input), std::move(fn),
                                      num_parallel_calls, std::move(out_dtypes),
                                      std::move(out_shapes));
}

DatasetPtr NewPrefetchDataset(DatasetPtr input, int64_t buffer_size) {
  return std::make_shared<PrefetchDataset>(std::move(input), buffer_size);
}

}  // namespace recflow::data::internal
