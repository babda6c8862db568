// ZipDataset (tf.data's Dataset.zip): the i-th element is the components of
// the i-th elements of every input, in input order; it ends when the
// shortest input ends. The stage is written here, on recflow/data's public
// DatasetBase / IteratorBase interface, because only the graph face needs
// it. Position: each input's, plus whether the zip has ended.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"
#include "recflow/core/variant.h"
#include "recflow/data/dataset.h"
#include "recflow/data/dataset_variant.h"
#include "recflow/kernels/dataset_kernel_util.h"

namespace recflow {
namespace {

using data::Dataset;
using data::DatasetPtr;
using data::Element;
using data::IteratorBase;
using data::IteratorContext;
using data::IteratorState;

class ZipIterator : public IteratorBase {
 public:
  ZipIterator(std::shared_ptr<const IteratorContext> ctx, std::string prefix,
              std::vector<std::unique_ptr<IteratorBase>> inputs, DatasetPtr keep_alive)
      : IteratorBase(std::move(ctx), std::move(prefix)),
        inputs_(std::move(inputs)),
        keep_alive_(std::move(keep_alive)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = ended_;
    if (ended_) return absl::OkStatus();
    Element zipped;
    for (auto& input : inputs_) {
      Element e;
      bool end = false;
      RETURN_IF_ERROR(input->GetNext(&e, &end));
      if (end) {
        ended_ = true;
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      zipped.insert(zipped.end(), std::make_move_iterator(e.begin()),
                    std::make_move_iterator(e.end()));
    }
    *out = std::move(zipped);
    return absl::OkStatus();
  }

  absl::Status Save(IteratorState* state) override {
    state->WriteInt(Key("ended"), ended_ ? 1 : 0);
    for (auto& input : inputs_) RETURN_IF_ERROR(input->Save(state));
    return absl::OkStatus();
  }

  absl::Status Restore(const IteratorState& state) override {
    ASSIGN_OR_RETURN(int64_t ended, state.ReadInt(Key("ended")));
    ended_ = ended != 0;
    for (auto& input : inputs_) RETURN_IF_ERROR(input->Restore(state));
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<IteratorBase>> inputs_;
  DatasetPtr keep_alive_;
  bool ended_ = false;
};

class ZipDatasetImpl : public data::DatasetBase {
 public:
  explicit ZipDatasetImpl(std::vector<DatasetPtr> inputs) : inputs_(std::move(inputs)) {
    for (const DatasetPtr& in : inputs_) {
      const auto& t = in->output_dtypes();
      dtypes_.insert(dtypes_.end(), t.begin(), t.end());
      const auto& s = in->output_shapes();
      if (s.size() == t.size()) {
        shapes_.insert(shapes_.end(), s.begin(), s.end());
      } else {
        shapes_.insert(shapes_.end(), t.size(), PartialShape::Unknown());
      }
    }
  }

  std::unique_ptr<IteratorBase> MakeIteratorInternal(std::shared_ptr<const IteratorContext> ctx,
                                                     const std::string& prefix) const override {
    std::vector<std::unique_ptr<IteratorBase>> inputs;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      inputs.push_back(inputs_[i]->MakeIteratorInternal(ctx, absl::StrCat(prefix, "/Zip[", i, "]")));
    }
    return std::make_unique<ZipIterator>(std::move(ctx), prefix, std::move(inputs),
                                         shared_from_this());
  }
  const std::vector<DataType>& output_dtypes() const override { return dtypes_; }
  const std::vector<PartialShape>& output_shapes() const override { return shapes_; }
  std::string DebugString() const override {
    return absl::StrCat("Zip(", absl::StrJoin(inputs_, ", ", [](std::string* out, const DatasetPtr& d) {
                          out->append(d->DebugString());
                        }), ")");
  }
  absl::Status CheckValid() const override {
    for (const DatasetPtr& in : inputs_) RETURN_IF_ERROR(in->CheckValid());
    return absl::OkStatus();
  }

 private:
  std::vector<DatasetPtr> inputs_;
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
};

class ZipDatasetOp : public dataset_kernels::DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    std::vector<DatasetPtr> inputs;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      ASSIGN_OR_RETURN(Dataset d, data::DatasetFromTensor(
                                      ctx->input(i), absl::StrCat("input_datasets[", i, "]")));
      inputs.push_back(d.impl());
    }
    return Dataset(std::make_shared<const ZipDatasetImpl>(std::move(inputs)));
  }
};

REGISTER_KERNEL_BUILDER(Name("ZipDataset").Device(DEVICE_CPU), ZipDatasetOp);

}  // namespace
}  // namespace recflow
