// Kernels of the input pipeline's graph face (ops/data_ops.cc): they find
// the IteratorResource a handle names and pull from it.
#include "absl/strings/str_join.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

using data::Element;
using data::IteratorResource;

absl::StatusOr<std::shared_ptr<IteratorResource>> IteratorFromHandle(
    OpKernelContext* ctx, int input) {
  const Tensor& t = ctx->input(input);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return errors::InvalidArgument("expected a scalar iterator handle, got ",
                                   t.DebugString());
  }
  const ResourceHandle& h = t.scalar<ResourceHandle>();
  if (h.resource() != nullptr) {
    auto it = std::dynamic_pointer_cast<IteratorResource>(h.resource());
    if (it == nullptr) {
      return errors::InvalidArgument("resource ", h.DebugString(),
                                     " is not an iterator");
    }
    return it;
  }
  return ctx->resource_manager()->Lookup<IteratorResource>(h.container(),
                                                           h.name());
}

class IteratorV2Op : public OpKernel {
 public:
  explicit IteratorV2Op(OpKernelConstruction* c) : OpKernel(c) {
    ResourceLocation where = NodeResourceLocation(c->def(), c->resource_manager()->default_container());
    container_ = std::move(where.container);
    name_ = std::move(where.name);
    c->SetStatus(c->GetAttr("output_types", &types_));
    device_ = c->device()->name();
  }
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    auto it = ctx->resource_manager()->Lookup<IteratorResource>(container_, name_);
    OP_REQUIRES(ctx, it.ok(),
                errors::NotFound("no input pipeline is registered as '", container_,
                                 "/", name_,
                                 "'; register one with data::RegisterIterator "
                                 "before running this graph"));
    OP_REQUIRES(ctx, (*it)->output_dtypes() == types_,
                errors::InvalidArgument(
                    "iterator '", name_, "' yields (",
                    absl::StrJoin((*it)->output_dtypes(), ", ",
                                  [](std::string* out, DataType d) {
                                    out->append(DataTypeString(d));
                                  }),
                    ") but node '", def().name(), "' declares (",
                    absl::StrJoin(types_, ", ",
                                  [](std::string* out, DataType d) {
                                    out->append(DataTypeString(d));
                                  }),
                    ")"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape(), &out));
    ResourceHandle handle(device_, container_, name_,
                          ResourceMgr::TypeName<IteratorResource>());
    handle.set_resource(*std::move(it));
    out->scalar<ResourceHandle>() = std::move(handle);
  }

 private:
  std::string name_, container_, device_;
  std::vector<DataType> types_;
};

class IteratorGetNextOp : public OpKernel {
 public:
  explicit IteratorGetNextOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("output_types", &types_));
    c->SetStatus(c->GetAttr("output_shapes", &shapes_));
  }

  void Compute(OpKernelContext* ctx) override {
    auto it = IteratorFromHandle(ctx, 0);
    OP_REQUIRES_OK(ctx, it.status());
    Element element;
    bool end = false;
    OP_REQUIRES_OK(ctx, (*it)->GetNext(&element, &end));
    OP_REQUIRES(ctx, !end, errors::OutOfRange("End of sequence"));
    OP_REQUIRES(ctx, element.size() == types_.size(),
                errors::InvalidArgument("the pipeline yielded ", element.size(),
                                        " components, node '", def().name(),
                                        "' declares ", types_.size()));
    for (size_t i = 0; i < element.size(); ++i) {
      const Tensor& t = element[i];
      OP_REQUIRES(ctx, t.dtype() == types_[i],
                  errors::InvalidArgument("component ", i, " is ",
                                          DataTypeString(t.dtype()), ", declared ",
                                          DataTypeString(types_[i])));
      OP_REQUIRES(ctx, shapes_[i].IsCompatibleWith(PartialShape(t.shape())),
                  errors::InvalidArgument("component ", i, " has shape ",
                                          t.shape().DebugString(),
                                          ", declared ", shapes_[i].DebugString()));
      ctx->set_output(static_cast<int>(i), t);
    }
  }

 private:
  std::vector<DataType> types_;
  std::vector<PartialShape> shapes_;
};

class IteratorSaveStateOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    auto it = IteratorFromHandle(ctx, 0);
    OP_REQUIRES_OK(ctx, it.status());
    auto state = (*it)->SaveToString();
    OP_REQUIRES_OK(ctx, state.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape(), &out));
    out->scalar<std::string>() = *std::move(state);
  }
};

class IteratorRestoreStateOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    auto it = IteratorFromHandle(ctx, 0);
    OP_REQUIRES_OK(ctx, it.status());
    const Tensor& state = ctx->input(1);
    OP_REQUIRES(ctx, state.dtype() == DT_STRING && state.NumElements() == 1,
                errors::InvalidArgument("state must be a scalar string, got ",
                                        state.DebugString()));
    OP_REQUIRES_OK(ctx, (*it)->RestoreFromString(state.scalar<std::string>()));
  }
};

REGISTER_KERNEL_BUILDER(Name("IteratorV2").Device(DEVICE_CPU), IteratorV2Op);
REGISTER_KERNEL_BUILDER(Name("IteratorGetNext").Device(DEVICE_CPU), IteratorGetNextOp);
REGISTER_KERNEL_BUILDER(Name("IteratorSaveState").Device(DEVICE_CPU), IteratorSaveStateOp);
REGISTER_KERNEL_BUILDER(Name("IteratorRestoreState").Device(DEVICE_CPU),
                        IteratorRestoreStateOp);

}  // namespace
}  // namespace recflow
