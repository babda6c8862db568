#include "recflow/train/saved_model_export.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/status.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/resource_mgr.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/embedding/graph_tables.h"
#include "recflow/embedding/table_bundle.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

// Appends nodes to a GraphDef, TensorFlow-style names ("save/Assign_3").
class DefBuilder {
 public:
  DefBuilder(tensorflow::GraphDef* def, std::string prefix)
      : def_(def), prefix_(std::move(prefix)) {}

  tensorflow::NodeDef* Add(const std::string& name, const std::string& op,
                           std::vector<std::string> inputs) {
    tensorflow::NodeDef* n = def_->add_node();
    n->set_name(absl::StrCat(prefix_, "/", name));
    n->set_op(op);
    for (auto& in : inputs) n->add_input(std::move(in));
    return n;
  }
  std::string Const(const std::string& name, const Tensor& value) {
    tensorflow::NodeDef* n = Add(name, "Const", {});
    SetAttrValue(value.dtype(), &(*n->mutable_attr())["dtype"]);
    TensorToProto(value, (*n->mutable_attr())["value"].mutable_tensor());
    return n->name();
  }
  // "Assign", "Assign_1", ... within the prefix.
  std::string Unique(const std::string& base) {
    int k = counts_[base]++;
    return k == 0 ? base : absl::StrCat(base, "_", k);
  }

 private:
  tensorflow::GraphDef* def_;
  std::string prefix_;
  std::map<std::string, int> counts_;
};

Tensor StringVector(const std::vector<std::string>& v) {
  Tensor t(DT_STRING, TensorShape({static_cast<int64_t>(v.size())}));
  for (size_t i = 0; i < v.size(); ++i) t.flat<std::string>()[i] = v[i];
  return t;
}

// "save", or "save_1", "save_2", ... when nodes already live under it.
std::string SaverPrefix(const Graph& graph) {
  std::set<std::string> scopes;
  for (const auto& node : graph.nodes()) {
    const std::string& name = node->name();
    scopes.insert(name.substr(0, name.find('/')));
  }
  std::string prefix = "save";
  for (int k = 1; scopes.contains(prefix); ++k)
    prefix = absl::StrCat("save_", k);
  return prefix;
}

absl::Status AddSaver(const Graph& graph,
                      const std::vector<const Node*>& variables,
                      tensorflow::MetaGraphDef* mg) {
  tensorflow::GraphDef* def = mg->mutable_graph_def();
  const std::string prefix = SaverPrefix(graph);
  DefBuilder b(def, prefix);
  std::vector<const Node*> vars = variables;
  std::sort(vars.begin(), vars.end(),
            [](const Node* a, const Node* c) { return a->name() < c->name(); });
  std::vector<std::string> names;
  std::vector<DataType> dtypes;
  for (const Node* v : vars) {
    names.push_back(v->name());
    DataType dt = DT_INVALID;
    RETURN_IF_ERROR(GetNodeAttr(AttrSlice(v->def()), "dtype", &dt));
    dtypes.push_back(dt);
  }
  const std::string input =
      b.Const("filename/input", Tensor::Scalar<std::string>("model"));
  tensorflow::NodeDef* filename =
      b.Add("Const", "PlaceholderWithDefault", {input});
  SetAttrValue(DT_STRING, &(*filename->mutable_attr())["dtype"]);
  SetAttrValue(PartialShape(TensorShape({})),
               &(*filename->mutable_attr())["shape"]);
  const std::string fname = filename->name();

  const std::vector<std::string> empty_slices(vars.size(), "");
  const std::string save_names =
      b.Const("SaveV2/tensor_names", StringVector(names));
  const std::string save_slices =
      b.Const("SaveV2/shape_and_slices", StringVector(empty_slices));
  std::vector<std::string> save_inputs = {fname, save_names, save_slices};
  for (size_t i = 0; i < vars.size(); ++i) {
    if (vars[i]->op() == "VarHandleOp") {
      tensorflow::NodeDef* read =
          b.Add(absl::StrCat(b.Unique("Read"), "/ReadVariableOp"),
                "ReadVariableOp", {vars[i]->name()});
      SetAttrValue(dtypes[i], &(*read->mutable_attr())["dtype"]);
      save_inputs.push_back(read->name());
    } else {
      save_inputs.push_back(vars[i]->name());
    }
  }
  tensorflow::NodeDef* save = b.Add("SaveV2", "SaveV2", save_inputs);
  SetAttrValue(absl::MakeConstSpan(dtypes), &(*save->mutable_attr())["dtypes"]);
  tensorflow::NodeDef* dep = b.Add("control_dependency", "Identity",
                                   {fname, absl::StrCat("^", save->name())});
  SetAttrValue(DT_STRING, &(*dep->mutable_attr())["T"]);

  const std::string restore_names =
      b.Const("RestoreV2/tensor_names", StringVector(names));
  const std::string restore_slices =
      b.Const("RestoreV2/shape_and_slices", StringVector(empty_slices));
  tensorflow::NodeDef* restore =
      b.Add("RestoreV2", "RestoreV2", {fname, restore_names, restore_slices});
  SetAttrValue(absl::MakeConstSpan(dtypes),
               &(*restore->mutable_attr())["dtypes"]);
  const std::string restore_name = restore->name();
  std::vector<std::string> assigns;
  for (size_t i = 0; i < vars.size(); ++i) {
    const std::string value = absl::StrCat(restore_name, ":", i);
    if (vars[i]->op() == "VarHandleOp") {
      tensorflow::NodeDef* id =
          b.Add(b.Unique("Identity"), "Identity", {value});
      SetAttrValue(dtypes[i], &(*id->mutable_attr())["T"]);
      tensorflow::NodeDef* a =
          b.Add(b.Unique("AssignVariableOp"), "AssignVariableOp",
                {vars[i]->name(), id->name()});
      SetAttrValue(dtypes[i], &(*a->mutable_attr())["dtype"]);
      assigns.push_back(absl::StrCat("^", a->name()));
    } else {
      tensorflow::NodeDef* a =
          b.Add(b.Unique("Assign"), "Assign", {vars[i]->name(), value});
      SetAttrValue(dtypes[i], &(*a->mutable_attr())["T"]);
      SetAttrValue(true, &(*a->mutable_attr())["validate_shape"]);
      SetAttrValue(true, &(*a->mutable_attr())["use_locking"]);
      assigns.push_back(absl::StrCat("^", a->name()));
    }
  }
  tensorflow::NodeDef* restore_all = b.Add("restore_all", "NoOp", assigns);

  tensorflow::SaverDef* saver = mg->mutable_saver_def();
  saver->set_filename_tensor_name(fname + ":0");
  saver->set_save_tensor_name(dep->name() + ":0");
  saver->set_restore_op_name(restore_all->name());
  saver->set_max_to_keep(5);
  saver->set_sharded(false);
  saver->set_keep_checkpoint_every_n_hours(10000.0f);
  saver->set_version(tensorflow::SaverDef::V2);
  return absl::OkStatus();
}

absl::StatusOr<tensorflow::TensorInfo> MakeTensorInfo(const Graph& graph,
                                                      const Output& out,
                                                      const std::string& what) {
  if (!out.valid())
    return errors::InvalidArgument(what, " is an invalid Output");
  if (graph.FindNode(out.node()->name()) == nullptr) {
    return errors::InvalidArgument(what, " names node '", out.node()->name(),
                                   "', which is not in the session's graph");
  }
  tensorflow::TensorInfo info;
  info.set_name(out.name());
  info.set_dtype(static_cast<tensorflow::DataType>(BaseType(out.type())));
  out.shape().ToProto(info.mutable_tensor_shape());
  return info;
}

}  // namespace

absl::StatusOr<tensorflow::MetaGraphDef> BuildExportMetaGraph(
    const Graph& graph, const std::vector<const Node*>& variables,
    const std::map<std::string, ExportSignature>& signatures,
    const ExportOptions& options) {
  if (signatures.empty())
    return errors::InvalidArgument("an export needs at least one signature");
  if (options.tags.empty())
    return errors::InvalidArgument("an export needs at least one tag");
  tensorflow::MetaGraphDef mg;
  graph.ToGraphDef(mg.mutable_graph_def());
  if (!variables.empty()) RETURN_IF_ERROR(AddSaver(graph, variables, &mg));

  auto* info = mg.mutable_meta_info_def();
  for (const std::string& tag : options.tags) info->add_tags(tag);
  info->set_meta_graph_version("recflow");
  std::set<std::string> used;
  for (const auto& node : mg.graph_def().node()) used.insert(node.op());
  for (const std::string& op : used) {
    if (const OpRegistrationData* reg = OpRegistry::Global()->Find(op)) {
      tensorflow::OpDef* def = info->mutable_stripped_op_list()->add_op();
      *def = reg->op_def;
      def->clear_description();
      def->clear_summary();
    }
  }

  for (const auto& [file, tensor] : options.asset_tensors) {
    if (!options.assets.contains(file)) {
      return errors::InvalidArgument("asset_tensors names '", file,
                                     "', which is not one of the assets");
    }
    tensorflow::AssetFileDef* asset = mg.add_asset_file_def();
    asset->set_filename(file);
    ASSIGN_OR_RETURN(
        *asset->mutable_tensor_info(),
        MakeTensorInfo(graph, tensor,
                       absl::StrCat("asset tensor for '", file, "'")));
    if (BaseType(tensor.type()) != DT_STRING) {
      return errors::InvalidArgument("asset tensor for '", file, "' (",
                                     tensor.name(), ") must be a string, not ",
                                     DataTypeString(tensor.type()));
    }
  }
  if (options.main_op.valid()) {
    if (graph.FindNode(options.main_op.node()->name()) == nullptr) {
      return errors::InvalidArgument("main_op '",
                                     options.main_op.node()->name(),
                                     "' is not in the session's graph");
    }
    (*mg.mutable_collection_def())[checkpoint::kSavedModelMainOpKey]
        .mutable_node_list()
        ->add_value(options.main_op.node()->name());
  }

  for (const auto& [name, spec] : signatures) {
    tensorflow::SignatureDef& sig = (*mg.mutable_signature_def())[name];
    sig.set_method_name(spec.method_name);
    if (spec.outputs.empty()) {
      return errors::InvalidArgument("signature '", name, "' has no outputs");
    }
    for (const auto& [key, out] : spec.inputs) {
      ASSIGN_OR_RETURN((*sig.mutable_inputs())[key],
                       MakeTensorInfo(graph, out,
                                      absl::StrCat("signature '", name,
                                                   "' input '", key, "'")));
    }
    for (const auto& [key, out] : spec.outputs) {
      ASSIGN_OR_RETURN((*sig.mutable_outputs())[key],
                       MakeTensorInfo(graph, out,
                                      absl::StrCat("signature '", name,
                                                   "' output '", key, "'")));
    }
  }
  return mg;
}

absl::Status ExportSavedModel(
    Session* session, const std::map<std::string, ExportSignature>& signatures,
    const std::string& export_dir, const ExportOptions& options) {
  std::shared_ptr<const Graph> graph = session->graph();
  ResourceMgr* rm = session->device()->resource_manager();
  ASSIGN_OR_RETURN(const std::vector<embedding::TableNode> tables,
                   embedding::FindGraphTables(*graph, *rm));
  std::vector<const Node*> vars;
  if (options.variable_names.empty()) {
    for (const Output& v : GlobalVariables(*graph)) vars.push_back(v.node());
  } else {
    for (const std::string& name : options.variable_names) {
      const Node* n = graph->FindNode(name);
      if (n == nullptr ||
          (n->op() != "VariableV2" && n->op() != "VarHandleOp")) {
        return errors::InvalidArgument(
            "'", name, "' is not a variable of the session's graph");
      }
      vars.push_back(n);
    }
  }
  ASSIGN_OR_RETURN(tensorflow::MetaGraphDef mg,
                   BuildExportMetaGraph(*graph, vars, signatures, options));
  tensorflow::SavedModel sm;
  sm.set_saved_model_schema_version(1);
  *sm.add_meta_graphs() = std::move(mg);

  checkpoint::SavedModelWriteOptions write;
  write.assets = options.assets;
  write.assets_extra = options.assets_extra;
  if (!vars.empty() || !tables.empty()) {
    write.write_variables = [&](const std::string& prefix) -> absl::Status {
      ASSIGN_OR_RETURN(auto writer, checkpoint::BundleWriter::Create(
                                        options.env, prefix, options.writer));
      std::vector<const Node*> sorted = vars;
      std::sort(sorted.begin(), sorted.end(), [](const Node* a, const Node* c) {
        return a->name() < c->name();
      });
      for (const Node* n : sorted) {
        checkpoint::VarRef ref;
        ref.checkpoint_key = n->name();
        ResourceLocation where = NodeResourceLocation(n->def(), rm->default_container());
        ref.container = std::move(where.container);
        ref.name = std::move(where.name);
        ref.dtype = VariableDtype(Output(const_cast<Node*>(n)));
        ref.shape = VariableShape(Output(const_cast<Node*>(n)));
        checkpoint::Saveable s = checkpoint::VarSaveable(rm, ref);
        RETURN_IF_ERROR(s.save(writer.get(), ref.checkpoint_key));
      }
      // Hash embedding tables, in the bridge's layout under the table
      // node's name (serving/saved_model_bundle.h imports them on load).
      for (const embedding::TableNode& t : tables) {
        auto res = embedding::EmbeddingTableResource::Lookup(*rm, t.container, t.name);
        if (!res.ok()) {
          return errors::FailedPrecondition("hash embedding table '", t.node,
                                            "' does not exist in the session (run the graph "
                                            "or restore a checkpoint first): ",
                                            res.status().message());
        }
        // With the hash index: servers open the table in place
        // (embedding/mapped_rows.h) instead of inserting every row.
        embedding::TableBundleOptions to;
        to.save_index = true;
        RETURN_IF_ERROR(embedding::SaveTable((*res)->table(), writer.get(), t.node, -1, to));
      }
      return writer->Finish();
    };
  }
  return checkpoint::WriteSavedModel(options.env, export_dir, sm, write);
}

}  // namespace recflow::train
