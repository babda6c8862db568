// CPU kernels of the TensorList ops (ops/list_ops.cc) over TensorList
// values (tensor_list.h), with TensorFlow's semantics and checks
// (tensorflow/core/kernels/list_kernels.{h,cc}): element dtypes must match
// the op's element_dtype, elements must fit the list's element shape, an
// unset slot reads as zeros of the element shape (which must then be fully
// known), indices are checked against the length.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_join.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/tensor_list.h"

namespace recflow {

std::string TensorList::DebugString() const {
  return absl::StrCat("TensorList(", DataTypeString(element_dtype), ", ",
                      element_shape.DebugString(), ", ", tensors.size(), " elements)");
}

Tensor TensorList::Wrap(TensorList list) {
  Tensor t(DT_VARIANT, TensorShape({}));
  t.scalar<Variant>() = Variant(std::make_shared<const TensorList>(std::move(list)));
  return t;
}

absl::StatusOr<const TensorList*> TensorList::FromTensor(const Tensor& t, absl::string_view what) {
  if (t.dtype() != DT_VARIANT || t.dims() != 0) {
    return errors::InvalidArgument(what, " must be a scalar variant holding a TensorList, got ",
                                   DataTypeString(t.dtype()), " of shape ",
                                   t.shape().DebugString());
  }
  const Variant& v = t.scalar<Variant>();
  const TensorList* list = v.get<TensorList>();
  if (list == nullptr) {
    return errors::InvalidArgument(what, " must hold a TensorList, but holds ", v.TypeName());
  }
  return list;
}

namespace {

// A shape tensor as a PartialShape: the scalar -1 is an unknown rank; in a
// vector, -1 is an unknown dim.
absl::StatusOr<PartialShape> ShapeFromTensor(const Tensor& t) {
  if (t.dtype() != DT_INT32 && t.dtype() != DT_INT64) {
    return errors::InvalidArgument("element_shape must be int32 or int64, got ",
                                   DataTypeString(t.dtype()));
  }
  auto at = [&](int64_t i) -> int64_t {
    return t.dtype() == DT_INT32 ? t.flat<int32_t>()[i] : t.flat<int64_t>()[i];
  };
  if (t.dims() == 0) {
    if (at(0) != -1) {
      return errors::InvalidArgument("element_shape is the scalar ", at(0),
                                     "; a scalar element_shape must be -1 (unknown rank)");
    }
    return PartialShape::Unknown();
  }
  if (t.dims() != 1) {
    return errors::InvalidArgument("element_shape must be a scalar or a vector, got shape ",
                                   t.shape().DebugString());
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (at(i) < -1) {
      return errors::InvalidArgument("element_shape holds dimension ", at(i),
                                     "; sizes must be >= -1");
    }
    dims.push_back(at(i));
  }
  return PartialShape(absl::MakeConstSpan(dims));
}

absl::Status CheckDtype(const TensorList& list, DataType op_dtype) {
  if (list.element_dtype != op_dtype) {
    return errors::InvalidArgument("Invalid data types; op elements ", DataTypeString(op_dtype),
                                   " but list elements ", DataTypeString(list.element_dtype));
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> ScalarInt32(const Tensor& t, absl::string_view what) {
  if (t.dtype() != DT_INT32 || t.dims() != 0) {
    return errors::InvalidArgument(what, " must be an int32 scalar, got ",
                                   DataTypeString(t.dtype()), " of shape ",
                                   t.shape().DebugString());
  }
  return t.scalar<int32_t>();
}

// Zeros of `dtype` and the list's element shape merged with `requested`,
// for reading an unset slot.
absl::StatusOr<Tensor> ZerosForUnset(const TensorList& list, const PartialShape& requested) {
  auto merged = list.element_shape.Merge(requested);
  if (!merged.ok()) {
    return errors::InvalidArgument("element_shape ", requested.DebugString(),
                                   " does not fit the list's element shape ",
                                   list.element_shape.DebugString());
  }
  if (!merged->IsFullyDefined()) {
    return errors::InvalidArgument(
        "Trying to read an uninitialized tensor but element_shape is not fully defined: ",
        merged->DebugString());
  }
  Tensor zeros(list.element_dtype, merged->ToTensorShape());
  if (DataTypeIsPod(list.element_dtype)) std::memset(zeros.raw_data(), 0, zeros.TotalBytes());
  return zeros;
}

absl::Status CheckFits(const TensorList& list, const Tensor& item, absl::string_view action) {
  if (!list.element_shape.IsCompatibleWith(PartialShape(item.shape()))) {
    return errors::InvalidArgument("Tried to ", action,
                                   " a tensor with incompatible shape to a list. Op element "
                                   "shape: ",
                                   item.shape().DebugString(),
                                   " list shape: ", list.element_shape.DebugString());
  }
  return absl::OkStatus();
}

class ListOpBase : public OpKernel {
 public:
  explicit ListOpBase(OpKernelConstruction* c) : OpKernel(c) {
    if (AttrSlice(c->def()).Find("element_dtype") != nullptr) {
      OP_REQUIRES_OK(c, c->GetAttr("element_dtype", &element_dtype_));
    }
  }
  bool IsExpensive() const override { return false; }

 protected:
  DataType element_dtype_ = DT_INVALID;
};

// EmptyTensorList and TensorListReserve.
class NewListOp : public ListOpBase {
 public:
  explicit NewListOp(OpKernelConstruction* c)
      : ListOpBase(c), reserve_(c->def().op() == "TensorListReserve") {}
  void Compute(OpKernelContext* ctx) override {
    TensorList list;
    list.element_dtype = element_dtype_;
    auto shape = ShapeFromTensor(ctx->input(0));
    OP_REQUIRES_OK(ctx, shape.status());
    list.element_shape = *shape;
    auto n = ScalarInt32(ctx->input(1), reserve_ ? "num_elements" : "max_num_elements");
    OP_REQUIRES_OK(ctx, n.status());
    if (reserve_) {
      OP_REQUIRES(ctx, *n >= 0,
                  errors::InvalidArgument(
                      "The num_elements to reserve must be a non negative number, but got ", *n));
      list.tensors.resize(*n);
    } else {
      OP_REQUIRES(ctx, *n >= -1,
                  errors::InvalidArgument("max_num_elements must be at least -1 but got ", *n));
      list.max_num_elements = *n;
    }
    ctx->set_output(0, TensorList::Wrap(std::move(list)));
  }

 private:
  const bool reserve_;
};

class FromTensorOp : public ListOpBase {
 public:
  using ListOpBase::ListOpBase;
  void Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    OP_REQUIRES(ctx, t.dims() >= 1,
                errors::InvalidArgument("Tensor must be at least a vector, but saw shape: ",
                                        t.shape().DebugString()));
    auto requested = ShapeFromTensor(ctx->input(1));
    OP_REQUIRES_OK(ctx, requested.status());
    std::vector<int64_t> rest(t.shape().dim_sizes().begin() + 1, t.shape().dim_sizes().end());
    const TensorShape element(absl::MakeConstSpan(rest));
    OP_REQUIRES(ctx, requested->IsCompatibleWith(PartialShape(element)),
                errors::InvalidArgument("Specified a list with shape ", requested->DebugString(),
                                        " from a tensor with shape ", t.shape().DebugString()));
    TensorList list;
    list.element_dtype = element_dtype_;
    list.element_shape = *requested;
    list.tensors.reserve(t.dim_size(0));
    for (int64_t i = 0; i < t.dim_size(0); ++i) {
      auto item = t.Slice(i, i + 1).Reshaped(element);
      OP_REQUIRES_OK(ctx, item.status());
      list.tensors.push_back(*std::move(item));
    }
    ctx->set_output(0, TensorList::Wrap(std::move(list)));
  }
};

class StackOp : public ListOpBase {
 public:
  explicit StackOp(OpKernelConstruction* c) : ListOpBase(c) {
    OP_REQUIRES_OK(c, c->GetAttr("num_elements", &num_elements_));
  }
  void Compute(OpKernelContext* ctx) override {
    auto list = TensorList::FromTensor(ctx->input(0), "input_handle");
    OP_REQUIRES_OK(ctx, list.status());
    const TensorList& l = **list;
    OP_REQUIRES_OK(ctx, CheckDtype(l, element_dtype_));
    const int64_t n = static_cast<int64_t>(l.tensors.size());
    OP_REQUIRES(ctx, num_elements_ == -1 || num_elements_ == n,
                errors::InvalidArgument("Operation expected a list with ", num_elements_,
                                        " elements but got a list with ", n, " elements."));
    auto requested = ShapeFromTensor(ctx->input(1));
    OP_REQUIRES_OK(ctx, requested.status());
    auto shape = l.element_shape.Merge(*requested);
    OP_REQUIRES(ctx, shape.ok(),
                errors::InvalidArgument("element_shape ", requested->DebugString(),
                                        " does not fit the list's element shape ",
                                        l.element_shape.DebugString()));
    // The set elements decide the shape; all must agree.
    PartialShape element = *shape;
    for (int64_t i = 0; i < n; ++i) {
      if (!l.tensors[i].IsInitialized()) continue;
      auto merged = element.Merge(PartialShape(l.tensors[i].shape()));
      OP_REQUIRES(ctx, merged.ok(),
                  errors::InvalidArgument("Tried to stack elements of different shapes: element ",
                                          i, " is ", l.tensors[i].shape().DebugString(),
                                          " but the others are ", element.DebugString()));
      element = *merged;
    }
    OP_REQUIRES(ctx, element.IsFullyDefined(),
                errors::InvalidArgument(
                    "Tried to stack elements of ", n == 0 ? "an empty list" : "a list",
                    " with non-fully-defined element_shape: ", element.DebugString()));
    const TensorShape element_shape = element.ToTensorShape();
    std::vector<int64_t> dims = {n};
    dims.insert(dims.end(), element_shape.dim_sizes().begin(), element_shape.dim_sizes().end());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape(absl::MakeConstSpan(dims)), &out));
    const int64_t per = element_shape.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      const Tensor& src = l.tensors[i];
      if (element_dtype_ == DT_STRING) {
        auto dst = out->flat<std::string>().subspan(i * per, per);
        if (src.IsInitialized()) {
          std::copy(src.flat<std::string>().begin(), src.flat<std::string>().end(), dst.begin());
        } else {
          std::fill(dst.begin(), dst.end(), std::string());
        }
      } else if (element_dtype_ == DT_VARIANT) {
        auto dst = out->flat<Variant>().subspan(i * per, per);
        if (src.IsInitialized()) {
          std::copy(src.flat<Variant>().begin(), src.flat<Variant>().end(), dst.begin());
        }
      } else {
        OP_REQUIRES(ctx, DataTypeIsPod(element_dtype_),
                    errors::InvalidArgument("cannot stack a list of ",
                                            DataTypeString(element_dtype_)));
        const size_t bytes = per * DataTypeSize(element_dtype_);
        char* dst = out->raw_data() + i * bytes;
        if (src.IsInitialized()) {
          std::memcpy(dst, src.raw_data(), bytes);
        } else {
          std::memset(dst, 0, bytes);
        }
      }
    }
  }

 private:
  int64_t num_elements_ = -1;
};

class GetItemOp : public ListOpBase {
 public:
  using ListOpBase::ListOpBase;
  void Compute(OpKernelContext* ctx) override {
    auto list = TensorList::FromTensor(ctx->input(0), "input_handle");
    OP_REQUIRES_OK(ctx, list.status());
    const TensorList& l = **list;
    OP_REQUIRES_OK(ctx, CheckDtype(l, element_dtype_));
    auto index = ScalarInt32(ctx->input(1), "index");
    OP_REQUIRES_OK(ctx, index.status());
    const int64_t size = static_cast<int64_t>(l.tensors.size());
    OP_REQUIRES(ctx, *index >= 0 && *index < size,
                errors::InvalidArgument("Trying to access element ", *index, " in a list with ",
                                        size, " elements."));
    const Tensor& item = l.tensors[*index];
    if (item.IsInitialized()) {
      ctx->set_output(0, item);
      return;
    }
    auto requested = ShapeFromTensor(ctx->input(2));
    OP_REQUIRES_OK(ctx, requested.status());
    auto zeros = ZerosForUnset(l, *requested);
    OP_REQUIRES_OK(ctx, zeros.status());
    ctx->set_output(0, *std::move(zeros));
  }
};

class SetItemOp : public ListOpBase {
 public:
  explicit SetItemOp(OpKernelConstruction* c) : ListOpBase(c) {
    if (AttrSlice(c->def()).Find("resize_if_index_out_of_bounds") != nullptr) {
      OP_REQUIRES_OK(c, c->GetAttr("resize_if_index_out_of_bounds", &resize_));
    }
  }
  void Compute(OpKernelContext* ctx) override {
    auto list = TensorList::FromTensor(ctx->input(0), "input_handle");
    OP_REQUIRES_OK(ctx, list.status());
    const TensorList& l = **list;
    OP_REQUIRES_OK(ctx, CheckDtype(l, element_dtype_));
    auto index = ScalarInt32(ctx->input(1), "index");
    OP_REQUIRES_OK(ctx, index.status());
    const int64_t size = static_cast<int64_t>(l.tensors.size());
    OP_REQUIRES(ctx, *index >= 0 && (*index < size || resize_),
                errors::InvalidArgument("Trying to modify element ", *index, " in a list with ",
                                        size, " elements."));
    const Tensor& item = ctx->input(2);
    OP_REQUIRES_OK(ctx, CheckFits(l, item, "set"));
    TensorList out = l;
    if (*index >= size) out.tensors.resize(*index + 1);
    out.tensors[*index] = item;
    ctx->set_output(0, TensorList::Wrap(std::move(out)));
  }

 private:
  bool resize_ = false;
};

class LengthOp : public ListOpBase {
 public:
  using ListOpBase::ListOpBase;
  void Compute(OpKernelContext* ctx) override {
    auto list = TensorList::FromTensor(ctx->input(0), "input_handle");
    OP_REQUIRES_OK(ctx, list.status());
    ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>((*list)->tensors.size())));
  }
};

class ElementShapeOp : public ListOpBase {
 public:
  explicit ElementShapeOp(OpKernelConstruction* c) : ListOpBase(c) {
    OP_REQUIRES_OK(c, c->GetAttr("shape_type", &shape_type_));
  }
  void Compute(OpKernelContext* ctx) override {
    auto list = TensorList::FromTensor(ctx->input(0), "input_handle");
    OP_REQUIRES_OK(ctx, list.status());
    const PartialShape& s = (*list)->element_shape;
    std::vector<int64_t> dims;
    TensorShape shape;  // scalar -1 for an unknown rank
    if (s.unknown_rank()) {
      dims = {-1};
    } else {
      dims.assign(s.dims().begin(), s.dims().end());
      shape = TensorShape({static_cast<int64_t>(dims.size())});
    }
    Tensor out(shape_type_, shape);
    for (size_t i = 0; i < dims.size(); ++i) {
      if (shape_type_ == DT_INT32) {
        out.flat<int32_t>()[i] = static_cast<int32_t>(dims[i]);
      } else {
        out.flat<int64_t>()[i] = dims[i];
      }
    }
    ctx->set_output(0, std::move(out));
  }

 private:
  DataType shape_type_ = DT_INT32;
};

class PushBackOp : public ListOpBase {
 public:
  using ListOpBase::ListOpBase;
  void Compute(OpKernelContext* ctx) override {
    auto list = TensorList::FromTensor(ctx->input(0), "input_handle");
    OP_REQUIRES_OK(ctx, list.status());
    const TensorList& l = **list;
    OP_REQUIRES_OK(ctx, CheckDtype(l, element_dtype_));
    const Tensor& item = ctx->input(1);
    OP_REQUIRES_OK(ctx, CheckFits(l, item, "append"));
    OP_REQUIRES(ctx,
                l.max_num_elements == -1 ||
                    static_cast<int64_t>(l.tensors.size()) < l.max_num_elements,
                errors::InvalidArgument("Tried to push item into a full list list size: ",
                                        l.tensors.size(),
                                        " max_num_elements: ", l.max_num_elements));
    TensorList out = l;
    out.tensors.push_back(item);
    ctx->set_output(0, TensorList::Wrap(std::move(out)));
  }
};

class PopBackOp : public ListOpBase {
 public:
  using ListOpBase::ListOpBase;
  void Compute(OpKernelContext* ctx) override {
    auto list = TensorList::FromTensor(ctx->input(0), "input_handle");
    OP_REQUIRES_OK(ctx, list.status());
    const TensorList& l = **list;
    OP_REQUIRES_OK(ctx, CheckDtype(l, element_dtype_));
    OP_REQUIRES(ctx, !l.tensors.empty(),
                errors::InvalidArgument("Trying to pop from an empty list."));
    Tensor item = l.tensors.back();
    if (!item.IsInitialized()) {
      auto requested = ShapeFromTensor(ctx->input(1));
      OP_REQUIRES_OK(ctx, requested.status());
      auto zeros = ZerosForUnset(l, *requested);
      OP_REQUIRES_OK(ctx, zeros.status());
      item = *std::move(zeros);
    }
    TensorList out = l;
    out.tensors.pop_back();
    ctx->set_output(0, TensorList::Wrap(std::move(out)));
    ctx->set_output(1, std::move(item));
  }
};

REGISTER_KERNEL_BUILDER(Name("EmptyTensorList").Device(DEVICE_CPU), NewListOp);
REGISTER_KERNEL_BUILDER(Name("TensorListReserve").Device(DEVICE_CPU), NewListOp);
REGISTER_KERNEL_BUILDER(Name("TensorListFromTensor").Device(DEVICE_CPU), FromTensorOp);
REGISTER_KERNEL_BUILDER(Name("TensorListStack").Device(DEVICE_CPU), StackOp);
REGISTER_KERNEL_BUILDER(Name("TensorListGetItem").Device(DEVICE_CPU), GetItemOp);
REGISTER_KERNEL_BUILDER(Name("TensorListSetItem").Device(DEVICE_CPU), SetItemOp);
REGISTER_KERNEL_BUILDER(Name("TensorListLength").Device(DEVICE_CPU), LengthOp);
REGISTER_KERNEL_BUILDER(Name("TensorListElementShape").Device(DEVICE_CPU), ElementShapeOp);
REGISTER_KERNEL_BUILDER(Name("TensorListPushBack").Device(DEVICE_CPU), PushBackOp);
REGISTER_KERNEL_BUILDER(Name("TensorListPopBack").Device(DEVICE_CPU), PopBackOp);

}  // namespace
}  // namespace recflow
