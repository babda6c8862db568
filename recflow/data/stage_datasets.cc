// Sequential stages: Shuffle, Batch, Repeat, Take, Skip, Cache.

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/core/variant.h"
#include "recflow/data/dataset.h"
#include "recflow/data/dataset_internal.h"

namespace recflow::data::internal {
namespace {

// A stage whose elements have its input's type.
class SameTypeDataset : public UnaryDataset {
 public:
  using UnaryDataset::UnaryDataset;
  const std::vector<DataType>& output_dtypes() const override {
    return input()->output_dtypes();
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return input()->output_shapes();
  }
};

// ---------------------------------------------------------------------------
// Shuffle

class ShuffleDataset : public SameTypeDataset {
 public:
  ShuffleDataset(DatasetPtr input, int64_t buffer_size, int64_t seed,
                 bool reshuffle)
      : SameTypeDataset(std::move(input),
                        buffer_size >= 1 ? absl::OkStatus()
                                         : errors::InvalidArgument(
                                               "Shuffle: buffer_size is ",
                                               buffer_size, "; must be >= 1")),
        buffer_size_(buffer_size),
        given_seed_(seed),
        seed_(seed >= 0 ? static_cast<uint64_t>(seed)
                        : (uint64_t{std::random_device()()} << 32) ^
                              std::random_device()()),
        reshuffle_(reshuffle) {}

  std::string Name() const override { return "Shuffle"; }
  std::string StageString() const override {
    return absl::StrCat("Shuffle(", buffer_size_, ", seed=",
                        given_seed_ >= 0 ? absl::StrCat(given_seed_) : "random",
                        reshuffle_ ? "" : ", no reshuffle", ")");
  }

  int64_t buffer_size() const { return buffer_size_; }
  // The generator's start for a pass with epoch key `epoch`.
  uint64_t PassSeed(uint64_t epoch) const {
    return Mix64(seed_ ^ (reshuffle_ ? Mix64(epoch ^ 0x5348554646ull) : 0));
  }

 protected:
  std::unique_ptr<IteratorBase> MakeStageIterator(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;

 private:
  const int64_t buffer_size_;
  const int64_t given_seed_;
  const uint64_t seed_;
  const bool reshuffle_;
};

// Fills a buffer of buffer_size elements, then yields a uniformly chosen one
// and refills its place. Position: the buffer (tensors), the generator
// state and the input's position.
class ShuffleIterator : public StageIterator<ShuffleDataset> {
 public:
  ShuffleIterator(std::shared_ptr<const ShuffleDataset> ds,
                  std::shared_ptr<const IteratorContext> ctx,
                  std::string prefix)
      : StageIterator(std::move(ds), std::move(ctx), std::move(prefix)),
        rng_(ds_->PassSeed(ctx_->epoch)) {
    input_ = MakeInput();
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    while (input_ != nullptr &&
           static_cast<int64_t>(buffer_.size()) < ds_->buffer_size()) {
      Element e;
      bool end = false;
      RETURN_IF_ERROR(input_->GetNext(&e, &end));
      if (end) {
        input_.reset();
        break;
      }
      buffer_.push_back(std::move(e));
    }
    if (buffer_.empty()) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    const size_t i = rng_.Uniform(buffer_.size());
    *out = std::move(buffer_[i]);
    if (i + 1 != buffer_.size()) buffer_[i] = std::move(buffer_.back());
    buffer_.pop_back();
    return absl::OkStatus();
  }

  absl::Status Save(IteratorState* state) override {
    state->WriteInt(Key("rng"), static_cast<int64_t>(rng_.state()));
    state->WriteInt(Key("buffer_size"), static_cast<int64_t>(buffer_.size()));
    for (size_t i = 0; i < buffer_.size(); ++i) {
      SaveElement(state, Key(absl::StrCat("buffer/", i)), buffer_[i]);
    }
    return SaveInput(state, input_.get());
  }

  absl::Status Restore(const IteratorState& state) override {
    ASSIGN_OR_RETURN(int64_t rng, state.ReadInt(Key("rng")));
    ASSIGN_OR_RETURN(int64_t n, state.ReadInt(Key("buffer_size")));
    if (n < 0 || n > ds_->buffer_size()) {
      return errors::DataLoss("Shuffle state at '", prefix(), "' holds ", n,
                              " elements; the buffer holds at most ",
                              ds_->buffer_size());
    }
    rng_ = Rng(static_cast<uint64_t>(rng));
    buffer_.clear();
    for (int64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(Element e,
                       RestoreElement(state, Key(absl::StrCat("buffer/", i))));
      buffer_.push_back(std::move(e));
    }
    return RestoreInput(state, &input_);
  }

 private:
  std::unique_ptr<IteratorBase> input_;  // Null once exhausted.
  std::vector<Element> buffer_;
  Rng rng_;
};

std::unique_ptr<IteratorBase> ShuffleDataset::MakeStageIterator(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  return std::make_unique<ShuffleIterator>(SharedSelf(this), std::move(ctx),
                                           prefix);
}

// ---------------------------------------------------------------------------
// Batch

class BatchDataset : public UnaryDataset {
 public:
  BatchDataset(DatasetPtr input, int64_t batch_size, bool drop_remainder,
               BatchOptions opts)
      : UnaryDataset(
            input, batch_size >= 1
                       ? absl::OkStatus()
                       : errors::InvalidArgument("Batch: batch_size is ",
                                                 batch_size, "; must be >= 1")),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder),
        ragged_allowed_(opts.ragged) {
    const std::vector<DataType>& in_dtypes = input->output_dtypes();
    const std::vector<PartialShape>& in_shapes = input->output_shapes();
    const int64_t b = drop_remainder ? batch_size : kUnknownDim;
    for (size_t c = 0; c < in_dtypes.size(); ++c) {
      const PartialShape shape =
          c < in_shapes.size() ? in_shapes[c] : PartialShape::Unknown();
      const bool ragged =
          opts.ragged && shape.rank() >= 1 && shape.dim(0) == kUnknownDim;
      ragged_.push_back(ragged);
      if (shape.unknown_rank()) {
        dtypes_.push_back(in_dtypes[c]);
        shapes_.push_back(PartialShape::Unknown());
        continue;
      }
      std::vector<int64_t> dims(shape.dims().begin(), shape.dims().end());
      if (ragged) {
        dtypes_.push_back(in_dtypes[c]);
        shapes_.push_back(PartialShape(absl::MakeConstSpan(dims)));
        dtypes_.push_back(DT_INT64);
        shapes_.push_back(PartialShape({b == kUnknownDim ? b : b + 1}));
      } else {
        dims.insert(dims.begin(), b);
        dtypes_.push_back(in_dtypes[c]);
        shapes_.push_back(PartialShape(absl::MakeConstSpan(dims)));
      }
    }
  }

  std::string Name() const override { return "Batch"; }
  std::string StageString() const override {
    return absl::StrCat("Batch(", batch_size_,
                        drop_remainder_ ? ", drop_remainder" : "",
                        ragged_allowed_ ? "" : ", dense", ")");
  }
  const std::vector<DataType>& output_dtypes() const override {
    return dtypes_;
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return shapes_;
  }

  int64_t batch_size() const { return batch_size_; }
  bool drop_remainder() const { return drop_remainder_; }

  // Stacks (or, for ragged components, concatenates with row_splits) the
  // elements.
  absl::StatusOr<Element> MakeBatch(const std::vector<Element>& elements) const;

 protected:
  std::unique_ptr<IteratorBase> MakeStageIterator(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;

 private:
  const int64_t batch_size_;
  const bool drop_remainder_;
  const bool ragged_allowed_;
  std::vector<bool> ragged_;  // Per input component; empty when unknown.
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
};

// Copies src's elements into dst starting at element `offset`.
absl::Status CopyElements(const Tensor& src, Tensor* dst, int64_t offset) {
  const int64_t n = src.NumElements();
  if (n == 0) return absl::OkStatus();
  if (DataTypeIsPod(src.dtype())) {
    const size_t size = DataTypeSize(src.dtype());
    std::memcpy(dst->raw_data() + offset * size, src.raw_data(), n * size);
  } else if (src.dtype() == DT_STRING) {
    std::copy_n(src.data<std::string>(), n, dst->data<std::string>() + offset);
  } else if (src.dtype() == DT_VARIANT) {
    std::copy_n(src.data<Variant>(), n, dst->data<Variant>() + offset);
  } else {
    return errors::Unimplemented("Batch: cannot batch ",
                                 DataTypeString(src.dtype()), " components");
  }
  return absl::OkStatus();
}

absl::StatusOr<Element> BatchDataset::MakeBatch(
    const std::vector<Element>& elements) const {
  const int64_t n = static_cast<int64_t>(elements.size());
  const size_t ncomp = elements[0].size();
  for (int64_t i = 1; i < n; ++i) {
    if (elements[i].size() != ncomp) {
      return errors::InvalidArgument("Batch: element ", i, " of the batch has ",
                                     elements[i].size(),
                                     " components, element 0 has ", ncomp);
    }
  }
  if (!ragged_.empty() && ncomp != ragged_.size()) {
    return errors::InvalidArgument("Batch: input elements have ", ncomp,
                                   " components, declared ", ragged_.size());
  }
  Element out;
  for (size_t c = 0; c < ncomp; ++c) {
    const Tensor& first = elements[0][c];
    const bool ragged = !ragged_.empty() && ragged_[c];
    for (int64_t i = 1; i < n; ++i) {
      const Tensor& t = elements[i][c];
      if (t.dtype() != first.dtype()) {
        return errors::InvalidArgument(
            "Batch: component ", c, " is ", DataTypeString(t.dtype()),
            " in element ", i, " but ", DataTypeString(first.dtype()),
            " in element 0");
      }
      bool same = ragged ? t.dims() == first.dims() && t.dims() >= 1
                         : t.shape() == first.shape();
      for (int d = 1; ragged && same && d < t.dims(); ++d) {
        same = t.dim_size(d) == first.dim_size(d);
      }
      if (!same && !ragged_allowed_) {
        // tf.data's batch: every element must have the same shape.
        return errors::InvalidArgument(
            "Cannot batch tensors with different shapes in component ", c,
            ". First element had shape ", first.shape().DebugString(),
            " and element ", i, " had shape ", t.shape().DebugString(), ".");
      }
      if (!same) {
        return errors::InvalidArgument(
            "Batch: component ", c, " has shape ", t.shape().DebugString(),
            " in element ", i, " but ", first.shape().DebugString(),
            " in element 0",
            ragged ? "; a ragged component may differ in dim 0 only"
                   : "; declare dim 0 unknown (e.g. Map out_shapes [?]) to "
                     "batch it ragged");
      }
    }
    if (ragged) {
      if (first.dims() < 1) {
        return errors::InvalidArgument("Batch: ragged component ", c,
                                       " is a scalar");
      }
      ASSIGN_OR_RETURN(Tensor splits,
                       Tensor::Create(DT_INT64, TensorShape({n + 1})));
      int64_t* s = splits.data<int64_t>();
      s[0] = 0;
      for (int64_t i = 0; i < n; ++i)
        s[i + 1] = s[i] + elements[i][c].dim_size(0);
      TensorShape shape = first.shape();
      shape.set_dim(0, s[n]);
      ASSIGN_OR_RETURN(Tensor values, Tensor::Create(first.dtype(), shape));
      int64_t row = 1;  // Elements per dim-0 row.
      for (int d = 1; d < first.dims(); ++d) row *= first.dim_size(d);
      for (int64_t i = 0; i < n; ++i) {
        RETURN_IF_ERROR(CopyElements(elements[i][c], &values, s[i] * row));
      }
      out.push_back(std::move(values));
      out.push_back(std::move(splits));
    } else {
      TensorShape shape = first.shape();
      shape.InsertDim(0, n);
      ASSIGN_OR_RETURN(Tensor stacked, Tensor::Create(first.dtype(), shape));
      const int64_t per = first.NumElements();
      for (int64_t i = 0; i < n; ++i) {
        RETURN_IF_ERROR(CopyElements(elements[i][c], &stacked, i * per));
      }
      out.push_back(std::move(stacked));
    }
  }
  return out;
}

// Position: the input's, plus the elements collected before an input error
// interrupted a batch.
class BatchIterator : public StageIterator<BatchDataset> {
 public:
  BatchIterator(std::shared_ptr<const BatchDataset> ds,
                std::shared_ptr<const IteratorContext> ctx, std::string prefix)
      : StageIterator(std::move(ds), std::move(ctx), std::move(prefix)) {
    input_ = MakeInput();
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    const size_t b = static_cast<size_t>(ds_->batch_size());
    while (input_ != nullptr && pending_.size() < b) {
      Element e;
      bool end = false;
      RETURN_IF_ERROR(input_->GetNext(&e, &end));
      if (end) {
        input_.reset();
        break;
      }
      pending_.push_back(std::move(e));
    }
    if (pending_.empty() || (ds_->drop_remainder() && pending_.size() < b)) {
      pending_.clear();
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    std::vector<Element> elements = std::move(pending_);
    pending_.clear();
    ASSIGN_OR_RETURN(*out, ds_->MakeBatch(elements));
    return absl::OkStatus();
  }

  absl::Status Save(IteratorState* state) override {
    state->WriteInt(Key("pending"), static_cast<int64_t>(pending_.size()));
    for (size_t i = 0; i < pending_.size(); ++i) {
      SaveElement(state, Key(absl::StrCat("pending/", i)), pending_[i]);
    }
    return SaveInput(state, input_.get());
  }

  absl::Status Restore(const IteratorState& state) override {
    ASSIGN_OR_RETURN(int64_t n, state.ReadInt(Key("pending")));
    if (n < 0 || n > ds_->batch_size()) {
      return errors::DataLoss("Batch state at '", prefix(), "' holds ", n,
                              " pending elements");
    }
    pending_.clear();
    for (int64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(Element e,
                       RestoreElement(state, Key(absl::StrCat("pending/", i))));
      pending_.push_back(std::move(e));
    }
    return RestoreInput(state, &input_);
  }

 private:
  std::unique_ptr<IteratorBase> input_;  // Null once exhausted.
  std::vector<Element> pending_;
};

std::unique_ptr<IteratorBase> BatchDataset::MakeStageIterator(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  return std::make_unique<BatchIterator>(SharedSelf(this), std::move(ctx),
                                         prefix);
}

// ---------------------------------------------------------------------------
// Repeat

absl::Status CountStatus(absl::string_view stage, int64_t count) {
  if (count >= -1) return absl::OkStatus();
  return errors::InvalidArgument(stage, ": count is ", count,
                                 "; must be >= 0, or -1 for all");
}

class RepeatDataset : public SameTypeDataset {
 public:
  RepeatDataset(DatasetPtr input, int64_t count)
      : SameTypeDataset(std::move(input), CountStatus("Repeat", count)),
        count_(count) {}
  std::string Name() const override { return "Repeat"; }
  std::string StageString() const override {
    return count_ < 0 ? "Repeat" : absl::StrCat("Repeat(", count_, ")");
  }
  int64_t count() const { return count_; }

 protected:
  std::unique_ptr<IteratorBase> MakeStageIterator(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;

 private:
  const int64_t count_;
};

// A new input iterator per pass, with the pass's epoch key (ContextForPass).
// Position: the pass number and the input's position in it.
class RepeatIterator : public StageIterator<RepeatDataset> {
 public:
  RepeatIterator(std::shared_ptr<const RepeatDataset> ds,
                 std::shared_ptr<const IteratorContext> ctx, std::string prefix)
      : StageIterator(std::move(ds), std::move(ctx), std::move(prefix)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    while (!done_) {
      if (input_ == nullptr) {
        if (ds_->count() >= 0 && pass_ >= ds_->count()) break;
        input_ = MakeInput(ContextForPass(ctx_, pass_));
        produced_ = false;
      }
      bool end = false;
      RETURN_IF_ERROR(input_->GetNext(out, &end));
      if (!end) {
        produced_ = true;
        return absl::OkStatus();
      }
      input_.reset();
      ++pass_;
      if (!produced_) break;  // An empty pass: every pass is empty.
    }
    done_ = true;
    *end_of_sequence = true;
    return absl::OkStatus();
  }

  absl::Status Save(IteratorState* state) override {
    state->WriteInt(Key("pass"), pass_);
    state->WriteInt(Key("produced"), produced_ ? 1 : 0);
    state->WriteInt(Key("done"), done_ ? 1 : 0);
    return SaveInput(state, input_.get());
  }

  absl::Status Restore(const IteratorState& state) override {
    ASSIGN_OR_RETURN(pass_, state.ReadInt(Key("pass")));
    ASSIGN_OR_RETURN(int64_t produced, state.ReadInt(Key("produced")));
    ASSIGN_OR_RETURN(int64_t done, state.ReadInt(Key("done")));
    if (pass_ < 0) {
      return errors::DataLoss("Repeat state at '", prefix(), "' has pass ",
                              pass_);
    }
    produced_ = produced != 0;
    done_ = done != 0;
    input_.reset();
    return RestoreInput(state, &input_, ContextForPass(ctx_, pass_));
  }

 private:
  std::unique_ptr<IteratorBase> input_;  // The current pass's, or null.
  int64_t pass_ = 0;
  bool produced_ = false;  // The current pass yielded an element.
  bool done_ = false;
};

std::unique_ptr<IteratorBase> RepeatDataset::MakeStageIterator(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  return std::make_unique<RepeatIterator>(SharedSelf(this), std::move(ctx),
                                          prefix);
}

// ---------------------------------------------------------------------------
// Take, Skip

class TakeSkipDataset : public SameTypeDataset {
 public:
  TakeSkipDataset(DatasetPtr input, int64_t count, bool take)
      : SameTypeDataset(std::move(input),
                        CountStatus(take ? "Take" : "Skip", count)),
        count_(count),
        take_(take) {}
  std::string Name() const override { return take_ ? "Take" : "Skip"; }
  std::string StageString() const override {
    return absl::StrCat(Name(), "(", count_, ")");
  }
  int64_t count() const { return count_; }
  bool take() const { return take_; }

 protected:
  std::unique_ptr<IteratorBase> MakeStageIterator(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;

 private:
  const int64_t count_;
  const bool take_;
};

// Position: elements taken / skipped so far, and the input's position.
class TakeSkipIterator : public StageIterator<TakeSkipDataset> {
 public:
  TakeSkipIterator(std::shared_ptr<const TakeSkipDataset> ds,
                   std::shared_ptr<const IteratorContext> ctx,
                   std::string prefix)
      : StageIterator(std::move(ds), std::move(ctx), std::move(prefix)) {
    input_ = MakeInput();
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    const int64_t count = ds_->count();
    if (ds_->take()) {
      if (count >= 0 && n_ >= count) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
      if (!*end_of_sequence) ++n_;
      return absl::OkStatus();
    }
    while (count < 0 || n_ < count) {
      Element skipped;
      RETURN_IF_ERROR(input_->GetNext(&skipped, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      ++n_;
    }
    return input_->GetNext(out, end_of_sequence);
  }

  absl::Status Save(IteratorState* state) override {
    state->WriteInt(Key("n"), n_);
    return input_->Save(state);
  }
  absl::Status Restore(const IteratorState& state) override {
    ASSIGN_OR_RETURN(n_, state.ReadInt(Key("n")));
    return input_->Restore(state);
  }

 private:
  std::unique_ptr<IteratorBase> input_;
  int64_t n_ = 0;
};

std::unique_ptr<IteratorBase> TakeSkipDataset::MakeStageIterator(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  return std::make_unique<TakeSkipIterator>(SharedSelf(this), std::move(ctx),
                                            prefix);
}

// ---------------------------------------------------------------------------
// Cache

// The elements of the first complete pass, kept in the Iterator's resources
// under the Cache iterator's prefix so that they survive Repeat making a new
// Cache iterator for every pass.
struct CacheStore {
  Mutex mu;
  DatasetPtr owner;  // The Cache dataset the elements belong to.
  bool complete = false;
  std::vector<Element> elements;
};

class CacheDataset : public SameTypeDataset {
 public:
  explicit CacheDataset(DatasetPtr input)
      : SameTypeDataset(std::move(input), absl::OkStatus()) {}
  std::string Name() const override { return "Cache"; }

 protected:
  std::unique_ptr<IteratorBase> MakeStageIterator(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;
};

// Fill mode (no complete cache yet): passes the input through and appends
// to the store; replay mode: yields the stored elements. Position: the mode,
// the elements held (all of them: a restored iterator may live in a process
// that never filled the cache) and the input's position or the replay index.
class CacheIterator : public StageIterator<CacheDataset> {
 public:
  CacheIterator(std::shared_ptr<const CacheDataset> ds,
                std::shared_ptr<const IteratorContext> ctx, std::string prefix)
      : StageIterator(std::move(ds), std::move(ctx), std::move(prefix)) {
    auto make = [] { return std::make_shared<CacheStore>(); };
    store_ =
        ctx_->resources != nullptr
            ? ctx_->resources->GetOrCreate<CacheStore>(prefix_ + "#cache", make)
            : make();
    MutexLock lock(&store_->mu);
    if (store_->owner != ds_) {
      store_->owner = ds_;
      store_->complete = false;
      store_->elements.clear();
    }
    replay_ = store_->complete;
    if (!replay_) {
      store_->elements.clear();
      input_ = MakeInput();
    }
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    if (replay_) {
      MutexLock lock(&store_->mu);
      if (index_ < static_cast<int64_t>(store_->elements.size())) {
        *out = store_->elements[index_++];
      } else {
        *end_of_sequence = true;
      }
      return absl::OkStatus();
    }
    if (input_ == nullptr) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
    MutexLock lock(&store_->mu);
    if (*end_of_sequence) {
      input_.reset();
      store_->complete = true;
    } else {
      store_->elements.push_back(*out);
    }
    return absl::OkStatus();
  }

  absl::Status Save(IteratorState* state) override {
    state->WriteInt(Key("replay"), replay_ ? 1 : 0);
    state->WriteInt(Key("index"), index_);
    {
      MutexLock lock(&store_->mu);
      state->WriteInt(Key("complete"), store_->complete ? 1 : 0);
      state->WriteInt(Key("count"),
                      static_cast<int64_t>(store_->elements.size()));
      for (size_t i = 0; i < store_->elements.size(); ++i) {
        SaveElement(state, Key(absl::StrCat("cache/", i)), store_->elements[i]);
      }
    }
    return SaveInput(state, input_.get());
  }

  absl::Status Restore(const IteratorState& state) override {
    ASSIGN_OR_RETURN(int64_t replay, state.ReadInt(Key("replay")));
    ASSIGN_OR_RETURN(index_, state.ReadInt(Key("index")));
    ASSIGN_OR_RETURN(int64_t complete, state.ReadInt(Key("complete")));
    ASSIGN_OR_RETURN(int64_t count, state.ReadInt(Key("count")));
    if (count < 0 || index_ < 0 || index_ > count) {
      return errors::DataLoss("Cache state at '", prefix(), "' is at ", index_,
                              " of ", count);
    }
    std::vector<Element> elements;
    for (int64_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(Element e,
                       RestoreElement(state, Key(absl::StrCat("cache/", i))));
      elements.push_back(std::move(e));
    }
    {
      MutexLock lock(&store_->mu);
      store_->owner = ds_;
      store_->complete = complete != 0;
      store_->elements = std::move(elements);
    }
    replay_ = replay != 0;
    return RestoreInput(state, &input_);
  }

 private:
  std::shared_ptr<CacheStore> store_;
  bool replay_ = false;
  int64_t index_ = 0;                    // Replay position.
  std::unique_ptr<IteratorBase> input_;  // Fill mode, until its end.
};

std::unique_ptr<IteratorBase> CacheDataset::MakeStageIterator(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  return std::make_unique<CacheIterator>(SharedSelf(this), std::move(ctx),
                                         prefix);
}

}  // namespace

DatasetPtr NewShuffleDataset(DatasetPtr input, int64_t buffer_size,
                             int64_t seed, bool reshuffle_each_iteration) {
  return std::make_shared<ShuffleDataset>(std::move(input), buffer_size, seed,
                                          reshuffle_each_iteration);
}

DatasetPtr NewBatchDataset(DatasetPtr input, int64_t batch_size,
                           bool drop_remainder, BatchOptions opts) {
  return std::make_shared<BatchDataset>(std::move(input), batch_size,
                                        drop_remainder, opts);
}

DatasetPtr NewRepeatDataset(DatasetPtr input, int64_t count) {
  return std::make_shared<RepeatDataset>(std::move(input), count);
}

DatasetPtr NewTakeDataset(DatasetPtr input, int64_t count) {
  return std::make_shared<TakeSkipDataset>(std::move(input), count, true);
}

DatasetPtr NewSkipDataset(DatasetPtr input, int64_t count) {
  return std::make_shared<TakeSkipDataset>(std::move(input), count, false);
}

DatasetPtr NewCacheDataset(DatasetPtr input) {
  return std::make_shared<CacheDataset>(std::move(input));
}

}  // namespace recflow::data::internal
