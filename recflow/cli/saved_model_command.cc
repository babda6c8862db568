// recflow saved_model show|run: inspect a SavedModel's tag sets and
// signatures and run a signature on inputs given as expressions or .npy
// files, like TensorFlow's saved_model_cli. The inputs are read by library
// code (framework/tensor_literal.h, data/example_literal.h, core/npy.h);
// this file wires the flags to them and prints.
#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/cli/commands.h"
#include "recflow/core/dtype.h"
#include "recflow/core/env.h"
#include "recflow/core/npy.h"
#include "recflow/core/status.h"
#include "recflow/data/example_literal.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/framework/tensor_literal.h"
#include "recflow/proto/example.pb.h"
#include "recflow/serving/saved_model_bundle.h"

namespace recflow::cli {
namespace {

constexpr char kUsage[] =
    "usage: recflow saved_model show --dir DIR [--all] [--tag_set serve] "
    "[--signature_def NAME]\n"
    "       recflow saved_model run --dir DIR [--tag_set serve] "
    "--signature_def NAME\n"
    "           [--input_exprs 'x=[1.0,2.0];y=3'] [--inputs "
    "'x=file.npy;y=other.npy']\n"
    "           [--input_examples 'inputs=[{\"x\": [1.0]}, {\"x\": [2.0]}]']\n"
    "           [--outdir DIR]\n"
    "\n"
    "show: without --tag_set, lists the tag sets; with it, the signature "
    "names; with\n"
    "--signature_def too, that signature's inputs and outputs (dtype, shape, "
    "tensor\n"
    "name) and method name; --all prints everything.\n"
    "run: loads the MetaGraph tagged --tag_set (default serve), feeds the "
    "inputs\n"
    "(values are cast to the signature's dtype; a vector is reshaped to the "
    "signature's\n"
    "shape when only one layout fits) and prints every output; --outdir also "
    "writes\n"
    "each output to OUTDIR/KEY.npy.\n\n";

// ---------------------------------------------------------------------------
// Flags.

// "k=v;k2=v2" -> pairs; InvalidArgument naming `flag` when malformed.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
SplitAssignments(const std::string& text, const char* flag) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view part :
       absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    const size_t eq = part.find('=');
    std::string key(absl::StripAsciiWhitespace(part.substr(0, eq)));
    if (eq == absl::string_view::npos || key.empty()) {
      return errors::InvalidArgument("--", flag, ": expected KEY=VALUE, got '",
                                     part, "'");
    }
    out.emplace_back(
        key, std::string(absl::StripAsciiWhitespace(part.substr(eq + 1))));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Printing.

std::string ShapeString(const tensorflow::TensorShapeProto& shape) {
  if (shape.unknown_rank()) return "unknown_rank";
  std::vector<std::string> dims;
  for (const auto& d : shape.dim()) dims.push_back(absl::StrCat(d.size()));
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

void PrintTensorInfos(
    const google::protobuf::Map<std::string, tensorflow::TensorInfo>& infos,
    const char* kind, const std::string& indent) {
  std::map<std::string, tensorflow::TensorInfo> sorted(infos.begin(),
                                                       infos.end());
  for (const auto& [key, info] : sorted) {
    std::cout << indent << kind << "['" << key << "'] tensor_info:\n"
              << indent
              << "    dtype: " << tensorflow::DataType_Name(info.dtype())
              << "\n"
              << indent << "    shape: " << ShapeString(info.tensor_shape())
              << "\n"
              << indent << "    name: " << info.name() << "\n";
  }
}

void PrintSignature(const tensorflow::SignatureDef& sig,
                    const std::string& indent) {
  std::cout
      << indent
      << "The given SavedModel SignatureDef contains the following input(s):\n";
  PrintTensorInfos(sig.inputs(), "inputs", indent + "  ");
  std::cout << indent
            << "The given SavedModel SignatureDef contains the following "
               "output(s):\n";
  PrintTensorInfos(sig.outputs(), "outputs", indent + "  ");
  std::cout << indent << "Method name is: " << sig.method_name() << "\n";
}

std::string ElementString(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_FLOAT:
      return absl::StrCat(t.flat<float>()[i]);
    case DT_DOUBLE:
      return absl::StrCat(t.flat<double>()[i]);
    case DT_INT32:
      return absl::StrCat(t.flat<int32_t>()[i]);
    case DT_INT64:
      return absl::StrCat(t.flat<int64_t>()[i]);
    case DT_BOOL:
      return t.flat<bool>()[i] ? "true" : "false";
    case DT_STRING:
      return absl::StrCat("\"", absl::CHexEscape(t.flat<std::string>()[i]),
                          "\"");
    default:
      return "?";
  }
}

// Nested-list form: [[2.5], [3], [4.5]].
void AppendNested(const Tensor& t, int dim, int64_t* next, std::string* out) {
  if (dim == t.shape().dims()) {
    out->append(ElementString(t, (*next)++));
    return;
  }
  out->push_back('[');
  for (int64_t i = 0; i < t.shape().dim_size(dim); ++i) {
    if (i > 0) out->append(", ");
    AppendNested(t, dim + 1, next, out);
  }
  out->push_back(']');
}

std::vector<std::string> ParseTags(const std::string& tag_set) {
  std::vector<std::string> tags;
  for (absl::string_view t :
       absl::StrSplit(tag_set, ',', absl::SkipWhitespace())) {
    tags.emplace_back(absl::StripAsciiWhitespace(t));
  }
  return tags;
}

int Fail(const absl::Status& s) {
  std::cerr << "error: " << s.message() << "\n";
  return 1;
}

int Show(const std::string& dir, const std::string& tag_set,
         const std::string& signature, bool all) {
  auto sm = checkpoint::ReadSavedModel(Env::Default(), dir);
  if (!sm.ok()) return Fail(sm.status());
  if (all) {
    for (const auto& mg : sm->meta_graphs()) {
      std::cout << "\nMetaGraphDef with tag-set: '"
                << absl::StrJoin(mg.meta_info_def().tags(), ", ")
                << "' contains the following SignatureDefs:\n";
      std::map<std::string, tensorflow::SignatureDef> sigs(
          mg.signature_def().begin(), mg.signature_def().end());
      for (const auto& [name, sig] : sigs) {
        std::cout << "\nsignature_def['" << name << "']:\n";
        PrintSignature(sig, "  ");
      }
    }
    return 0;
  }
  if (tag_set.empty()) {
    if (!signature.empty()) {
      std::cerr << "error: --signature_def needs --tag_set\n";
      return 2;
    }
    std::cout << "The given SavedModel contains the following tag-sets:\n";
    for (const auto& mg : sm->meta_graphs()) {
      std::cout << "'" << absl::StrJoin(mg.meta_info_def().tags(), ", ")
                << "'\n";
    }
    return 0;
  }
  auto mg = checkpoint::FindMetaGraph(*sm, ParseTags(tag_set));
  if (!mg.ok()) return Fail(mg.status());
  if (signature.empty()) {
    std::cout << "The given SavedModel MetaGraphDef contains SignatureDefs "
                 "with the following "
                 "keys:\n";
    std::set<std::string> names;
    for (const auto& [name, sig] : (*mg)->signature_def()) names.insert(name);
    for (const std::string& name : names)
      std::cout << "SignatureDef key: \"" << name << "\"\n";
    return 0;
  }
  auto sig = checkpoint::FindSignature(**mg, signature);
  if (!sig.ok()) return Fail(sig.status());
  PrintSignature(**sig, "");
  return 0;
}

int Run(const std::string& dir, const std::string& tag_set,
        const std::string& signature, const std::string& input_exprs,
        const std::string& input_files, const std::string& input_examples,
        const std::string& outdir) {
  if (signature.empty()) {
    std::cerr << "error: --signature_def is required\n" << kUsage;
    return 2;
  }
  auto exprs = SplitAssignments(input_exprs, "input_exprs");
  if (!exprs.ok()) return Fail(exprs.status());
  auto files = SplitAssignments(input_files, "inputs");
  if (!files.ok()) return Fail(files.status());
  auto examples = SplitAssignments(input_examples, "input_examples");
  if (!examples.ok()) return Fail(examples.status());
  if (exprs->empty() && files->empty() && examples->empty()) {
    std::cerr << "error: give the inputs with --input_exprs, --inputs and/or "
                 "--input_examples\n"
              << kUsage;
    return 2;
  }
  auto bundle = serving::LoadSavedModel({}, dir, ParseTags(tag_set));
  if (!bundle.ok()) return Fail(bundle.status());
  auto sig = checkpoint::FindSignature(bundle->meta_graph_def, signature);
  if (!sig.ok()) return Fail(sig.status());

  std::map<std::string, Tensor> inputs;
  auto add = [&](const std::string& key,
                 absl::StatusOr<TensorLiteral> literal) -> absl::Status {
    if (!literal.ok())
      return errors::Annotate(literal.status(),
                              absl::StrCat("input '", key, "'"));
    if (inputs.contains(key))
      return errors::InvalidArgument("input '", key, "' given twice");
    auto it = (*sig)->inputs().find(key);
    if (it == (*sig)->inputs().end()) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : (*sig)->inputs()) keys.push_back(k);
      std::sort(keys.begin(), keys.end());
      return errors::InvalidArgument(
          "signature '", signature, "' has no input '", key,
          "'; its inputs are: ", absl::StrJoin(keys, ", "));
    }
    PartialShape want;
    if (it->second.has_tensor_shape()) {
      auto s = PartialShape::FromProto(it->second.tensor_shape());
      if (s.ok()) want = *s;
    }
    bool reshaped = false;
    ASSIGN_OR_RETURN(
        Tensor t, TensorLiteralToTensor(
                      *literal, static_cast<DataType>(it->second.dtype()), want,
                      absl::StrCat("input '", key, "'"), &reshaped));
    if (reshaped) {
      std::cerr
          << "note: input '" << key << "' reshaped from "
          << TensorShape(absl::MakeConstSpan(literal->shape)).DebugString()
          << " to " << t.shape().DebugString() << " to match the signature\n";
    }
    inputs.emplace(key, std::move(t));
    return absl::OkStatus();
  };
  for (const auto& [key, expr] : *exprs) {
    absl::Status s = add(key, ParseTensorLiteral(expr));
    if (!s.ok()) return Fail(errors::Annotate(s, "--input_exprs"));
  }
  for (const auto& [key, path] : *files) {
    auto t = ReadNpyFile(Env::Default(), path);
    absl::Status s =
        t.ok() ? add(key, TensorLiteralFromTensor(*t)) : t.status();
    if (!s.ok()) return Fail(errors::Annotate(s, "--inputs"));
  }
  for (const auto& [key, text] : *examples) {
    absl::Status s;
    auto parsed = data::ParseExampleLiterals(text);
    if (!parsed.ok()) {
      s = errors::Annotate(parsed.status(), absl::StrCat("input '", key, "'"));
    } else if (inputs.contains(key)) {
      s = errors::InvalidArgument("input '", key, "' given twice");
    } else {
      // Fed as a vector of serialized tf.Examples.
      Tensor t(DT_STRING, TensorShape({static_cast<int64_t>(parsed->size())}));
      for (size_t i = 0; i < parsed->size(); ++i) {
        t.flat<std::string>()[i] = (*parsed)[i].SerializeAsString();
      }
      inputs.emplace(key, std::move(t));
    }
    if (!s.ok()) return Fail(errors::Annotate(s, "--input_examples"));
  }
  auto outputs = serving::RunSignature(*bundle, signature, inputs);
  if (!outputs.ok()) return Fail(outputs.status());
  if (!outdir.empty()) {
    absl::Status s = Env::Default()->RecursivelyCreateDir(outdir);
    if (!s.ok())
      return Fail(errors::Annotate(s, absl::StrCat("--outdir ", outdir)));
  }
  for (const auto& [key, t] : *outputs) {
    std::string text;
    int64_t next = 0;
    if (t.NumElements() <= 100000) {
      AppendNested(t, 0, &next, &text);
    } else {
      text = t.DebugString(20);
    }
    std::cout << "Result for output key " << key << ":\n" << text << "\n";
    if (!outdir.empty()) {
      const std::string path = JoinPath(outdir, key + ".npy");
      absl::Status s = WriteNpyFile(Env::Default(), path, t);
      if (!s.ok()) return Fail(s);
      std::cout << "Output " << key << " is saved to " << path << "\n";
    }
  }
  return 0;
}

}  // namespace

int SavedModelCommand(const Args& args) {
  std::string dir, tag_set, signature, input_exprs, input_files, input_examples,
      outdir;
  bool all = false;
  std::vector<Flag> flags = {
      {"dir", &dir, nullptr, "the SavedModel directory (required)"},
      {"tag_set", &tag_set, nullptr,
       "comma-separated tags of the MetaGraph (run: default serve)"},
      {"signature_def", &signature, nullptr, "signature name"},
      {"all", nullptr, &all, "show: print every tag set and signature"},
      {"input_exprs", &input_exprs, nullptr,
       "run: KEY=VALUE;... with numbers or nested lists, e.g. 'x=[[1],[2]]'"},
      {"inputs", &input_files, nullptr,
       "run: KEY=FILE.npy;... (float32/64, int32/64, bool)"},
      {"input_examples", &input_examples, nullptr,
       "run: KEY=[{\"feature\": [values], ...}, ...] fed as serialized "
       "tf.Examples"},
      {"outdir", &outdir, nullptr,
       "run: also write each output to OUTDIR/KEY.npy"},
  };
  Args positional;
  if (!ParseFlags(args, flags, &positional, kUsage)) return 2;
  if (positional.size() != 1 ||
      (positional[0] != "show" && positional[0] != "run")) {
    std::cerr << "error: expected 'show' or 'run'\n" << kUsage;
    return 2;
  }
  if (dir.empty()) {
    std::cerr << "error: --dir is required\n" << kUsage;
    return 2;
  }
  if (positional[0] == "show") return Show(dir, tag_set, signature, all);
  return Run(dir, tag_set.empty() ? checkpoint::kSavedModelTagServe : tag_set,
             signature, input_exprs, input_files, input_examples, outdir);
}

}  // namespace recflow::cli
