// SavedModel directories in TensorFlow's layout (docs/formats/saved_model.md):
//
//   DIR/saved_model.pb            a tensorflow.SavedModel (or
//   saved_model.pbtxt) DIR/variables/variables.index + .data-0000k-of-0000N
//   tensor bundle DIR/assets/                   files the graph refers to
//   (vocabularies) DIR/assets.extra/             files for the serving system,
//   not the graph
//
// This file reads and writes the directory and looks things up in the
// protos; it knows no Session (checkpoint/ sits below runtime/). Loading
// into a session is serving/saved_model_bundle.h; exporting a trained graph
// is train/saved_model_export.h.
//
// Thread-safe: free functions over their arguments only.
#ifndef RECFLOW_CHECKPOINT_SAVED_MODEL_H_
#define RECFLOW_CHECKPOINT_SAVED_MODEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/env.h"
#include "recflow/proto/meta_graph.pb.h"
#include "recflow/proto/saved_model.pb.h"

namespace recflow::checkpoint {

// File and directory names (TensorFlow's constants).
inline constexpr char kSavedModelFilenamePb[] = "saved_model.pb";
inline constexpr char kSavedModelFilenamePbTxt[] = "saved_model.pbtxt";
inline constexpr char kSavedModelVariablesDirectory[] = "variables";
inline constexpr char kSavedModelVariablesFilename[] = "variables";
inline constexpr char kSavedModelAssetsDirectory[] = "assets";
inline constexpr char kSavedModelAssetsExtraDirectory[] = "assets.extra";
// Tags.
inline constexpr char kSavedModelTagServe[] = "serve";
inline constexpr char kSavedModelTagTrain[] = "train";
// Signature names, keys and method names (tensorflow/serving/...).
inline constexpr char kDefaultServingSignatureDefKey[] = "serving_default";
inline constexpr char kPredictMethodName[] = "tensorflow/serving/predict";
inline constexpr char kClassifyMethodName[] = "tensorflow/serving/classify";
inline constexpr char kRegressMethodName[] = "tensorflow/serving/regress";
inline constexpr char kClassifyInputs[] = "inputs";
inline constexpr char kClassifyOutputClasses[] = "classes";
inline constexpr char kClassifyOutputScores[] = "scores";
inline constexpr char kRegressInputs[] = "inputs";
inline constexpr char kRegressOutputs[] = "outputs";
// Collections a loader reads.
inline constexpr char kSavedModelMainOpKey[] = "saved_model_main_op";
inline constexpr char kSavedModelLegacyInitOpKey[] = "legacy_init_op";
inline constexpr char kSavedModelAssetsKey[] = "saved_model_assets";

// saved_model.pb larger than this is refused (protobuf's own limit is 2 GiB;
// weights live in variables/, so a real graph is far smaller).
inline constexpr uint64_t kMaxSavedModelBytes = uint64_t{1} << 30;

// Reads DIR/saved_model.pb, or DIR/saved_model.pbtxt when there is no .pb.
// NotFound naming DIR when it or both files are missing (InvalidArgument
// when DIR is a file); DataLoss naming the
// file when it does not parse; ResourceExhausted when it is over
// kMaxSavedModelBytes; InvalidArgument when it holds no MetaGraph.
absl::StatusOr<tensorflow::SavedModel> ReadSavedModel(Env* env,
                                                      const std::string& dir);

// True when DIR holds saved_model.pb or saved_model.pbtxt.
bool MaybeSavedModelDirectory(Env* env, const std::string& dir);

// The MetaGraph whose tags equal `tags` as a set (order and duplicates do
// not matter). InvalidArgument listing the available tag sets otherwise.
absl::StatusOr<const tensorflow::MetaGraphDef*> FindMetaGraph(
    const tensorflow::SavedModel& saved_model,
    const std::vector<std::string>& tags);

// The tag sets of every MetaGraph, each as "tag1,tag2" (sorted tags).
std::vector<std::string> TagSets(const tensorflow::SavedModel& saved_model);

// The SignatureDef called `name`. NotFound listing the available ones.
absl::StatusOr<const tensorflow::SignatureDef*> FindSignature(
    const tensorflow::MetaGraphDef& meta_graph, const std::string& name);

// The variables' bundle prefix: DIR/variables/variables.
std::string VariablesPrefix(const std::string& dir);
// DIR/assets.
std::string AssetsDirectory(const std::string& dir);

// Writes a SavedModel to `dir`:
//   - `write_variables(prefix)` writes the variables bundle at `prefix`
//     (a BundleWriter's job); unset: no variables/ directory;
//   - `assets` maps a file name under assets/ to its contents;
//   - `assets_extra` the same for assets.extra/.
// Everything goes into a temporary directory next to DIR
// ("DIR.tmp-<random>"), which is synced and then renamed to DIR, so a crash
// never leaves a half export under DIR. AlreadyExists when DIR exists; on
// error the temporary directory is deleted. `as_text` writes
// saved_model.pbtxt instead of saved_model.pb.
struct SavedModelWriteOptions {
  std::function<absl::Status(const std::string& prefix)> write_variables;
  std::map<std::string, std::string> assets;
  std::map<std::string, std::string> assets_extra;
  bool as_text = false;
};
absl::Status WriteSavedModel(Env* env, const std::string& dir,
                             const tensorflow::SavedModel& saved_model,
                             const SavedModelWriteOptions& options = {});

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_SAVED_MODEL_H_
