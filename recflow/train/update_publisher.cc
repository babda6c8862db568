#include "recflow/train/update_publisher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/embedding/graph_tables.h"
#include "recflow/embedding/table_bundle.h"
#include "recflow/framework/resource_var.h"
#include "recflow/train/variables.h"

namespace recflow::train {

checkpoint::UpdateBase PublishedUpdates::Get() const {
  MutexLock lock(&mu_);
  return base_;
}

void PublishedUpdates::Set(const checkpoint::UpdateBase& base) {
  MutexLock lock(&mu_);
  base_ = base;
}

bool PublishedUpdates::restored() const {
  MutexLock lock(&mu_);
  return restored_;
}

checkpoint::Saveable PublishedUpdates::CheckpointSaveable() {
  checkpoint::Saveable s;
  s.name = checkpoint::kCheckpointUpdateKey;
  s.save = [this](checkpoint::BundleWriter* writer, const std::string& key) -> absl::Status {
    const checkpoint::UpdateBase base = Get();
    return writer->Add(key, Tensor::FromVector<int64_t>({base.sequence, base.step}, {2}));
  };
  s.restore = [this](const checkpoint::BundleReader& reader,
                     const std::string& key) -> absl::Status {
    // A checkpoint of a run that published nothing has no such key.
    if (!reader.Contains(key)) return absl::OkStatus();
    ASSIGN_OR_RETURN(Tensor t, reader.Lookup(key));
    if (t.dtype() != DT_INT64 || t.NumElements() != 2) {
      return errors::DataLoss(key, " in ", reader.prefix(), " is ", DataTypeString(t.dtype()),
                              " ", t.shape().DebugString(), ", not int64 [2]");
    }
    MutexLock lock(&mu_);
    base_ = {t.flat<int64_t>()[0], t.flat<int64_t>()[1]};
    restored_ = true;
    return absl::OkStatus();
  };
  return s;
}

void StepTimes::Note(int64_t step, int64_t micros) {
  constexpr size_t kMax = 100000;
  if (times_.size() >= kMax) times_.erase(times_.begin(), times_.begin() + kMax / 2);
  times_.emplace_back(step, micros);
}

std::vector<int64_t> StepTimes::Between(int64_t after, int64_t through) const {
  std::vector<int64_t> out;
  for (const auto& [step, micros] : times_) {
    if (step > after && step <= through) {
      out.push_back(step);
      out.push_back(micros);
    }
  }
  return out;
}

void StepTimes::DropThrough(int64_t through) {
  std::erase_if(times_, [through](const auto& st) { return st.first <= through; });
}

absl::StatusOr<std::vector<Output>> PublishedVariables(const Graph& graph,
                                                       const std::vector<std::string>& names) {
  std::vector<Output> out;
  std::map<std::string, Output> by_name;
  for (const Output& v : TrainableVariables(graph)) {
    if (IsHashTable(v)) continue;
    by_name.emplace(VariableName(v), v);
    if (names.empty()) out.push_back(v);
  }
  for (const std::string& name : names) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return errors::InvalidArgument("cannot publish variable '", name,
                                     "': the graph has no trainable variable of that name");
    }
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<UpdatePublisher>> UpdatePublisher::Create(
    Session* session, const UpdatePublisherOptions& options,
    std::shared_ptr<PublishedUpdates> state) {
  if (options.directory.empty()) {
    return errors::InvalidArgument("the model update directory is empty");
  }
  std::unique_ptr<UpdatePublisher> p(new UpdatePublisher());
  p->options_ = options;
  p->session_ = session;
  p->state_ = std::move(state);
  ResourceMgr* rm = session->device()->resource_manager();
  const Graph& graph = *session->graph();
  ASSIGN_OR_RETURN(std::vector<embedding::TableNode> tables,
                   embedding::FindGraphTables(graph, *rm));
  for (const embedding::TableNode& t : tables) {
    p->table_keys_.push_back(t.node);
    p->table_locations_.emplace_back(t.container, t.name);
  }
  ASSIGN_OR_RETURN(std::vector<Output> vars, PublishedVariables(graph, options.variable_names));
  for (const Output& v : vars) {
    ResourceLocation where = NodeResourceLocation(v.node()->def(), rm->default_container());
    const std::string name = VariableName(v);
    p->variable_keys_.push_back(name);
    p->vars_.push_back({name, std::move(where.container), std::move(where.name), std::nullopt});
  }
  Env* env = options.env;
  RETURN_IF_ERROR(env->RecursivelyCreateDir(options.directory));
  checkpoint::RemoveUpdateTemporaries(env, options.directory);
  ASSIGN_OR_RETURN(auto listed, checkpoint::ListUpdates(env, options.directory));
  p->last_sequence_ = listed.empty() ? 0 : listed.back().first;
  return p;
}

absl::StatusOr<PublishResult> UpdatePublisher::Publish(int64_t step, bool full) {
  Env* env = options_.env;
  ResourceMgr* rm = session_->device()->resource_manager();
  ThreadPool* pool =
      options_.pool != nullptr ? options_.pool : session_->device()->intra_op_pool();
  PublishResult result;
  checkpoint::UpdateMeta& meta = result.meta;
  meta.sequence = std::max(last_sequence_, state_->Get().sequence) + 1;
  meta.step = step;
  meta.full = full || !last_step_.has_value();
  meta.since_step = meta.full ? -1 : *last_step_;
  meta.time_micros = static_cast<int64_t>(env->NowUnixMicros());
  result.prefix = checkpoint::UpdatePrefix(options_.directory, meta.sequence);

  checkpoint::BundleWriterOptions wo;
  wo.direct_io = false;  // small, and read back by servers at once
  ASSIGN_OR_RETURN(auto writer, checkpoint::BundleWriter::Create(env, result.prefix, wo));
  std::vector<std::shared_ptr<embedding::EmbeddingTableResource>> tables;
  for (size_t i = 0; i < table_keys_.size(); ++i) {
    ASSIGN_OR_RETURN(auto res, embedding::EmbeddingTableResource::Lookup(
                                   *rm, table_locations_[i].first, table_locations_[i].second));
    embedding::TableBundleOptions to;
    to.rows_per_chunk = options_.rows_per_chunk;
    to.pool = pool;
    to.save_slots = false;
    RETURN_IF_ERROR(errors::Annotate(
        embedding::SaveTable(res->table(), writer.get(), table_keys_[i], meta.since_step, to),
        absl::StrCat("publishing table '", table_keys_[i], "'")));
    meta.tables.push_back(table_keys_[i]);
    tables.push_back(std::move(res));
  }
  std::vector<uint64_t> fingerprints(vars_.size());
  std::vector<bool> written(vars_.size(), false);
  for (size_t i = 0; i < vars_.size(); ++i) {
    DenseVar& v = vars_[i];
    auto var = rm->Lookup<Var>(v.container, v.name);
    if (!var.ok()) {
      return errors::FailedPrecondition("cannot publish variable '", v.key,
                                        "': it does not exist (the graph has not run)");
    }
    ASSIGN_OR_RETURN(Tensor value, (*var)->Read());
    fingerprints[i] = checkpoint::ContentFingerprint(value);
    if (!meta.full && v.fingerprint == fingerprints[i]) continue;
    RETURN_IF_ERROR(writer->Add(v.key, value));
    result.bytes += static_cast<int64_t>(value.TotalBytes());
    meta.variables.push_back(v.key);
    written[i] = true;
  }
  // The step times this update covers (steps after since_step, up to step).
  const std::vector<int64_t> times = step_times_.Between(meta.since_step, step);
  if (!times.empty()) {
    const int64_t n = static_cast<int64_t>(times.size() / 2);
    RETURN_IF_ERROR(writer->Add(checkpoint::kUpdateStepTimesKey,
                                Tensor::FromVector<int64_t>(times, {n, 2})));
  }
  RETURN_IF_ERROR(writer->Add(checkpoint::kUpdateMetaKey,
                              Tensor::Scalar<std::string>(checkpoint::FormatUpdateMeta(meta))));
  RETURN_IF_ERROR(writer->Finish());

  // Published: remember what it holds.
  last_sequence_ = meta.sequence;
  last_step_ = step;
  state_->Set({meta.sequence, step});
  for (size_t i = 0; i < vars_.size(); ++i) {
    if (written[i]) vars_[i].fingerprint = fingerprints[i];
  }
  for (auto& res : tables) res->table()->KeepDeletionsAfter(step);
  step_times_.DropThrough(step);
  // Sizes for the caller (the keys are small: read them back from the index).
  auto reader = checkpoint::BundleReader::Open(env, result.prefix);
  if (reader.ok()) {
    for (const std::string& key : meta.tables) {
      auto keys = (*reader)->GetInfo(absl::StrCat(key, "/keys"));
      if (keys.ok()) result.rows += keys->shape.num_elements();
      auto deleted = (*reader)->GetInfo(absl::StrCat(key, "/deleted_ids"));
      if (deleted.ok()) result.deleted_ids += deleted->shape.num_elements();
      auto values = (*reader)->GetInfo(absl::StrCat(key, "/values"));
      if (values.ok()) result.bytes += values->shape.num_elements() * 4;
    }
  }
  return result;
}

UpdatePublishHook::UpdatePublishHook(UpdatePublisherOptions options, double every_secs,
                                     std::shared_ptr<PublishedUpdates> state)
    : directory_(options.directory), env_(options.env), every_secs_(every_secs) {
  factory_ = [options = std::move(options), state = std::move(state)](
                 Session* session) -> absl::StatusOr<std::unique_ptr<UpdateWriter>> {
    ASSIGN_OR_RETURN(auto p, UpdatePublisher::Create(session, options, state));
    return std::unique_ptr<UpdateWriter>(std::move(p));
  };
}

UpdatePublishHook::UpdatePublishHook(UpdateWriterFactory factory, std::string directory,
                                     double every_secs, Env* env)
    : factory_(std::move(factory)),
      directory_(std::move(directory)),
      env_(env),
      every_secs_(every_secs) {}

absl::Status UpdatePublishHook::AfterCreateSession(Session* session, int64_t global_step) {
  ASSIGN_OR_RETURN(publisher_, factory_(session));
  // The first update (full) goes out at once: servers that follow the log
  // get the restored model before any step changes it.
  return PublishNow(std::max<int64_t>(global_step, 0), /*periodic=*/true);
}

absl::Status UpdatePublishHook::AfterRun(SessionRunContext* context, const RunValues&) {
  if (publisher_ == nullptr) return absl::OkStatus();
  const uint64_t now = env_->NowMicros();
  publisher_->NoteStepTime(context->global_step(), static_cast<int64_t>(env_->NowUnixMicros()));
  if (static_cast<double>(now - last_micros_) < every_secs_ * 1e6) return absl::OkStatus();
  return PublishNow(context->global_step(), /*periodic=*/true);
}

absl::Status UpdatePublishHook::End(Session*, int64_t global_step) {
  if (publisher_ == nullptr || global_step == last_step_) return absl::OkStatus();
  return PublishNow(global_step, /*periodic=*/false);
}

absl::Status UpdatePublishHook::PublishNow(int64_t step, bool periodic) {
  last_micros_ = env_->NowMicros();
  // A server stuck on the log asked for a full update (resync).
  const std::optional<std::string> request =
      checkpoint::PendingFullUpdateRequest(env_, directory_);
  auto published = publisher_->Publish(step, request.has_value());
  if (!published.ok()) {
    absl::Status error = errors::Annotate(
        published.status(), absl::StrCat("publishing the model update at step ", step, " into ",
                                          directory_));
    if (periodic && on_failed_publish) {
      on_failed_publish(step, error);
      return absl::OkStatus();
    }
    return error;
  }
  last_step_ = step;
  if (request.has_value()) {
    checkpoint::ClearFullUpdateRequest(env_, directory_);
    LOG(INFO) << "model update " << published->meta.sequence
              << " is full: a server asked for one (" << *request << ")";
  }
  if (on_published) on_published(*published);
  return absl::OkStatus();
}

void UpdatePublishHook::ReportTo(std::FILE* log) {
  auto first = std::make_shared<bool>(true);
  on_published = [log, first](const PublishResult& r) {
    // The first, and every full one after it (a ps that restored an older
    // state makes a cluster publish everything again).
    if (!*first && !r.meta.full) return;
    *first = false;
    std::fprintf(log, "published model update %lld (%s, step %lld, %lld rows) to %s\n",
                 static_cast<long long>(r.meta.sequence), r.meta.full ? "full" : "delta",
                 static_cast<long long>(r.meta.step), static_cast<long long>(r.rows),
                 r.prefix.c_str());
  };
  on_failed_publish = [log](int64_t, const absl::Status& error) {
    std::fprintf(log, "\nwarning: %s (training goes on; the next period retries)\n",
                 std::string(error.message()).c_str());
  };
}

std::unique_ptr<UpdatePublishHook> MakeUpdatePublishHook(const std::string& model_dir,
                                                         double every_secs,
                                                         std::shared_ptr<PublishedUpdates> state,
                                                         std::FILE* log) {
  UpdatePublisherOptions options;
  options.directory = JoinPath(model_dir, checkpoint::kUpdatesDirName);
  auto hook = std::make_unique<UpdatePublishHook>(options, every_secs, std::move(state));
  if (log != nullptr) hook->ReportTo(log);
  return hook;
}

}  // namespace recflow::train
