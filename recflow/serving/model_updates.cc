#include "recflow/serving/model_updates.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/status.h"
#include "recflow/embedding/graph_tables.h"
#include "recflow/embedding/table_bundle.h"
#include "recflow/framework/resource_mgr.h"

namespace recflow::serving {
namespace {

// One table's rows in an update, read and checked: one part, or one per ps
// task when a cluster published it (embedding/table_bundle.h's
// partitioned layout, K/part_<p>/...).
struct TablePart {
  embedding::TableChunk rows;
  Tensor deleted_ids;  // int64 [m]; unset for a full update
};
struct TableUpdate {
  size_t table = 0;  // index into tables_
  std::vector<TablePart> parts;
};

struct VariableUpdate {
  std::shared_ptr<Var> var;
  Tensor value;
};

// Calls fn(id, version) for every row of `table` (storage order, no values).
absl::Status ForEachRow(embedding::HashEmbeddingTable* table,
                        const std::function<void(int64_t id, int64_t version)>& fn) {
  embedding::ExportOptions eo;
  eo.include_values = false;
  eo.include_slots = false;
  eo.order = embedding::ExportOptions::Order::kStorage;
  return table
      ->Export(eo,
               [&](const embedding::TableChunk& c) {
                 const auto keys = c.keys.flat<int64_t>();
                 const auto versions = c.versions.flat<int64_t>();
                 for (int64_t i = 0; i < keys.size(); ++i) fn(keys[i], versions[i]);
                 return absl::OkStatus();
               })
      .status();
}

}  // namespace

absl::StatusOr<int64_t> TrimTableToRows(embedding::HashEmbeddingTable* table, int64_t max_rows) {
  const int64_t excess = table->size() - max_rows;
  if (excess <= 0) return 0;
  std::vector<std::pair<int64_t, int64_t>> rows;  // {version, id}
  rows.reserve(static_cast<size_t>(table->size()));
  RETURN_IF_ERROR(
      ForEachRow(table, [&](int64_t id, int64_t version) { rows.emplace_back(version, id); }));
  if (static_cast<int64_t>(rows.size()) <= max_rows) return 0;
  const size_t cut = rows.size() - static_cast<size_t>(max_rows) - 1;
  std::nth_element(rows.begin(), rows.begin() + cut, rows.end());
  const int64_t boundary = rows[cut].first;
  std::vector<int64_t> ids;
  for (const auto& [version, id] : rows) {
    if (version <= boundary) ids.push_back(id);
  }
  return table->Remove(ids);
}

namespace {

absl::StatusOr<Tensor> ReadTensor(const checkpoint::BundleReader& reader, const std::string& key,
                                  DataType dtype) {
  if (!reader.Contains(key)) {
    return errors::DataLoss("model update ", reader.prefix(), " lists '", key.substr(0, key.rfind('/')),
                            "' but has no tensor '", key, "'");
  }
  ASSIGN_OR_RETURN(Tensor t, reader.Lookup(key));
  if (t.dtype() != dtype) {
    return errors::DataLoss("model update ", reader.prefix(), ": '", key, "' is ",
                            DataTypeString(t.dtype()), ", not ", DataTypeString(dtype));
  }
  return t;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelUpdater>> ModelUpdater::Create(
    const SavedModelBundle& bundle, const ModelUpdaterOptions& options) {
  std::unique_ptr<ModelUpdater> u(new ModelUpdater());
  u->options_ = options;
  u->export_dir_ = bundle.export_dir;
  Session* session = bundle.session.get();
  ResourceMgr* rm = session->device()->resource_manager();
  const Graph& graph = *session->graph();
  ASSIGN_OR_RETURN(std::vector<embedding::GraphTable> tables,
                   embedding::CreateGraphTables(graph, rm));
  for (embedding::GraphTable& t : tables) {
    u->tables_.push_back({t.where.node, std::move(t.resource)});
  }
  for (const auto& node : graph.nodes()) {
    const std::string& op = node->op();
    if (op != "VariableV2" && op != "VarHandleOp" && op != "Variable") continue;
    ResourceLocation where = NodeResourceLocation(node->def(), rm->default_container());
    auto var = rm->Lookup<Var>(where.container, where.name);
    // A variable that was never restored or initialized cannot be served
    // anyway; updates for it are skipped.
    if (!var.ok()) continue;
    u->variables_.push_back({node->name(), std::move(*var)});
  }
  std::sort(u->variables_.begin(), u->variables_.end(),
            [](const Variable& a, const Variable& b) { return a.key < b.key; });
  const std::string base_path = JoinPath(bundle.export_dir, checkpoint::kSavedModelAssetsExtraDirectory,
                                         checkpoint::kUpdateBaseFile);
  if (options.env->FileExists(base_path)) {
    std::string text;
    RETURN_IF_ERROR(ReadFileToString(options.env, base_path, &text));
    ASSIGN_OR_RETURN(checkpoint::UpdateBase base, checkpoint::ParseUpdateBase(text, base_path));
    MutexLock lock(&u->apply_mu_);
    u->applied_ = base.sequence;
    MutexLock status_lock(&u->status_mu_);
    u->status_.export_base = base.sequence;
    u->status_.applied = base.sequence;
  }
  return u;
}

int64_t ModelUpdater::applied_sequence() const {
  MutexLock lock(&apply_mu_);
  return applied_;
}

std::optional<AppliedUpdate> ModelUpdater::last_applied() const {
  MutexLock lock(&apply_mu_);
  return last_;
}

absl::StatusOr<std::optional<AppliedUpdate>> ModelUpdater::Apply(const std::string& prefix) {
  MutexLock lock(&apply_mu_);
  return ApplyLocked(prefix);
}

absl::StatusOr<std::optional<AppliedUpdate>> ModelUpdater::ApplyLocked(const std::string& prefix) {
  Env* env = options_.env;
  checkpoint::BundleReaderOptions ro;
  ro.direct_io = false;
  ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(env, prefix, ro));
  AppliedUpdate done;
  ASSIGN_OR_RETURN(done.meta, checkpoint::ReadUpdateMeta(*reader));
  const checkpoint::UpdateMeta& meta = done.meta;
  if (meta.sequence <= applied_) return std::nullopt;
  if (meta.sequence != applied_ + 1 && !meta.full) {
    return errors::FailedPrecondition("model update ", meta.sequence, " (", prefix,
                                      ") cannot be applied: the served model has applied "
                                      "updates up to ",
                                      applied_, ", so update ", applied_ + 1,
                                      " must come first (a gap loses changes)");
  }

  // 1. Read and check everything.
  std::vector<TableUpdate> table_updates;
  for (const std::string& key : meta.tables) {
    auto it = std::find_if(tables_.begin(), tables_.end(),
                           [&](const Table& t) { return t.key == key; });
    if (it == tables_.end()) {
      return errors::InvalidArgument("model update ", prefix, " holds table '", key,
                                     "', which the served model (", export_dir_,
                                     ") does not have");
    }
    embedding::HashEmbeddingTable* table = it->resource->table();
    TableUpdate u;
    u.table = static_cast<size_t>(it - tables_.begin());
    // Where its parts are: K/ (one) or K/part_0/, K/part_1/, ...
    std::vector<std::string> heads;
    if (reader->Contains(key + "/keys")) {
      heads.push_back(key);
    } else {
      for (int64_t p = 0; reader->Contains(embedding::TablePartKey(key, p) + "/keys"); ++p) {
        heads.push_back(embedding::TablePartKey(key, p));
      }
    }
    if (heads.empty()) {
      return errors::DataLoss("model update ", prefix, " lists table '", key, "' but has no '",
                              key, "/keys' (nor '", embedding::TablePartKey(key, 0), "/keys')");
    }
    for (const std::string& head : heads) {
      TablePart part;
      ASSIGN_OR_RETURN(part.rows.keys, ReadTensor(*reader, head + "/keys", DT_INT64));
      ASSIGN_OR_RETURN(part.rows.values, ReadTensor(*reader, head + "/values", DT_FLOAT));
      const int64_t n = part.rows.keys.NumElements();
      if (part.rows.keys.dims() != 1 || part.rows.values.dims() != 2 ||
          part.rows.values.dim_size(0) != n || part.rows.values.dim_size(1) != table->dim()) {
        return errors::InvalidArgument(
            "model update ", prefix, ": table '", head, "' has keys ",
            part.rows.keys.shape().DebugString(), " and values ",
            part.rows.values.shape().DebugString(), "; the served table needs [n] and [n, ",
            table->dim(), "]");
      }
      if (reader->Contains(head + "/versions")) {
        ASSIGN_OR_RETURN(part.rows.versions, ReadTensor(*reader, head + "/versions", DT_INT64));
        if (part.rows.versions.NumElements() != n) {
          return errors::DataLoss("model update ", prefix, ": table '", head, "' has ", n,
                                  " keys but ", part.rows.versions.NumElements(), " versions");
        }
      }
      if (!meta.full) {
        ASSIGN_OR_RETURN(part.deleted_ids, ReadTensor(*reader, head + "/deleted_ids", DT_INT64));
      }
      u.parts.push_back(std::move(part));
    }
    table_updates.push_back(std::move(u));
  }
  // When each step the update covers ended (freshness; optional).
  std::map<int64_t, int64_t> step_end;
  if (!meta.full && reader->Contains(checkpoint::kUpdateStepTimesKey)) {
    ASSIGN_OR_RETURN(Tensor times, ReadTensor(*reader, checkpoint::kUpdateStepTimesKey, DT_INT64));
    if (times.dims() != 2 || times.dim_size(1) != 2) {
      return errors::DataLoss("model update ", prefix, ": ", checkpoint::kUpdateStepTimesKey,
                              " is ", times.shape().DebugString(), ", not [n, 2]");
    }
    const auto t = times.flat<int64_t>();
    for (int64_t i = 0; i + 1 < t.size(); i += 2) step_end[t[i]] = t[i + 1];
  }
  std::vector<VariableUpdate> var_updates;
  for (const std::string& key : meta.variables) {
    auto it = std::lower_bound(variables_.begin(), variables_.end(), key,
                               [](const Variable& v, const std::string& k) { return v.key < k; });
    if (it == variables_.end() || it->key != key) {
      ++done.skipped_variables;
      continue;
    }
    // Whole, or in row ranges from a cluster's ps tasks (KEY/part_<p>).
    auto read = checkpoint::ReadTensorOrParts(*reader, key);
    if (absl::IsNotFound(read.status())) {
      return errors::DataLoss("model update ", prefix, " lists variable '", key,
                              "' but has no tensor of that name (nor its parts)");
    }
    ASSIGN_OR_RETURN(Tensor value, std::move(read));
    ASSIGN_OR_RETURN(Tensor current, it->var->Read());
    if (value.dtype() != current.dtype() || value.shape() != current.shape()) {
      return errors::InvalidArgument("model update ", prefix, ": variable '", key, "' is ",
                                     DataTypeString(value.dtype()), " ",
                                     value.shape().DebugString(), ", the served one ",
                                     DataTypeString(current.dtype()), " ",
                                     current.shape().DebugString());
    }
    var_updates.push_back({it->var, std::move(value)});
  }

  // 2. Tables, row by row (each under its shard's lock).
  for (TableUpdate& u : table_updates) {
    embedding::HashEmbeddingTable* table = tables_[u.table].resource->table();
    for (TablePart& part : u.parts) {
      if (!meta.full && part.deleted_ids.NumElements() > 0) {
        const auto ids = part.deleted_ids.flat<int64_t>();
        done.removed += table->Remove(absl::MakeConstSpan(ids.data(), ids.size()));
      }
      // Checked above: Import fails only on a shape it refuses, or when
      // memory runs out (rows written before stay; the next update retries).
      RETURN_IF_ERROR(errors::Annotate(
          table->Import(part.rows),
          absl::StrCat("applying model update ", prefix, " to table '", tables_[u.table].key,
                       "'")));
      done.rows += part.rows.keys.NumElements();
    }
    if (meta.full) {
      // Drop the rows the update does not hold (in any part).
      absl::flat_hash_set<int64_t> keep;
      for (const TablePart& part : u.parts) {
        const auto keys = part.rows.keys.flat<int64_t>();
        keep.insert(keys.begin(), keys.end());
      }
      std::vector<int64_t> extra;
      RETURN_IF_ERROR(ForEachRow(table, [&](int64_t id, int64_t) {
        if (!keep.contains(id)) extra.push_back(id);
      }));
      done.removed += table->Remove(extra);
    }
  }

  // The memory budget: the least recently trained rows go.
  if (options_.max_rows_per_table > 0) {
    for (const TableUpdate& u : table_updates) {
      ASSIGN_OR_RETURN(int64_t n, TrimTableToRows(tables_[u.table].resource->table(),
                                            options_.max_rows_per_table));
      done.evicted += n;
    }
  }

  // 3. Dense variables, all at once: between requests when the server has
  // a moment with none running (requests do not queue behind the swap),
  // else after 100 ms in turn.
  {
    embedding::PoliteWriterLock hold(&state_mu_, std::chrono::milliseconds(100));
    for (VariableUpdate& v : var_updates) {
      absl::Status s = v.var->Assign(v.value, /*validate_shape=*/true);
      // Checked above (dtype and shape); an assign cannot fail now.
      if (!s.ok()) {
        return errors::Internal("applying model update ", prefix, " to variable '",
                                v.var->name(), "' after checking it: ", s.message());
      }
    }
  }
  done.variables = static_cast<int64_t>(var_updates.size());
  done.applied_micros = env->NowUnixMicros();
  if (!step_end.empty()) {
    std::map<int64_t, int64_t> rows_by_step;
    for (const TableUpdate& u : table_updates) {
      for (const TablePart& part : u.parts) {
        if (part.rows.versions.NumElements() == 0) continue;
        for (int64_t v : part.rows.versions.flat<int64_t>()) {
          if (step_end.contains(v)) ++rows_by_step[v];
        }
      }
    }
    for (const auto& [step, rows] : rows_by_step) {
      const double seconds = (static_cast<double>(done.applied_micros) -
                              static_cast<double>(step_end[step])) * 1e-6;
      done.freshness.emplace_back(seconds, rows);
    }
  }
  applied_ = meta.sequence;
  last_ = done;
  {
    MutexLock lock(&status_mu_);
    status_.applied = meta.sequence;
    status_.step = meta.step;
    status_.lag_seconds = (static_cast<double>(done.applied_micros) -
                           static_cast<double>(meta.time_micros)) * 1e-6;
    status_.behind = std::max<int64_t>(0, status_.behind - 1);
  }
  return std::optional<AppliedUpdate>(std::move(done));
}

ModelUpdateStatus ModelUpdater::status() const {
  MutexLock lock(&status_mu_);
  return status_;
}

void ModelUpdater::SetLogState(int64_t newest, const absl::Status& error) {
  MutexLock lock(&status_mu_);
  status_.behind = std::max<int64_t>(0, newest - status_.applied);
  status_.error = error.ok() ? "" : std::string(error.message());
}

CatchUpResult ModelUpdater::CatchUp(const std::string& dir) {
  CatchUpResult result = ApplyPending(dir);
  SetLogState(result.newest, result.error);
  return result;
}

CatchUpResult ModelUpdater::ApplyPending(const std::string& dir) {
  CatchUpResult result;
  auto listed = checkpoint::ListUpdates(options_.env, dir);
  if (!listed.ok()) {
    result.error = errors::Annotate(listed.status(), absl::StrCat("listing model updates in ", dir));
    return result;
  }
  if (listed->empty()) return result;
  result.newest = listed->back().first;
  MutexLock lock(&apply_mu_);
  if (result.newest <= applied_) return result;
  // Start from the newest full update past the applied sequence, if any:
  // it replaces everything before it.
  size_t start = 0;
  while (start < listed->size() && (*listed)[start].first <= applied_) ++start;
  for (size_t i = listed->size(); i-- > start;) {
    const std::string& prefix = (*listed)[i].second;
    auto reader = checkpoint::BundleReader::Open(options_.env, prefix);
    if (!reader.ok()) continue;
    auto meta = checkpoint::ReadUpdateMeta(**reader);
    if (meta.ok() && meta->full) {
      start = i;
      break;
    }
  }
  for (size_t i = start; i < listed->size(); ++i) {
    const auto& [sequence, prefix] = (*listed)[i];
    if (sequence != applied_ + 1 && i != start) {
      result.error = errors::FailedPrecondition("model update ", applied_ + 1,
                                                " is missing from ", dir, " (next there: ",
                                                sequence, ")");
      return result;
    }
    auto applied = ApplyLocked(prefix);
    if (!applied.ok()) {
      result.error = applied.status();
      return result;
    }
    if (applied->has_value()) {
      ++result.applied;
      result.evicted += (*applied)->evicted;
      const auto& f = (*applied)->freshness;
      result.freshness.insert(result.freshness.end(), f.begin(), f.end());
      result.last = std::move(**applied);
    }
  }
  return result;
}

}  // namespace recflow::serving
