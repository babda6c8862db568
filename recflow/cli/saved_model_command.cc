// recflow saved_model show|run: inspect a SavedModel's tag sets and
// signatures and run a signature on inputs given as expressions or .npy
// files, like TensorFlow's saved_model_cli. The inputs are read by library
// code (framework/tensor_literal.h, data/example_literal.h, core/npy.h);
// this file wires the flags to them and prints.
#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/unknown_field_set.h"
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
#include "recflow/proto/saved_object_graph.pb.h"
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
    case DT_FLOAT: return absl::StrCat(t.flat<float>()[i]);
    case DT_DOUBLE: return absl::StrCat(t.flat<double>()[i]);
    case DT_HALF: return absl::StrCat(static_cast<float>(t.flat<half>()[i]));
    case DT_BFLOAT16:
      return absl::StrCat(static_cast<float>(t.flat<bfloat16>()[i]));
    case DT_INT8: return absl::StrCat(t.flat<int8_t>()[i]);
    case DT_INT16: return absl::StrCat(t.flat<int16_t>()[i]);
    case DT_INT32: return absl::StrCat(t.flat<int32_t>()[i]);
    case DT_INT64: return absl::StrCat(t.flat<int64_t>()[i]);
    case DT_UINT8: return absl::StrCat(t.flat<uint8_t>()[i]);
    case DT_UINT16: return absl::StrCat(t.flat<uint16_t>()[i]);
    case DT_UINT32: return absl::StrCat(t.flat<uint32_t>()[i]);
    case DT_UINT64: return absl::StrCat(t.flat<uint64_t>()[i]);
    case DT_BOOL: return t.flat<bool>()[i] ? "true" : "false";
    case DT_STRING:
      return absl::StrCat("b\"", absl::CHexEscape(t.flat<std::string>()[i]),
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

// ---------------------------------------------------------------------------
// TF2 defined functions (saved_model_cli show --all's "Concrete Functions").

// The SavedObjectGraph of `mg`: MetaGraphDef field 7, which meta_graph.proto
// leaves undeclared, so protobuf keeps it among the unknown fields. nullopt
// when the MetaGraph has none (TF1 exports).
absl::StatusOr<std::optional<tensorflow::SavedObjectGraph>> ObjectGraph(
    const tensorflow::MetaGraphDef& mg) {
  const google::protobuf::UnknownFieldSet& unknown =
      mg.GetReflection()->GetUnknownFields(mg);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& f = unknown.field(i);
    if (f.number() != 7) continue;
    tensorflow::SavedObjectGraph graph;
    if (f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED ||
        !graph.ParseFromString(f.length_delimited())) {
      return errors::DataLoss(
          "the MetaGraph's object_graph_def (field 7) is not a valid "
          "SavedObjectGraph");
    }
    return graph;
  }
  return std::nullopt;
}

// TensorFlow's Python name of a dtype ("float32" for DT_FLOAT).
std::string PythonDtypeName(tensorflow::DataType dtype) {
  switch (dtype) {
    case tensorflow::DT_FLOAT: return "float32";
    case tensorflow::DT_DOUBLE: return "float64";
    case tensorflow::DT_HALF: return "float16";
    default: {
      std::string name = tensorflow::DataType_Name(dtype);
      if (absl::StartsWith(name, "DT_")) name = name.substr(3);
      return absl::AsciiStrToLower(name);
    }
  }
}

// Python's str() of a TensorShape: "(None, 1)", "(3,)", "()", "<unknown>".
std::string PythonShape(const tensorflow::TensorShapeProto& shape) {
  if (shape.unknown_rank()) return "<unknown>";
  std::vector<std::string> dims;
  for (const auto& d : shape.dim()) {
    dims.push_back(d.size() < 0 ? "None" : absl::StrCat(d.size()));
  }
  return absl::StrCat("(", absl::StrJoin(dims, ", "),
                      dims.size() == 1 ? ",)" : ")");
}

std::string PythonQuoted(const std::string& s) {
  return absl::StrCat("'", absl::CHexEscape(s), "'");
}

std::string TensorSpecRepr(const tensorflow::TensorSpecProto& spec) {
  return absl::StrCat("TensorSpec(shape=", PythonShape(spec.shape()),
                      ", dtype=tf.", PythonDtypeName(spec.dtype()), ", name=",
                      spec.name().empty() ? "None" : PythonQuoted(spec.name()),
                      ")");
}

// Python's str() of the value (repr() for the elements of a container).
std::string PythonStr(const tensorflow::StructuredValue& v, bool repr = false) {
  using K = tensorflow::StructuredValue;
  auto join = [](const auto& values) {
    std::vector<std::string> parts;
    for (const auto& e : values) parts.push_back(PythonStr(e, true));
    return parts;
  };
  switch (v.kind_case()) {
    case K::kNoneValue: return "None";
    case K::kFloat64Value: {
      std::string s = absl::StrCat(v.float64_value());
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      return s;
    }
    case K::kInt64Value: return absl::StrCat(v.int64_value());
    case K::kStringValue:
      return repr ? PythonQuoted(v.string_value()) : v.string_value();
    case K::kBoolValue: return v.bool_value() ? "True" : "False";
    case K::kTensorSpecValue: return TensorSpecRepr(v.tensor_spec_value());
    case K::kTensorDtypeValue:
      return absl::StrCat("tf.", PythonDtypeName(v.tensor_dtype_value()));
    case K::kTensorShapeValue: return PythonShape(v.tensor_shape_value());
    case K::kListValue:
      return absl::StrCat("[", absl::StrJoin(join(v.list_value().values()), ", "),
                          "]");
    case K::kTupleValue: {
      std::vector<std::string> parts = join(v.tuple_value().values());
      return absl::StrCat("(", absl::StrJoin(parts, ", "),
                          parts.size() == 1 ? ",)" : ")");
    }
    case K::kDictValue: {
      std::map<std::string, std::string> sorted;
      for (const auto& [k, e] : v.dict_value().fields()) {
        sorted[k] = PythonStr(e, true);
      }
      std::vector<std::string> parts;
      for (const auto& [k, s] : sorted) {
        parts.push_back(absl::StrCat(PythonQuoted(k), ": ", s));
      }
      return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
    }
    default:
      return "<structure>";
  }
}

// The Python type name saved_model_cli prints as "DType:".
const char* PythonTypeName(const tensorflow::StructuredValue& v) {
  using K = tensorflow::StructuredValue;
  switch (v.kind_case()) {
    case K::kNoneValue: return "NoneType";
    case K::kFloat64Value: return "float";
    case K::kInt64Value: return "int";
    case K::kStringValue: return "str";
    case K::kBoolValue: return "bool";
    case K::kListValue: return "list";
    case K::kTupleValue: return "tuple";
    case K::kDictValue: return "dict";
    default: return "object";
  }
}

// saved_model_cli's _print_args at indent 4, for positional arguments.
void PrintArguments(
    const google::protobuf::RepeatedPtrField<tensorflow::StructuredValue>& args) {
  using K = tensorflow::StructuredValue;
  int index = 0;
  for (const auto& a : args) {
    std::cout << "        Argument #" << ++index << "\n";
    if (a.kind_case() == K::kStringValue) {
      std::cout << "          " << a.string_value() << "\n";
    } else if (a.kind_case() == K::kTensorSpecValue) {
      const std::string& name = a.tensor_spec_value().name();
      std::cout << "          " << (name.empty() ? "None" : name) << ": "
                << TensorSpecRepr(a.tensor_spec_value()) << "\n";
    } else if (a.kind_case() == K::kListValue ||
               a.kind_case() == K::kTupleValue) {
      const auto& values = a.kind_case() == K::kListValue
                               ? a.list_value().values()
                               : a.tuple_value().values();
      std::vector<std::string> parts;
      for (const auto& e : values) {
        parts.push_back(e.kind_case() == K::kStringValue
                            ? PythonQuoted(e.string_value())
                            : PythonStr(e));
      }
      std::cout << "            DType: " << PythonTypeName(a) << "\n"
                << "            Value: [" << absl::StrJoin(parts, ", ")
                << "]\n";
    } else {
      std::cout << "            DType: " << PythonTypeName(a) << "\n"
                << "            Value: " << PythonStr(a) << "\n";
    }
  }
}

// One concrete function: its positional arguments as an "Option", its
// keyword arguments by name (saved_model_cli's layout).
void PrintConcreteFunction(const tensorflow::SavedObjectGraph& graph,
                           const std::string& name,
                           const std::vector<std::string>& keywords,
                           int index) {
  auto it = graph.concrete_functions().find(name);
  const tensorflow::StructuredValue* sig =
      it == graph.concrete_functions().end()
          ? nullptr
          : &it->second.canonicalized_input_signature();
  if (sig != nullptr && sig->has_tuple_value() &&
      sig->tuple_value().values_size() == 2) {
    const auto& args = sig->tuple_value().values(0);
    const auto& kwargs = sig->tuple_value().values(1);
    const auto* positional =
        args.has_tuple_value() ? &args.tuple_value().values()
        : args.has_list_value() ? &args.list_value().values()
                                : nullptr;
    if (positional != nullptr && !positional->empty()) {
      std::cout << "    Option #" << index << "\n      Callable with:\n";
      PrintArguments(*positional);
    }
    if (kwargs.has_dict_value() && !kwargs.dict_value().fields().empty()) {
      std::set<std::string> names;
      for (const auto& [k, v] : kwargs.dict_value().fields()) names.insert(k);
      int n = 0;
      for (const std::string& k : names) {
        std::cout << "        Named Argument #" << ++n << "\n          " << k
                  << "\n";
      }
    }
    return;
  }
  if (!keywords.empty()) {  // a bare concrete function: its keywords
    std::cout << "    Option #" << index << "\n      Callable with:\n";
    int n = 0;
    for (const std::string& k : keywords) {
      std::cout << "        Argument #" << ++n << "\n          " << k << "\n";
    }
  }
}

// "Concrete Functions:" for the first MetaGraph that has an object graph:
// the root object's functions by name, each with its concrete functions.
absl::Status PrintDefinedFunctions(const tensorflow::SavedModel& sm) {
  for (const auto& mg : sm.meta_graphs()) {
    ASSIGN_OR_RETURN(std::optional<tensorflow::SavedObjectGraph> graph,
                     ObjectGraph(mg));
    if (!graph.has_value()) continue;
    if (graph->nodes().empty()) return absl::OkStatus();
    std::map<std::string, int> children;
    for (const auto& c : graph->nodes(0).children()) {
      if (c.node_id() < 0 || c.node_id() >= graph->nodes_size()) {
        return errors::DataLoss("object graph: child '", c.local_name(),
                                "' of the root refers to node ", c.node_id(),
                                " of ", graph->nodes_size());
      }
      children.emplace(c.local_name(), c.node_id());
    }
    std::cout << "\nConcrete Functions:";
    for (const auto& [name, id] : children) {
      const tensorflow::SavedObject& node = graph->nodes(id);
      std::vector<std::string> functions;
      std::vector<std::string> keywords;
      if (node.has_function()) {
        functions.assign(node.function().concrete_functions().begin(),
                         node.function().concrete_functions().end());
      } else if (node.has_bare_concrete_function()) {
        functions.push_back(node.bare_concrete_function().concrete_function_name());
        keywords.assign(node.bare_concrete_function().argument_keywords().begin(),
                        node.bare_concrete_function().argument_keywords().end());
      } else {
        continue;
      }
      std::cout << "\n  Function Name: '" << name << "'\n";
      std::sort(functions.begin(), functions.end());
      int index = 0;
      for (const std::string& f : functions) {
        PrintConcreteFunction(*graph, f, keywords, ++index);
      }
    }
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

// The ops a MetaGraph uses, its functions' bodies included and calls to its
// functions left out (TensorFlow's ops_used_by_graph_def).
std::set<std::string> OpsUsed(const tensorflow::GraphDef& graph) {
  std::set<std::string> functions;
  for (const auto& f : graph.library().function()) {
    functions.insert(f.signature().name());
  }
  std::set<std::string> ops;
  auto add = [&](const tensorflow::NodeDef& n) {
    if (!functions.contains(n.op())) ops.insert(n.op());
  };
  for (const auto& n : graph.node()) add(n);
  for (const auto& f : graph.library().function()) {
    for (const auto& n : f.node_def()) add(n);
  }
  return ops;
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
      // saved_model_cli prints Python's set, in no order; sorted here.
      std::vector<std::string> tags, ops;
      for (const std::string& t : mg.meta_info_def().tags()) {
        tags.push_back(PythonQuoted(t));
      }
      for (const std::string& op : OpsUsed(mg.graph_def())) {
        ops.push_back(PythonQuoted(op));
      }
      std::cout << "The MetaGraph with tag set [" << absl::StrJoin(tags, ", ")
                << "] contains the following ops: {"
                << absl::StrJoin(ops, ", ") << "}\n";
    }
    absl::Status s = PrintDefinedFunctions(*sm);
    if (!s.ok()) return Fail(s);
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
  auto bundle = serving::LoadSavedModel({}, dir, ParseTags(tag_set));
  if (!bundle.ok()) return Fail(bundle.status());
  auto sig = checkpoint::FindSignature(bundle->meta_graph_def, signature);
  if (!sig.ok()) return Fail(sig.status());
  // A signature without inputs runs with none (saved_model_cli runs it too).
  if (exprs->empty() && files->empty() && examples->empty() &&
      !(*sig)->inputs().empty()) {
    std::cerr << "error: signature '" << signature
              << "' has inputs; give them with --input_exprs, --inputs "
                 "and/or --input_examples\n"
              << kUsage;
    return 2;
  }

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
       "run: KEY=VALUE;... with numbers, strings or nested lists, e.g. "
       "'x=[[1],[2]];s=[\"a\", b\"\\x00\"]'"},
      {"inputs", &input_files, nullptr,
       "run: KEY=FILE.npy;... (float16/32/64, int8..int64, uint8..uint64, "
       "bool)"},
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
