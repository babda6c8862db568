// Kernels of tf.data's dataset ops without functions (ops/dataset_ops.cc):
// each builds a data::Dataset with recflow/data's builder from its inputs
// and outputs it as a DT_VARIANT scalar. Argument checks and their messages
// follow TensorFlow's kernels (tensorflow/core/kernels/data/).
#include <limits>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/core/variant.h"
#include "recflow/data/dataset.h"
#include "recflow/kernels/dataset_kernel_util.h"

namespace recflow {
namespace {

using data::Dataset;
using data::Element;
using dataset_kernels::DatasetOpKernel;
using dataset_kernels::InputDataset;
using dataset_kernels::ScalarBool;
using dataset_kernels::ScalarInt;
using dataset_kernels::ScalarString;

absl::StatusOr<Element> Components(OpKernelContext* ctx) {
  Element components;
  RETURN_IF_ERROR(ctx->input_list("components", &components));
  return components;
}

class TensorDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Element components, Components(ctx));
    // One element: each component as the single slice of a [1, ...] tensor.
    for (Tensor& t : components) {
      TensorShape shape = t.shape();
      shape.InsertDim(0, 1);
      ASSIGN_OR_RETURN(t, t.Reshaped(shape));
    }
    return Dataset::FromTensorSlices(std::move(components));
  }
};

class TensorSliceDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Element components, Components(ctx));
    for (size_t i = 0; i < components.size(); ++i) {
      if (components[i].dims() < 1) {
        return errors::InvalidArgument("All components must be at least 1-dimensional; "
                                       "component ", i, " is a scalar");
      }
      if (components[i].dim_size(0) != components[0].dim_size(0)) {
        return errors::InvalidArgument(
            "All components must have the same size in the 0th dimension; component 0 "
            "has ", components[0].dim_size(0), " rows, component ", i, " has ",
            components[i].dim_size(0));
      }
    }
    return Dataset::FromTensorSlices(std::move(components));
  }
};

// start, start + step, ... < stop (> stop for a negative step), as
// Range(count) mapped to the declared dtype.
class RangeDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t start, ScalarInt(ctx, 0, "start"));
    ASSIGN_OR_RETURN(int64_t stop, ScalarInt(ctx, 1, "stop"));
    ASSIGN_OR_RETURN(int64_t step, ScalarInt(ctx, 2, "step"));
    if (step == 0) return errors::InvalidArgument("step must be a non-zero integer.");
    const DataType dtype = output_types_.empty() ? DT_INT64 : output_types_[0];
    if (output_types_.size() > 1 ||
        (dtype != DT_INT64 && dtype != DT_INT32 && dtype != DT_FLOAT &&
         dtype != DT_DOUBLE)) {
      return errors::InvalidArgument("RangeDataset yields one int64, int32, float or "
                                     "double component, not ",
                                     DataTypeString(dtype));
    }
    const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
    const __int128 mag = step > 0 ? __int128{step} : -__int128{step};
    const int64_t count = span <= 0 ? 0 : static_cast<int64_t>((span + mag - 1) / mag);
    Dataset range = Dataset::Range(count);
    if (start == 0 && step == 1 && dtype == DT_INT64) return range;
    data::MapFn fn = [start, step, dtype](Element e) -> absl::StatusOr<Element> {
      const int64_t v = start + e[0].scalar<int64_t>() * step;
      Element out;
      switch (dtype) {
        case DT_INT32: out.push_back(Tensor::Scalar<int32_t>(static_cast<int32_t>(v))); break;
        case DT_FLOAT: out.push_back(Tensor::Scalar<float>(static_cast<float>(v))); break;
        case DT_DOUBLE: out.push_back(Tensor::Scalar<double>(static_cast<double>(v))); break;
        default: out.push_back(Tensor::Scalar<int64_t>(v)); break;
      }
      return out;
    };
    return range.Map(std::move(fn), 1, {dtype}, {PartialShape({})});
  }
};

// TextLineDataset / TFRecordDataset: the file names, and the only
// compression recflow reads ("").
absl::StatusOr<std::vector<std::string>> FileNames(OpKernelContext* ctx) {
  const Tensor& t = ctx->input(0);
  if (t.dtype() != DT_STRING || t.dims() > 1) {
    return errors::InvalidArgument("filenames must be a scalar or a vector of strings, got ",
                                   DataTypeString(t.dtype()), " ", t.shape().DebugString());
  }
  std::vector<std::string> files(t.flat<std::string>().begin(), t.flat<std::string>().end());
  ASSIGN_OR_RETURN(std::string compression, ScalarString(ctx, 1, "compression_type"));
  if (!compression.empty()) {
    return errors::Unimplemented("compression_type '", compression,
                                 "' is not supported by recflow; only uncompressed "
                                 "files (compression_type '') are read");
  }
  ASSIGN_OR_RETURN(int64_t buffer_size, ScalarInt(ctx, 2, "buffer_size"));
  if (buffer_size < 0) {
    return errors::InvalidArgument("buffer_size must be >= 0 (0 means the default), got ",
                                   buffer_size);
  }
  return files;
}

class TextLineDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::vector<std::string> files, FileNames(ctx));
    data::TextLineOptions opts;
    const int64_t buffer = ctx->input(2).scalar<int64_t>();
    if (buffer > 0) opts.read_buffer_bytes = buffer;
    opts.max_line_bytes = std::numeric_limits<int32_t>::max();  // TF has no limit.
    return Dataset::TextLine(std::move(files), {}, opts);
  }
};

class TFRecordDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::vector<std::string> files, FileNames(ctx));
    data::TFRecordOptions opts;
    const int64_t buffer = ctx->input(2).scalar<int64_t>();
    if (buffer > 0) opts.read_buffer_bytes = buffer;
    return Dataset::TFRecord(std::move(files), {}, opts);
  }
};

// BatchDataset (no drop_remainder input) and BatchDatasetV2: dense stacking.
class BatchDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Dataset input, InputDataset(ctx, 0));
    ASSIGN_OR_RETURN(int64_t batch_size, ScalarInt(ctx, 1, "batch_size"));
    if (batch_size <= 0) {
      return errors::InvalidArgument("Batch size must be greater than zero, got ",
                                     batch_size);
    }
    bool drop_remainder = false;
    if (ctx->num_inputs() > 2) {
      ASSIGN_OR_RETURN(drop_remainder, ScalarBool(ctx, 2, "drop_remainder"));
    }
    return input.Batch(batch_size, drop_remainder, {.ragged = false});
  }
};

class ShuffleDatasetOp : public DatasetOpKernel {
 public:
  explicit ShuffleDatasetOp(OpKernelConstruction* c) : DatasetOpKernel(c) {
    c->SetStatus(c->GetAttr("reshuffle_each_iteration", &reshuffle_));
  }
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Dataset input, InputDataset(ctx, 0));
    ASSIGN_OR_RETURN(int64_t buffer_size, ScalarInt(ctx, 1, "buffer_size"));
    ASSIGN_OR_RETURN(int64_t seed, ScalarInt(ctx, 2, "seed"));
    ASSIGN_OR_RETURN(int64_t seed2, ScalarInt(ctx, 3, "seed2"));
    if (buffer_size <= 0) {
      return errors::InvalidArgument("buffer_size must be greater than zero, got ",
                                     buffer_size);
    }
    // TF: seed = seed2 = 0 draws a random seed; else the pair is the seed.
    int64_t combined = -1;
    if (seed != 0 || seed2 != 0) {
      const uint64_t mixed = (static_cast<uint64_t>(seed) * 0x9e3779b97f4a7c15ull) ^
                             static_cast<uint64_t>(seed2);
      combined = static_cast<int64_t>(mixed >> 1);  // >= 0: deterministic.
    }
    return input.Shuffle(buffer_size, combined, reshuffle_);
  }

 private:
  bool reshuffle_ = true;
};

// Repeat / Take / Skip: TF reads every negative count as "all" (forever).
template <int kKind>
class CountDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Dataset input, InputDataset(ctx, 0));
    ASSIGN_OR_RETURN(int64_t count, ScalarInt(ctx, 1, "count"));
    if (count < 0) count = -1;
    if constexpr (kKind == 0) return input.Repeat(count);
    if constexpr (kKind == 1) return input.Take(count);
    return input.Skip(count);
  }
};

class ShardDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Dataset input, InputDataset(ctx, 0));
    ASSIGN_OR_RETURN(int64_t num_shards, ScalarInt(ctx, 1, "num_shards"));
    ASSIGN_OR_RETURN(int64_t index, ScalarInt(ctx, 2, "index"));
    if (num_shards <= 0) {
      return errors::InvalidArgument(
          "Number of shards must be greater than zero (currently num_shards = ",
          num_shards, ").");
    }
    if (index < 0 || index >= num_shards) {
      return errors::InvalidArgument("Index must be between 0 and ", num_shards - 1,
                                     " (currently index = ", index, ").");
    }
    return input.Shard(num_shards, index);
  }
};

class CacheDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Dataset input, InputDataset(ctx, 0));
    ASSIGN_OR_RETURN(std::string filename, ScalarString(ctx, 1, "filename"));
    if (!filename.empty()) {
      return errors::Unimplemented("cache(filename='", filename,
                                   "'): recflow caches in memory only; pass no filename");
    }
    return input.Cache();
  }
};

// AUTOTUNE (-1) prefetches a fixed 2 elements; 0 adds no stage.
class PrefetchDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Dataset input, InputDataset(ctx, 0));
    ASSIGN_OR_RETURN(int64_t buffer_size, ScalarInt(ctx, 1, "buffer_size"));
    if (buffer_size < -1) {
      return errors::InvalidArgument("buffer_size must be >= 0 or -1 (AUTOTUNE), got ",
                                     buffer_size);
    }
    if (buffer_size == 0) return input;
    return input.Prefetch(buffer_size == -1 ? 2 : buffer_size);
  }
};

// ModelDataset / OptimizeDataset(V2): tf.data's autotuning and rewrites.
class PassThroughDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    return InputDataset(ctx, 0);
  }
};

REGISTER_KERNEL_BUILDER(Name("TensorDataset").Device(DEVICE_CPU), TensorDatasetOp);
REGISTER_KERNEL_BUILDER(Name("TensorSliceDataset").Device(DEVICE_CPU), TensorSliceDatasetOp);
REGISTER_KERNEL_BUILDER(Name("RangeDataset").Device(DEVICE_CPU), RangeDatasetOp);
REGISTER_KERNEL_BUILDER(Name("TextLineDataset").Device(DEVICE_CPU), TextLineDatasetOp);
REGISTER_KERNEL_BUILDER(Name("TFRecordDataset").Device(DEVICE_CPU), TFRecordDatasetOp);
REGISTER_KERNEL_BUILDER(Name("BatchDataset").Device(DEVICE_CPU), BatchDatasetOp);
REGISTER_KERNEL_BUILDER(Name("BatchDatasetV2").Device(DEVICE_CPU), BatchDatasetOp);
REGISTER_KERNEL_BUILDER(Name("ShuffleDataset").Device(DEVICE_CPU), ShuffleDatasetOp);
REGISTER_KERNEL_BUILDER(Name("RepeatDataset").Device(DEVICE_CPU), CountDatasetOp<0>);
REGISTER_KERNEL_BUILDER(Name("TakeDataset").Device(DEVICE_CPU), CountDatasetOp<1>);
REGISTER_KERNEL_BUILDER(Name("SkipDataset").Device(DEVICE_CPU), CountDatasetOp<2>);
REGISTER_KERNEL_BUILDER(Name("ShardDataset").Device(DEVICE_CPU), ShardDatasetOp);
REGISTER_KERNEL_BUILDER(Name("CacheDataset").Device(DEVICE_CPU), CacheDatasetOp);
REGISTER_KERNEL_BUILDER(Name("PrefetchDataset").Device(DEVICE_CPU), PrefetchDatasetOp);
REGISTER_KERNEL_BUILDER(Name("ModelDataset").Device(DEVICE_CPU), PassThroughDatasetOp);
REGISTER_KERNEL_BUILDER(Name("OptimizeDataset").Device(DEVICE_CPU), PassThroughDatasetOp);
REGISTER_KERNEL_BUILDER(Name("OptimizeDatasetV2").Device(DEVICE_CPU), PassThroughDatasetOp);

}  // namespace
}  // namespace recflow
