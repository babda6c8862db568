// Exporting a trained model as a TensorFlow SavedModel
// (checkpoint/saved_model.h; docs/formats/saved_model.md).
//
//   std::map<std::string, train::ExportSignature> sigs;
//   sigs["serving_default"] = {.inputs = {{"x", x}}, .outputs = {{"y", y}}};
//   RETURN_IF_ERROR(train::ExportSavedModel(session.get(), sigs,
//   "/models/m/1"));
//
// What is written, as TensorFlow's SavedModelBuilder + tf.train.Saver lay
// it out, so TensorFlow (and serving/saved_model_bundle.h) can load it:
//   - saved_model.pb: one MetaGraphDef with options.tags, whose graph_def is
//     the session's graph plus a saver subgraph under "save/" (or "save_1/"
//     ... when that scope is taken):
//       save/filename/input  Const "model"
//       save/Const           PlaceholderWithDefault   <- filename tensor
//       save/SaveV2          SaveV2(save/Const, tensor_names, shape_and_slices,
//       vars...) save/control_dependency  Identity(save/Const) after SaveV2  <-
//       save tensor save/RestoreV2       RestoreV2(save/Const, tensor_names,
//       shape_and_slices) save/Assign[_k]      Assign(var, save/RestoreV2:k)
//       (VariableV2) save/AssignVariableOp[_k]  AssignVariableOp(handle,
//       save/Identity[_k])
//                                                           (resource
//                                                           variables)
//       save/restore_all     NoOp after every assign         <- restore op
//     and a SaverDef naming them (version V2); signature_defs with each
//     tensor's name, dtype and inferred shape; meta_info_def with the tags
//     and the stripped op list (the OpDefs of the ops the graph uses).
//   - variables/variables.{index,data-00000-of-00001}: every variable's
//     current value in the session, keyed by its node name (TF's default
//     checkpoint key), read straight from the session's resources.
//   - assets/ and assets.extra/: options.assets / options.assets_extra.
// Everything is published atomically (WriteSavedModel): AlreadyExists when
// export_dir exists, and a failed export leaves nothing under export_dir.
// Hash embedding tables of the graph (HashEmbeddingTableOp nodes) go into
// the variables bundle too, in embedding/table_bundle.h's layout under the
// table node's name (K/keys, K/values, K/slots, K/frequencies, K/versions);
// LoadSavedModel (serving/saved_model_bundle.h) imports them. TensorFlow
// itself cannot run such a graph (the ops are recflow's).
//
// Not thread-safe with respect to training steps on the same session: run
// it between steps (the values are read variable by variable).
#ifndef RECFLOW_TRAIN_SAVED_MODEL_EXPORT_H_
#define RECFLOW_TRAIN_SAVED_MODEL_EXPORT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/env.h"
#include "recflow/framework/scope.h"
#include "recflow/proto/meta_graph.pb.h"
#include "recflow/runtime/session.h"

namespace recflow::train {

struct ExportSignature {
  // Keyed by the names clients use; the Outputs must be nodes of the
  // session's graph (built with the same Scope the session was created from).
  std::map<std::string, Output> inputs;
  std::map<std::string, Output> outputs;
  std::string method_name = checkpoint::kPredictMethodName;
};

struct ExportOptions {
  Env* env = Env::Default();  // Not owned.
  std::vector<std::string> tags = {checkpoint::kSavedModelTagServe};
  // The variables to save; empty: every variable GlobalVariables() finds in
  // the session's graph.
  std::vector<std::string> variable_names;
  // File name -> contents, under assets/ and assets.extra/.
  std::map<std::string, std::string> assets;
  std::map<std::string, std::string> assets_extra;
  // Asset file name (a key of `assets`) -> the string scalar tensor of the
  // graph (a Placeholder or PlaceholderWithDefault) that a loader feeds the
  // asset's path DIR/assets/NAME when it runs main_op
  // (MetaGraphDef.asset_file_def).
  std::map<std::string, Output> asset_tensors;
  // Run once after the variables are restored (a table initializer, say):
  // the "saved_model_main_op" collection. Invalid Output: none.
  Output main_op;
  checkpoint::BundleWriterOptions writer;
};

absl::Status ExportSavedModel(
    Session* session, const std::map<std::string, ExportSignature>& signatures,
    const std::string& export_dir, const ExportOptions& options = {});

// Builds the MetaGraphDef ExportSavedModel writes (no files touched).
// `variables` are the variable nodes of `graph` to save and restore.
absl::StatusOr<tensorflow::MetaGraphDef> BuildExportMetaGraph(
    const Graph& graph, const std::vector<const Node*>& variables,
    const std::map<std::string, ExportSignature>& signatures,
    const ExportOptions& options);

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_SAVED_MODEL_EXPORT_H_
