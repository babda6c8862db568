// recflow graph inspect: prints a GraphDef, or the graph inside a
// SavedModel, as a readable node list and a summary.
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "recflow/cli/commands.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/proto/saved_model.pb.h"

namespace recflow::cli {
namespace {

constexpr char kUsage[] =
    "usage: recflow graph inspect PATH [flags]\n"
    "\n"
    "PATH is a GraphDef (binary, or text if it ends in .pbtxt/.txt or does not parse as\n"
    "binary), a SavedModel's saved_model.pb / saved_model.pbtxt, or a SavedModel directory.\n"
    "Prints every node (op, inputs, device, attrs), then a count of nodes per op, the ops\n"
    "this binary has no kernel for, and a SavedModel's signatures.\n\n";

struct Loaded {
  tensorflow::GraphDef graph;
  std::string origin;
  const tensorflow::MetaGraphDef* meta = nullptr;
  tensorflow::SavedModel saved_model;
};

bool LooksLikeGraph(const tensorflow::GraphDef& g) {
  for (const auto& n : g.node()) {
    if (n.name().empty() || n.op().empty()) return false;
  }
  return true;
}

absl::Status Load(std::string path, const std::string& tag, Loaded* out) {
  Env* env = Env::Default();
  if (env->IsDirectory(path).ok()) {
    const std::string pb = JoinPath(path, "saved_model.pb");
    const std::string txt = JoinPath(path, "saved_model.pbtxt");
    if (env->FileExists(pb)) {
      path = pb;
    } else if (env->FileExists(txt)) {
      path = txt;
    } else {
      return errors::NotFound("directory '", path,
                              "' has no saved_model.pb or saved_model.pbtxt");
    }
  }
  std::string data;
  RETURN_IF_ERROR(ReadFileToString(env, path, &data));
  const bool text = absl::EndsWith(path, ".pbtxt") || absl::EndsWith(path, ".txt");
  const bool saved_model = absl::StartsWith(Basename(path), "saved_model.");
  if (saved_model) {
    const bool ok = text ? google::protobuf::TextFormat::ParseFromString(data, &out->saved_model)
                         : out->saved_model.ParseFromString(data);
    if (!ok) return errors::DataLoss("'", path, "' is not a valid SavedModel (corrupt or truncated)");
    if (out->saved_model.meta_graphs_size() == 0) {
      return errors::InvalidArgument("SavedModel '", path, "' has no meta graphs");
    }
    std::vector<std::string> all_tags;
    for (const auto& mg : out->saved_model.meta_graphs()) {
      const auto& tags = mg.meta_info_def().tags();
      all_tags.push_back("{" + absl::StrJoin(tags, ",") + "}");
      if (tag.empty() || std::find(tags.begin(), tags.end(), tag) != tags.end()) {
        out->meta = &mg;
        break;
      }
    }
    if (out->meta == nullptr) {
      return errors::NotFound("SavedModel '", path, "' has no meta graph tagged '", tag,
                              "'; tag sets: ", absl::StrJoin(all_tags, " "));
    }
    out->graph = out->meta->graph_def();
    out->origin = absl::StrCat(path, " (SavedModel, tags ",
                               absl::StrJoin(out->meta->meta_info_def().tags(), ","),
                               out->meta->meta_info_def().tensorflow_version().empty()
                                   ? ""
                                   : ", written by TensorFlow " +
                                         out->meta->meta_info_def().tensorflow_version(),
                               ")");
    return absl::OkStatus();
  }
  if (!text && out->graph.ParseFromString(data) && LooksLikeGraph(out->graph)) {
    out->origin = absl::StrCat(path, " (binary GraphDef)");
    return absl::OkStatus();
  }
  out->graph.Clear();
  if (google::protobuf::TextFormat::ParseFromString(data, &out->graph)) {
    out->origin = absl::StrCat(path, " (text GraphDef)");
    return absl::OkStatus();
  }
  return errors::DataLoss("'", path,
                          "' parses neither as a binary nor as a text GraphDef (corrupt, "
                          "truncated, or another kind of file)");
}

std::string Truncate(std::string s, size_t max) {
  if (max > 3 && s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

void PrintTensorInfo(const std::string& key, const tensorflow::TensorInfo& info) {
  auto shape = PartialShape::FromProto(info.tensor_shape());
  std::cout << "      " << key << " -> " << info.name() << " "
            << DataTypeString(static_cast<DataType>(info.dtype())) << " "
            << (shape.ok() ? shape->DebugString() : "<bad shape>") << "\n";
}

}  // namespace

int GraphCommand(const Args& args) {
  if (args.empty() || args[0] != "inspect") {
    std::cerr << kUsage;
    return 2;
  }
  std::string tag = "serve", max_attr = "120";
  bool no_nodes = false;
  Args positional;
  if (!ParseFlags(Args(args.begin() + 1, args.end()),
                  {{"tag", &tag, nullptr, "SavedModel meta graph tag to pick (default serve; '' = first)"},
                   {"max_attr_len", &max_attr, nullptr, "truncate each attr value to this many characters"},
                   {"summary_only", nullptr, &no_nodes, "print only the summary, not every node"}},
                  &positional, kUsage)) {
    return 2;
  }
  if (positional.size() != 1) {
    std::cerr << kUsage;
    return 2;
  }
  Loaded loaded;
  if (absl::Status s = Load(positional[0], tag, &loaded); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  const size_t max_len = std::max(8, std::atoi(max_attr.c_str()));
  const tensorflow::GraphDef& g = loaded.graph;
  std::cout << loaded.origin << "\n"
            << g.node_size() << " nodes, GraphDef producer version " << g.versions().producer()
            << (g.library().function_size() > 0
                    ? absl::StrCat(", ", g.library().function_size(), " functions")
                    : "")
            << "\n\n";
  std::map<std::string, int> per_op;
  for (const auto& n : g.node()) {
    ++per_op[n.op()];
    if (no_nodes) continue;
    std::cout << n.name() << " = " << n.op() << "\n";
    if (n.input_size() > 0) std::cout << "    inputs: " << absl::StrJoin(n.input(), ", ") << "\n";
    if (!n.device().empty()) std::cout << "    device: " << n.device() << "\n";
    std::vector<std::string> keys;
    for (const auto& [k, v] : n.attr()) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    for (const auto& k : keys) {
      std::cout << "    " << k << " = " << Truncate(SummarizeAttrValue(n.attr().at(k)), max_len)
                << "\n";
    }
  }
  std::cout << (no_nodes ? "" : "\n") << "Nodes per op:\n";
  std::vector<std::string> no_kernel;
  for (const auto& [op, count] : per_op) {
    const bool registered = OpRegistry::Global()->Find(op) != nullptr;
    const bool kernel = KernelRegistry::Global()->HasKernelForOp(op, DEVICE_CPU);
    std::cout << "  " << std::left << std::setw(28) << op << std::right << std::setw(6) << count
              << (registered ? "" : "   (op not registered)")
              << (registered && !kernel ? "   (no CPU kernel)" : "") << "\n";
    if (!kernel) no_kernel.push_back(absl::StrCat(op, " x", count));
  }
  std::cout << "\nOps with no kernel here: "
            << (no_kernel.empty() ? "none" : absl::StrJoin(no_kernel, ", ")) << "\n";
  Graph graph;
  absl::Status imported = ConvertGraphDefToGraph({}, g, &graph);
  std::cout << "Import check: " << (imported.ok() ? "ok" : std::string(imported.message())) << "\n";
  if (loaded.meta != nullptr && loaded.meta->signature_def_size() > 0) {
    std::cout << "\nSignatures:\n";
    std::map<std::string, const tensorflow::SignatureDef*> sigs;
    for (const auto& [k, v] : loaded.meta->signature_def()) sigs[k] = &v;
    for (const auto& [name, sig] : sigs) {
      std::cout << "  " << name << " (" << sig->method_name() << ")\n    inputs:\n";
      std::map<std::string, tensorflow::TensorInfo> in(sig->inputs().begin(), sig->inputs().end());
      for (const auto& [k, v] : in) PrintTensorInfo(k, v);
      std::cout << "    outputs:\n";
      std::map<std::string, tensorflow::TensorInfo> out(sig->outputs().begin(), sig->outputs().end());
      for (const auto& [k, v] : out) PrintTensorInfo(k, v);
    }
  }
  return imported.ok() ? 0 : 1;
}

}  // namespace recflow::cli
