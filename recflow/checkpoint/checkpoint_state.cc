#include "recflow/checkpoint/checkpoint_state.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "recflow/checkpoint/bundle_format.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"

namespace recflow::checkpoint {
namespace {

// `path` without empty and "." components, with "a/.." pairs removed. A
// leading ".." that cannot be removed stays (relative paths only).
std::vector<std::string> PathComponents(absl::string_view path) {
  std::vector<std::string> out;
  for (absl::string_view c : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (c == ".") continue;
    if (c == ".." && !out.empty() && out.back() != "..") {
      out.pop_back();
      continue;
    }
    out.emplace_back(c);
  }
  return out;
}

// The absolute form of `dir`, from the working directory when relative;
// nullopt when the working directory is unknown.
std::optional<std::string> AbsoluteDir(const std::string& dir) {
  if (absl::StartsWith(dir, "/")) return dir;
  std::string cwd(4096, '\0');
  if (getcwd(cwd.data(), cwd.size()) == nullptr) return std::nullopt;
  cwd.resize(strlen(cwd.c_str()));
  return JoinPath(cwd, dir);
}

}  // namespace

absl::StatusOr<tensorflow::CheckpointState> ReadCheckpointState(Env* env,
                                                                const std::string& dir) {
  const std::string path = JoinPath(dir, kCheckpointStateFilename);
  std::string text;
  absl::Status s = ReadFileToString(env, path, &text, uint64_t{64} << 20);
  if (!s.ok()) {
    if (absl::IsNotFound(s)) return errors::NotFound("no checkpoint state file ", path);
    return errors::Annotate(s, absl::StrCat("reading checkpoint state file ", path));
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
  auto check = [&](const std::string& p) -> absl::Status {
    const std::vector<std::string> parts = PathComponents(p);
    if (p.empty() || absl::StartsWith(p, "/") || parts.empty() || parts.front() == "..") {
      return errors::InvalidArgument("checkpoint state for ", dir, ": '", p,
                                     "' is not a path inside the directory; a state file names "
                                     "only checkpoints in its own directory");
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(check(state.model_checkpoint_path()));
  for (const std::string& p : state.all_model_checkpoint_paths()) RETURN_IF_ERROR(check(p));
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(state, &text)) {
    return errors::Internal("cannot print the checkpoint state");
  }
  return WriteStringToFileAtomically(env, JoinPath(dir, kCheckpointStateFilename), text);
}

std::optional<std::string> CheckpointPathInDir(const std::string& dir, const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::vector<std::string> parts;
  if (absl::StartsWith(path, "/")) {
    const std::optional<std::string> abs_dir = AbsoluteDir(dir);
    if (!abs_dir.has_value()) return std::nullopt;  // cannot tell: not inside
    const std::vector<std::string> base = PathComponents(*abs_dir);
    parts = PathComponents(path);
    if (parts.size() <= base.size() || !std::equal(base.begin(), base.end(), parts.begin())) {
      return std::nullopt;
    }
    parts.erase(parts.begin(), parts.begin() + base.size());
  } else {
    parts = PathComponents(path);
    if (parts.empty() || parts.front() == "..") return std::nullopt;
  }
  return JoinPath(dir, absl::StrJoin(parts, "/"));
}

absl::Status CheckCheckpointIntact(Env* env, const std::string& prefix) {
  if (!env->FileExists(MetaFilename(prefix))) {
    return errors::NotFound("no index file ", MetaFilename(prefix));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> reader, BundleReader::Open(env, prefix));
  const int shards = reader->num_shards();
  for (int i = 0; i < shards; ++i) {
    const std::string data = DataFilename(prefix, i, shards);
    if (!env->FileExists(data)) {
      return errors::NotFound("no data file ", data);
    }
  }
  ASSIGN_OR_RETURN(std::optional<DeltaInfo> delta, ReadDeltaInfo(*reader));
  if (delta.has_value()) {
    for (const std::string& member : delta->chain) {
      if (!env->FileExists(MetaFilename(member))) {
        return errors::NotFound("delta checkpoint ", prefix, " needs checkpoint ", member,
                                ", which has no index file");
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ListCheckpoints(
    Env* env, const std::string& dir, const std::string& basename) {
  std::vector<std::pair<int64_t, std::string>> out;
  auto children = env->GetChildren(dir);
  if (!children.ok()) {
    if (absl::IsNotFound(children.status())) return out;
    return children.status();
  }
  const std::string head = basename + "-", tail = ".index";
  for (const std::string& child : *children) {
    if (!absl::StartsWith(child, head) || !absl::EndsWith(child, tail)) continue;
    const std::string digits = child.substr(head.size(), child.size() - head.size() - tail.size());
    int64_t step = 0;
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(digits, &step)) {
      continue;
    }
    out.emplace_back(step, JoinPath(dir, child.substr(0, child.size() - tail.size())));
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<LatestCheckpointInfo> FindLatestCheckpoint(Env* env, const std::string& dir,
                                                          const std::string& basename) {
  const std::string state_path = JoinPath(dir, kCheckpointStateFilename);
  // Why the state file cannot be used ("" when there is none).
  std::string problem;
  auto state = ReadCheckpointState(env, dir);
  if (state.ok()) {
    const std::string& named = state->model_checkpoint_path();
    const std::optional<std::string> prefix = CheckpointPathInDir(dir, named);
    if (named.empty()) {
      problem = absl::StrCat("checkpoint state file ", state_path, " names no checkpoint");
    } else if (!prefix.has_value()) {
      problem = absl::StrCat("checkpoint state file ", state_path, " names '", named,
                             "', which is not in ", dir, " (not read)");
    } else if (absl::Status intact = CheckCheckpointIntact(env, *prefix); !intact.ok()) {
      problem = absl::StrCat("checkpoint state file ", state_path, " names ", *prefix,
                             ", which cannot be restored: ", intact.message());
    } else {
      return LatestCheckpointInfo{*prefix, ""};
    }
  } else if (!absl::IsNotFound(state.status())) {
    problem = std::string(state.status().message());
  }

  ASSIGN_OR_RETURN(auto listed, ListCheckpoints(env, dir, basename));
  std::vector<std::string> damaged;
  for (auto it = listed.rbegin(); it != listed.rend(); ++it) {
    absl::Status intact = CheckCheckpointIntact(env, it->second);
    if (intact.ok()) {
      return LatestCheckpointInfo{
          it->second,
          absl::StrCat(problem.empty() ? absl::StrCat(dir, " has no checkpoint state file")
                                       : problem,
                       "; using ", it->second, ", the newest intact checkpoint in ", dir)};
    }
    damaged.push_back(std::string(intact.message()));
  }
  if (problem.empty() && damaged.empty()) {
    return errors::NotFound("no checkpoint in ", dir, " (no state file ", state_path, ", no ",
                            basename, "-STEP.index)");
  }
  if (problem.empty()) problem = absl::StrCat(dir, " has no checkpoint state file");
  return errors::DataLoss(
      problem, "; and ", dir, " holds no intact checkpoint to use instead",
      damaged.empty() ? std::string() : absl::StrCat(" (", absl::StrJoin(damaged, "; "), ")"),
      ". Repair or remove ", state_path, " (removing it and every ", basename,
      "-* file starts training over)");
}

absl::StatusOr<std::string> LatestCheckpoint(Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(LatestCheckpointInfo info, FindLatestCheckpoint(env, dir));
  if (!info.recovery.empty()) LOG(WARNING) << info.recovery;
  return info.prefix;
}

}  // namespace recflow::checkpoint
