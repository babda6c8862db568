// TensorList ops, TensorFlow's definitions (tensorflow/core/ops/list_ops.cc):
// the ones TF2's while_v2 and Keras RNN layers write (EmptyTensorList,
// TensorListReserve, TensorListFromTensor, TensorListStack,
// TensorListGetItem, TensorListSetItem, TensorListLength,
// TensorListElementShape, TensorListPushBack, TensorListPopBack). A list is
// a scalar DT_VARIANT (kernels/tensor_list.h).
//
// Shape functions: TensorFlow also tracks each list handle's element shape
// through the graph (handle data); recflow does not, so an element shape is
// known here only from an op's own element_shape input (a constant shape
// tensor, where -1 is an unknown dim and the scalar -1 an unknown rank)
// and, for TensorListFromTensor, from the tensor. Where TensorFlow would
// take it from the handle, the shape here is unknown.
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// TensorFlow's MakeShapeFromShapeTensorTreatScalarAsUnknownShape over input i.
absl::StatusOr<PartialShape> ElementShapeInput(InferenceContext* c, int i) {
  const PartialShape& s = c->input(i);
  if (s.rank() == 0) {
    if (const Tensor* t = c->input_tensor(i)) {
      const int64_t v = t->dtype() == DT_INT64 ? t->scalar<int64_t>() : t->scalar<int32_t>();
      if (v != -1) {
        return errors::InvalidArgument("element_shape (input ", i,
                                       ") is a scalar; it must be -1 (unknown rank), got ", v);
      }
    }
    return PartialShape::Unknown();
  }
  if (s.rank() > 1) {
    return errors::InvalidArgument("element_shape (input ", i, ") must be a scalar or a vector, "
                                   "got shape ", s.DebugString());
  }
  return c->ShapeFromShapeTensor(i);
}

// [prefix] + shape, unknown when shape is.
PartialShape Prepend(int64_t prefix, const PartialShape& shape) {
  if (shape.unknown_rank()) return PartialShape::Unknown();
  std::vector<int64_t> dims = {prefix};
  dims.insert(dims.end(), shape.dims().begin(), shape.dims().end());
  return PartialShape(absl::MakeConstSpan(dims));
}

absl::Status ScalarHandleWithShapeInput(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape element_shape, ElementShapeInput(c, 0));
  (void)element_shape;  // validated; kept by the kernel, not the shape
  c->set_output(0, PartialShape({}));
  return absl::OkStatus();
}

absl::Status ScalarHandle(InferenceContext* c) {
  c->set_output(0, PartialShape({}));
  return absl::OkStatus();
}

absl::Status FromTensorShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape tensor, c->WithRankAtLeast(0, 1));
  ASSIGN_OR_RETURN(PartialShape element_shape, ElementShapeInput(c, 1));
  if (!tensor.unknown_rank()) {
    const PartialShape rest(tensor.dims().subspan(1));
    if (!rest.IsCompatibleWith(element_shape)) {
      return errors::InvalidArgument("element_shape ", element_shape.DebugString(),
                                     " does not fit the tensor's elements, of shape ",
                                     rest.DebugString());
    }
  }
  c->set_output(0, PartialShape({}));
  return absl::OkStatus();
}

absl::Status StackShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape element_shape, ElementShapeInput(c, 1));
  int64_t num_elements = -1;
  RETURN_IF_ERROR(c->GetAttr("num_elements", &num_elements));
  c->set_output(0, Prepend(num_elements, element_shape));
  return absl::OkStatus();
}

absl::Status GetItemShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape element_shape, ElementShapeInput(c, 2));
  c->set_output(0, element_shape);
  return absl::OkStatus();
}

absl::Status PopBackShape(InferenceContext* c) {
  c->set_output(0, PartialShape({}));
  c->set_output(1, PartialShape::Unknown());
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("EmptyTensorList")
    .Input("element_shape: shape_type")
    .Input("max_num_elements: int32")
    .Output("handle: variant")
    .Attr("element_dtype: type")
    .Attr("shape_type: {int32, int64}")
    .SetShapeFn(ScalarHandleWithShapeInput)
    .Doc("An empty list of element_dtype tensors of element_shape, holding at most "
         "max_num_elements (-1: unbounded).");

REGISTER_OP("TensorListReserve")
    .Input("element_shape: shape_type")
    .Input("num_elements: int32")
    .Output("handle: variant")
    .Attr("element_dtype: type")
    .Attr("shape_type: {int32, int64}")
    .SetShapeFn(ScalarHandleWithShapeInput)
    .Doc("A list of num_elements unset slots (reading one gives zeros of element_shape).");

REGISTER_OP("TensorListFromTensor")
    .Input("tensor: element_dtype")
    .Input("element_shape: shape_type")
    .Output("output_handle: variant")
    .Attr("element_dtype: type")
    .Attr("shape_type: {int32, int64}")
    .SetShapeFn(FromTensorShape)
    .Doc("The list of tensor's slices along its first dimension.");

REGISTER_OP("TensorListStack")
    .Input("input_handle: variant")
    .Input("element_shape: int32")
    .Output("tensor: element_dtype")
    .Attr("element_dtype: type")
    .Attr("num_elements: int = -1")
    .SetShapeFn(StackShape)
    .Doc("The list's elements stacked along a new first dimension (num_elements, when not -1, "
         "is the length the list must have).");

REGISTER_OP("TensorListGetItem")
    .Input("input_handle: variant")
    .Input("index: int32")
    .Input("element_shape: int32")
    .Output("item: element_dtype")
    .Attr("element_dtype: type")
    .SetShapeFn(GetItemShape)
    .Doc("Element index of the list (zeros of element_shape when the slot is unset).");

REGISTER_OP("TensorListSetItem")
    .Input("input_handle: variant")
    .Input("index: int32")
    .Input("item: element_dtype")
    .Output("output_handle: variant")
    .Attr("element_dtype: type")
    .Attr("resize_if_index_out_of_bounds: bool = false")
    .SetShapeFn(ScalarHandle)
    .Doc("The list with element index replaced by item (grown to index + 1 first when "
         "resize_if_index_out_of_bounds).");

REGISTER_OP("TensorListLength")
    .Input("input_handle: variant")
    .Output("length: int32")
    .SetShapeFn(shape_fns::ScalarShape)
    .Doc("The number of elements of the list.");

REGISTER_OP("TensorListElementShape")
    .Input("input_handle: variant")
    .Output("element_shape: shape_type")
    .Attr("shape_type: {int32, int64}")
    .SetShapeFn(shape_fns::UnknownShape)
    .Doc("The list's element shape: a vector (-1 for unknown dims), or the scalar -1 when its "
         "rank is unknown.");

REGISTER_OP("TensorListPushBack")
    .Input("input_handle: variant")
    .Input("tensor: element_dtype")
    .Output("output_handle: variant")
    .Attr("element_dtype: type")
    .SetShapeFn(ScalarHandle)
    .Doc("The list with tensor appended.");

REGISTER_OP("TensorListPopBack")
    .Input("input_handle: variant")
    .Input("element_shape: int32")
    .Output("output_handle: variant")
    .Output("tensor: element_dtype")
    .Attr("element_dtype: type")
    .SetShapeFn(PopBackShape)
    .Doc("The list without its last element, and that element (zeros of element_shape when "
         "its slot is unset).");

}  // namespace recflow
