// Interleave: cycle_length inner datasets read block_length elements at a
// time in turn (TensorFlow's InterleaveDataset order), optionally with
// read-ahead threads. Save semantics: Note [Saving the parallel stages] in
// dataset.h.

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
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

using InterleaveFn = std::function<absl::StatusOr<Dataset>(const Element&)>;

absl::Status InterleaveStatus(int cycle_length, int block_length,
                              int num_parallel_calls,
                              const std::vector<DataType>& dtypes,
                              const std::vector<PartialShape>& shapes) {
  if (cycle_length < 1 || block_length < 1) {
    return errors::InvalidArgument("Interleave: cycle_length is ", cycle_length,
                                   " and block_length ", block_length,
                                   "; both must be >= 1");
  }
  if (num_parallel_calls != -1) {
    RETURN_IF_ERROR(errors::Annotate(
        ValidateThreadCount("num_parallel_calls", num_parallel_calls),
        "Interleave (or -1 for one per CPU)"));
  }
  return CheckSignature(dtypes, shapes, "Interleave");
}

class InterleaveDataset : public UnaryDataset {
 public:
  InterleaveDataset(DatasetPtr input, InterleaveFn fn, int cycle_length,
                    int block_length, int num_parallel_calls,
                    std::vector<DataType> dtypes,
                    std::vector<PartialShape> shapes)
      : UnaryDataset(std::move(input),
                     InterleaveStatus(cycle_length, block_length,
                                      num_parallel_calls, dtypes, shapes)),
        fn_(std::move(fn)),
        cycle_length_(cycle_length),
        block_length_(block_length),
        num_parallel_calls_(num_parallel_calls == -1 ? NumSchedulableCPUs()
                                                     : num_parallel_calls),
        dtypes_(std::move(dtypes)),
        shapes_(std::move(shapes)) {
    if (!dtypes_.empty() && shapes_.empty()) {
      shapes_.assign(dtypes_.size(), PartialShape::Unknown());
    }
  }

  std::string Name() const override { return "Interleave"; }
  std::string StageString() const override {
    return absl::StrCat("Interleave(cycle=", cycle_length_,
                        ", block=", block_length_,
                        num_parallel_calls_ > 1
                            ? absl::StrCat(", parallel=", num_parallel_calls_)
                            : "",
                        ")");
  }
  const std::vector<DataType>& output_dtypes() const override {
    return dtypes_;
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return shapes_;
  }

  const InterleaveFn& fn() const { return fn_; }
  int cycle_length() const { return cycle_length_; }
  int block_length() const { return block_length_; }
  int num_parallel_calls() const { return num_parallel_calls_; }
  const std::vector<DataType>& dtypes() const { return dtypes_; }

 protected:
  std::unique_ptr<IteratorBase> MakeStageIterator(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;

 private:
  InterleaveFn fn_;
  const int cycle_length_;
  const int block_length_;
  const int num_parallel_calls_;
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
};

// One place of the cycle.
struct CycleSlot {
  Element args;                      // The input element that opened it.
  DatasetPtr dataset;                // fn(args).
  std::unique_ptr<IteratorBase> it;  // Null when the slot is empty. Used by
                                     // its read-ahead task while one runs.
  // Parallel mode; guarded by the iterator's mu_.
  std::deque<Result> buffer;  // Read ahead, in order; may end with the end.
  bool task = false;          // A read-ahead task is scheduled or running.
  bool ended = false;         // The end is in `buffer`.
};

class InterleaveIterator : public StageIterator<InterleaveDataset> {
 public:
  InterleaveIterator(std::shared_ptr<const InterleaveDataset> ds,
                     std::shared_ptr<const IteratorContext> ctx,
                     std::string prefix)
      : StageIterator(std::move(ds), std::move(ctx), std::move(prefix)),
        parallel_(ds_->num_parallel_calls() > 1),
        readahead_(static_cast<size_t>(std::max(2, 2 * ds_->block_length()))) {
    input_ = MakeInput();
    for (int i = 0; i < ds_->cycle_length(); ++i) {
      slots_.push_back(std::make_unique<CycleSlot>());
    }
    if (parallel_) {
      absl::StatusOr<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(
          "rf_interleave",
          std::min(ds_->num_parallel_calls(), ds_->cycle_length()));
      if (pool.ok()) {
        pool_ = std::move(*pool);
      } else {
        start_error_ = pool.status();  // Returned by GetNext.
      }
    }
  }

  ~InterleaveIterator() override {
    if (pool_ == nullptr) return;
    {
      std::unique_lock<std::mutex> lock(mu_.native());
      cancelled_ = true;
      cv_.wait(lock, [this] { return tasks_ == 0; });
    }
    pool_.reset();
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    RETURN_IF_ERROR(start_error_);
    while (input_ != nullptr || num_open_ > 0) {
      CycleSlot& slot = *slots_[cycle_index_];
      if (slot.it != nullptr) {
        Result r = NextFromSlot(cycle_index_);
        RETURN_IF_ERROR(r.status);  // Same slot again next time.
        if (!r.end) {
          RETURN_IF_ERROR(CheckElement(r.element, ds_->dtypes(),
                                       ds_->output_shapes(), "Interleave"));
          *out = std::move(r.element);
          if (++block_index_ == ds_->block_length()) Advance();
          return absl::OkStatus();
        }
        CloseSlot(slot);
        --num_open_;
        Advance();
      } else if (input_ != nullptr) {
        Element args;
        bool end = false;
        RETURN_IF_ERROR(input_->GetNext(&args, &end));
        if (end) {
          input_.reset();
          continue;
        }
        RETURN_IF_ERROR(OpenSlot(cycle_index_, std::move(args)));
        ++num_open_;
      } else {
        Advance();
      }
    }
    *end_of_sequence = true;
    return absl::OkStatus();
  }

  absl::Status Save(IteratorState* state) override {
    Pause();
    state->WriteInt(Key("cycle_index"), cycle_index_);
    state->WriteInt(Key("block_index"), block_index_);
    state->WriteInt(Key("num_open"), num_open_);
    absl::Status s = SaveInput(state, input_.get());
    for (size_t i = 0; i < slots_.size() && s.ok(); ++i) {
      const CycleSlot& slot = *slots_[i];
      const std::string k = Key(absl::StrCat("slot_", i));
      state->WriteInt(k + "/open", slot.it != nullptr ? 1 : 0);
      if (slot.it == nullptr) continue;
      SaveElement(state, k + "/args", slot.args);
      std::vector<const Result*> ptrs;
      for (const Result& r : slot.buffer) ptrs.push_back(&r);
      SaveResults(state, k + "/buffer", ptrs);
      s = slot.it->Save(state);
    }
    Resume();
    return s;
  }

  absl::Status Restore(const IteratorState& state) override {
    Pause();
    for (auto& slot : slots_) CloseSlot(*slot);
    absl::Status s = RestoreState(state);
    Resume();
    return s;
  }

 private:
  absl::Status RestoreState(const IteratorState& state) {
    ASSIGN_OR_RETURN(cycle_index_, state.ReadInt(Key("cycle_index")));
    ASSIGN_OR_RETURN(block_index_, state.ReadInt(Key("block_index")));
    ASSIGN_OR_RETURN(num_open_, state.ReadInt(Key("num_open")));
    if (cycle_index_ < 0 || cycle_index_ >= ds_->cycle_length() ||
        block_index_ < 0 || block_index_ >= ds_->block_length()) {
      return errors::DataLoss("Interleave state at '", prefix(),
                              "' is at cycle ", cycle_index_, " block ",
                              block_index_);
    }
    RETURN_IF_ERROR(RestoreInput(state, &input_));
    int64_t open = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const std::string k = Key(absl::StrCat("slot_", i));
      ASSIGN_OR_RETURN(int64_t is_open, state.ReadInt(k + "/open"));
      if (is_open == 0) continue;
      ++open;
      ASSIGN_OR_RETURN(Element args, RestoreElement(state, k + "/args"));
      ASSIGN_OR_RETURN(std::vector<Result> buffer,
                       RestoreResults(state, k + "/buffer"));
      RETURN_IF_ERROR(OpenSlot(i, std::move(args), /*schedule=*/false));
      CycleSlot& slot = *slots_[i];
      RETURN_IF_ERROR(slot.it->Restore(state));
      MutexLock lock(&mu_);
      for (Result& r : buffer) {
        slot.ended = slot.ended || r.end;
        slot.buffer.push_back(std::move(r));
      }
    }
    if (open != num_open_) {
      return errors::DataLoss("Interleave state at '", prefix(), "' has ", open,
                              " open slots but num_open ", num_open_);
    }
    return absl::OkStatus();
  }

  void Advance() {
    cycle_index_ = (cycle_index_ + 1) % ds_->cycle_length();
    block_index_ = 0;
  }

  std::string SlotPrefix(size_t i) const {
    return absl::StrCat(prefix_, "/slot_", i);
  }

  absl::Status OpenSlot(size_t i, Element args, bool schedule = true) {
    CycleSlot& slot = *slots_[i];
    ASSIGN_OR_RETURN(Dataset d, ds_->fn()(args));
    absl::Status valid = d.impl()->CheckValid();
    if (!valid.ok()) {
      return errors::Annotate(valid, "Interleave: the dataset fn returned");
    }
    slot.args = std::move(args);
    slot.dataset = d.impl();
    slot.it = slot.dataset->MakeIteratorInternal(ctx_, SlotPrefix(i));
    if (parallel_ && schedule) {
      MutexLock lock(&mu_);
      ScheduleLocked(i);
    }
    return absl::OkStatus();
  }

  // REQUIRES: no read-ahead task for the slot.
  void CloseSlot(CycleSlot& slot) {
    slot.it.reset();
    slot.dataset.reset();
    slot.args.clear();
    MutexLock lock(&mu_);
    slot.buffer.clear();
    slot.ended = false;
  }

  Result NextFromSlot(size_t i) {
    CycleSlot& slot = *slots_[i];
    Result r;
    if (!parallel_) {
      r.status = slot.it->GetNext(&r.element, &r.end);
      return r;
    }
    std::unique_lock<std::mutex> lock(mu_.native());
    if (slot.buffer.empty()) ScheduleLocked(i);
    cv_.wait(lock, [&slot] { return !slot.buffer.empty(); });
    r = std::move(slot.buffer.front());
    slot.buffer.pop_front();
    if (!r.end) ScheduleLocked(i);
    return r;
  }

  // Starts a read-ahead task for slot i unless one runs, the slot ended or
  // its buffer is full.
  void ScheduleLocked(size_t i) {
    CycleSlot& slot = *slots_[i];
    if (slot.task || slot.ended || slot.it == nullptr || paused_ ||
        cancelled_ || slot.buffer.size() >= readahead_) {
      return;
    }
    slot.task = true;
    ++tasks_;
    pool_->Schedule([this, i] { ReadAhead(i); });
  }

  // Fills slot i's buffer; stops when it is full, at the end, or when
  // paused. Pushing the end and leaving happen under one lock, so the
  // consumer never sees the end while the task still runs.
  void ReadAhead(size_t i) {
    CycleSlot& slot = *slots_[i];
    std::unique_lock<std::mutex> lock(mu_.native());
    while (!cancelled_ && !paused_ && !slot.ended &&
           slot.buffer.size() < readahead_) {
      lock.unlock();
      Result r;
      r.status = slot.it->GetNext(&r.element, &r.end);
      if (!r.status.ok()) r.end = false;
      lock.lock();
      slot.ended = r.end;
      slot.buffer.push_back(std::move(r));
      cv_.notify_all();
    }
    slot.task = false;
    --tasks_;
    cv_.notify_all();
  }

  // Waits until no read-ahead task runs, and keeps new ones from starting.
  void Pause() {
    if (!parallel_) return;
    std::unique_lock<std::mutex> lock(mu_.native());
    paused_ = true;
    cv_.wait(lock, [this] { return tasks_ == 0; });
  }

  void Resume() {
    if (!parallel_) return;
    MutexLock lock(&mu_);
    paused_ = false;
    for (size_t i = 0; i < slots_.size(); ++i) ScheduleLocked(i);
  }

  const bool parallel_;
  const size_t readahead_;               // Per slot.
  std::unique_ptr<IteratorBase> input_;  // Null once exhausted.
  int64_t cycle_index_ = 0;
  int64_t block_index_ = 0;
  int64_t num_open_ = 0;
  std::vector<std::unique_ptr<CycleSlot>> slots_;

  Mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;  // Guarded by mu_.
  bool paused_ = false;     // Guarded by mu_.
  int tasks_ = 0;           // Guarded by mu_: scheduled read-ahead tasks.
  std::unique_ptr<ThreadPool> pool_;  // Parallel mode; destroyed first.
  absl::Status start_error_;          // The pool could not start.
};

std::unique_ptr<IteratorBase> InterleaveDataset::MakeStageIterator(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  return std::make_unique<InterleaveIterator>(SharedSelf(this), std::move(ctx),
                                              prefix);
}

}  // namespace

DatasetPtr NewInterleaveDataset(DatasetPtr input, InterleaveFn fn,
                                int cycle_length, int block_length,
                                int num_parallel_calls,
                                std::vector<DataType> out_dtypes,
                                std::vector<PartialShape> out_shapes) {
  return std::make_shared<InterleaveDataset>(
      std::move(input), std::move(fn), cycle_length, block_length,
      num_parallel_calls, std::move(out_dtypes), std::move(out_shapes));
}

}  // namespace recflow::data::internal
