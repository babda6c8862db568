#include "recflow/checkpoint/saver.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "recflow/core/status.h"
#include "recflow/framework/resource_var.h"

namespace recflow::checkpoint {
namespace {

bool IsAbsolute(absl::string_view path) { return !path.empty() && path[0] == '/'; }

// `prefix` relative to `dir` when it lies inside it, else unchanged.
std::string RelativeTo(const std::string& dir, const std::string& prefix) {
  const std::string d = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  if (!d.empty() && absl::StartsWith(prefix, d)) return prefix.substr(d.size());
  return prefix;
}

std::string Resolve(const std::string& dir, const std::string& path) {
  return IsAbsolute(path) || dir.empty() ? path : JoinPath(dir, path);
}

}  // namespace

Saveable TensorSaveable(std::string name, std::function<absl::StatusOr<Tensor>()> read,
                        std::function<absl::Status(const Tensor&)> assign) {
  Saveable s;
  s.name = std::move(name);
  s.save = [read = std::move(read)](BundleWriter* writer,
                                    const std::string& key) -> absl::Status {
    ASSIGN_OR_RETURN(Tensor t, read());
    return writer->Add(key, t);
  };
  s.restore = [assign = std::move(assign)](const BundleReader& reader,
                                           const std::string& key) -> absl::Status {
    ASSIGN_OR_RETURN(Tensor t, reader.Lookup(key));
    return assign(t);
  };
  return s;
}

Saveable VarSaveable(ResourceMgr* rm, VarRef ref) {
  if (ref.container.empty()) ref.container = rm->default_container();
  auto shared = std::make_shared<const VarRef>(std::move(ref));
  Saveable s;
  s.name = shared->checkpoint_key;
  s.save = [rm, shared](BundleWriter* writer, const std::string& key) -> absl::Status {
    auto var = rm->Lookup<Var>(shared->container, shared->name);
    if (!var.ok()) {
      return errors::FailedPrecondition("cannot save variable '", shared->name,
                                        "': it does not exist (the graph has not run)");
    }
    ASSIGN_OR_RETURN(Tensor value, (*var)->Read());
    return writer->Add(key, value);
  };
  s.restore = [rm, shared](const BundleReader& reader, const std::string& key) -> absl::Status {
    ASSIGN_OR_RETURN(TensorInfo info, reader.GetInfo(key));
    if (info.dtype != shared->dtype) {
      return errors::InvalidArgument("variable '", shared->name, "' is ",
                                     DataTypeString(shared->dtype), " but checkpoint ",
                                     reader.prefix(), " holds '", key, "' as ",
                                     DataTypeString(info.dtype));
    }
    if (!shared->shape.IsCompatibleWith(PartialShape(info.shape))) {
      return errors::InvalidArgument("variable '", shared->name, "' has shape ",
                                     shared->shape.DebugString(), " but checkpoint ",
                                     reader.prefix(), " holds '", key, "' with shape ",
                                     info.shape.DebugString());
    }
    ASSIGN_OR_RETURN(Tensor value, reader.Lookup(key));
    ASSIGN_OR_RETURN(std::shared_ptr<Var> var,
                     rm->LookupOrCreate<Var>(
                         shared->container, shared->name,
                         [&]() -> absl::StatusOr<std::shared_ptr<Var>> {
                           return std::make_shared<Var>(shared->dtype, shared->shape,
                                                        shared->name);
                         }));
    return errors::Annotate(var->Assign(value, /*validate_shape=*/true),
                            absl::StrCat("restoring variable '", shared->name, "'"));
  };
  return s;
}

// --- Saver ---------------------------------------------------------------------

Saver::Saver(SaverOptions options, std::vector<Saveable> saveables)
    : options_(std::move(options)), saveables_(std::move(saveables)) {
  const int threads =
      options_.restore_threads > 0 ? options_.restore_threads : NumSchedulableCPUs();
  if (threads > 1) pool_ = std::make_unique<ThreadPool>("ckpt_restore", threads);
}

absl::StatusOr<std::unique_ptr<Saver>> Saver::Create(SaverOptions options,
                                                     std::vector<Saveable> saveables) {
  if (options.directory.empty()) {
    return errors::InvalidArgument("Saver needs a checkpoint directory");
  }
  if (options.basename.empty() || absl::StrContains(options.basename, "/")) {
    return errors::InvalidArgument("Saver basename '", options.basename,
                                   "' must be a non-empty file name");
  }
  if (options.env == nullptr) options.env = Env::Default();
  std::set<std::string> names;
  for (const Saveable& s : saveables) {
    if (s.name.empty() || !s.save || !s.restore) {
      return errors::InvalidArgument("saveable '", s.name,
                                     "' needs a name, a save and a restore function");
    }
    if (!names.insert(s.name).second) {
      return errors::InvalidArgument("two saveables are named '", s.name, "'");
    }
  }
  Env* env = options.env;
  const std::string dir = options.directory;
  RETURN_IF_ERROR(env->RecursivelyCreateDir(dir));
  std::unique_ptr<Saver> saver(new Saver(std::move(options), std::move(saveables)));
  // Leftovers of crashed saves: temporary bundle and state files.
  ASSIGN_OR_RETURN(std::vector<std::string> children, env->GetChildren(dir));
  for (const std::string& child : children) {
    const bool bundle_temp = absl::StartsWith(child, saver->options_.basename + "-") &&
                             absl::StrContains(child, ".tempstate");
    const bool state_temp =
        absl::StartsWith(child, absl::StrCat(kCheckpointStateFilename, ".tmp."));
    if (bundle_temp || state_temp) {
      env->DeleteFile(JoinPath(dir, child)).IgnoreError();
    }
  }
  // Continue the retention list of an earlier run.
  auto state = ReadCheckpointState(env, dir);
  if (state.ok()) {
    MutexLock lock(&saver->mu_);
    for (const std::string& path : state->all_model_checkpoint_paths()) {
      const std::string prefix = Resolve(dir, path);
      if (env->FileExists(MetaFilename(prefix))) saver->checkpoints_.push_back(prefix);
    }
  } else if (!absl::IsNotFound(state.status())) {
    return state.status();
  }
  return saver;
}

std::vector<std::string> Saver::checkpoints() const {
  MutexLock lock(&mu_);
  return checkpoints_;
}

void Saver::DeleteCheckpointFiles(const std::string& prefix) {
  Env* env = options_.env;
  // The index first: without it the rest is never read.
  env->DeleteFile(MetaFilename(prefix)).IgnoreError();
  const std::string dir = Dirname(prefix);
  const std::string data = Basename(prefix) + ".data-";
  auto children = env->GetChildren(dir.empty() ? "." : dir);
  if (!children.ok()) return;
  for (const std::string& child : *children) {
    if (absl::StartsWith(child, data)) env->DeleteFile(JoinPath(dir, child)).IgnoreError();
  }
}

absl::StatusOr<std::string> Saver::Save(int64_t step) {
  MutexLock lock(&mu_);
  const std::string prefix =
      JoinPath(options_.directory, absl::StrCat(options_.basename, "-", step));
  {
    ASSIGN_OR_RETURN(auto writer, BundleWriter::Create(options_.env, prefix, options_.writer));
    for (const Saveable& s : saveables_) {
      RETURN_IF_ERROR(errors::Annotate(s.save(writer.get(), s.name),
                                       absl::StrCat("saving '", s.name, "' to ", prefix)));
    }
    RETURN_IF_ERROR(writer->Finish());
  }
  std::vector<std::string> kept = checkpoints_;
  kept.erase(std::remove(kept.begin(), kept.end(), prefix), kept.end());
  kept.push_back(prefix);
  std::vector<std::string> dropped;
  if (options_.max_to_keep > 0 && static_cast<int>(kept.size()) > options_.max_to_keep) {
    const size_t n = kept.size() - options_.max_to_keep;
    dropped.assign(kept.begin(), kept.begin() + n);
    kept.erase(kept.begin(), kept.begin() + n);
  }
  tensorflow::CheckpointState state;
  state.set_model_checkpoint_path(RelativeTo(options_.directory, prefix));
  for (const std::string& p : kept) {
    state.add_all_model_checkpoint_paths(RelativeTo(options_.directory, p));
  }
  RETURN_IF_ERROR(WriteCheckpointState(options_.env, options_.directory, state));
  checkpoints_ = std::move(kept);
  for (const std::string& p : dropped) DeleteCheckpointFiles(p);
  return prefix;
}

absl::Status Saver::Restore(const std::string& prefix) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto reader, BundleReader::Open(options_.env, prefix));
  std::vector<absl::Status> status(saveables_.size());
  auto restore = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Saveable& s = saveables_[i];
      status[i] = errors::Annotate(s.restore(*reader, s.name),
                                   absl::StrCat("restoring '", s.name, "' from ", prefix));
    }
  };
  if (pool_ != nullptr && saveables_.size() > 1) {
    pool_->ParallelFor(static_cast<int64_t>(saveables_.size()), 1000000000, restore);
  } else {
    restore(0, static_cast<int64_t>(saveables_.size()));
  }
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

// --- State file ------------------------------------------------------------------

absl::StatusOr<tensorflow::CheckpointState> ReadCheckpointState(Env* env,
                                                                const std::string& dir) {
  const std::string path = JoinPath(dir, kCheckpointStateFilename);
  std::string text;
  absl::Status s = ReadFileToString(env, path, &text, uint64_t{64} << 20);
  if (!s.ok()) {
    if (absl::IsNotFound(s)) return errors::NotFound("no checkpoint state file ", path);
    return s;
  }
  tensorflow::CheckpointState state;
  // Collects the parser's complaint instead of letting it log.
  class Errors : public google::protobuf::io::ErrorCollector {
   public:
    void AddError(int line, int column, const std::string& message) override {
      if (first.empty()) first = absl::StrCat(line + 1, ":", column + 1, ": ", message);
    }
    std::string first;
  } collector;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  if (!parser.ParseFromString(text, &state)) {
    return errors::DataLoss("checkpoint state file ", path,
                            " is not a CheckpointState in text format: ", collector.first);
  }
  return state;
}

absl::Status WriteCheckpointState(Env* env, const std::string& dir,
                                  const tensorflow::CheckpointState& state) {
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(state, &text)) {
    return errors::Internal("cannot print the checkpoint state");
  }
  return WriteStringToFileAtomically(env, JoinPath(dir, kCheckpointStateFilename), text);
}

absl::StatusOr<std::string> LatestCheckpoint(Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(tensorflow::CheckpointState state, ReadCheckpointState(env, dir));
  if (state.model_checkpoint_path().empty()) {
    return errors::NotFound("checkpoint state in ", dir, " names no checkpoint");
  }
  const std::string prefix = Resolve(dir, state.model_checkpoint_path());
  if (!env->FileExists(MetaFilename(prefix))) {
    return errors::NotFound("checkpoint state in ", dir, " names ", prefix,
                            ", which has no index file");
  }
  return prefix;
}

}  // namespace recflow::checkpoint
