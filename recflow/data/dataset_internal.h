// Private to recflow/data: the building blocks of the stages in
// dataset.cc, source_datasets.cc, stage_datasets.cc and
// parallel_datasets.cc. Not a public interface; other modules use
// dataset.h.

#ifndef RECFLOW_DATA_DATASET_INTERNAL_H_
#define RECFLOW_DATA_DATASET_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/core/mutex.h"
#include "recflow/data/dataset.h"

namespace recflow::data {

// Keyed objects that live as long as one Iterator (see
// IteratorContext::resources). Thread-safe.
class IteratorResources {
 public:
  // The object stored under `key`, created with make() when absent.
  template <typename T>
  std::shared_ptr<T> GetOrCreate(
      const std::string& key, const std::function<std::shared_ptr<T>()>& make) {
    MutexLock lock(&mu_);
    std::shared_ptr<void>& slot = objects_[key];
    if (slot == nullptr) slot = make();
    return std::static_pointer_cast<T>(slot);
  }

 private:
  Mutex mu_;
  std::map<std::string, std::shared_ptr<void>> objects_;
};

namespace internal {

// SplitMix64's finalizer: a bijective 64-bit mixer.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A tiny deterministic generator whose whole state is one uint64, so it
// checkpoints as one integer. Not thread-safe.
class Rng {
 public:
  explicit Rng(uint64_t state) : state_(state) {}
  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ull;
    return Mix64(state_);
  }
  // Uniform in [0, n). REQUIRES: n > 0.
  uint64_t Uniform(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >>
                                 64);
  }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

// One outcome of an input: an element, an error, or the end of sequence.
// Buffered by the parallel stages.
struct Result {
  absl::Status status;
  Element element;
  bool end = false;
};

// Element / Status / Result <-> IteratorState under `key`.
void SaveElement(IteratorState* state, const std::string& key,
                 const Element& element);
absl::StatusOr<Element> RestoreElement(const IteratorState& state,
                                       const std::string& key);
void SaveResults(IteratorState* state, const std::string& key,
                 const std::vector<const Result*>& results);
absl::StatusOr<std::vector<Result>> RestoreResults(const IteratorState& state,
                                                   const std::string& key);

// The context of the pass `pass` of a Repeat inside `ctx` (see "Epochs" in
// dataset.h).
std::shared_ptr<const IteratorContext> ContextForPass(
    const std::shared_ptr<const IteratorContext>& ctx, int64_t pass);

// An iterator that returns `status` from GetNext (for invalid datasets).
std::unique_ptr<IteratorBase> MakeErrorIterator(
    std::shared_ptr<const IteratorContext> ctx, const std::string& prefix,
    absl::Status status);

// Checks an element against declared dtypes / shapes (either may be empty:
// unknown). InvalidArgument naming `what`, the component and both types.
absl::Status CheckElement(const Element& element,
                          const std::vector<DataType>& dtypes,
                          const std::vector<PartialShape>& shapes,
                          absl::string_view what);

// InvalidArgument unless shapes is empty or has one entry per dtype.
absl::Status CheckSignature(const std::vector<DataType>& dtypes,
                            const std::vector<PartialShape>& shapes,
                            absl::string_view what);

// Base of the stages with one input: holds the input and a builder error,
// and turns an invalid dataset into an error iterator.
class UnaryDataset : public DatasetBase {
 public:
  UnaryDataset(DatasetPtr input, absl::Status status)
      : input_(std::move(input)), status_(std::move(status)) {}

  std::unique_ptr<IteratorBase> MakeIteratorInternal(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const final;
  absl::Status CheckValid() const override;

  const DatasetPtr& input() const { return input_; }
  // The stage's name in DebugString and in its input's prefix ("Batch").
  virtual std::string Name() const = 0;
  // The part of DebugString before "<-" ("Batch(32, drop_remainder)").
  virtual std::string StageString() const { return Name(); }
  std::string DebugString() const override;

  // The prefix of the input iterator of this stage's iterator at `prefix`.
  std::string InputPrefix(const std::string& prefix) const {
    return prefix + "/" + Name();
  }

 protected:
  // Called only when CheckValid() is OK.
  virtual std::unique_ptr<IteratorBase> MakeStageIterator(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const = 0;

 private:
  DatasetPtr input_;
  absl::Status status_;
};

// shared_from_this() of a stage, as its own type.
template <typename D>
std::shared_ptr<const D> SharedSelf(const D* d) {
  return std::static_pointer_cast<const D>(d->shared_from_this());
}

// Base of the iterators of UnaryDataset stages.
template <typename D>
class StageIterator : public IteratorBase {
 protected:
  StageIterator(std::shared_ptr<const D> ds,
                std::shared_ptr<const IteratorContext> ctx, std::string prefix)
      : IteratorBase(std::move(ctx), std::move(prefix)), ds_(std::move(ds)) {}

  // A new iterator over the input (with `ctx`, default this one's).
  std::unique_ptr<IteratorBase> MakeInput(
      std::shared_ptr<const IteratorContext> ctx = nullptr) const {
    return ds_->input()->MakeIteratorInternal(ctx != nullptr ? ctx : ctx_,
                                              ds_->InputPrefix(prefix_));
  }
  // Saves "has_input" and, when `input` is set, its state.
  absl::Status SaveInput(IteratorState* state, IteratorBase* input) const {
    state->WriteInt(Key("has_input"), input != nullptr ? 1 : 0);
    return input != nullptr ? input->Save(state) : absl::OkStatus();
  }
  // Reads "has_input"; restores *input (made when null) or resets it.
  absl::Status RestoreInput(
      const IteratorState& state, std::unique_ptr<IteratorBase>* input,
      std::shared_ptr<const IteratorContext> ctx = nullptr) {
    auto has = state.ReadInt(Key("has_input"));
    if (!has.ok()) return has.status();
    if (*has == 0) {
      input->reset();
      return absl::OkStatus();
    }
    if (*input == nullptr) *input = MakeInput(std::move(ctx));
    return (*input)->Restore(state);
  }

  std::shared_ptr<const D> ds_;
};

// Factories (one per stage; invalid arguments give a dataset whose
// CheckValid() is the InvalidArgument).
DatasetPtr NewTextLineDataset(std::vector<std::string> files,
                              ShardOptions shard, TextLineOptions opts);
DatasetPtr NewFromTensorSlicesDataset(Element components);
DatasetPtr NewRangeDataset(int64_t n);
DatasetPtr NewMapDataset(DatasetPtr input, MapFn fn, int num_parallel_calls,
                         std::vector<DataType> out_dtypes,
                         std::vector<PartialShape> out_shapes);
DatasetPtr NewInterleaveDataset(
    DatasetPtr input, std::function<absl::StatusOr<Dataset>(const Element&)> fn,
    int cycle_length, int block_length, int num_parallel_calls,
    std::vector<DataType> out_dtypes, std::vector<PartialShape> out_shapes);
DatasetPtr NewShuffleDataset(DatasetPtr input, int64_t buffer_size,
                             int64_t seed, bool reshuffle_each_iteration);
DatasetPtr NewBatchDataset(DatasetPtr input, int64_t batch_size,
                           bool drop_remainder, BatchOptions opts);
DatasetPtr NewPrefetchDataset(DatasetPtr input, int64_t buffer_size);
DatasetPtr NewRepeatDataset(DatasetPtr input, int64_t count);
DatasetPtr NewTakeDataset(DatasetPtr input, int64_t count);
DatasetPtr NewSkipDataset(DatasetPtr input, int64_t count);
DatasetPtr NewCacheDataset(DatasetPtr input);

}  // namespace internal
}  // namespace recflow::data

#endif  // RECFLOW_DATA_DATASET_INTERNAL_H_
