#include "recflow/distributed/worker.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/distributed/task_threads.h"
#include "recflow/distributed/wire.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/framework/resource_var.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/train/monitored_session.h"

namespace recflow::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

bool NotInitialized(const absl::Status& s) {
  return absl::IsFailedPrecondition(s) && absl::StrContains(s.message(), "not initialized");
}

bool Retriable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || NotInitialized(s) ||
         absl::IsAborted(s) || absl::IsCancelled(s);
}

// Runs fn(ps) for every ps on its own thread (RunOnThreads); the first
// error wins.
absl::Status ForEachPs(int num_ps, const std::function<absl::Status(int)>& fn) {
  for (absl::Status& s : RunOnThreads("rf_ps_call", num_ps, fn)) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

std::string CanonicalEndpoint(const std::string& name) {
  return name.find(':') == std::string::npos ? name + ":0" : name;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(Session* session, PsClient* client,
                                                      WorkerOptions options) {
  std::unique_ptr<Worker> w(new Worker(session, client, std::move(options)));
  // Push sequence numbers start at the wall clock's microseconds, so a
  // restarted worker's pushes follow its previous life's and are not taken
  // for retries of them.
  w->seq_ = absl::ToUnixMicros(absl::Now());
  ASSIGN_OR_RETURN(w->plan_,
                   PlanTraining(*session->graph(),
                                {.num_ps = client->num_ps(),
                                 .devices = w->options_.devices,
                                 .partition_bytes = w->options_.partition_bytes}));
  for (const ApplyPlacement& a : w->plan_.applies) {
    w->grad_fetches_.push_back(a.grad);
    if (!a.indices.empty()) w->grad_fetches_.push_back(a.indices);
  }
  for (const VariablePlacement& v : w->plan_.variables) {
    if (v.primary && v.bytes > 0) w->dense_params_ += v.bytes / 4;  // each once, partitioned too
  }
  std::sort(w->grad_fetches_.begin(), w->grad_fetches_.end());
  w->grad_fetches_.erase(std::unique(w->grad_fetches_.begin(), w->grad_fetches_.end()),
                         w->grad_fetches_.end());
  RETURN_IF_ERROR(train::CreateHashTables(session));
  return w;
}

absl::Status Worker::Retry(const std::string& what, int ps,
                           const std::function<absl::Status()>& call) {
  const auto start = Clock::now();
  auto last_log = start;
  absl::Duration backoff = absl::Milliseconds(500);
  for (int attempt = 0;; ++attempt) {
    absl::Status s = call();
    if (s.ok() || !Retriable(s)) {
      if (s.ok() && attempt > 0) {
        LOG(INFO) << what << ": ps task " << ps << " answers again after "
                  << static_cast<int>(Seconds(start)) << " s";
      }
      return s;
    }
    if (NotInitialized(s) && options_.is_chief) {
      absl::StatusOr<std::string> latest =
          options_.latest_checkpoint ? options_.latest_checkpoint() : std::string();
      InitRequest req = MakeInit(latest.ok() ? *latest : std::string());
      InitResponse resp;
      // Never a fresh ps beside a trained cluster because the checkpoint
      // directory could not be read.
      absl::Status init = latest.ok() ? client_->Init(ps, req, &resp) : latest.status();
      LOG(INFO) << "ps task " << ps << " restarted: "
                << (init.ok() ? (resp.initialized_now()
                                     ? "initialized it " + (req.checkpoint_prefix().empty()
                                                                ? std::string("(no checkpoint yet)")
                                                                : "from " + req.checkpoint_prefix())
                                     : std::string("it was initialized meanwhile"))
                              : "initializing it failed: " + std::string(init.message()));
      if (init.ok()) continue;
    }
    if (Seconds(start) > absl::ToDoubleSeconds(options_.retry_for)) {
      return errors::Annotate(s, absl::StrCat(what, ": gave up after ",
                                              static_cast<int>(Seconds(start)), " s of retries"));
    }
    if (Seconds(last_log) >= 10 || attempt == 0) {
      LOG(WARNING) << what << ": " << s.message() << "; retrying ("
                   << static_cast<int>(Seconds(start)) << " s so far)";
      last_log = Clock::now();
    }
    retries_.fetch_add(1);
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

absl::Status Worker::StartCluster(const std::string& restore_prefix) {
  const auto start = Clock::now();
  return ForEachPs(client_->num_ps(), [&](int ps) -> absl::Status {
    auto last_log = start;
    for (;;) {
      StatusResponse st;
      absl::Status s = client_->GetStatus(ps, &st);
      if (s.ok()) {
        if (st.has_graph() && st.graph_fingerprint() != plan_.graph_fingerprint) {
          return errors::FailedPrecondition(
              "ps task ", ps, " (", client_->address(ps),
              ") runs a different training graph: every task must run the same run config "
              "(or Python model code) and recflow version");
        }
        if (!st.has_graph() && options_.ps_graph.empty()) {
          return errors::FailedPrecondition("ps task ", ps, " (", client_->address(ps),
                                            ") has no training graph and this chief has none "
                                            "to send");
        }
        InitRequest req = MakeInit(restore_prefix);
        InitResponse resp;
        RETURN_IF_ERROR(client_->Init(ps, req, &resp));
        LOG(INFO) << "ps task " << ps << ": "
                  << (resp.initialized_now()
                          ? (restore_prefix.empty() ? std::string("initialized")
                                                    : "restored from " + restore_prefix)
                          : std::string("already initialized (a live cluster)"))
                  << ", global step " << resp.global_step();
        return absl::OkStatus();
      }
      if (!absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s)) return s;
      if (Seconds(start) > absl::ToDoubleSeconds(options_.init_wait)) {
        return errors::DeadlineExceeded("ps task ", ps, " (", client_->address(ps),
                                        ") did not answer within ",
                                        absl::FormatDuration(options_.init_wait), ": ",
                                        s.message());
      }
      if (Seconds(last_log) >= 10) {
        LOG(INFO) << "waiting for ps task " << ps << " (" << client_->address(ps) << ") to start ("
                  << static_cast<int>(Seconds(start)) << " s)";
        last_log = Clock::now();
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  });
}

InitRequest Worker::MakeInit(const std::string& checkpoint_prefix) const {
  InitRequest req;
  req.set_only_if_uninitialized(true);
  req.set_checkpoint_prefix(checkpoint_prefix);
  req.set_graph_fingerprint(plan_.graph_fingerprint);
  if (!options_.ps_graph.empty()) {
    req.set_graph_def(options_.ps_graph);
    req.set_partition_bytes(options_.partition_bytes);
    req.set_init_node(options_.ps_init_node);
  }
  return req;
}

absl::Status Worker::WaitForCluster() {
  const auto start = Clock::now();
  absl::Status s = WaitForClusterImpl(start);
  if (s.ok()) {
    LOG(INFO) << "every ps task is initialized (waited " << Seconds(start) << " s)";
  }
  return s;
}

absl::Status Worker::WaitForClusterImpl(std::chrono::steady_clock::time_point start) {
  return ForEachPs(client_->num_ps(), [&](int ps) -> absl::Status {
    auto last_log = start;
    for (;;) {
      StatusResponse st;
      absl::Status s = client_->GetStatus(ps, &st);
      if (s.ok() && st.has_graph() && st.graph_fingerprint() != plan_.graph_fingerprint) {
        return errors::FailedPrecondition(
            "ps task ", ps, " (", client_->address(ps),
            ") runs a different training graph: every task must run the same run config "
            "(or Python model code) and recflow version");
      }
      if (s.ok() && st.finished()) {
        return errors::OutOfRange("ps task ", ps, " reports the job finished");
      }
      if (s.ok() && st.initialized()) return absl::OkStatus();
      if (!s.ok() && !absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s)) return s;
      if (Seconds(start) > absl::ToDoubleSeconds(options_.init_wait)) {
        return errors::DeadlineExceeded(
            "ps task ", ps, " (", client_->address(ps), ") was not initialized within ",
            absl::FormatDuration(options_.init_wait), " (is the chief running?)",
            s.ok() ? "" : absl::StrCat(": ", s.message()));
      }
      if (Seconds(last_log) >= 10) {
        LOG(INFO) << "waiting for the chief to initialize ps task " << ps << " ("
                  << static_cast<int>(Seconds(start)) << " s)";
        last_log = Clock::now();
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  });
}

absl::Status Worker::EnsureInitialized() {
  return ForEachPs(client_->num_ps(), [&](int ps) -> absl::Status {
    return Retry("status", ps, [&]() -> absl::Status {
      StatusResponse st;
      RETURN_IF_ERROR(client_->GetStatus(ps, &st));
      if (st.initialized()) return absl::OkStatus();
      return errors::FailedPrecondition("ps task ", ps, " is not initialized");
    });
  });
}

absl::StatusOr<std::vector<std::vector<std::vector<int64_t>>>> Worker::StepIds(
    const std::vector<std::pair<std::string, Tensor>>& feeds) {
  std::map<std::string, const Tensor*> fed;
  for (const auto& [name, t] : feeds) fed[CanonicalEndpoint(name)] = &t;
  std::vector<std::string> computed;
  for (const TablePlacement& t : plan_.tables) {
    for (const std::string& e : t.ids_endpoints) {
      if (fed.count(e) == 0) computed.push_back(e);
    }
  }
  std::vector<Tensor> values;
  if (!computed.empty()) RETURN_IF_ERROR(session_->Run(feeds, computed, {}, &values));
  std::map<std::string, const Tensor*> all = fed;
  for (size_t i = 0; i < computed.size(); ++i) all[computed[i]] = &values[i];

  const int num_ps = client_->num_ps();
  std::vector<std::vector<std::vector<int64_t>>> out(
      num_ps, std::vector<std::vector<int64_t>>(plan_.tables.size()));
  for (size_t ti = 0; ti < plan_.tables.size(); ++ti) {
    std::vector<int64_t> ids;
    for (const std::string& e : plan_.tables[ti].ids_endpoints) {
      const Tensor* t = all.at(e);
      if (t->dtype() != DT_INT64) {
        return errors::InvalidArgument("the ids '", e, "' of table '", plan_.tables[ti].node,
                                       "' are ", DataTypeString(t->dtype()), ", not int64");
      }
      ids.insert(ids.end(), t->data<int64_t>(), t->data<int64_t>() + t->NumElements());
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (int64_t id : ids) out[PsShardOf(id, num_ps)][ti].push_back(id);
  }
  return out;
}

absl::Status Worker::PullAll(const std::vector<std::vector<std::vector<int64_t>>>& ids_per_ps,
                             bool training, std::vector<PullResponse>* responses) {
  const int num_ps = client_->num_ps();
  responses->assign(num_ps, PullResponse());
  return ForEachPs(num_ps, [&](int ps) -> absl::Status {
    PullRequest req;
    req.set_worker(options_.worker_index);
    req.set_training(training);
    req.set_include_dense(true);
    req.set_graph_fingerprint(plan_.graph_fingerprint);
    for (size_t ti = 0; ti < plan_.tables.size(); ++ti) {
      TableIds* t = req.add_tables();
      t->set_table(plan_.tables[ti].node);
      t->set_ids(IdsToBytes(ids_per_ps[ps][ti]));
    }
    return Retry("pull", ps, [&] {
      (*responses)[ps].Clear();
      return client_->Pull(ps, req, &(*responses)[ps], options_.rpc_timeout);
    });
  });
}

absl::Status Worker::WriteLocal(const std::vector<std::vector<std::vector<int64_t>>>& ids_per_ps,
                                const std::vector<PullResponse>& responses) {
  ResourceMgr* rm = session_->device()->resource_manager();
  // Partitioned variables: one part from each ps, stacked.
  std::map<std::string, std::vector<Tensor>> parts;
  std::vector<std::pair<const VariablePlacement*, Tensor>> values;
  for (size_t ps = 0; ps < responses.size(); ++ps) {
    for (const TensorBytes& d : responses[ps].dense()) {
      const VariablePlacement* v = plan_.FindVariable(d.name());
      if (v == nullptr) {
        return errors::InvalidArgument("pull: ps task ", ps, " sent variable '", d.name(),
                                       "', which the graph does not have");
      }
      ASSIGN_OR_RETURN(Tensor value, FromWire(d));
      if (v->ps != kPartitioned) {
        values.emplace_back(v, std::move(value));
        continue;
      }
      std::vector<Tensor>& p = parts[v->node];
      p.resize(responses.size());
      p[ps] = std::move(value);
    }
  }
  for (auto& [node, p] : parts) {
    ASSIGN_OR_RETURN(Tensor whole, ConcatRows(p, "pull of partitioned variable '" + node + "'"));
    values.emplace_back(plan_.FindVariable(node), std::move(whole));
  }
  for (auto& entry : values) {
    const auto* v = entry.first;  // not a structured binding: clang 14 cannot capture one
    const Tensor& value = entry.second;
    const std::string container = v->container.empty() ? rm->default_container() : v->container;
    ASSIGN_OR_RETURN(auto var, rm->LookupOrCreate<Var>(
                                   container, v->shared_name,
                                   [&]() -> absl::StatusOr<std::shared_ptr<Var>> {
                                     return std::make_shared<Var>(v->dtype, v->shape, v->node);
                                   }));
    RETURN_IF_ERROR(var->Assign(value, /*validate_shape=*/true));
  }
  for (size_t ti = 0; ti < plan_.tables.size(); ++ti) {
    const TablePlacement& tp = plan_.tables[ti];
    const std::string container = tp.container.empty() ? rm->default_container() : tp.container;
    ASSIGN_OR_RETURN(auto res,
                     embedding::EmbeddingTableResource::Lookup(*rm, container, tp.shared_name));
    embedding::HashEmbeddingTable* table = res->table();
    const int64_t dim = table->dim();
    int64_t n = 0;
    for (size_t ps = 0; ps < responses.size(); ++ps) n += ids_per_ps[ps][ti].size();
    embedding::TableChunk chunk;
    chunk.keys = Tensor(DT_INT64, TensorShape({n}));
    chunk.values = Tensor(DT_FLOAT, TensorShape({n, dim}));
    int64_t at = 0;
    for (size_t ps = 0; ps < responses.size(); ++ps) {
      const std::vector<int64_t>& ids = ids_per_ps[ps][ti];
      if (static_cast<int>(ti) >= responses[ps].rows_size()) {
        return errors::InvalidArgument("pull from ps task ", ps, ": no rows for table '",
                                       tp.node, "'");
      }
      const TableRows& rows = responses[ps].rows(ti);
      const size_t want = ids.size() * dim * sizeof(float);
      if (rows.table() != tp.node || rows.values().size() != want) {
        return errors::InvalidArgument("pull from ps task ", ps, ": table '", tp.node, "' sent ",
                                       rows.values().size(), " bytes for ", ids.size(),
                                       " rows of ", dim, " floats");
      }
      if (!ids.empty()) {
        std::memcpy(chunk.keys.data<int64_t>() + at, ids.data(), ids.size() * sizeof(int64_t));
        std::memcpy(chunk.values.data<float>() + at * dim, rows.values().data(), want);
      }
      at += ids.size();
    }
    table->Clear();
    RETURN_IF_ERROR(table->Import(chunk));
  }
  if (!responses.empty()) global_step_ = responses[0].global_step();
  if (!responses.empty() && !plan_.global_step.empty()) {
    // The local copy of the global step follows ps 0's (what a fetch of
    // the global step reads on this worker).
    const VariablePlacement* v = plan_.FindVariable(plan_.global_step);
    if (v != nullptr && (v->dtype == DT_INT64 || v->dtype == DT_INT32)) {
      const std::string container = v->container.empty() ? rm->default_container() : v->container;
      ASSIGN_OR_RETURN(auto var, rm->LookupOrCreate<Var>(
                                     container, v->shared_name,
                                     [&]() -> absl::StatusOr<std::shared_ptr<Var>> {
                                       return std::make_shared<Var>(v->dtype, v->shape, v->node);
                                     }));
      Tensor step(v->dtype, TensorShape({}));
      if (v->dtype == DT_INT64) {
        step.data<int64_t>()[0] = global_step_;
      } else {
        step.data<int32_t>()[0] = static_cast<int32_t>(global_step_);
      }
      RETURN_IF_ERROR(var->Assign(step, /*validate_shape=*/false));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Worker::StepResult> Worker::TrainStep(const Feeds& feeds,
                                                     const std::vector<std::string>& extra,
                                                     std::vector<Tensor>* outputs,
                                                     const std::vector<std::string>& targets) {
  const int64_t sent0 = client_->bytes_sent(), received0 = client_->bytes_received();
  ASSIGN_OR_RETURN(auto ids, StepIds(feeds));
  std::vector<PullResponse> pulled;
  std::vector<std::string> fetches;
  if (!options_.loss.empty()) fetches.push_back(options_.loss);
  const size_t first_grad = fetches.size();
  fetches.insert(fetches.end(), grad_fetches_.begin(), grad_fetches_.end());
  const size_t first_extra = fetches.size();
  fetches.insert(fetches.end(), extra.begin(), extra.end());
  std::vector<Tensor> out;
  int64_t pulled_step = 0;
  for (int attempt = 0;; ++attempt) {
    RETURN_IF_ERROR(PullAll(ids, /*training=*/true, &pulled));
    RETURN_IF_ERROR(WriteLocal(ids, pulled));
    pulled_step = global_step_;
    RETURN_IF_ERROR(session_->Run(feeds, fetches, targets, &out));
    // Bounded staleness (async): when other workers pushed more than
    // max_staleness steps since this pull (this process waited for a core,
    // say), the gradients are recomputed on fresh parameters, up to twice.
    if (options_.sync || options_.max_staleness <= 0 || attempt >= 2) break;
    PullRequest probe;  // no tables, no dense: just the global step
    probe.set_worker(options_.worker_index);
    probe.set_graph_fingerprint(plan_.graph_fingerprint);
    PullResponse now;
    if (!client_->Pull(0, probe, &now, options_.rpc_timeout).ok() ||
        now.global_step() - pulled_step <= options_.max_staleness) {
      break;
    }
    ++stats_.recomputed;
  }
  std::map<std::string, const Tensor*> value;
  for (size_t i = first_grad; i < first_extra; ++i) value[fetches[i]] = &out[i];

  const int num_ps = client_->num_ps();
  const int64_t seq = ++seq_;
  std::vector<PushRequest> push(num_ps);
  for (int ps = 0; ps < num_ps; ++ps) {
    push[ps].set_worker(options_.worker_index);
    push[ps].set_seq(seq);
    push[ps].set_global_step(pulled_step);
    push[ps].set_graph_fingerprint(plan_.graph_fingerprint);
  }
  int64_t touched = dense_params_;  // parameters pulled (and gradients pushed)
  for (const ApplyPlacement& a : plan_.applies) {
    if (!a.table && a.ps != kPartitioned) {
      for (const std::string& e : {a.grad, a.indices}) {
        if (e.empty()) continue;
        TensorBytes* t = push[a.ps].add_dense_grads();
        t->set_name(e);
        ToWire(*value.at(e), t);
      }
      continue;
    }
    if (!a.table) {
      RETURN_IF_ERROR(SplitPartitioned(a, value, &push));
      continue;
    }
    const Tensor& ids = *value.at(a.indices);
    const Tensor& rows = *value.at(a.grad);
    const int64_t n = ids.NumElements();
    const int64_t dim = n == 0 ? 0 : rows.NumElements() / n;
    touched += n * dim;
    std::vector<SparseGrad*> by_ps(num_ps, nullptr);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = ids.data<int64_t>()[i];
      const int ps = PsShardOf(id, num_ps);
      SparseGrad*& g = by_ps[ps];
      if (g == nullptr) {
        g = push[ps].add_sparse_grads();
        g->set_apply_node(a.node);
        g->set_dim(dim);
      }
      g->mutable_ids()->append(reinterpret_cast<const char*>(&id), sizeof(id));
      g->mutable_values()->append(reinterpret_cast<const char*>(rows.data<float>() + i * dim),
                                  dim * sizeof(float));
    }
  }
  std::vector<PushResponse> pushed(num_ps);
  const absl::Duration timeout =
      options_.sync ? options_.sync_round_timeout + options_.rpc_timeout : options_.rpc_timeout;
  RETURN_IF_ERROR(ForEachPs(num_ps, [&](int ps) {
    return Retry("push", ps, [&] {
      pushed[ps].Clear();
      return client_->Push(ps, push[ps], &pushed[ps], timeout);
    });
  }));
  StepResult r;
  if (first_grad > 0) {
    r.loss = out[0].dtype() == DT_FLOAT ? out[0].data<float>()[0]
                                        : static_cast<float>(out[0].data<double>()[0]);
  }
  r.global_step = pushed[0].global_step();
  for (const PushResponse& p : pushed) r.applied &= p.applied();
  global_step_ = r.global_step;
  if (outputs != nullptr) outputs->assign(out.begin() + first_extra, out.end());
  ++stats_.steps;
  stats_.bytes_sent += client_->bytes_sent() - sent0;
  stats_.bytes_received += client_->bytes_received() - received0;
  stats_.minimum_bytes += 2 * 4 * touched;
  stats_.retries = retries_.load();
  return r;
}

absl::Status Worker::SplitPartitioned(const ApplyPlacement& a,
                                      const std::map<std::string, const Tensor*>& value,
                                      std::vector<PushRequest>* push) const {
  const std::vector<int64_t>& off = plan_.FindVariable(a.target)->part_offsets;
  const Tensor& grad = *value.at(a.grad);
  const int num_ps = static_cast<int>(push->size());
  if (a.indices.empty()) {  // dense: each ps its rows
    for (int ps = 0; ps < num_ps; ++ps) {
      TensorBytes* t = (*push)[ps].add_dense_grads();
      t->set_name(a.grad);
      ToWire(SliceRows(grad, off[ps], off[ps + 1]), t);
    }
    return absl::OkStatus();
  }
  // Sparse: each ps the rows of its range, indices relative to it.
  const Tensor& indices = *value.at(a.indices);
  const int64_t n = indices.NumElements();
  const int64_t row = n == 0 ? 0 : grad.NumElements() / n;
  std::vector<std::vector<int64_t>> idx(num_ps);
  std::vector<std::vector<int64_t>> at(num_ps);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = indices.dtype() == DT_INT32 ? indices.data<int32_t>()[i]
                                                   : indices.data<int64_t>()[i];
    const int ps = static_cast<int>(std::upper_bound(off.begin(), off.end(), r) - off.begin()) - 1;
    if (ps < 0 || ps >= num_ps) {
      return errors::InvalidArgument("gradient of '", a.target, "': index ", r,
                                     " is outside its ", off.back(), " rows");
    }
    idx[ps].push_back(r - off[ps]);
    at[ps].push_back(i);
  }
  for (int ps = 0; ps < num_ps; ++ps) {
    const int64_t k = static_cast<int64_t>(at[ps].size());
    TensorShape shape = grad.shape();
    shape.set_dim(0, k);
    Tensor rows(grad.dtype(), shape);
    const size_t row_bytes = static_cast<size_t>(row) * DataTypeSize(grad.dtype());
    for (int64_t j = 0; j < k; ++j) {
      std::memcpy(rows.raw_data() + j * row_bytes, grad.raw_data() + at[ps][j] * row_bytes,
                  row_bytes);
    }
    Tensor ids(indices.dtype(), TensorShape({k}));
    for (int64_t j = 0; j < k; ++j) {
      if (indices.dtype() == DT_INT32) {
        ids.data<int32_t>()[j] = static_cast<int32_t>(idx[ps][j]);
      } else {
        ids.data<int64_t>()[j] = idx[ps][j];
      }
    }
    TensorBytes* g = (*push)[ps].add_dense_grads();
    g->set_name(a.grad);
    ToWire(rows, g);
    TensorBytes* i = (*push)[ps].add_dense_grads();
    i->set_name(a.indices);
    ToWire(ids, i);
  }
  return absl::OkStatus();
}

absl::Status Worker::Evaluate(const Feeds& feeds, const std::vector<std::string>& fetches,
                              std::vector<Tensor>* outputs,
                              const std::vector<std::string>& targets) {
  ASSIGN_OR_RETURN(auto ids, StepIds(feeds));
  std::vector<PullResponse> pulled;
  RETURN_IF_ERROR(PullAll(ids, /*training=*/false, &pulled));
  RETURN_IF_ERROR(WriteLocal(ids, pulled));
  return session_->Run(feeds, fetches, targets, outputs);
}

absl::StatusOr<int64_t> Worker::FetchGlobalStep() {
  StatusResponse st;
  RETURN_IF_ERROR(Retry("status", 0, [&] { return client_->GetStatus(0, &st); }));
  global_step_ = st.global_step();
  return global_step_;
}

}  // namespace recflow::distributed
