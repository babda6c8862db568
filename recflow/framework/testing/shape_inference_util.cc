#include "recflow/framework/testing/shape_inference_util.h"

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "recflow/core/status.h"
#include "recflow/framework/node_def_util.h"
#include "recflow/framework/op_registry.h"

namespace recflow {

ShapeTestOp::ShapeTestOp(std::string op) {
  def_.set_name("test_node");
  def_.set_op(std::move(op));
}

ShapeTestOp& ShapeTestOp::InputTensor(int i, Tensor value) {
  tensors_[i] = std::move(value);
  return *this;
}

absl::StatusOr<std::string> ShapeTestOp::Infer(const std::string& inputs) const {
  ASSIGN_OR_RETURN(const OpRegistrationData* reg, OpRegistry::Global()->LookUp(def_.op()));
  tensorflow::NodeDef def = def_;
  std::vector<PartialShape> shapes;
  if (!inputs.empty()) {
    for (absl::string_view part : absl::StrSplit(inputs, ';')) {
      ASSIGN_OR_RETURN(PartialShape s, PartialShape::Parse(part));
      shapes.push_back(std::move(s));
      def.add_input("x");
    }
  }
  AddDefaultsToNodeDef(reg->op_def, &def);
  RETURN_IF_ERROR(ValidateNodeDef(def, reg->op_def));
  std::vector<DataType> in_types, out_types;
  RETURN_IF_ERROR(InOutTypesForNode(def, reg->op_def, &in_types, &out_types));
  std::vector<const Tensor*> values(shapes.size(), nullptr);
  for (const auto& [i, t] : tensors_) {
    if (i < static_cast<int>(values.size())) values[i] = &t;
  }
  if (!reg->shape_fn) return errors::FailedPrecondition("op ", def.op(), " has no shape function");
  InferenceContext ctx(def, std::move(shapes), std::move(values),
                       static_cast<int>(out_types.size()));
  RETURN_IF_ERROR(reg->shape_fn(&ctx));
  std::vector<std::string> out;
  for (const PartialShape& s : ctx.outputs()) out.push_back(s.DebugString());
  return absl::StrJoin(out, ";");
}

}  // namespace recflow
