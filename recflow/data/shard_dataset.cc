// Shard: every num_shards-th element of the input, starting at index
// (tf.data's Dataset.shard).

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/data/dataset.h"
#include "recflow/data/dataset_internal.h"

namespace recflow::data {
namespace internal {
namespace {

absl::Status ShardStatus(int64_t num_shards, int64_t index) {
  if (num_shards < 1) {
    return errors::InvalidArgument("Shard: num_shards is ", num_shards,
                                   "; must be >= 1");
  }
  if (index < 0 || index >= num_shards) {
    return errors::InvalidArgument("Shard: index is ", index,
                                   "; must be in [0, ", num_shards,
                                   ") for num_shards = ", num_shards);
  }
  return absl::OkStatus();
}

class ShardDataset : public UnaryDataset {
 public:
  ShardDataset(DatasetPtr input, int64_t num_shards, int64_t index)
      : UnaryDataset(std::move(input), ShardStatus(num_shards, index)),
        num_shards_(num_shards),
        index_(index) {}

  std::string Name() const override { return "Shard"; }
  std::string StageString() const override {
    return absl::StrCat("Shard(", num_shards_, ", ", index_, ")");
  }
  const std::vector<DataType>& output_dtypes() const override {
    return input()->output_dtypes();
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return input()->output_shapes();
  }
  int64_t num_shards() const { return num_shards_; }
  int64_t index() const { return index_; }

 protected:
  std::unique_ptr<IteratorBase> MakeStageIterator(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;

 private:
  const int64_t num_shards_;
  const int64_t index_;
};

// Position: the index of the input's next element, and the input's
// position.
class ShardIterator : public StageIterator<ShardDataset> {
 public:
  ShardIterator(std::shared_ptr<const ShardDataset> ds,
                std::shared_ptr<const IteratorContext> ctx, std::string prefix)
      : StageIterator(std::move(ds), std::move(ctx), std::move(prefix)) {
    input_ = MakeInput();
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    while (true) {
      Element e;
      RETURN_IF_ERROR(input_->GetNext(&e, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      const bool mine = next_ % ds_->num_shards() == ds_->index();
      ++next_;
      if (mine) {
        *out = std::move(e);
        return absl::OkStatus();
      }
    }
  }

  absl::Status Save(IteratorState* state) override {
    state->WriteInt(Key("next"), next_);
    return input_->Save(state);
  }
  absl::Status Restore(const IteratorState& state) override {
    ASSIGN_OR_RETURN(next_, state.ReadInt(Key("next")));
    if (next_ < 0) {
      return errors::DataLoss("Shard state at '", prefix(),
                              "' has a negative position ", next_);
    }
    return input_->Restore(state);
  }

 private:
  std::unique_ptr<IteratorBase> input_;
  int64_t next_ = 0;
};

std::unique_ptr<IteratorBase> ShardDataset::MakeStageIterator(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  return std::make_unique<ShardIterator>(SharedSelf(this), std::move(ctx),
                                         prefix);
}

}  // namespace
}  // namespace internal

Dataset Dataset::Shard(int64_t num_shards, int64_t index) const {
  return Dataset(
      std::make_shared<internal::ShardDataset>(impl_, num_shards, index));
}

}  // namespace recflow::data
