// Kernels of the input pipeline's graph face (ops/data_ops.cc and the
// iterator ops of ops/dataset_ops.cc): they create IteratorResources,
// initialize them from datasets (MakeIterator), find the one a handle names
// and pull from it.
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/variant.h"
#include "recflow/data/dataset_variant.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/dataset_kernel_util.h"
#include "recflow/proto/resource_handle.pb.h"

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

std::string TypeList(const std::vector<DataType>& types) {
  return absl::StrJoin(types, ", ", [](std::string* out, DataType d) {
    out->append(DataTypeString(d));
  });
}

absl::Status SetHandle(OpKernelContext* ctx, int output, const std::string& device,
                 const std::string& container, const std::string& name,
                 std::shared_ptr<IteratorResource> it) {
  Tensor* out = nullptr;
  RETURN_IF_ERROR(ctx->allocate_output(output, TensorShape(), &out));
  ResourceHandle handle(device, container, name,
                        ResourceMgr::TypeName<IteratorResource>());
  handle.set_resource(std::move(it));
  out->scalar<ResourceHandle>() = std::move(handle);
  return absl::OkStatus();
}

// Iterator (TF1) and IteratorV2: the iterator registered as (container,
// shared_name), created uninitialized on first use (MakeIterator or
// data::RegisterIterator initializes it).
class IteratorV2Op : public OpKernel {
 public:
  explicit IteratorV2Op(OpKernelConstruction* c) : OpKernel(c) {
    ResourceLocation where = NodeResourceLocation(c->def(), c->resource_manager()->default_container());
    container_ = std::move(where.container);
    name_ = std::move(where.name);
    c->SetStatus(c->GetAttr("output_types", &types_));
    c->SetStatus(c->GetAttr("output_shapes", &shapes_));
    device_ = c->device()->name();
  }
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    auto it = ctx->resource_manager()->LookupOrCreate<IteratorResource>(
        container_, name_, [&]() -> absl::StatusOr<std::shared_ptr<IteratorResource>> {
          return std::make_shared<IteratorResource>(
              types_, shapes_, absl::StrCat("'", container_, "/", name_, "'"));
        });
    OP_REQUIRES_OK(ctx, it.status());
    OP_REQUIRES(ctx, (*it)->output_dtypes() == types_,
                errors::InvalidArgument("iterator '", name_, "' yields (",
                                        TypeList((*it)->output_dtypes()), ") but node '",
                                        def().name(), "' declares (", TypeList(types_), ")"));
    OP_REQUIRES_OK(ctx, SetHandle(ctx, 0, device_, container_, name_, *std::move(it)));
  }

 private:
  std::string name_, container_, device_;
  std::vector<DataType> types_;
  std::vector<PartialShape> shapes_;
};

// AnonymousIterator(V2, V3): a new uninitialized iterator per run, kept in
// the resource manager under a unique name until DeleteIterator (so that a
// string handle can name it); V2 also outputs the (empty) deleter.
class AnonymousIteratorOp : public OpKernel {
 public:
  explicit AnonymousIteratorOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("output_types", &types_));
    c->SetStatus(c->GetAttr("output_shapes", &shapes_));
    device_ = c->device()->name();
  }
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    static std::atomic<int64_t> counter{0};
    const std::string name = absl::StrCat("_AnonymousIterator", counter.fetch_add(1));
    const std::string& container = ctx->resource_manager()->default_container();
    auto it = std::make_shared<IteratorResource>(types_, shapes_,
                                                 absl::StrCat("'", name, "'"));
    OP_REQUIRES_OK(ctx, ctx->resource_manager()->Create<IteratorResource>(container, name, it));
    OP_REQUIRES_OK(ctx, SetHandle(ctx, 0, device_, container, name, std::move(it)));
    if (ctx->num_outputs() > 1) {
      Tensor* deleter = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape(), &deleter));
    }
  }

 private:
  std::vector<DataType> types_;
  std::vector<PartialShape> shapes_;
  std::string device_;
};

class DeleteIteratorOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    OP_REQUIRES(ctx, t.dtype() == DT_RESOURCE && t.NumElements() == 1,
                errors::InvalidArgument("expected a scalar iterator handle, got ",
                                        t.DebugString()));
    const ResourceHandle& h = t.scalar<ResourceHandle>();
    OP_REQUIRES_OK(ctx, ctx->resource_manager()->Delete<IteratorResource>(h.container(),
                                                                         h.name()));
  }
};

// MakeIterator: (re)starts the iterator at the beginning of the dataset.
class MakeIteratorOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    auto ds = data::DatasetFromTensor(ctx->input(0), "dataset");
    OP_REQUIRES_OK(ctx, ds.status());
    auto it = IteratorFromHandle(ctx, 1);
    OP_REQUIRES_OK(ctx, it.status());
    OP_REQUIRES_OK(ctx, (*it)->Initialize(*ds, dataset_kernels::GraphIteratorContext()));
  }
};

class IteratorToStringHandleOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    OP_REQUIRES(ctx, t.dtype() == DT_RESOURCE && t.NumElements() == 1,
                errors::InvalidArgument("expected a scalar iterator handle, got ",
                                        t.DebugString()));
    const ResourceHandle& h = t.scalar<ResourceHandle>();
    tensorflow::ResourceHandleProto proto;
    proto.set_device(h.device());
    proto.set_container(h.container());
    proto.set_name(h.name());
    proto.set_maybe_type_name(h.type_name());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape(), &out));
    out->scalar<std::string>() = proto.SerializeAsString();
  }
};

// IteratorFromStringHandle(V2): the iterator a string handle names, checked
// against output_types when they are given.
class IteratorFromStringHandleOp : public OpKernel {
 public:
  explicit IteratorFromStringHandleOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("output_types", &types_));
  }
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    OP_REQUIRES(ctx, t.dtype() == DT_STRING && t.NumElements() == 1,
                errors::InvalidArgument("string_handle must be a scalar string, got ",
                                        t.DebugString()));
    tensorflow::ResourceHandleProto proto;
    OP_REQUIRES(ctx, proto.ParseFromString(t.flat<std::string>()[0]),
                errors::InvalidArgument("could not parse an iterator string handle"));
    auto it = ctx->resource_manager()->Lookup<IteratorResource>(proto.container(), proto.name());
    OP_REQUIRES_OK(ctx, it.status());
    OP_REQUIRES(ctx, types_.empty() || (*it)->output_dtypes() == types_,
                errors::InvalidArgument("the iterator of this string handle yields (",
                                        TypeList((*it)->output_dtypes()), ") but node '",
                                        def().name(), "' declares (", TypeList(types_), ")"));
    OP_REQUIRES_OK(ctx, SetHandle(ctx, 0, proto.device(), proto.container(), proto.name(),
                                  *std::move(it)));
  }

 private:
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
REGISTER_KERNEL_BUILDER(Name("Iterator").Device(DEVICE_CPU), IteratorV2Op);
REGISTER_KERNEL_BUILDER(Name("AnonymousIterator").Device(DEVICE_CPU), AnonymousIteratorOp);
REGISTER_KERNEL_BUILDER(Name("AnonymousIteratorV2").Device(DEVICE_CPU), AnonymousIteratorOp);
REGISTER_KERNEL_BUILDER(Name("AnonymousIteratorV3").Device(DEVICE_CPU), AnonymousIteratorOp);
REGISTER_KERNEL_BUILDER(Name("DeleteIterator").Device(DEVICE_CPU), DeleteIteratorOp);
REGISTER_KERNEL_BUILDER(Name("MakeIterator").Device(DEVICE_CPU), MakeIteratorOp);
REGISTER_KERNEL_BUILDER(Name("IteratorToStringHandle").Device(DEVICE_CPU),
                        IteratorToStringHandleOp);
REGISTER_KERNEL_BUILDER(Name("IteratorFromStringHandle").Device(DEVICE_CPU),
                        IteratorFromStringHandleOp);
REGISTER_KERNEL_BUILDER(Name("IteratorFromStringHandleV2").Device(DEVICE_CPU),
                        IteratorFromStringHandleOp);
REGISTER_KERNEL_BUILDER(Name("IteratorGetNext").Device(DEVICE_CPU), IteratorGetNextOp);
REGISTER_KERNEL_BUILDER(Name("IteratorGetNextSync").Device(DEVICE_CPU), IteratorGetNextOp);
REGISTER_KERNEL_BUILDER(Name("IteratorSaveState").Device(DEVICE_CPU), IteratorSaveStateOp);
REGISTER_KERNEL_BUILDER(Name("IteratorRestoreState").Device(DEVICE_CPU),
                        IteratorRestoreStateOp);

}  // namespace
}  // namespace recflow
