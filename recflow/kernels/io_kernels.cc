// CPU kernels of the checkpoint ops (ops/io_ops.cc): SaveV2, RestoreV2 and
// MergeV2Checkpoints over checkpoint/'s BundleWriter, BundleReader and
// MergeBundles, on the default (POSIX) Env. RestoreV2 reads its tensors in
// parallel on the intra-op pool.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/core/env.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

// Checks prefix (scalar), tensor_names and shape_and_slices ([n] each, all
// slices empty) and returns the prefix and names.
absl::Status ParseCommonInputs(const OpKernel& op, OpKernelContext* ctx, int64_t n,
                               std::string* prefix, std::vector<std::string>* names) {
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
  for (int64_t i = 0; i < n; ++i) {
    const std::string& spec = s.flat<std::string>()[i];
    if (!spec.empty()) {
      return errors::Unimplemented(op.type_string(), " '", op.name(), "': tensor '",
                                   (*names)[i], "' has shape_and_slice \"", spec,
                                   "\"; partitioned (sliced) checkpoints are not supported, "
                                   "only \"\" (the whole tensor)");
    }
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
    OP_REQUIRES_OK(ctx, ParseCommonInputs(*this, ctx, n, &prefix, &names));
    auto writer = checkpoint::BundleWriter::Create(Env::Default(), prefix);
    OP_REQUIRES_OK(ctx, Annotated(writer.status(), prefix));
    for (int64_t i = 0; i < n; ++i) {
      OP_REQUIRES_OK(ctx, Annotated((*writer)->Add(names[i], ctx->input(3 + i)), prefix));
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
    OP_REQUIRES_OK(ctx, ParseCommonInputs(*this, ctx, n, &prefix, &names));
    auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
    OP_REQUIRES_OK(ctx, Annotated(reader.status(), prefix));
    for (int64_t i = 0; i < n; ++i) {
      auto info = (*reader)->GetInfo(names[i]);
      OP_REQUIRES_OK(ctx, Annotated(info.status(), prefix));
      OP_REQUIRES(ctx, info->dtype == dtypes_[i],
                  errors::InvalidArgument("RestoreV2 '", name(), "': tensor '", names[i],
                                          "' is stored in ", prefix, " as ",
                                          DataTypeString(info->dtype), " ",
                                          info->shape.DebugString(), " but dtypes[", i,
                                          "] is ", DataTypeString(dtypes_[i])));
    }
    auto tensors = (*reader)->LookupMany(names, ctx->intra_op_pool());
    OP_REQUIRES_OK(ctx, Annotated(tensors.status(), prefix));
    for (int64_t i = 0; i < n; ++i) ctx->set_output(i, std::move((*tensors)[i]));
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
