#include "recflow/serving/saved_model_bundle.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/checkpoint/saved_model_functions.h"
#include "recflow/core/dtype.h"
#include "recflow/core/status.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/runtime/feed_shape_check.h"

namespace recflow::serving {
namespace {

constexpr char kInitOpSignatureKey[] = "__saved_model_init_op";

// A collection's first node name ("" when absent).
std::string CollectionNode(const tensorflow::MetaGraphDef& mg,
                           const std::string& key) {
  auto it = mg.collection_def().find(key);
  if (it == mg.collection_def().end() ||
      it->second.node_list().value_size() == 0)
    return "";
  return it->second.node_list().value(0);
}

std::string NodeName(const std::string& tensor_name) {
  return tensor_name.substr(0, tensor_name.find(':'));
}

std::string InitOpName(const tensorflow::MetaGraphDef& mg) {
  std::string name = CollectionNode(mg, checkpoint::kSavedModelMainOpKey);
  if (!name.empty()) return NodeName(name);
  auto sig = mg.signature_def().find(kInitOpSignatureKey);
  if (sig != mg.signature_def().end()) {
    auto out = sig->second.outputs().find(kInitOpSignatureKey);
    if (out != sig->second.outputs().end()) return NodeName(out->second.name());
  }
  return NodeName(CollectionNode(mg, checkpoint::kSavedModelLegacyInitOpKey));
}

absl::StatusOr<std::vector<tensorflow::AssetFileDef>> AssetFiles(
    const tensorflow::MetaGraphDef& mg) {
  std::vector<tensorflow::AssetFileDef> assets(mg.asset_file_def().begin(),
                                               mg.asset_file_def().end());
  auto it = mg.collection_def().find(checkpoint::kSavedModelAssetsKey);
  if (assets.empty() && it != mg.collection_def().end()) {
    for (const auto& any : it->second.any_list().value()) {
      tensorflow::AssetFileDef def;
      if (!any.UnpackTo(&def)) {
        return errors::DataLoss("collection '",
                                checkpoint::kSavedModelAssetsKey, "' holds a ",
                                any.type_url(), ", not an AssetFileDef");
      }
      assets.push_back(std::move(def));
    }
  }
  return assets;
}

std::string Keys(
    const google::protobuf::Map<std::string, tensorflow::TensorInfo>& m) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return absl::StrJoin(keys, ", ");
}

}  // namespace

absl::StatusOr<SavedModelBundle> LoadSavedModel(
    const LoadOptions& options, const std::string& export_dir,
    const std::vector<std::string>& tags) {
  Env* env = options.env;
  auto ctx = [&](absl::string_view step) {
    return absl::StrCat("loading SavedModel '", export_dir, "': ", step);
  };
  ASSIGN_OR_RETURN(tensorflow::SavedModel sm,
                   checkpoint::ReadSavedModel(env, export_dir));
  ASSIGN_OR_RETURN(const tensorflow::MetaGraphDef* mg,
                   checkpoint::FindMetaGraph(sm, tags));
  SavedModelBundle bundle;
  bundle.export_dir = export_dir;
  bundle.meta_graph_def = std::move(*const_cast<tensorflow::MetaGraphDef*>(mg));
  const tensorflow::MetaGraphDef& meta = bundle.meta_graph_def;
  {
    // TF2: a missing or mis-called library function fails the load, not
    // the first request.
    absl::Status s = checkpoint::CheckFunctionCalls(meta.graph_def());
    if (!s.ok()) return errors::Annotate(s, ctx("checking the function library"));
  }
  {
    auto session = Session::Create(options.session, meta.graph_def());
    if (!session.ok())
      return errors::Annotate(session.status(), ctx("importing the graph"));
    bundle.session = std::move(*session);
  }

  const std::string prefix = checkpoint::VariablesPrefix(export_dir);
  const auto& saver = meta.saver_def();
  if (env->FileExists(prefix + ".index") && !saver.restore_op_name().empty() &&
      !saver.filename_tensor_name().empty()) {
    absl::Status s = bundle.session->Run(
        {{saver.filename_tensor_name(), Tensor::Scalar<std::string>(prefix)}},
        {}, {NodeName(saver.restore_op_name())}, nullptr);
    if (!s.ok()) return errors::Annotate(s, ctx("restoring the variables"));
  }
  {
    embedding::RowFormat format = embedding::RowFormat::kFloat32;
    if (options.embedding_row_format.has_value()) {
      format = *options.embedding_row_format;
    } else {
      const std::string path = JoinPath(export_dir, checkpoint::kSavedModelAssetsExtraDirectory,
                                        kEmbeddingRowFormatFile);
      std::string text;
      if (env->FileExists(path)) {
        RETURN_IF_ERROR(ReadFileToString(env, path, &text));
        while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
        auto parsed = embedding::ParseRowFormat(text);
        if (!parsed.ok()) return errors::Annotate(parsed.status(), ctx(path));
        format = *parsed;
      }
    }
    absl::Status s = RestoreHashTables(bundle.session.get(), env, prefix, format,
                                       options.open_tables_in_place,
                                       !options.tables_available_before_checked);
    if (!s.ok()) return errors::Annotate(s, ctx("restoring hash embedding tables"));
  }

  const std::string init_op = InitOpName(meta);
  if (!init_op.empty()) {
    ASSIGN_OR_RETURN(auto assets, AssetFiles(meta));
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (const auto& asset : assets) {
      const std::string path =
          JoinPath(checkpoint::AssetsDirectory(export_dir), asset.filename());
      if (!env->FileExists(path)) {
        return errors::NotFound(ctx("asset file '"), path, "' (for tensor '",
                                asset.tensor_info().name(), "') is missing");
      }
      feeds.emplace_back(asset.tensor_info().name(),
                         Tensor::Scalar<std::string>(path));
    }
    absl::Status s = bundle.session->Run(feeds, {}, {init_op}, nullptr);
    if (!s.ok())
      return errors::Annotate(
          s, ctx(absl::StrCat("running init op '", init_op, "'")));
  }
  return bundle;
}

absl::StatusOr<std::map<std::string, Tensor>> RunSignature(
    const SavedModelBundle& bundle, const std::string& signature_name,
    const std::map<std::string, Tensor>& inputs,
    const std::vector<std::string>& output_keys,
    const RunSignatureOptions& options) {
  ASSIGN_OR_RETURN(
      const tensorflow::SignatureDef* sig,
      checkpoint::FindSignature(bundle.meta_graph_def, signature_name));
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const auto& [key, tensor] : inputs) {
    auto it = sig->inputs().find(key);
    if (it == sig->inputs().end()) {
      return errors::InvalidArgument(
          "signature '", signature_name, "' has no input '", key,
          "'; its inputs are: ", Keys(sig->inputs()));
    }
    const tensorflow::TensorInfo& info = it->second;
    const DataType want = static_cast<DataType>(info.dtype());
    if (tensor.dtype() != want) {
      return errors::InvalidArgument("signature '", signature_name, "' input '",
                                     key, "' must be ", DataTypeString(want),
                                     ", got ", DataTypeString(tensor.dtype()));
    }
    if (!options.leave_shapes_to_graph && info.has_tensor_shape()) {
      auto shape = PartialShape::FromProto(info.tensor_shape());
      if (shape.ok() && !shape->IsCompatibleWith(PartialShape(tensor.shape()))) {
        return errors::InvalidArgument(
            "signature '", signature_name, "' input '", key,
            "' must have shape ", shape->DebugString(), ", got ",
            tensor.shape().DebugString());
      }
    }
    feeds.emplace_back(info.name(), tensor);
  }
  for (const auto& [key, info] : sig->inputs()) {
    if (!inputs.contains(key)) {
      return errors::InvalidArgument(
          "signature '", signature_name, "' input '", key,
          "' is missing; its inputs are: ", Keys(sig->inputs()));
    }
  }
  std::vector<std::string> keys = output_keys;
  if (keys.empty()) {
    for (const auto& [key, info] : sig->outputs()) keys.push_back(key);
    std::sort(keys.begin(), keys.end());
  }
  std::vector<std::string> fetches;
  std::vector<const tensorflow::TensorInfo*> infos;
  for (const std::string& key : keys) {
    auto it = sig->outputs().find(key);
    if (it == sig->outputs().end()) {
      return errors::NotFound("signature '", signature_name,
                              "' has no output '", key,
                              "'; its outputs are: ", Keys(sig->outputs()));
    }
    fetches.push_back(it->second.name());
    infos.push_back(&it->second);
  }
  std::vector<Tensor> outs;
  absl::Status s;
  if (options.leave_shapes_to_graph) {
    ScopedUncheckedFeedShapes unchecked;
    s = bundle.session->Run(feeds, fetches, {}, &outs);
  } else {
    s = bundle.session->Run(feeds, fetches, {}, &outs);
  }
  if (!s.ok()) {
    return errors::Annotate(
        s, absl::StrCat("running signature '", signature_name, "'"));
  }
  std::map<std::string, Tensor> result;
  for (size_t i = 0; i < keys.size(); ++i) {
    result.emplace(keys[i], std::move(outs[i]));
  }
  return result;
}

}  // namespace recflow::serving
