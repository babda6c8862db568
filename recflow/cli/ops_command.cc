// recflow ops list | show NAME: what this binary (plus loaded libraries)
// can run.
#include <iostream>

#include "absl/strings/str_join.h"
#include "recflow/cli/commands.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"

namespace recflow::cli {
namespace {

constexpr char kUsage[] =
    "usage: recflow ops list           one line per registered op: name and summary\n"
    "       recflow ops show NAME      inputs, outputs, attrs and kernels of one op\n\n";

std::string ArgString(const tensorflow::OpDef::ArgDef& a) {
  std::string type = !a.type_attr().empty()        ? a.type_attr()
                     : !a.type_list_attr().empty() ? a.type_list_attr()
                                                   : DataTypeString(static_cast<DataType>(a.type()));
  if (!a.number_attr().empty()) type = a.number_attr() + " * " + type;
  if (a.is_ref()) type = "Ref(" + type + ")";
  return a.name() + ": " + type;
}

}  // namespace

int OpsCommand(const Args& args) {
  if (args.empty() || args[0] == "--help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "list") {
    for (const std::string& name : OpRegistry::Global()->ListOpNames()) {
      std::cout << name << "  " << OpRegistry::Global()->Find(name)->op_def.summary() << "\n";
    }
    return 0;
  }
  if (args[0] == "show" && args.size() == 2) {
    auto reg = OpRegistry::Global()->LookUp(args[1]);
    if (!reg.ok()) {
      std::cerr << "error: " << reg.status().message() << "\n";
      return 1;
    }
    const tensorflow::OpDef& op = (*reg)->op_def;
    std::cout << op.name() << ": " << op.summary() << "\n";
    if (!op.description().empty()) std::cout << "\n" << op.description() << "\n";
    for (const auto& a : op.input_arg()) std::cout << "  input   " << ArgString(a) << "\n";
    for (const auto& a : op.output_arg()) std::cout << "  output  " << ArgString(a) << "\n";
    for (const auto& a : op.attr()) {
      std::cout << "  attr    " << a.name() << ": " << a.type();
      if (a.has_allowed_values()) std::cout << " in " << SummarizeAttrValue(a.allowed_values());
      if (a.has_minimum()) std::cout << " >= " << a.minimum();
      if (a.has_default_value()) std::cout << " = " << SummarizeAttrValue(a.default_value());
      std::cout << "\n";
    }
    if (op.is_stateful()) std::cout << "  stateful\n";
    for (const std::string& k : KernelRegistry::Global()->ListKernels()) {
      if (k.rfind(op.name() + " on ", 0) == 0) std::cout << "  kernel  " << k << "\n";
    }
    return 0;
  }
  std::cerr << kUsage;
  return 2;
}

}  // namespace recflow::cli
