#include "recflow/kernels/dataset_kernel_util.h"

#include "absl/strings/str_join.h"
#include "recflow/core/status.h"

namespace recflow::dataset_kernels {
namespace {

std::string TypeList(const std::vector<DataType>& types) {
  return absl::StrJoin(types, ", ", [](std::string* out, DataType d) {
    out->append(DataTypeString(d));
  });
}

absl::StatusOr<const Tensor*> ScalarInput(OpKernelContext* ctx, int i,
                                          absl::string_view name, DataType want) {
  const Tensor& t = ctx->input(i);
  if (t.dtype() != want || t.dims() != 0) {
    return errors::InvalidArgument(name, " must be a scalar ", DataTypeString(want),
                                   ", got ", DataTypeString(t.dtype()), " ",
                                   t.shape().DebugString());
  }
  return &t;
}

}  // namespace

DatasetOpKernel::DatasetOpKernel(OpKernelConstruction* c) : OpKernel(c) {
  const auto& attrs = c->def().attr();
  if (attrs.contains("output_types")) {
    c->SetStatus(c->GetAttr("output_types", &output_types_));
  } else if (attrs.contains("Toutput_types")) {
    c->SetStatus(c->GetAttr("Toutput_types", &output_types_));
  }
  if (attrs.contains("output_shapes")) {
    c->SetStatus(c->GetAttr("output_shapes", &output_shapes_));
  }
}

void DatasetOpKernel::Compute(OpKernelContext* ctx) {
  auto ds = MakeDataset(ctx);
  OP_REQUIRES_OK(ctx, ds.status());
  const std::vector<DataType>& got = ds->impl()->output_dtypes();
  OP_REQUIRES(ctx, output_types_.empty() || got == output_types_,
              errors::InvalidArgument("node '", def().name(), "' (", def().op(),
                                      ") declares elements of (", TypeList(output_types_),
                                      ") but its dataset yields (", TypeList(got), ")"));
  ctx->set_output(0, data::DatasetToTensor(*std::move(ds)));
}

absl::StatusOr<int64_t> ScalarInt(OpKernelContext* ctx, int i, absl::string_view name) {
  const Tensor& t = ctx->input(i);
  if (t.dtype() == DT_INT32 && t.dims() == 0) return t.scalar<int32_t>();
  ASSIGN_OR_RETURN(const Tensor* s, ScalarInput(ctx, i, name, DT_INT64));
  return s->scalar<int64_t>();
}

absl::StatusOr<bool> ScalarBool(OpKernelContext* ctx, int i, absl::string_view name) {
  ASSIGN_OR_RETURN(const Tensor* s, ScalarInput(ctx, i, name, DT_BOOL));
  return s->scalar<bool>();
}

absl::StatusOr<std::string> ScalarString(OpKernelContext* ctx, int i,
                                         absl::string_view name) {
  ASSIGN_OR_RETURN(const Tensor* s, ScalarInput(ctx, i, name, DT_STRING));
  return s->scalar<std::string>();
}

absl::StatusOr<data::Dataset> InputDataset(OpKernelContext* ctx, int i) {
  return data::DatasetFromTensor(ctx->input(i), "input_dataset");
}

data::IteratorContext GraphIteratorContext() {
  data::IteratorContext ctx;
  ctx.error_policy.mode = data::ErrorMode::kFail;
  return ctx;
}

absl::Status GetFuncAttr(const tensorflow::NodeDef& def, absl::string_view name,
                         tensorflow::NameAttrList* out) {
  auto it = def.attr().find(std::string(name));
  if (it == def.attr().end() || !it->second.has_func()) {
    return errors::InvalidArgument("node '", def.name(), "' (", def.op(),
                                   ") has no function attr '", name, "'");
  }
  *out = it->second.func();
  return absl::OkStatus();
}

}  // namespace recflow::dataset_kernels
