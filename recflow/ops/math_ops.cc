#include "recflow/ops/math_ops.h"

#include "recflow/framework/op_registry.h"

namespace recflow {

#define RECFLOW_NUMERIC_TYPES_ \
  "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, int64, " \
  "complex64, complex128"

REGISTER_OP("AddV2")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {" RECFLOW_NUMERIC_TYPES_ "}")
    .SetIsCommutative()
    .SetIsAggregate()
    .SetShapeFn(shape_fns::BroadcastBinaryOpShape)
    .Doc("Returns x + y elementwise, with NumPy broadcasting.");

REGISTER_OP("Add")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {" RECFLOW_NUMERIC_TYPES_ ", string}")
    .SetShapeFn(shape_fns::BroadcastBinaryOpShape)
    .Doc("Returns x + y elementwise, with NumPy broadcasting (TF1; strings concatenate).");

REGISTER_OP("Mul")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {" RECFLOW_NUMERIC_TYPES_ "}")
    .SetIsCommutative()
    .SetShapeFn(shape_fns::BroadcastBinaryOpShape)
    .Doc("Returns x * y elementwise, with NumPy broadcasting.");

REGISTER_OP("MatMul")
    .Input("a: T")
    .Input("b: T")
    .Output("product: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("T: {bfloat16, half, float, double, int32, int64, complex64, complex128}")
    .Attr("grad_a: bool = false")
    .Attr("grad_b: bool = false")
    .SetShapeFn(shape_fns::MatMulShape)
    .Doc("Multiplies matrix a by matrix b, each optionally transposed first.");

REGISTER_OP("AddN")
    .Input("inputs: N * T")
    .Output("sum: T")
    .Attr("N: int >= 1")
    .Attr("T: {" RECFLOW_NUMERIC_TYPES_ "}")
    .SetIsCommutative()
    .SetIsAggregate()
    .SetShapeFn([](InferenceContext* c) {
      PartialShape merged = c->input(0);
      for (int i = 1; i < c->num_inputs(); ++i) {
        auto m = merged.Merge(c->input(i));
        if (!m.ok()) {
          return errors::InvalidArgument("all inputs must have the same shape, but input ", i,
                                         " is ", c->input(i).DebugString(), " and the others ",
                                         merged.DebugString());
        }
        merged = *m;
      }
      c->set_output(0, merged);
      return absl::OkStatus();
    })
    .Doc("Adds all inputs elementwise (same shapes, no broadcasting).");

REGISTER_OP("BroadcastGradientArgs")
    .Input("s0: T")
    .Input("s1: T")
    .Output("r0: T")
    .Output("r1: T")
    .Attr("T: {int32, int64} = int32")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, PartialShape({kUnknownDim}));
      c->set_output(1, PartialShape({kUnknownDim}));
      return absl::OkStatus();
    })
    .Doc("The axes to sum a broadcast result's gradient over, for each of two input shapes.");

#undef RECFLOW_NUMERIC_TYPES_

namespace ops {
namespace {

Output Binary(const Scope& scope, const char* op, Output x, Output y) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  b.Input(x).Input(y);
  return Output(scope.AddNode(b));
}

}  // namespace

Output AddV2(const Scope& scope, Output x, Output y) { return Binary(scope, "AddV2", x, y); }
Output Add(const Scope& scope, Output x, Output y) { return Binary(scope, "Add", x, y); }
Output Mul(const Scope& scope, Output x, Output y) { return Binary(scope, "Mul", x, y); }

Output AddN(const Scope& scope, std::vector<Output> inputs) {
  NodeBuilder b(scope.GetUniqueNameForOp("AddN"), "AddN");
  b.Input(std::move(inputs));
  return Output(scope.AddNode(b));
}

Output MatMul(const Scope& scope, Output a, Output b, const MatMulAttrs& attrs) {
  NodeBuilder nb(scope.GetUniqueNameForOp("MatMul"), "MatMul");
  nb.Input(a).Input(b).Attr("transpose_a", attrs.transpose_a).Attr("transpose_b", attrs.transpose_b);
  return Output(scope.AddNode(nb));
}

}  // namespace ops
}  // namespace recflow
