// Kernels of tf.data's ops that call a function of the graph's library
// (MapDataset, ParallelMapDataset(V2), FlatMapDataset, InterleaveDataset,
// ParallelInterleaveDatasetV2/V4, FilterDataset, OneShotIterator). The
// function is instantiated once, when the kernel is built, through the
// FunctionLibraryRuntime the session gives kernels
// (framework/function.h); that runtime outlives the datasets made here, so
// their MapFn / interleave fn keep the pointer and the handle. Arguments
// are the element's components followed by the captured other_arguments.
#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/core/variant.h"
#include "recflow/data/dataset.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/framework/function.h"
#include "recflow/kernels/dataset_kernel_util.h"

namespace recflow {
namespace {

using data::Dataset;
using data::Element;
using dataset_kernels::DatasetOpKernel;
using dataset_kernels::GetFuncAttr;
using dataset_kernels::InputDataset;
using dataset_kernels::ScalarInt;

// A function of the library, instantiated for one node.
struct BoundFunction {
  FunctionLibraryRuntime* flr = nullptr;  // Not owned.
  FunctionLibraryRuntime::Handle handle = 0;
  std::string name;

  absl::Status Run(Element args, Element* rets) const {
    absl::Status s = flr->Run(handle, std::move(args), rets);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("in function '", name, "': ", s.message()));
    }
    return absl::OkStatus();
  }
};

absl::StatusOr<BoundFunction> Bind(OpKernelConstruction* c, absl::string_view attr) {
  tensorflow::NameAttrList func;
  RETURN_IF_ERROR(GetFuncAttr(c->def(), attr, &func));
  FunctionLibraryRuntime* flr = c->function_library();
  if (flr == nullptr) {
    return errors::FailedPrecondition(
        "node '", c->def().name(), "' (", c->def().op(), ") calls function '",
        func.name(), "' but the session gave its kernels no function library");
  }
  ASSIGN_OR_RETURN(FunctionLibraryRuntime::Handle h, flr->Instantiate(func));
  return BoundFunction{flr, h, func.name()};
}

// Base of the dataset ops with a function attr and other_arguments.
class FunctionDatasetOp : public DatasetOpKernel {
 public:
  FunctionDatasetOp(OpKernelConstruction* c, absl::string_view attr) : DatasetOpKernel(c) {
    auto fn = Bind(c, attr);
    if (!fn.ok()) {
      c->SetStatus(fn.status());
      return;
    }
    fn_ = *std::move(fn);
  }

 protected:
  // The element (or its prefix) passed on with the captured arguments.
  static Element Args(const Element& element, const Element& captured) {
    Element args = element;
    args.insert(args.end(), captured.begin(), captured.end());
    return args;
  }

  absl::StatusOr<Element> Captured(OpKernelContext* ctx) const {
    Element captured;
    RETURN_IF_ERROR(ctx->input_list("other_arguments", &captured));
    return captured;
  }

  // fn as a dataset-returning function (FlatMap, Interleave).
  std::function<absl::StatusOr<Dataset>(const Element&)> DatasetFn(Element captured) const {
    return [fn = fn_, captured = std::move(captured)](
               const Element& e) -> absl::StatusOr<Dataset> {
      Element rets;
      RETURN_IF_ERROR(fn.Run(Args(e, captured), &rets));
      if (rets.size() != 1) {
        return errors::InvalidArgument("function '", fn.name,
                                       "' must return one dataset, returned ", rets.size(),
                                       " values");
      }
      return data::DatasetFromTensor(rets[0],
                                     absl::StrCat("the result of function '", fn.name, "'"));
    };
  }

  BoundFunction fn_;
};

// MapDataset, ParallelMapDataset (int32 num_parallel_calls) and V2 (int64).
class MapDatasetOp : public FunctionDatasetOp {
 public:
  explicit MapDatasetOp(OpKernelConstruction* c) : FunctionDatasetOp(c, "f") {}
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Dataset input, InputDataset(ctx, 0));
    ASSIGN_OR_RETURN(Element captured, Captured(ctx));
    int64_t parallel = 1;
    if (def().op() != "MapDataset") {
      ASSIGN_OR_RETURN(parallel, ScalarInt(ctx, ctx->num_inputs() - 1, "num_parallel_calls"));
      if (parallel <= 0 && parallel != -1) {
        return errors::InvalidArgument(
            "num_parallel_calls must be greater than zero or AUTOTUNE (-1), got ", parallel);
      }
    }
    data::MapFn map = [fn = fn_, captured = std::move(captured)](
                          Element e) -> absl::StatusOr<Element> {
      Element rets;
      RETURN_IF_ERROR(fn.Run(Args(e, captured), &rets));
      return rets;
    };
    return input.Map(std::move(map), static_cast<int>(parallel), output_types_,
                     output_shapes_);
  }
};

// FlatMapDataset: Interleave with one dataset at a time.
class FlatMapDatasetOp : public FunctionDatasetOp {
 public:
  explicit FlatMapDatasetOp(OpKernelConstruction* c) : FunctionDatasetOp(c, "f") {}
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Dataset input, InputDataset(ctx, 0));
    ASSIGN_OR_RETURN(Element captured, Captured(ctx));
    return input.Interleave(DatasetFn(std::move(captured)), 1, 1, 1, output_types_,
                            output_shapes_);
  }
};

// InterleaveDataset and ParallelInterleaveDatasetV2/V4: cycle_length and
// block_length follow the other arguments; num_parallel_calls is last.
class InterleaveDatasetOp : public FunctionDatasetOp {
 public:
  explicit InterleaveDatasetOp(OpKernelConstruction* c) : FunctionDatasetOp(c, "f") {}
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Dataset input, InputDataset(ctx, 0));
    ASSIGN_OR_RETURN(Element captured, Captured(ctx));
    const int first = 1 + static_cast<int>(captured.size());
    ASSIGN_OR_RETURN(int64_t cycle_length, ScalarInt(ctx, first, "cycle_length"));
    ASSIGN_OR_RETURN(int64_t block_length, ScalarInt(ctx, first + 1, "block_length"));
    int64_t parallel = 1;
    if (def().op() != "InterleaveDataset") {
      ASSIGN_OR_RETURN(parallel, ScalarInt(ctx, ctx->num_inputs() - 1, "num_parallel_calls"));
      if (parallel == -1) parallel = NumSchedulableCPUs();
      if (parallel <= 0) {
        return errors::InvalidArgument(
            "num_parallel_calls must be greater than zero or AUTOTUNE (-1), got ", parallel);
      }
    }
    if (cycle_length == -1) cycle_length = NumSchedulableCPUs();  // AUTOTUNE
    if (cycle_length <= 0) {
      return errors::InvalidArgument("cycle_length must be greater than zero, got ",
                                     cycle_length);
    }
    if (block_length <= 0) {
      return errors::InvalidArgument("block_length must be greater than zero, got ",
                                     block_length);
    }
    parallel = std::min(parallel, cycle_length);
    return input.Interleave(DatasetFn(std::move(captured)), static_cast<int>(cycle_length),
                            static_cast<int>(block_length), static_cast<int>(parallel),
                            output_types_, output_shapes_);
  }
};

// FilterDataset: each element becomes a dataset of itself (predicate true)
// or of nothing, read through Interleave with one dataset at a time, so
// position saving is Interleave's.
class FilterDatasetOp : public FunctionDatasetOp {
 public:
  explicit FilterDatasetOp(OpKernelConstruction* c) : FunctionDatasetOp(c, "predicate") {}
  absl::StatusOr<Dataset> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(Dataset input, InputDataset(ctx, 0));
    ASSIGN_OR_RETURN(Element captured, Captured(ctx));
    auto keep_or_drop = [fn = fn_, captured = std::move(captured)](
                            const Element& e) -> absl::StatusOr<Dataset> {
      Element rets;
      RETURN_IF_ERROR(fn.Run(Args(e, captured), &rets));
      if (rets.size() != 1 || rets[0].dtype() != DT_BOOL || rets[0].NumElements() != 1) {
        return errors::InvalidArgument("Filter predicate `", fn.name,
                                       "` must return a scalar bool.");
      }
      const bool keep = rets[0].flat<bool>()[0];
      Element slices;
      for (const Tensor& t : e) {
        TensorShape shape = t.shape();
        shape.InsertDim(0, 1);
        ASSIGN_OR_RETURN(Tensor one, t.Reshaped(shape));
        slices.push_back(keep ? one : one.Slice(0, 0));
      }
      return Dataset::FromTensorSlices(std::move(slices));
    };
    return input.Interleave(std::move(keep_or_drop), 1, 1, 1, input.impl()->output_dtypes(),
                            input.impl()->output_shapes());
  }
};

// OneShotIterator: on first use, runs dataset_factory and starts an
// iterator over its dataset, registered under (container, shared_name or
// the node's name); later runs return the same iterator.
class OneShotIteratorOp : public OpKernel {
 public:
  explicit OneShotIteratorOp(OpKernelConstruction* c) : OpKernel(c) {
    auto fn = Bind(c, "dataset_factory");
    if (!fn.ok()) {
      c->SetStatus(fn.status());
      return;
    }
    factory_ = *std::move(fn);
    c->SetStatus(c->GetAttr("output_types", &types_));
    c->SetStatus(c->GetAttr("output_shapes", &shapes_));
    ResourceLocation where =
        NodeResourceLocation(c->def(), c->resource_manager()->default_container());
    container_ = std::move(where.container);
    name_ = std::move(where.name);
    device_ = c->device()->name();
  }

  void Compute(OpKernelContext* ctx) override {
    std::shared_ptr<data::IteratorResource> it;
    {
      MutexLock lock(&mu_);
      if (iterator_ == nullptr) {
        auto made = Make(ctx);
        OP_REQUIRES_OK(ctx, made.status());
        iterator_ = *std::move(made);
      }
      it = iterator_;
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape(), &out));
    ResourceHandle handle(device_, container_, name_,
                          ResourceMgr::TypeName<data::IteratorResource>());
    handle.set_resource(std::move(it));
    out->scalar<ResourceHandle>() = std::move(handle);
  }

 private:
  // Runs the factory outside the resource manager's lock (its body may use
  // resources); a concurrent maker that registered first wins.
  absl::StatusOr<std::shared_ptr<data::IteratorResource>> Make(OpKernelContext* ctx) {
    ResourceMgr* rm = ctx->resource_manager();
    auto existing = rm->Lookup<data::IteratorResource>(container_, name_);
    if (existing.ok()) return existing;
    Element rets;
    RETURN_IF_ERROR(factory_.Run({}, &rets));
    if (rets.size() != 1) {
      return errors::InvalidArgument("dataset_factory '", factory_.name,
                                     "' must return one dataset, returned ", rets.size(),
                                     " values");
    }
    ASSIGN_OR_RETURN(Dataset ds, data::DatasetFromTensor(rets[0], "dataset_factory's result"));
    auto made = std::make_shared<data::IteratorResource>(types_, shapes_,
                                                         absl::StrCat("'", def().name(), "'"));
    RETURN_IF_ERROR(made->Initialize(ds, dataset_kernels::GraphIteratorContext()));
    return rm->LookupOrCreate<data::IteratorResource>(
        container_, name_,
        [&]() -> absl::StatusOr<std::shared_ptr<data::IteratorResource>> { return made; });
  }

  BoundFunction factory_;
  std::vector<DataType> types_;
  std::vector<PartialShape> shapes_;
  std::string container_, name_, device_;
  Mutex mu_;
  std::shared_ptr<data::IteratorResource> iterator_ ABSL_GUARDED_BY(mu_);
};

REGISTER_KERNEL_BUILDER(Name("MapDataset").Device(DEVICE_CPU), MapDatasetOp);
REGISTER_KERNEL_BUILDER(Name("ParallelMapDataset").Device(DEVICE_CPU), MapDatasetOp);
REGISTER_KERNEL_BUILDER(Name("ParallelMapDatasetV2").Device(DEVICE_CPU), MapDatasetOp);
REGISTER_KERNEL_BUILDER(Name("FlatMapDataset").Device(DEVICE_CPU), FlatMapDatasetOp);
REGISTER_KERNEL_BUILDER(Name("InterleaveDataset").Device(DEVICE_CPU), InterleaveDatasetOp);
REGISTER_KERNEL_BUILDER(Name("ParallelInterleaveDatasetV2").Device(DEVICE_CPU),
                        InterleaveDatasetOp);
REGISTER_KERNEL_BUILDER(Name("ParallelInterleaveDatasetV4").Device(DEVICE_CPU),
                        InterleaveDatasetOp);
REGISTER_KERNEL_BUILDER(Name("FilterDataset").Device(DEVICE_CPU), FilterDatasetOp);
REGISTER_KERNEL_BUILDER(Name("OneShotIterator").Device(DEVICE_CPU), OneShotIteratorOp);

}  // namespace
}  // namespace recflow
