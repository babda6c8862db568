#include "recflow/framework/op_kernel.h"

#include <algorithm>

#include "absl/strings/str_join.h"

namespace recflow {

OpKernel::OpKernel(OpKernelConstruction* c)
    : def_(c->def()), input_types_(c->input_types()), output_types_(c->output_types()) {
  absl::Status s = NameRangesForNode(def_, c->op_def(), &input_ranges_, nullptr);
  if (!s.ok()) c->SetStatus(s);
}

absl::Status OpKernel::InputRange(absl::string_view arg_name, int* start, int* stop) const {
  auto it = input_ranges_.find(std::string(arg_name));
  if (it == input_ranges_.end()) {
    return errors::InvalidArgument("op ", type_string(), " has no input argument '", arg_name,
                                   "'");
  }
  *start = it->second.first;
  *stop = it->second.second;
  return absl::OkStatus();
}

absl::Status OpKernelContext::input_list(absl::string_view arg_name,
                                         std::vector<Tensor>* tensors) const {
  int start, stop;
  RETURN_IF_ERROR(params_->op_kernel->InputRange(arg_name, &start, &stop));
  tensors->clear();
  for (int i = start; i < stop; ++i) tensors->push_back(input(i));
  return absl::OkStatus();
}

absl::Status OpKernelContext::allocate_output(int i, const TensorShape& shape, Tensor** out) {
  auto t = Tensor::Create(expected_output_dtype(i), shape, device()->allocator());
  if (!t.ok()) {
    return errors::Annotate(t.status(), absl::StrCat("allocating output ", i));
  }
  outputs_[i].tensor = *std::move(t);
  *out = &outputs_[i].tensor;
  return absl::OkStatus();
}

absl::Status OpKernelContext::forward_input_or_allocate_output(int input_index, int output_index,
                                                               const TensorShape& shape,
                                                               Tensor** out) {
  TensorValue& in = params_->inputs[input_index];
  // The executor moved the input into this step's slot, so a use count of
  // one means nobody else can see the buffer. A slice (offset) or another
  // element count cannot be reused in place.
  if (!in.is_ref() && in.tensor.RefCountIsOne() &&
      in.tensor.dtype() == expected_output_dtype(output_index) &&
      DataTypeIsPod(in.tensor.dtype()) && in.tensor.NumElements() == shape.num_elements() &&
      in.tensor.raw_data() == in.tensor.buffer()->data() &&
      in.tensor.TotalBytes() == in.tensor.buffer()->size_bytes()) {
    Tensor& dst = outputs_[output_index].tensor;
    dst = in.tensor;
    if (dst.shape() != shape) dst = *dst.Reshaped(shape);  // same element count
    *out = &dst;
    return absl::OkStatus();
  }
  return allocate_output(output_index, shape, out);
}

std::string KernelDef::DebugString() const {
  std::vector<std::string> parts;
  for (const auto& [attr, types] : type_constraints) {
    std::vector<std::string> names;
    for (DataType t : types) names.push_back(DataTypeString(t));
    parts.push_back(absl::StrCat(attr, " in {", absl::StrJoin(names, ", "), "}"));
  }
  return absl::StrCat(op, " on ", device_type,
                      parts.empty() ? "" : absl::StrCat(" [", absl::StrJoin(parts, "; "), "]"));
}

KernelRegistry* KernelRegistry::Global() {
  static KernelRegistry* const registry = new KernelRegistry;
  return registry;
}

void KernelRegistry::Register(KernelDef def, std::string class_name, KernelFactory factory) {
  MutexLock lock(&mu_);
  auto [begin, end] = kernels_.equal_range(def.op);
  for (auto it = begin; it != end; ++it) {
    const KernelDef& other = it->second.def;
    if (other.device_type == def.device_type && other.type_constraints == def.type_constraints &&
        other.priority == def.priority) {
      errors_.push_back(absl::StrCat("kernel ", def.DebugString(), " (", class_name,
                                     ") is already registered by ", it->second.class_name));
      return;
    }
  }
  std::string op = def.op;
  kernels_.emplace(std::move(op),
                   Registration{std::move(def), std::move(class_name), std::move(factory)});
}

absl::StatusOr<const KernelRegistry::Registration*> KernelRegistry::Find(
    absl::string_view device_type, const tensorflow::NodeDef& node) const {
  MutexLock lock(&mu_);
  const Registration* best = nullptr;
  std::vector<std::string> candidates;
  auto [begin, end] = kernels_.equal_range(node.op());
  for (auto it = begin; it != end; ++it) {
    const Registration& r = it->second;
    candidates.push_back(r.def.DebugString());
    if (r.def.device_type != device_type) continue;
    bool match = true;
    for (const auto& [attr, allowed] : r.def.type_constraints) {
      auto a = node.attr().find(attr);
      if (a == node.attr().end()) {
        match = false;
        break;
      }
      std::vector<DataType> actual;
      if (a->second.value_case() == tensorflow::AttrValue::kType) {
        actual.push_back(static_cast<DataType>(a->second.type()));
      } else {
        for (int t : a->second.list().type()) actual.push_back(static_cast<DataType>(t));
      }
      for (DataType t : actual) {
        if (std::find(allowed.begin(), allowed.end(), t) == allowed.end()) match = false;
      }
      if (!match) break;
    }
    if (match && (best == nullptr || r.def.priority > best->def.priority)) best = &r;
  }
  if (best != nullptr) return best;
  std::vector<std::string> type_attrs;
  for (const auto& [k, v] : node.attr()) {
    if (v.value_case() == tensorflow::AttrValue::kType) {
      type_attrs.push_back(absl::StrCat(k, "=", DataTypeString(static_cast<DataType>(v.type()))));
    }
  }
  std::sort(type_attrs.begin(), type_attrs.end());
  return errors::NotFound(
      "no kernel for node '", node.name(), "' (op ", node.op(), ") on ", device_type,
      type_attrs.empty() ? "" : absl::StrCat(" with ", absl::StrJoin(type_attrs, ", ")),
      candidates.empty()
          ? "; no kernels are registered for this op"
          : absl::StrCat("; registered kernels: ", absl::StrJoin(candidates, "; ")));
}

absl::StatusOr<const KernelDef*> KernelRegistry::FindKernel(
    absl::string_view device_type, const tensorflow::NodeDef& node) const {
  ASSIGN_OR_RETURN(const Registration* r, Find(device_type, node));
  return &r->def;
}

bool KernelRegistry::HasKernelForOp(absl::string_view op, absl::string_view device_type) const {
  MutexLock lock(&mu_);
  auto [begin, end] = kernels_.equal_range(op);
  for (auto it = begin; it != end; ++it) {
    if (it->second.def.device_type == device_type) return true;
  }
  return false;
}

std::vector<std::string> KernelRegistry::RegistrationErrors() const {
  MutexLock lock(&mu_);
  return errors_;
}

std::vector<std::string> KernelRegistry::ListKernels() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [op, r] : kernels_) {
    out.push_back(absl::StrCat(r.def.DebugString(), " -> ", r.class_name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::unique_ptr<OpKernel>> KernelRegistry::CreateKernel(
    Device* device, const tensorflow::NodeDef& def, const tensorflow::OpDef& op_def,
    const std::vector<DataType>& input_types, const std::vector<DataType>& output_types,
    FunctionLibraryRuntime* flr) const {
  ASSIGN_OR_RETURN(const Registration* r, Find(device->device_type(), def));
  OpKernelConstruction construction(device, def, op_def, input_types, output_types);
  construction.set_function_library(flr);
  std::unique_ptr<OpKernel> kernel = r->factory(&construction);
  if (!construction.status().ok()) {
    return errors::Annotate(construction.status(),
                            absl::StrCat("node '", def.name(), "' (", def.op(), ")"));
  }
  return kernel;
}

}  // namespace recflow
