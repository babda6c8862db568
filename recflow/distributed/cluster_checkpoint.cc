#include "recflow/distributed/cluster_checkpoint.h"

#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recflow/checkpoint/bundle_format.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/core/status.h"
#include "recflow/distributed/task_threads.h"

namespace recflow::distributed {
namespace {

constexpr char kTempMarker[] = "_temp_";

std::string RandomSuffix() {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return absl::StrFormat("%016x", r);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterCheckpointer>> ClusterCheckpointer::Create(
    Options options) {
  if (options.directory.empty()) {
    return errors::InvalidArgument("ClusterCheckpointer needs a checkpoint directory");
  }
  if (options.basename.empty() || absl::StrContains(options.basename, "/")) {
    return errors::InvalidArgument("ClusterCheckpointer basename '", options.basename,
                                   "' must be a non-empty file name");
  }
  if (options.env == nullptr) options.env = Env::Default();
  Env* env = options.env;
  const std::string dir = options.directory;
  const std::string head = options.basename + "-";
  RETURN_IF_ERROR(env->RecursivelyCreateDir(dir));
  // Leftovers of crashed cluster saves: temp dirs, and data files a merge
  // renamed into place before it could write their index.
  ASSIGN_OR_RETURN(std::vector<std::string> children, env->GetChildren(dir));
  for (const std::string& child : children) {
    if (!absl::StartsWith(child, head)) continue;
    const std::string path = JoinPath(dir, child);
    if (absl::StrContains(child, kTempMarker)) {
      DeleteRecursively(env, path).IgnoreError();
      continue;
    }
    const size_t data = child.find(".data-");
    if (data != std::string::npos &&
        !env->FileExists(checkpoint::MetaFilename(JoinPath(dir, child.substr(0, data))))) {
      env->DeleteFile(path).IgnoreError();
    }
  }
  ASSIGN_OR_RETURN(checkpoint::RetainedCheckpoints retained,
                   checkpoint::AdoptCheckpointDir(env, dir, options.basename));
  std::unique_ptr<ClusterCheckpointer> c(new ClusterCheckpointer(std::move(options)));
  MutexLock lock(&c->mu_);
  c->retained_ = std::move(retained);
  return c;
}

std::vector<std::string> ClusterCheckpointer::checkpoints() const {
  MutexLock lock(&mu_);
  return retained_.prefixes;
}

absl::StatusOr<std::string> ClusterCheckpointer::Save(int64_t step, int num_parts,
                                                      const WritePart& write_part) {
  if (num_parts < 1) {
    return errors::InvalidArgument("a cluster checkpoint needs at least one part, not ",
                                   num_parts);
  }
  MutexLock lock(&mu_);
  Env* env = options_.env;
  const std::string prefix =
      JoinPath(options_.directory, absl::StrCat(options_.basename, "-", step));
  const std::string temp_dir = absl::StrCat(prefix, kTempMarker, RandomSuffix());
  RETURN_IF_ERROR(env->RecursivelyCreateDir(temp_dir));
  // Whatever happens next, the temp dir goes (its files were merged away, or
  // are an unpublished save's).
  struct RemoveDir {
    Env* env;
    std::string dir;
    ~RemoveDir() { DeleteRecursively(env, dir).IgnoreError(); }
  } remove_temp{env, temp_dir};

  std::vector<std::string> part_prefixes(num_parts);
  for (int p = 0; p < num_parts; ++p) {
    part_prefixes[p] = JoinPath(temp_dir, absl::StrCat("part-", p));
  }
  const std::vector<absl::Status> status =
      RunOnThreads("rf_ckpt_part", num_parts, [&](int p) -> absl::Status {
        absl::Status s = write_part(p, part_prefixes[p]);
        if (s.ok() && !env->FileExists(checkpoint::MetaFilename(part_prefixes[p]))) {
          s = errors::DataLoss("reported success but there is no bundle at ", part_prefixes[p],
                               " (no index file)");
        }
        return s;
      });
  for (int p = 0; p < num_parts; ++p) {
    if (!status[p].ok()) {
      return errors::Annotate(status[p], absl::StrCat("cluster checkpoint ", prefix, ": part ",
                                                      p, " of ", num_parts));
    }
  }
  // Data files of a crashed merge at this prefix would be mistaken for ours.
  if (!env->FileExists(checkpoint::MetaFilename(prefix))) {
    checkpoint::DeleteCheckpointFiles(env, prefix);
  }
  absl::Status merged =
      checkpoint::MergeBundles(env, part_prefixes, prefix, /*allow_missing_files=*/false,
                               options_.sync);
  if (!merged.ok()) {
    // Data files already renamed into place are not a checkpoint without an
    // index.
    if (!env->FileExists(checkpoint::MetaFilename(prefix))) {
      checkpoint::DeleteCheckpointFiles(env, prefix);
    }
    return errors::Annotate(merged, absl::StrCat("cluster checkpoint ", prefix, ": merging ",
                                                 num_parts, " parts"));
  }
  checkpoint::RetainedCheckpoints next = retained_;
  const std::vector<std::string> dropped =
      checkpoint::RetainCheckpoint(&next, prefix, nullptr, options_.max_to_keep);
  RETURN_IF_ERROR(checkpoint::WriteCheckpointState(
      env, options_.directory, checkpoint::MakeCheckpointState(options_.directory, prefix, next)));
  retained_ = std::move(next);
  for (const std::string& p : dropped) checkpoint::DeleteCheckpointFiles(env, p);
  return prefix;
}

}  // namespace recflow::distributed
