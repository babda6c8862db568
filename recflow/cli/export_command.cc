// recflow export: the newest checkpoint of a model directory as a
// TensorFlow SavedModel with a serving_default signature.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/cli/commands.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/framework/scope.h"
#include "recflow/models/config.h"
#include "recflow/models/model.h"
#include "recflow/runtime/session.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/saved_model_export.h"

namespace recflow::cli {
namespace {

constexpr char kUsage[] =
    "usage: recflow export --model_dir DIR --export_dir DIR [--config FILE]\n\n"
    "Writes the newest checkpoint of --model_dir as a SavedModel (TensorFlow's format:\n"
    "saved_model.pb + variables/) in --export_dir, which must not exist. Its\n"
    "serving_default signature takes a request's raw features — \"dense\" float [B, n] and,\n"
    "per sparse feature F, \"F/ids\" int64 [nnz] and \"F/row_splits\" int64 [B+1] (the ids of\n"
    "example b are ids[row_splits[b]:row_splits[b+1]]) — and returns \"probabilities\"\n"
    "float [B] and \"logits\" float [B]. A two_tower model also gets \"user_embedding\" and\n"
    "\"item_embedding\" signatures (each tower's features -> its L2-normalised vector) and\n"
    "\"score\" in serving_default. The config defaults to DIR/run_config.yaml (written\n"
    "by recflow train). Try it with: recflow saved_model show --dir EXPORT_DIR --all\n\n";

absl::Status RunExport(const models::RunConfig& config, const std::string& model_dir,
                       const std::string& export_dir) {
  ASSIGN_OR_RETURN(checkpoint::LatestCheckpointInfo found,
                   checkpoint::FindLatestCheckpoint(Env::Default(), model_dir));
  if (!found.recovery.empty()) std::fprintf(stderr, "warning: %s\n", found.recovery.c_str());
  const std::string& latest = found.prefix;
  Scope root = Scope::NewRootScope();
  models::ModelInputs in = models::Placeholders(root, config.model);
  ASSIGN_OR_RETURN(models::Model m,
                   models::BuildModel(root, config.model, in, {.trainable = false}));
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(tensorflow::GraphDef gd, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create({}, gd));
  RETURN_IF_ERROR(train::RestoreModel(session.get(), model_dir, latest));

  // serving_default, plus the model's own signatures (two_tower:
  // user_embedding, item_embedding).
  RETURN_IF_ERROR(train::ExportSavedModel(
      session.get(), models::ServingSignatures(config.model, in, m), export_dir));
  std::printf("exported %s (%s, %lld parameters) to %s\n", latest.c_str(),
              config.model.type.c_str(), static_cast<long long>(m.num_parameters),
              export_dir.c_str());
  return absl::OkStatus();
}

}  // namespace

int ExportCommand(const Args& args) {
  std::string model_dir, export_dir, config_path;
  bool help = false;
  Args positional;
  if (!ParseFlags(args,
                  {{"model_dir", &model_dir, nullptr, "the trained model's directory"},
                   {"export_dir", &export_dir, nullptr, "where the SavedModel goes (new)"},
                   {"config", &config_path, nullptr, "run config (default MODEL_DIR/run_config.yaml)"},
                   {"help", nullptr, &help, "this message"}},
                  &positional, kUsage)) {
    return 2;
  }
  if (help) {
    std::cout << kUsage;
    return 0;
  }
  if (model_dir.empty() || export_dir.empty() || !positional.empty()) {
    std::cerr << "error: --model_dir and --export_dir are required\n" << kUsage;
    return 2;
  }
  if (config_path.empty()) config_path = model_dir + "/run_config.yaml";
  auto config = models::LoadRunConfig(Env::Default(), config_path);
  if (!config.ok()) {
    std::cerr << "error: " << config.status().message() << "\n";
    return 1;
  }
  absl::Status s = RunExport(*config, model_dir, export_dir);
  if (!s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace recflow::cli
