// CPU kernels of the checkpoint ops (ops/io_ops.cc): SaveV2, RestoreV2 and
// MergeV2Checkpoints over checkpoint/'s BundleWriter, BundleReader and
// MergeBundles, on the default (POSIX) Env. RestoreV2 reads its whole
// tensors in parallel on the intra-op pool.
//
// A non-empty shape_and_slices element ("10 4 0,5:-", tensor_slice.h's
// ParseShapeAndSlice) makes SaveV2 write its tensor as that slice of the
// full tensor (BundleWriter::AddSlice) and RestoreV2 read just that slice
// (BundleReader::LookupSlice), as TensorFlow's partitioned variables do.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/tensor_slice.h"
#include "recflow/core/env.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

// Checks prefix (scalar), tensor_names and shape_and_slices ([n] each) and
// returns the prefix, names and parsed slices (nullopt: the whole tensor).
absl::Status ParseCommonInputs(
    const OpKernel& op, OpKernelContext* ctx, int64_t n, std::string* prefix,
    std::vector<std::string>* names,
    std::vector<std::optional<checkpoint::ShapeAndSlice>>* slices) {
  const Tensor& p = ctx->input(0);
  const Tensor& t = ctx->input(1);
  const Tensor& s = ctx->input(2);
  if (p.NumElements() != 1) {
    return errors::InvalidArgument(op.type_string(), " '", op.name(),
                                   "': prefix must hold one string, got shape ",
                                   p.shape().DebugString());
  }
  if (t.dims() != 1 || t.dim_size(0) != n || s.dims() != 1 || s.dim_size(0) != n) {
    return errors::InvalidArgument(op.type_string(), " '", op.name(), "': tensor_names ",
                                   t.shape().DebugString(), " and shape_and_slices ",
                                   s.shape().DebugString(), " must both be [", n, "]");
  }
  *prefix = p.flat<std::string>()[0];
  if (prefix->empty()) {
    return errors::InvalidArgument(op.type_string(), " '", op.name(), "': empty prefix");
  }
  names->assign(t.flat<std::string>().begin(), t.flat<std::string>().end());
  slices->assign(n, std::nullopt);
  for (int64_t i = 0; i < n; ++i) {
    const std::string& spec = s.flat<std::string>()[i];
    if (spec.empty()) continue;
    auto parsed = checkpoint::ParseShapeAndSlice(spec);
    if (!parsed.ok()) {
      return errors::InvalidArgument(op.type_string(), " '", op.name(), "': tensor '",
                                     (*names)[i], "': ", parsed.status().message());
    }
    (*slices)[i] = *std::move(parsed);
  }
  return absl::OkStatus();
}

class SaveV2Op : public OpKernel {
 public:
  explicit SaveV2Op(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const int64_t n = ctx->num_inputs() - 3;
    std::string prefix;
    std::vector<std::string> names;
    std::vector<std::optional<checkpoint::ShapeAndSlice>> slices;
    OP_REQUIRES_OK(ctx, ParseCommonInputs(*this, ctx, n, &prefix, &names, &slices));
    for (int64_t i = 0; i < n; ++i) {
      if (!slices[i].has_value()) continue;
      const Tensor& t = ctx->input(3 + i);
      OP_REQUIRES(ctx, t.shape() == slices[i]->slice_shape,
                  errors::InvalidArgument(
                      "SaveV2 '", name(), "': tensor '", names[i], "' is ",
                      t.shape().DebugString(), " but its shape_and_slice \"",
                      ctx->input(2).flat<std::string>()[i], "\" describes a slice of shape ",
                      slices[i]->slice_shape.DebugString()));
    }
    auto writer = checkpoint::BundleWriter::Create(Env::Default(), prefix);
    OP_REQUIRES_OK(ctx, Annotated(writer.status(), prefix));
    for (int64_t i = 0; i < n; ++i) {
      const Tensor& t = ctx->input(3 + i);
      OP_REQUIRES_OK(ctx, Annotated(slices[i].has_value()
                                        ? (*writer)->AddSlice(names[i], slices[i]->full_shape,
                                                              slices[i]->slice, t)
                                        : (*writer)->Add(names[i], t),
                                    prefix));
    }
    OP_REQUIRES_OK(ctx, Annotated((*writer)->Finish(), prefix));
  }

 private:
  absl::Status Annotated(const absl::Status& s, const std::string& prefix) const {
    return errors::Annotate(s, absl::StrCat("SaveV2 '", name(), "' to ", prefix));
  }
};

class RestoreV2Op : public OpKernel {
 public:
  explicit RestoreV2Op(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("dtypes", &dtypes_));
  }

  void Compute(OpKernelContext* ctx) override {
    const int64_t n = static_cast<int64_t>(dtypes_.size());
    std::string prefix;
    std::vector<std::string> names;
    std::vector<std::optional<checkpoint::ShapeAndSlice>> slices;
    OP_REQUIRES_OK(ctx, ParseCommonInputs(*this, ctx, n, &prefix, &names, &slices));
    auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
    OP_REQUIRES_OK(ctx, Annotated(reader.status(), prefix));
    std::vector<std::string> whole;  // names restored whole, read in parallel
    for (int64_t i = 0; i < n; ++i) {
      auto info = (*reader)->GetInfo(names[i]);
      OP_REQUIRES_OK(ctx, Annotated(info.status(), prefix));
      OP_REQUIRES(ctx, info->dtype == dtypes_[i],
                  errors::InvalidArgument("RestoreV2 '", name(), "': tensor '", names[i],
                                          "' is stored in ", prefix, " as ",
                                          DataTypeString(info->dtype), " ",
                                          info->shape.DebugString(), " but dtypes[", i,
                                          "] is ", DataTypeString(dtypes_[i])));
      if (!slices[i].has_value()) {
        whole.push_back(names[i]);
        continue;
      }
      OP_REQUIRES(ctx, info->shape == slices[i]->full_shape,
                  errors::InvalidArgument(
                      "RestoreV2 '", name(), "': tensor '", names[i], "': the shape in "
                      "shape_and_slice \"", ctx->input(2).flat<std::string>()[i], "\", ",
                      slices[i]->full_shape.DebugString(), ", does not match the shape stored in ",
                      prefix, ", ", info->shape.DebugString()));
    }
    auto tensors = (*reader)->LookupMany(whole, ctx->intra_op_pool());
    OP_REQUIRES_OK(ctx, Annotated(tensors.status(), prefix));
    size_t next_whole = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (!slices[i].has_value()) {
        ctx->set_output(i, std::move((*tensors)[next_whole++]));
        continue;
      }
      auto part = (*reader)->LookupSlice(names[i], slices[i]->slice);
      OP_REQUIRES_OK(ctx, Annotated(part.status(), prefix));
      ctx->set_output(i, *std::move(part));
    }
  }

 private:
  absl::Status Annotated(const absl::Status& s, const std::string& prefix) const {
    return errors::Annotate(s, absl::StrCat("RestoreV2 '", name(), "' from ", prefix));
  }

  std::vector<DataType> dtypes_;
};

class MergeV2CheckpointsOp : public OpKernel {
 public:
  explicit MergeV2CheckpointsOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("delete_old_dirs", &delete_old_dirs_));
    c->SetStatus(c->GetAttr("allow_missing_files", &allow_missing_files_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& prefixes = ctx->input(0);
    const Tensor& dest = ctx->input(1);
    OP_REQUIRES(ctx, prefixes.dims() == 1,
                errors::InvalidArgument("MergeV2Checkpoints '", name(),
                                        "': checkpoint_prefixes must be a vector, got ",
                                        prefixes.shape().DebugString()));
    OP_REQUIRES(ctx, dest.dims() == 0,
                errors::InvalidArgument("MergeV2Checkpoints '", name(),
                                        "': destination_prefix must be a scalar, got ",
                                        dest.shape().DebugString()));
    const std::vector<std::string> sources(prefixes.flat<std::string>().begin(),
                                           prefixes.flat<std::string>().end());
    const std::string& merged = dest.scalar<std::string>();
    Env* env = Env::Default();
    OP_REQUIRES_OK(ctx, errors::Annotate(
                            checkpoint::MergeBundles(env, sources, merged, allow_missing_files_),
                            absl::StrCat("MergeV2Checkpoints '", name(), "' into ", merged)));
    if (delete_old_dirs_) {
      // Only directories left empty go (DeleteDir refuses others), and never
      // the destination's own.
      const std::string merged_dir = Dirname(merged);
      for (const std::string& source : sources) {
        const std::string dir = Dirname(source);
        if (!dir.empty() && dir != merged_dir) env->DeleteDir(dir).IgnoreError();
      }
    }
  }

 private:
  bool delete_old_dirs_ = true;
  bool allow_missing_files_ = false;
};

REGISTER_KERNEL_BUILDER(Name("SaveV2").Device(DEVICE_CPU), SaveV2Op);
REGISTER_KERNEL_BUILDER(Name("RestoreV2").Device(DEVICE_CPU), RestoreV2Op);
REGISTER_KERNEL_BUILDER(Name("MergeV2Checkpoints").Device(DEVICE_CPU), MergeV2CheckpointsOp);

}  // namespace
}  // namespace recflow
