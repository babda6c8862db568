#include "recflow/checkpoint/saved_model.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"

namespace recflow::checkpoint {
namespace {

std::string TagSetString(const tensorflow::MetaGraphDef& mg) {
  std::set<std::string> tags(mg.meta_info_def().tags().begin(),
                             mg.meta_info_def().tags().end());
  return absl::StrJoin(tags, ",");
}

// Collects the first text-format parse error instead of logging it.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error.empty())
      error = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  std::string error;
};

std::string TempSuffix() {
  std::random_device rd;
  return absl::StrCat(".tmp-", getpid(), "-", rd() % 1000000000u);
}

}  // namespace

bool MaybeSavedModelDirectory(Env* env, const std::string& dir) {
  return env->FileExists(JoinPath(dir, kSavedModelFilenamePb)) ||
         env->FileExists(JoinPath(dir, kSavedModelFilenamePbTxt));
}

absl::StatusOr<tensorflow::SavedModel> ReadSavedModel(Env* env,
                                                      const std::string& dir) {
  if (!env->IsDirectory(dir).ok()) {
    if (env->FileExists(dir)) {
      return errors::InvalidArgument("SavedModel path '", dir,
                                     "' is not a directory");
    }
    return errors::NotFound("SavedModel directory '", dir, "' does not exist");
  }
  const std::string pb = JoinPath(dir, kSavedModelFilenamePb);
  const std::string pbtxt = JoinPath(dir, kSavedModelFilenamePbTxt);
  tensorflow::SavedModel sm;
  std::string data;
  std::string path;
  if (env->FileExists(pb)) {
    path = pb;
    RETURN_IF_ERROR(ReadFileToString(env, pb, &data, kMaxSavedModelBytes));
    if (!sm.ParseFromString(data)) {
      return errors::DataLoss(
          "'", pb, "' (", data.size(),
          " bytes) is not a valid SavedModel proto (truncated or corrupt)");
    }
  } else if (env->FileExists(pbtxt)) {
    path = pbtxt;
    RETURN_IF_ERROR(ReadFileToString(env, pbtxt, &data, kMaxSavedModelBytes));
    google::protobuf::TextFormat::Parser parser;
    FirstError collector;
    parser.RecordErrorsTo(&collector);
    if (!parser.ParseFromString(data, &sm)) {
      return errors::DataLoss(
          "'", pbtxt,
          "' is not a valid SavedModel text proto: ", collector.error);
    }
  } else {
    return errors::NotFound("no ", kSavedModelFilenamePb, " or ",
                            kSavedModelFilenamePbTxt,
                            " in SavedModel directory '", dir, "'");
  }
  if (sm.meta_graphs_size() == 0) {
    return errors::InvalidArgument("'", path, "' holds no MetaGraph");
  }
  return sm;
}

std::vector<std::string> TagSets(const tensorflow::SavedModel& saved_model) {
  std::vector<std::string> out;
  for (const auto& mg : saved_model.meta_graphs())
    out.push_back(TagSetString(mg));
  return out;
}

absl::StatusOr<const tensorflow::MetaGraphDef*> FindMetaGraph(
    const tensorflow::SavedModel& saved_model,
    const std::vector<std::string>& tags) {
  const std::set<std::string> want(tags.begin(), tags.end());
  for (const auto& mg : saved_model.meta_graphs()) {
    std::set<std::string> have(mg.meta_info_def().tags().begin(),
                               mg.meta_info_def().tags().end());
    if (have == want) return &mg;
  }
  std::vector<std::string> sets;
  for (const std::string& s : TagSets(saved_model))
    sets.push_back(absl::StrCat("{", s, "}"));
  return errors::InvalidArgument(
      "no MetaGraph with tag set {", absl::StrJoin(want, ","),
      "}; available tag sets: ", absl::StrJoin(sets, " "));
}

absl::StatusOr<const tensorflow::SignatureDef*> FindSignature(
    const tensorflow::MetaGraphDef& meta_graph, const std::string& name) {
  auto it = meta_graph.signature_def().find(name);
  if (it != meta_graph.signature_def().end()) return &it->second;
  std::vector<std::string> names;
  for (const auto& [k, v] : meta_graph.signature_def()) names.push_back(k);
  std::sort(names.begin(), names.end());
  return errors::NotFound(
      "no signature '", name, "'; available signatures: ",
      names.empty() ? "(none)" : absl::StrJoin(names, ", "));
}

std::string VariablesPrefix(const std::string& dir) {
  return JoinPath(dir, kSavedModelVariablesDirectory,
                  kSavedModelVariablesFilename);
}

std::string AssetsDirectory(const std::string& dir) {
  return JoinPath(dir, kSavedModelAssetsDirectory);
}

absl::Status WriteSavedModel(Env* env, const std::string& dir,
                             const tensorflow::SavedModel& saved_model,
                             const SavedModelWriteOptions& options) {
  std::string clean = dir;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  if (clean.empty())
    return errors::InvalidArgument("empty SavedModel export directory");
  if (env->FileExists(clean)) {
    return errors::AlreadyExists("SavedModel export directory '", clean,
                                 "' already exists");
  }
  const std::string parent = Dirname(clean);
  if (!parent.empty()) RETURN_IF_ERROR(env->RecursivelyCreateDir(parent));
  const std::string tmp = clean + TempSuffix();
  RETURN_IF_ERROR(env->CreateDir(tmp));
  auto write_all = [&]() -> absl::Status {
    std::string data;
    if (options.as_text) {
      if (!google::protobuf::TextFormat::PrintToString(saved_model, &data)) {
        return errors::Internal("cannot print the SavedModel as text");
      }
      RETURN_IF_ERROR(WriteStringToFileAtomically(
          env, JoinPath(tmp, kSavedModelFilenamePbTxt), data));
    } else {
      if (!saved_model.SerializeToString(&data)) {
        return errors::InvalidArgument(
            "the SavedModel does not serialize (over 2 GiB?)");
      }
      RETURN_IF_ERROR(WriteStringToFileAtomically(
          env, JoinPath(tmp, kSavedModelFilenamePb), data));
    }
    if (options.write_variables) {
      RETURN_IF_ERROR(
          env->CreateDir(JoinPath(tmp, kSavedModelVariablesDirectory)));
      RETURN_IF_ERROR(options.write_variables(VariablesPrefix(tmp)));
    }
    auto write_dir = [&](const char* sub,
                         const std::map<std::string, std::string>& files) {
      if (files.empty()) return absl::OkStatus();
      const std::string d = JoinPath(tmp, sub);
      RETURN_IF_ERROR(env->CreateDir(d));
      for (const auto& [name, contents] : files) {
        if (name.empty() || name.find('/') != std::string::npos ||
            name == "." || name == "..") {
          return errors::InvalidArgument("bad asset file name '", name,
                                         "': must be a plain file name");
        }
        RETURN_IF_ERROR(
            WriteStringToFileAtomically(env, JoinPath(d, name), contents));
      }
      return env->SyncDir(d);
    };
    RETURN_IF_ERROR(write_dir(kSavedModelAssetsDirectory, options.assets));
    RETURN_IF_ERROR(
        write_dir(kSavedModelAssetsExtraDirectory, options.assets_extra));
    RETURN_IF_ERROR(env->SyncDir(tmp));
    if (env->FileExists(clean)) {
      return errors::AlreadyExists("SavedModel export directory '", clean,
                                   "' appeared during the export");
    }
    RETURN_IF_ERROR(env->RenameFile(tmp, clean));
    return env->SyncDir(parent.empty() ? "." : parent);
  };
  absl::Status s = write_all();
  if (!s.ok() && env->FileExists(tmp))
    DeleteRecursively(env, tmp).IgnoreError();
  return s;
}

}  // namespace recflow::checkpoint
