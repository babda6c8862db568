#include "recflow/checkpoint/saver.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/fingerprint.h"
#include "recflow/core/status.h"
#include "recflow/framework/resource_var.h"
#include "recflow/framework/tensor_util.h"

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

constexpr char kMetaMagic[] = "recflow incremental checkpoint v1";

std::string FormatMeta(int64_t step, int64_t since_step, const std::string& dir,
                       const std::vector<std::string>& chain) {
  std::string text = absl::StrCat(kMetaMagic, "\nstep: ", step, "\nsince_step: ", since_step, "\n");
  for (const std::string& p : chain) absl::StrAppend(&text, "chain: ", RelativeTo(dir, p), "\n");
  return text;
}

}  // namespace

uint64_t ContentFingerprint(const Tensor& t) {
  std::string head = absl::StrCat(DataTypeString(t.dtype()), t.shape().DebugString());
  uint64_t fp = Fingerprint64(head);
  if (t.dtype() == DT_STRING) {
    for (const std::string& v : t.flat<std::string>()) {
      fp = fp * 0x9E3779B97F4A7C15ull + Fingerprint64(v);
    }
  } else {
    fp = fp * 0x9E3779B97F4A7C15ull +
         Fingerprint64(absl::string_view(t.raw_data(), t.TotalBytes()));
  }
  return fp;
}

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

absl::StatusOr<Tensor> ReadTensorOrParts(const BundleReader& reader, const std::string& name) {
  if (reader.Contains(name)) return reader.Lookup(name);
  std::vector<Tensor> parts;
  for (int p = 0;; ++p) {
    const std::string part = absl::StrCat(name, "/part_", p);
    if (!reader.Contains(part)) break;
    ASSIGN_OR_RETURN(Tensor t, reader.Lookup(part));
    parts.push_back(std::move(t));
  }
  if (parts.empty()) {
    return errors::NotFound("checkpoint ", reader.prefix(), " has no tensor '", name,
                            "' (nor its parts '", name, "/part_0', ...)");
  }
  return ConcatRows(parts, absl::StrCat("checkpoint ", reader.prefix(), ": the parts of '", name, "'"));
}

Saveable VarSaveable(ResourceMgr* rm, VarRef ref) {
  if (ref.container.empty()) ref.container = rm->default_container();
  auto shared = std::make_shared<const VarRef>(std::move(ref));
  // Fingerprints for deltas: `pending` of the last save, `committed` of the
  // last published checkpoint.
  struct DeltaState {
    Mutex mu;
    std::optional<uint64_t> pending ABSL_GUARDED_BY(mu);
    std::optional<uint64_t> committed ABSL_GUARDED_BY(mu);
  };
  auto delta = std::make_shared<DeltaState>();
  auto read = [rm, shared]() -> absl::StatusOr<Tensor> {
    auto var = rm->Lookup<Var>(shared->container, shared->name);
    if (!var.ok()) {
      return errors::FailedPrecondition("cannot save variable '", shared->name,
                                        "': it does not exist (the graph has not run)");
    }
    return (*var)->Read();
  };
  Saveable s;
  s.name = shared->checkpoint_key;
  s.save = [read, delta](BundleWriter* writer, const std::string& key) -> absl::Status {
    ASSIGN_OR_RETURN(Tensor value, read());
    const uint64_t fp = ContentFingerprint(value);
    RETURN_IF_ERROR(writer->Add(key, value));
    MutexLock lock(&delta->mu);
    delta->pending = fp;
    return absl::OkStatus();
  };
  s.save_delta = [read, delta](BundleWriter* writer, const std::string& key,
                               int64_t) -> absl::Status {
    ASSIGN_OR_RETURN(Tensor value, read());
    const uint64_t fp = ContentFingerprint(value);
    bool changed;
    {
      MutexLock lock(&delta->mu);
      changed = !delta->committed.has_value() || *delta->committed != fp;
      delta->pending = fp;
    }
    return changed ? writer->Add(key, value) : absl::OkStatus();
  };
  s.committed = [delta](int64_t, bool) {
    MutexLock lock(&delta->mu);
    delta->committed = delta->pending;
  };
  s.restore = [rm, shared](const BundleReader& reader, const std::string& key) -> absl::Status {
    // Whole, or stacked from the row parts a cluster's ps tasks wrote.
    const bool parts = !reader.Contains(key) && reader.Contains(key + "/part_0");
    DataType dtype;
    TensorShape shape;
    Tensor value;
    if (parts) {
      ASSIGN_OR_RETURN(value, ReadTensorOrParts(reader, key));
      dtype = value.dtype();
      shape = value.shape();
    } else {
      ASSIGN_OR_RETURN(TensorInfo info, reader.GetInfo(key));
      dtype = info.dtype;
      shape = info.shape;
    }
    const std::string what = parts ? "its parts '" + key + "/part_*'" : "'" + key + "'";
    if (dtype != shared->dtype) {
      return errors::InvalidArgument("variable '", shared->name, "' is ",
                                     DataTypeString(shared->dtype), " but checkpoint ",
                                     reader.prefix(), " holds ", what, " as ",
                                     DataTypeString(dtype));
    }
    if (!shared->shape.IsCompatibleWith(PartialShape(shape))) {
      return errors::InvalidArgument("variable '", shared->name, "' has shape ",
                                     shared->shape.DebugString(), " but checkpoint ",
                                     reader.prefix(), " holds ", what, " with shape ",
                                     shape.DebugString());
    }
    if (!parts) {
      ASSIGN_OR_RETURN(value, reader.Lookup(key));
    }
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
    : options_(std::move(options)), saveables_(std::move(saveables)) {}

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
  RETURN_IF_ERROR(ValidateThreadCount("SaverOptions.restore_threads",
                                      options.restore_threads, /*min_threads=*/0));
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
  const int threads = saver->options_.restore_threads > 0 ? saver->options_.restore_threads
                                                          : NumSchedulableCPUs();
  if (threads > 1) {
    ASSIGN_OR_RETURN(saver->pool_, ThreadPool::Create("ckpt_restore", threads));
  }
  if (!saver->options_.adopt_directory) return saver;
  ASSIGN_OR_RETURN(RetainedCheckpoints retained,
                   AdoptCheckpointDir(env, dir, saver->options_.basename));
  {
    MutexLock lock(&saver->mu_);
    saver->checkpoints_ = std::move(retained.prefixes);
    saver->deps_ = std::move(retained.deps);
  }
  return saver;
}

std::vector<std::string> Saver::checkpoints() const {
  MutexLock lock(&mu_);
  return checkpoints_;
}

bool Saver::last_save_was_full() const {
  MutexLock lock(&mu_);
  return last_full_;
}

absl::StatusOr<std::string> Saver::Save(int64_t step) {
  MutexLock lock(&mu_);
  const std::string prefix =
      JoinPath(options_.directory, absl::StrCat(options_.basename, "-", step));
  const uint64_t now = options_.env->NowMicros();
  bool full = !last_.has_value() || options_.full_every_n_saves <= 1 ||
              static_cast<int>(last_->chain.size()) >= options_.full_every_n_saves ||
              std::find(last_->chain.begin(), last_->chain.end(), prefix) !=
                  last_->chain.end();
  if (!full && options_.full_every_seconds > 0 &&
      now - last_->full_micros >= static_cast<uint64_t>(options_.full_every_seconds) * 1000000) {
    full = true;
  }
  {
    ASSIGN_OR_RETURN(auto writer, BundleWriter::Create(options_.env, prefix, options_.writer));
    for (const Saveable& s : saveables_) {
      absl::Status st = full || !s.save_delta ? s.save(writer.get(), s.name)
                                              : s.save_delta(writer.get(), s.name, last_->step);
      RETURN_IF_ERROR(errors::Annotate(st, absl::StrCat("saving '", s.name, "' to ", prefix)));
    }
    if (!full) {
      Tensor meta(DT_STRING, TensorShape({}));
      meta.scalar<std::string>() =
          FormatMeta(step, last_->step, options_.directory, last_->chain);
      RETURN_IF_ERROR(writer->Add(kCheckpointMetaKey, meta));
    }
    RETURN_IF_ERROR(writer->Finish());
  }
  RetainedCheckpoints next{checkpoints_, deps_};
  const std::vector<std::string> dropped = RetainCheckpoint(
      &next, prefix, full ? nullptr : &last_->chain, options_.max_to_keep);
  RETURN_IF_ERROR(WriteCheckpointState(options_.env, options_.directory,
                                       MakeCheckpointState(options_.directory, prefix, next)));
  checkpoints_ = std::move(next.prefixes);
  deps_ = std::move(next.deps);
  Last last;
  last.prefix = prefix;
  last.step = step;
  if (full) {
    last.full_micros = now;
  } else {
    last.chain = last_->chain;
    last.full_micros = last_->full_micros;
  }
  last.chain.push_back(prefix);
  last_ = std::move(last);
  last_full_ = full;
  for (const Saveable& s : saveables_) {
    if (s.committed) s.committed(step, full);
  }
  for (const std::string& p : dropped) DeleteCheckpointFiles(options_.env, p);
  return prefix;
}

absl::Status Saver::Restore(const std::string& prefix) {
  MutexLock lock(&mu_);
  // A later save must not build a delta on state this restore replaced.
  last_.reset();
  ASSIGN_OR_RETURN(std::shared_ptr<BundleReader> target,
                   BundleReader::Open(options_.env, prefix, options_.reader));
  ASSIGN_OR_RETURN(std::optional<DeltaInfo> delta, ReadDeltaInfo(*target));
  // readers[0] is the full base, the last one `prefix` itself.
  std::vector<std::shared_ptr<BundleReader>> readers;
  if (delta.has_value()) {
    for (const std::string& p : delta->chain) {
      if (!options_.env->FileExists(MetaFilename(p))) {
        return errors::NotFound("delta checkpoint ", prefix, " needs checkpoint ", p,
                                " (", p == delta->chain.front() ? "its full base" : "an earlier delta",
                                "), which has no index file ", MetaFilename(p));
      }
      auto reader = BundleReader::Open(options_.env, p, options_.reader);
      if (!reader.ok()) {
        return errors::Annotate(reader.status(),
                                absl::StrCat("opening ", p, ", needed by delta checkpoint ", prefix));
      }
      readers.push_back(std::move(*reader));
    }
    if (readers.empty() || readers.front()->Contains(kCheckpointMetaKey)) {
      return errors::DataLoss("delta checkpoint ", prefix, " names ",
                              readers.empty() ? std::string("no base") : delta->chain.front(),
                              " as its full base, but that is not a full checkpoint");
    }
    // Each later member must be the delta this chain was built on (not, say,
    // a checkpoint rewritten at the same step since).
    for (size_t i = 1; i < readers.size(); ++i) {
      ASSIGN_OR_RETURN(std::optional<DeltaInfo> member, ReadDeltaInfo(*readers[i]));
      if (!member.has_value() ||
          member->chain != std::vector<std::string>(delta->chain.begin(),
                                                    delta->chain.begin() + i)) {
        return errors::DataLoss("delta checkpoint ", prefix, " builds on ", delta->chain[i],
                                ", but that is no longer the delta it was built on (it was "
                                "rewritten); restore a full checkpoint instead");
      }
    }
  }
  readers.push_back(target);
  std::vector<absl::Status> status(saveables_.size());
  auto restore_one = [&](const Saveable& s) -> absl::Status {
    if (readers.size() == 1) return s.restore(*readers[0], s.name);
    if (s.restore_delta) {
      RETURN_IF_ERROR(s.restore(*readers[0], s.name));
      for (size_t i = 1; i < readers.size(); ++i) {
        RETURN_IF_ERROR(s.restore_delta(*readers[i], s.name));
      }
      return absl::OkStatus();
    }
    for (size_t i = readers.size(); i-- > 1;) {
      if (readers[i]->Contains(s.name)) return s.restore(*readers[i], s.name);
    }
    return s.restore(*readers[0], s.name);
  };
  // Largest first, each taken by the next free thread: a big table listed
  // after many small variables would otherwise start last and finish alone.
  const std::vector<size_t> order = RestoreOrder(*target);
  std::atomic<size_t> next{0};
  auto restore = [&](int64_t, int64_t) {
    for (size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < order.size();) {
      const Saveable& s = saveables_[order[k]];
      status[order[k]] = errors::Annotate(
          restore_one(s), absl::StrCat("restoring '", s.name, "' from ", prefix));
    }
  };
  const int64_t workers =
      pool_ == nullptr ? 1
                       : std::min<int64_t>(pool_->NumThreads(),
                                           static_cast<int64_t>(saveables_.size()));
  if (workers > 1) {
    pool_->ParallelFor(workers, /*cost_per_unit=*/1000000000, restore);
  } else {
    restore(0, 1);
  }
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

std::vector<size_t> Saver::RestoreOrder(const BundleReader& reader) const {
  // Bytes per saveable: its own key, and keys under "name/". A key's owner
  // is the longest name that is the key or a '/'-prefix of it.
  absl::flat_hash_map<absl::string_view, size_t> by_name;
  for (size_t i = 0; i < saveables_.size(); ++i) by_name.emplace(saveables_[i].name, i);
  std::vector<uint64_t> bytes(saveables_.size(), 0);
  // Unreadable entries are left to the restores themselves to report.
  reader
      .ForEachEntry([&](absl::string_view key, const tensorflow::BundleEntryProto& entry) {
        for (absl::string_view name = key;;) {
          if (auto it = by_name.find(name); it != by_name.end()) {
            bytes[it->second] += static_cast<uint64_t>(entry.size());
            break;
          }
          const size_t slash = name.rfind('/');
          if (slash == absl::string_view::npos) break;
          name = name.substr(0, slash);
        }
        return absl::OkStatus();
      })
      .IgnoreError();
  std::vector<size_t> order(saveables_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  return order;
}

absl::StatusOr<std::optional<DeltaInfo>> ReadDeltaInfo(const BundleReader& reader) {
  if (!reader.Contains(kCheckpointMetaKey)) return std::optional<DeltaInfo>();
  ASSIGN_OR_RETURN(Tensor meta, reader.Lookup(kCheckpointMetaKey));
  auto bad = [&](absl::string_view why) {
    return errors::DataLoss("checkpoint ", reader.prefix(), ": '", kCheckpointMetaKey,
                            "' is not a valid incremental-checkpoint record: ", why);
  };
  if (meta.dtype() != DT_STRING || meta.NumElements() != 1) return bad("not a string scalar");
  const std::vector<std::string> lines =
      absl::StrSplit(meta.flat<std::string>()[0], '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != kMetaMagic) return bad("unknown header");
  DeltaInfo info;
  bool has_step = false, has_since = false;
  const std::string dir = Dirname(reader.prefix());
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(": ");
    if (colon == std::string::npos) return bad(absl::StrCat("line '", lines[i], "'"));
    const std::string key = lines[i].substr(0, colon), value = lines[i].substr(colon + 2);
    if (key == "step") {
      has_step = absl::SimpleAtoi(value, &info.step);
    } else if (key == "since_step") {
      has_since = absl::SimpleAtoi(value, &info.since_step);
    } else if (key == "chain") {
      if (value.empty()) return bad("empty chain entry");
      info.chain.push_back(Resolve(dir, value));
    }
  }
  if (!has_step || !has_since) return bad("no step or since_step");
  if (info.chain.empty()) return bad("no chain");
  return std::optional<DeltaInfo>(std::move(info));
}

// --- Pieces shared with distributed::ClusterCheckpointer ------------------------

absl::StatusOr<RetainedCheckpoints> AdoptCheckpointDir(Env* env, const std::string& dir,
                                                       const std::string& basename) {
  // Leftovers of crashed saves: temporary bundle and state files.
  ASSIGN_OR_RETURN(std::vector<std::string> children, env->GetChildren(dir));
  for (const std::string& child : children) {
    const bool bundle_temp =
        absl::StartsWith(child, basename + "-") && absl::StrContains(child, ".tempstate");
    const bool state_temp =
        absl::StartsWith(child, absl::StrCat(kCheckpointStateFilename, ".tmp."));
    if (bundle_temp || state_temp) {
      env->DeleteFile(JoinPath(dir, child)).IgnoreError();
    }
  }
  // Continue the retention list of an earlier run: the state file's, when
  // it is usable; else (no state file, or a damaged one: FindLatestCheckpoint
  // then resumes from the newest intact checkpoint) the checkpoints in the
  // directory, oldest first. Paths outside the directory are never taken
  // (retention would delete their files).
  std::vector<std::string> prefixes;
  auto state = ReadCheckpointState(env, dir);
  std::optional<std::string> newest;
  if (state.ok()) newest = CheckpointPathInDir(dir, state->model_checkpoint_path());
  if (newest.has_value() && env->FileExists(MetaFilename(*newest))) {
    for (const std::string& path : state->all_model_checkpoint_paths()) {
      std::optional<std::string> prefix = CheckpointPathInDir(dir, path);
      if (prefix.has_value() && env->FileExists(MetaFilename(*prefix))) {
        prefixes.push_back(*prefix);
      }
    }
  } else {
    ASSIGN_OR_RETURN(auto listed, ListCheckpoints(env, dir, basename));
    for (auto& [step, prefix] : listed) prefixes.push_back(std::move(prefix));
  }
  RetainedCheckpoints retained;
  for (const std::string& prefix : prefixes) {
    retained.prefixes.push_back(prefix);
    // A delta's chain, so retention keeps what it needs. An unreadable
    // bundle is kept as if full; restoring it reports the problem.
    auto reader = BundleReader::Open(env, prefix);
    if (!reader.ok()) continue;
    auto info = ReadDeltaInfo(**reader);
    if (info.ok() && info->has_value()) retained.deps[prefix] = (*info)->chain;
  }
  return retained;
}

std::vector<std::string> RetainCheckpoint(RetainedCheckpoints* retained,
                                          const std::string& prefix,
                                          const std::vector<std::string>* chain,
                                          int max_to_keep) {
  std::map<std::string, std::vector<std::string>> deps = std::move(retained->deps);
  deps.erase(prefix);
  if (chain != nullptr) deps[prefix] = *chain;
  std::vector<std::string> kept = std::move(retained->prefixes);
  kept.erase(std::remove(kept.begin(), kept.end(), prefix), kept.end());
  // Deltas built on a checkpoint this save replaced (a rerun of a step after
  // restoring an older checkpoint) belong to an abandoned history: drop them.
  std::vector<std::string> stale;
  for (const std::string& p : kept) {
    auto it = deps.find(p);
    if (it != deps.end() &&
        std::find(it->second.begin(), it->second.end(), prefix) != it->second.end()) {
      stale.push_back(p);
    }
  }
  for (const std::string& p : stale) kept.erase(std::remove(kept.begin(), kept.end(), p), kept.end());
  kept.push_back(prefix);
  // The newest max_to_keep and whatever their chains need.
  std::set<std::string> keep;
  const size_t newest =
      max_to_keep > 0 ? std::min<size_t>(kept.size(), max_to_keep) : kept.size();
  for (size_t i = kept.size() - newest; i < kept.size(); ++i) {
    keep.insert(kept[i]);
    auto it = deps.find(kept[i]);
    if (it != deps.end()) keep.insert(it->second.begin(), it->second.end());
  }
  std::vector<std::string> dropped = stale;
  retained->prefixes.clear();
  for (const std::string& p : kept) (keep.count(p) ? retained->prefixes : dropped).push_back(p);
  for (const std::string& p : dropped) deps.erase(p);
  retained->deps = std::move(deps);
  return dropped;
}

tensorflow::CheckpointState MakeCheckpointState(const std::string& dir, const std::string& newest,
                                                const RetainedCheckpoints& retained) {
  tensorflow::CheckpointState state;
  state.set_model_checkpoint_path(RelativeTo(dir, newest));
  for (const std::string& p : retained.prefixes) {
    state.add_all_model_checkpoint_paths(RelativeTo(dir, p));
  }
  return state;
}

void DeleteCheckpointFiles(Env* env, const std::string& prefix) {
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

}  // namespace recflow::checkpoint
