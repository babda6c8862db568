// Loading a SavedModel (checkpoint/saved_model.h) into a Session and running
// its signatures, as TensorFlow's LoadSavedModel / TF Serving do.
//
//   ASSIGN_OR_RETURN(SavedModelBundle bundle,
//                    LoadSavedModel({}, "/models/m/00000123", {"serve"}));
//   ASSIGN_OR_RETURN(auto out, RunSignature(&bundle, "serving_default",
//                                           {{"x",
//                                           Tensor::FromVector<float>({1, 2},
//                                           {2, 1})}}));
//   const Tensor& y = out.at("y");
//
// LoadSavedModel, in TensorFlow's order:
//   1. reads saved_model.pb(txt) and picks the MetaGraph with exactly `tags`;
//   2. checks the calls into its function library
//      (checkpoint/saved_model_functions.h: a missing function or a call of
//      the wrong signature fails the load, naming both), then creates a
//      Session over its graph_def;
//   3. restores the variables by running saver_def.restore_op_name with
//      DIR/variables/variables fed to saver_def.filename_tensor_name (the
//      graph's own RestoreV2 subgraph). With no variables/ bundle (or no
//      SaverDef) the model has no variables and this step is skipped;
//   3b. imports every hash embedding table of the graph
//      (HashEmbeddingTableOp nodes; train/saved_model_export.h writes them
//      into the variables bundle under the table node's name): the table is
//      created from the node's attrs (embedding/graph_tables.h), cleared and
//      filled from K/keys, K/values, K/frequencies and K/versions by the
//      table <-> bundle bridge training restores with
//      (embedding/table_bundle.h: streamed in lanes on the session's
//      intra-op pool, every crc32c checked); optimizer slots are not
//      loaded. Lookups in serve mode read it without inserting.
//   4. runs the main op (collection "saved_model_main_op", the signature
//      "__saved_model_init_op", or the legacy "legacy_init_op" collection)
//      with every asset's tensor (meta_graph.asset_file_def, or the
//      "saved_model_assets" collection of older exports) fed the absolute
//      path DIR/assets/FILENAME.
// Errors name the directory and the step that failed.
//
// Thread-safe: RunSignature may be called concurrently on one bundle (the
// Session is thread-safe); the bundle itself is immutable after loading.
#ifndef RECFLOW_SERVING_SAVED_MODEL_BUNDLE_H_
#define RECFLOW_SERVING_SAVED_MODEL_BUNDLE_H_

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/core/tensor.h"
#include "recflow/proto/meta_graph.pb.h"
#include "recflow/embedding/row_codec.h"
#include "recflow/runtime/session.h"

namespace recflow::serving {

struct SavedModelBundle {
  tensorflow::MetaGraphDef meta_graph_def;
  std::unique_ptr<Session> session;
  std::string export_dir;
};

// In an export's assets.extra/: the row format its hash tables are served
// in by default ("float16\n"; `recflow export --embedding_row_format`).
inline constexpr char kEmbeddingRowFormatFile[] = "recflow_embedding_row_format";

struct LoadOptions {
  Env* env = Env::Default();  // Not owned.
  SessionOptions session;
  // How the hash embedding tables store their rows (`recflow serve
  // --embedding_row_format`; embedding/row_codec.h): float16 and int8 hold
  // weights only, quantized, for about 1/2 and 1/4 of the bytes. Unset: as
  // the export's kEmbeddingRowFormatFile says, else float32.
  std::optional<embedding::RowFormat> embedding_row_format;
  // Hash tables of an export that carries their hash index are opened in
  // place (docs/embedding.md, "Open in place"): mapped, and read and
  // checksummed by a background pass. false: every table is imported
  // (read and inserted row by row before the load returns).
  bool open_tables_in_place = true;
  // For tables opened in place. false: the load waits for each
  // table's pass, so damage fails the load and the version goes live warm.
  // true: the load returns at once; damage found later fails the version's
  // lookups with DataLoss. ServerCore sets it for the first version of a
  // model (nothing serves the model yet) and leaves it false for a version
  // that replaces a serving one.
  bool tables_available_before_checked = false;
};

absl::StatusOr<SavedModelBundle> LoadSavedModel(
    const LoadOptions& options, const std::string& export_dir,
    const std::vector<std::string>& tags);

// Step 3b above, for tools: imports the hash embedding tables of the
// session's graph from the bundle at `variables_prefix` into the session's
// resources. OK when the graph has none; NotFound when it has one but the
// bundle or the table's rows are missing; DataLoss naming the tensor for a
// truncated or corrupted bundle (the table is left empty, never
// half-filled).
// Tables are created with rows in `row_format`.
// `open_in_place`: LoadOptions::open_tables_in_place; `wait_for_check`:
// the negation of LoadOptions::tables_available_before_checked.
absl::Status RestoreHashTables(Session* session, Env* env, const std::string& variables_prefix,
                               embedding::RowFormat row_format = embedding::RowFormat::kFloat32,
                               bool open_in_place = true, bool wait_for_check = true);

// Runs signature `signature_name` with `inputs` keyed by the signature's
// input keys and returns every output keyed by output key (or only
// `output_keys` when non-empty). Every input of the signature must be given
// (a signature without inputs runs with none). InvalidArgument naming the
// key for an unknown or missing input (listing the valid ones), a dtype that
// differs from the signature's, or (unless leave_shapes_to_graph) a shape
// incompatible with it; NotFound for an unknown signature or output key.
struct RunSignatureOptions {
  // TF Serving's rule: it checks no shapes, neither the signature's nor the
  // fed tensors' static ones; each value is fed as it is and the kernels
  // downstream accept or refuse it (half_plus_two, whose x is declared
  // [-1, 1], answers [[1, 2], [3, 4]] with [[2.5, 3], [3.5, 4]]). A kernel's
  // refusal comes back as its InvalidArgument, naming the node.
  bool leave_shapes_to_graph = false;
};

absl::StatusOr<std::map<std::string, Tensor>> RunSignature(
    const SavedModelBundle& bundle, const std::string& signature_name,
    const std::map<std::string, Tensor>& inputs,
    const std::vector<std::string>& output_keys = {},
    const RunSignatureOptions& options = {});

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_SAVED_MODEL_BUNDLE_H_
