// CPU kernels of the summary ops (ops/summary_ops.cc): each builds a
// tensorflow.Summary and outputs it serialized in a string scalar, with
// TensorFlow's checks and encodings (histograms over core/histogram.h's
// default buckets, empty runs collapsed).
#include <cmath>
#include <string>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "recflow/core/histogram.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/proto/summary.pb.h"

namespace recflow {
namespace {

template <typename T>
double ToDouble(const T& v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

void OutputSummary(OpKernelContext* ctx, const tensorflow::Summary& s) {
  Tensor* out = nullptr;
  OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
  s.SerializeToString(&out->flat<std::string>()[0]);
}

template <typename T>
class ScalarSummaryOp : public OpKernel {
 public:
  explicit ScalarSummaryOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& tags = ctx->input(0);
    const Tensor& values = ctx->input(1);
    OP_REQUIRES(ctx, tags.shape() == values.shape(),
                errors::InvalidArgument(
                    "ScalarSummary '", name(), "': tags and values not the same shape: ",
                    tags.shape().DebugString(), " != ", values.shape().DebugString(),
                    tags.NumElements() == 1
                        ? absl::StrCat(" (tag '", tags.flat<std::string>()[0], "')")
                        : std::string()));
    auto tag = tags.flat<std::string>();
    auto value = values.flat<T>();
    tensorflow::Summary s;
    for (int64_t i = 0; i < tags.NumElements(); ++i) {
      tensorflow::Summary::Value* v = s.add_value();
      v->set_tag(tag[i]);
      v->set_simple_value(static_cast<float>(ToDouble(value[i])));
    }
    OutputSummary(ctx, s);
  }
};

template <typename T>
class HistogramSummaryOp : public OpKernel {
 public:
  explicit HistogramSummaryOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& tag = ctx->input(0);
    const Tensor& values = ctx->input(1);
    OP_REQUIRES(ctx, tag.dims() == 0,
                errors::InvalidArgument("HistogramSummary '", name(),
                                        "': tags must be scalar, got shape ",
                                        tag.shape().DebugString()));
    histogram::Histogram histo;
    auto flat = values.flat<T>();
    for (int64_t i = 0; i < values.NumElements(); ++i) {
      const double v = ToDouble(flat[i]);
      OP_REQUIRES(ctx, !std::isnan(v),
                  errors::InvalidArgument("Nan in summary histogram for: ", name()));
      OP_REQUIRES(ctx, !std::isinf(v),
                  errors::InvalidArgument("Infinity in summary histogram for: ", name()));
      histo.Add(v);
    }
    tensorflow::Summary s;
    tensorflow::Summary::Value* sv = s.add_value();
    sv->set_tag(tag.flat<std::string>()[0]);
    const histogram::EncodedHistogram h = histo.Encode(/*preserve_zero_buckets=*/false);
    tensorflow::HistogramProto* p = sv->mutable_histo();
    p->set_min(h.min);
    p->set_max(h.max);
    p->set_num(h.num);
    p->set_sum(h.sum);
    p->set_sum_squares(h.sum_squares);
    p->mutable_bucket_limit()->Assign(h.bucket_limit.begin(), h.bucket_limit.end());
    p->mutable_bucket()->Assign(h.bucket.begin(), h.bucket.end());
    OutputSummary(ctx, s);
  }
};

class MergeSummaryOp : public OpKernel {
 public:
  explicit MergeSummaryOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    tensorflow::Summary s;
    std::unordered_set<std::string> tags;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      const Tensor& in = ctx->input(i);
      auto flat = in.flat<std::string>();
      for (int64_t j = 0; j < in.NumElements(); ++j) {
        tensorflow::Summary one;
        OP_REQUIRES(ctx, one.ParseFromString(flat[j]),
                    errors::InvalidArgument("MergeSummary '", name(),
                                            "': Could not parse one of the summary inputs "
                                            "(input ", i, ", element ", j, ")"));
        for (tensorflow::Summary::Value& v : *one.mutable_value()) {
          // An empty tag (TensorSummary's) is never a duplicate, as in TF.
          OP_REQUIRES(ctx, v.tag().empty() || tags.insert(v.tag()).second,
                      errors::InvalidArgument("MergeSummary '", name(), "': Duplicate tag ",
                                              v.tag(), " found in summary inputs"));
          *s.add_value() = std::move(v);
        }
      }
    }
    OutputSummary(ctx, s);
  }
};

class TensorSummaryV2Op : public OpKernel {
 public:
  explicit TensorSummaryV2Op(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& tag = ctx->input(0);
    const Tensor& tensor = ctx->input(1);
    const Tensor& metadata = ctx->input(2);
    OP_REQUIRES(ctx, tag.dims() == 0 && metadata.dims() == 0,
                errors::InvalidArgument("TensorSummaryV2 '", name(),
                                        "': tag and serialized_summary_metadata must be "
                                        "scalars, got shapes ", tag.shape().DebugString(),
                                        " and ", metadata.shape().DebugString()));
    tensorflow::Summary s;
    tensorflow::Summary::Value* v = s.add_value();
    v->set_tag(tag.flat<std::string>()[0]);
    OP_REQUIRES(ctx, v->mutable_metadata()->ParseFromString(metadata.flat<std::string>()[0]),
                errors::InvalidArgument("TensorSummaryV2 '", name(),
                                        "': serialized_summary_metadata is not a "
                                        "SummaryMetadata proto"));
    TensorToProto(tensor, v->mutable_tensor());
    OutputSummary(ctx, s);
  }
};

#define RECFLOW_REGISTER_SUMMARY_(T)                                                      \
  REGISTER_KERNEL_BUILDER(Name("ScalarSummary").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          ScalarSummaryOp<T>);                                            \
  REGISTER_KERNEL_BUILDER(                                                                \
      Name("HistogramSummary").Device(DEVICE_CPU).TypeConstraint<T>("T"),                 \
      HistogramSummaryOp<T>);
RECFLOW_REGISTER_SUMMARY_(float)
RECFLOW_REGISTER_SUMMARY_(double)
RECFLOW_REGISTER_SUMMARY_(int32_t)
RECFLOW_REGISTER_SUMMARY_(int64_t)
RECFLOW_REGISTER_SUMMARY_(uint8_t)
RECFLOW_REGISTER_SUMMARY_(int16_t)
RECFLOW_REGISTER_SUMMARY_(int8_t)
RECFLOW_REGISTER_SUMMARY_(uint16_t)
RECFLOW_REGISTER_SUMMARY_(uint32_t)
RECFLOW_REGISTER_SUMMARY_(uint64_t)
RECFLOW_REGISTER_SUMMARY_(half)
RECFLOW_REGISTER_SUMMARY_(bfloat16)
#undef RECFLOW_REGISTER_SUMMARY_

REGISTER_KERNEL_BUILDER(Name("MergeSummary").Device(DEVICE_CPU), MergeSummaryOp);
REGISTER_KERNEL_BUILDER(Name("TensorSummaryV2").Device(DEVICE_CPU), TensorSummaryV2Op);

}  // namespace
}  // namespace recflow
