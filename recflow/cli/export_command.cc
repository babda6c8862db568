// recflow export: the newest checkpoint of a model directory as a
// TensorFlow SavedModel with a serving_default signature.
#include <cstdio>
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/cli/commands.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/embedding/row_codec.h"
#include "recflow/framework/scope.h"
#include "recflow/models/config.h"
#include "recflow/models/model.h"
#include "recflow/runtime/session.h"
#include "recflow/serving/saved_model_bundle.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/saved_model_export.h"

namespace recflow::cli {
namespace {

constexpr char kUsage[] =
    "usage: recflow export --model_dir DIR --export_dir DIR [--config FILE] [--compact_updates]\n"
    "                      [--embedding_row_format float32|float16|int8]\n\n"
    "Writes the newest checkpoint of --model_dir as a SavedModel (TensorFlow's format:\n"
    "saved_model.pb + variables/) in --export_dir, which must not exist. Its\n"
    "serving_default signature takes a request's raw features — \"dense\" float [B, n] and,\n"
    "per sparse feature F, \"F/ids\" int64 [nnz] and \"F/row_splits\" int64 [B+1] (the ids of\n"
    "example b are ids[row_splits[b]:row_splits[b+1]]) — and returns \"probabilities\"\n"
    "float [B] and \"logits\" float [B]. A two_tower model also gets \"user_embedding\" and\n"
    "\"item_embedding\" signatures (each tower's features -> its L2-normalised vector) and\n"
    "\"score\" in serving_default. The config defaults to DIR/run_config.yaml (written\n"
    "by recflow train). Try it with: recflow saved_model show --dir EXPORT_DIR --all\n\n"
    "Online learning (docs/online_learning.md): when the run published model updates, the\n"
    "export records the last one its checkpoint reflects (assets.extra/recflow_update_base);\n"
    "a server following MODEL_DIR/updates applies the ones after it. --compact_updates then\n"
    "deletes the updates the export reflects (a server still on an older export that has not\n"
    "applied them waits for a newer full update or loads this export).\n\n"
    "--embedding_row_format float16 or int8 makes servers store the hash embedding tables'\n"
    "rows quantized by default (assets.extra/recflow_embedding_row_format; the rows written\n"
    "stay float32, and `recflow serve --embedding_row_format` overrides it;\n"
    "docs/embedding.md, \"Quantized rows\").\n\n";

absl::Status RunExport(const models::RunConfig& config, const std::string& model_dir,
                       const std::string& export_dir, bool compact_updates,
                       const std::string& row_format) {
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

  // Which published model updates the checkpoint reflects (a run that
  // publishes them records it; docs/online_learning.md).
  train::ExportOptions options;
  if (!row_format.empty()) {
    // The servers' default for this export's tables (the rows written stay
    // float32: a server may still choose another format).
    ASSIGN_OR_RETURN(embedding::RowFormat format, embedding::ParseRowFormat(row_format));
    options.assets_extra[serving::kEmbeddingRowFormatFile] =
        std::string(embedding::RowFormatName(format)) + "\n";
  }
  std::optional<checkpoint::UpdateBase> base;
  {
    ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(Env::Default(), latest));
    if (reader->Contains(checkpoint::kCheckpointUpdateKey)) {
      ASSIGN_OR_RETURN(Tensor t, reader->Lookup(checkpoint::kCheckpointUpdateKey));
      if (t.dtype() != DT_INT64 || t.NumElements() != 2) {
        return errors::DataLoss(checkpoint::kCheckpointUpdateKey, " in ", latest,
                                " is not int64 [2]");
      }
      base = checkpoint::UpdateBase{t.flat<int64_t>()[0], t.flat<int64_t>()[1]};
      options.assets_extra[checkpoint::kUpdateBaseFile] = checkpoint::FormatUpdateBase(*base);
    }
  }
  // serving_default, plus the model's own signatures (two_tower:
  // user_embedding, item_embedding).
  RETURN_IF_ERROR(train::ExportSavedModel(
      session.get(), models::ServingSignatures(config.model, in, m), export_dir, options));
  std::printf("exported %s (%s, %lld parameters) to %s\n", latest.c_str(),
              config.model.type.c_str(), static_cast<long long>(m.num_parameters),
              export_dir.c_str());
  if (base.has_value()) {
    std::printf("it reflects model updates up to %lld (step %lld)\n",
                static_cast<long long>(base->sequence), static_cast<long long>(base->step));
    if (compact_updates) {
      const std::string dir = JoinPath(model_dir, checkpoint::kUpdatesDirName);
      const int deleted = checkpoint::DeleteUpdatesThrough(Env::Default(), dir, base->sequence);
      std::printf("compacted %s: deleted %d update(s) numbered <= %lld\n", dir.c_str(), deleted,
                  static_cast<long long>(base->sequence));
    }
  } else if (compact_updates) {
    std::printf("nothing to compact: %s records no model update\n", latest.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int ExportCommand(const Args& args) {
  std::string model_dir, export_dir, config_path, row_format;
  bool help = false, compact_updates = false;
  Args positional;
  if (!ParseFlags(args,
                  {{"model_dir", &model_dir, nullptr, "the trained model's directory"},
                   {"compact_updates", nullptr, &compact_updates,
                    "delete the model updates the export reflects"},
                   {"export_dir", &export_dir, nullptr, "where the SavedModel goes (new)"},
                   {"config", &config_path, nullptr, "run config (default MODEL_DIR/run_config.yaml)"},
                   {"embedding_row_format", &row_format, nullptr,
                    "how servers store the hash tables' rows by default: float32, float16 or int8"},
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
  absl::Status s = RunExport(*config, model_dir, export_dir, compact_updates, row_format);
  if (!s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace recflow::cli
