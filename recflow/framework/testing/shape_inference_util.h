// Compact shape-function tests, in the style of TensorFlow's INFER_OK:
//
//   ShapeTestOp op("MatMul");
//   op.Attr("transpose_a", true);
//   INFER_OK(op, "[3,2];[3,4]", "[2,4]");
//   INFER_ERROR("inner dimensions", op, "[3,2];[4,4]");
//
// Inputs and outputs are ';'-separated shapes: "[2,?]", "[]" (scalar), "?"
// (unknown rank). Constant input values can be given with InputTensor().
// For tests only.
#ifndef RECFLOW_FRAMEWORK_TESTING_SHAPE_INFERENCE_UTIL_H_
#define RECFLOW_FRAMEWORK_TESTING_SHAPE_INFERENCE_UTIL_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/proto/node_def.pb.h"

namespace recflow {

class ShapeTestOp {
 public:
  explicit ShapeTestOp(std::string op);
  template <typename T>
  ShapeTestOp& Attr(const std::string& name, const T& value) {
    SetAttrValue(value, &(*def_.mutable_attr())[name]);
    return *this;
  }
  // The value of constant input i.
  ShapeTestOp& InputTensor(int i, Tensor value);

  // Adds defaults, validates attrs, runs the op's shape function over
  // `inputs`, and returns the outputs as ';'-joined shapes.
  absl::StatusOr<std::string> Infer(const std::string& inputs) const;

 private:
  tensorflow::NodeDef def_;
  std::map<int, Tensor> tensors_;
};

#define INFER_OK(op, inputs, expected)                     \
  do {                                                      \
    auto _r = (op).Infer(inputs);                           \
    ASSERT_TRUE(_r.ok()) << _r.status();                    \
    EXPECT_EQ(*_r, expected) << "inputs: " << (inputs);     \
  } while (0)

#define INFER_ERROR(substr, op, inputs)                                        \
  do {                                                                         \
    auto _r = (op).Infer(inputs);                                              \
    ASSERT_FALSE(_r.ok()) << "expected an error, got " << *_r;                 \
    EXPECT_NE(_r.status().message().find(substr), std::string::npos)          \
        << _r.status();                                                        \
  } while (0)

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_TESTING_SHAPE_INFERENCE_UTIL_H_
