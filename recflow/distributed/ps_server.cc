#include "recflow/distributed/ps_server.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/distributed/wire.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/embedding/table_bundle.h"
#include "recflow/framework/resource_var.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/table_saveable.h"

namespace recflow::distributed {
namespace {

absl::StatusOr<std::shared_ptr<Var>> LookupVar(Session* session, const VariablePlacement& v) {
  ResourceMgr* rm = session->device()->resource_manager();
  const std::string container = v.container.empty() ? rm->default_container() : v.container;
  return rm->Lookup<Var>(container, v.shared_name);
}

absl::StatusOr<embedding::HashEmbeddingTable*> LookupTable(Session* session,
                                                           const TablePlacement& t) {
  ResourceMgr* rm = session->device()->resource_manager();
  const std::string container = t.container.empty() ? rm->default_container() : t.container;
  ASSIGN_OR_RETURN(auto res, embedding::EmbeddingTableResource::Lookup(*rm, container,
                                                                       t.shared_name));
  return res->table();
}

template <typename T>
void AddInto(Tensor* acc, const Tensor& t) {
  T* a = acc->data<T>();
  const T* b = t.data<T>();
  for (int64_t i = 0, n = t.NumElements(); i < n; ++i) a[i] += b[i];
}

template <typename T>
void Scale(Tensor* t, double s) {
  T* a = t->data<T>();
  for (int64_t i = 0, n = t->NumElements(); i < n; ++i) a[i] = static_cast<T>(a[i] * s);
}

}  // namespace

PsServer::~PsServer() { Shutdown("the ps is being destroyed"); }

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Create(
    const tensorflow::GraphDef& train_graph, const PsOptions& options) {
  if (options.task_index < 0 || options.task_index >= options.num_ps) {
    return errors::InvalidArgument("ps task index ", options.task_index, " is not in [0, ",
                                   options.num_ps, ")");
  }
  if (options.sync && options.replicas_to_aggregate < 1) {
    return errors::InvalidArgument("sync training needs replicas_to_aggregate >= 1, got ",
                                   options.replicas_to_aggregate);
  }
  std::unique_ptr<PsServer> ps(new PsServer(options));
  if (train_graph.node_size() > 0) {
    RETURN_IF_ERROR(ps->AdoptGraph(train_graph, options.partition_bytes));
  }
  return ps;
}

absl::Status PsServer::AdoptGraph(const tensorflow::GraphDef& train_graph,
                                  int64_t partition_bytes) {
  Graph graph;
  RETURN_IF_ERROR(ConvertGraphDefToGraph({}, train_graph, &graph));
  ASSIGN_OR_RETURN(TrainPlan plan, PlanTraining(graph, {.num_ps = options_.num_ps,
                                                        .devices = options_.devices,
                                                        .partition_bytes = partition_bytes}));
  ASSIGN_OR_RETURN(tensorflow::GraphDef ps_graph, PsGraphDef(graph, plan));
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(options_.session, ps_graph));
  RETURN_IF_ERROR(train::CreateHashTables(session.get()));
  plan_ = std::move(plan);
  session_ = std::move(session);
  apply_by_node_.clear();
  feed_name_.clear();
  apply_by_endpoint_.clear();
  table_dims_.clear();
  for (const ApplyPlacement& a : plan_.applies) {
    apply_by_node_[a.node] = &a;
    feed_name_[a.grad] = a.ps_grad_feed;
    apply_by_endpoint_[a.grad] = &a;
    if (!a.indices.empty()) {
      feed_name_[a.indices] = a.ps_indices_feed;
      apply_by_endpoint_[a.indices] = &a;
    }
  }
  for (const TablePlacement& t : plan_.tables) table_dims_[t.node] = t.dim;
  return absl::OkStatus();
}

absl::Status PsServer::CheckServing(uint64_t fingerprint, int worker) {
  {
    std::lock_guard<std::mutex> l(workers_mu_);
    workers_seen_.insert(worker);
    if (finished_.load()) workers_gone_.insert(worker);
  }
  if (finished_.load()) {
    return errors::OutOfRange("ps task ", options_.task_index, ": training is finished");
  }
  if (session_ == nullptr) {
    return errors::FailedPrecondition("ps task ", options_.task_index,
                                      " is not initialized (it has no training graph yet: the "
                                      "chief sends it with its initialization)");
  }
  if (fingerprint != 0 && fingerprint != plan_.graph_fingerprint) {
    return errors::FailedPrecondition(
        "ps task ", options_.task_index, " runs a different training graph (fingerprint ",
        plan_.graph_fingerprint, ", the caller's ", fingerprint,
        "): every task must run the same run config, recflow version and placement options "
        "(number of ps tasks, --ps_partition_mb)");
  }
  if (!initialized_) {
    return errors::FailedPrecondition("ps task ", options_.task_index,
                                      " is not initialized (the chief initializes it or "
                                      "restores it from the latest checkpoint)");
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PsServer::ReadStep() const {
  if (plan_.global_step.empty()) return 0;
  ASSIGN_OR_RETURN(auto var, LookupVar(session_.get(), *plan_.FindVariable(plan_.global_step)));
  ASSIGN_OR_RETURN(Tensor t, var->Read());
  return t.dtype() == DT_INT32 ? int64_t{t.scalar<int32_t>()} : t.scalar<int64_t>();
}

absl::Status PsServer::WriteStep(int64_t step) {
  if (plan_.global_step.empty()) return absl::OkStatus();
  const VariablePlacement& v = *plan_.FindVariable(plan_.global_step);
  ASSIGN_OR_RETURN(auto var, LookupVar(session_.get(), v));
  Tensor t = v.dtype == DT_INT32 ? Tensor::Scalar<int32_t>(static_cast<int32_t>(step))
                                 : Tensor::Scalar<int64_t>(step);
  return var->Assign(t, /*validate_shape=*/false);
}

absl::Status PsServer::Pull(const PullRequest& request, PullResponse* response) {
  std::shared_lock<std::shared_mutex> lock(state_mu_);
  RETURN_IF_ERROR(CheckServing(request.graph_fingerprint(), request.worker()));
  ASSIGN_OR_RETURN(int64_t step, ReadStep());
  response->set_global_step(step);
  if (request.include_dense()) {
    for (const VariablePlacement* v : plan_.PrimaryVariablesOn(options_.task_index)) {
      ASSIGN_OR_RETURN(auto var, LookupVar(session_.get(), *v));
      ASSIGN_OR_RETURN(Tensor value, var->Read());
      TensorBytes* out = response->add_dense();
      out->set_name(v->node);
      ToWire(value, out);
    }
  }
  for (const TableIds& ids_msg : request.tables()) {
    const TablePlacement* tp = nullptr;
    for (const TablePlacement& t : plan_.tables) {
      if (t.node == ids_msg.table()) tp = &t;
    }
    if (tp == nullptr) {
      return errors::InvalidArgument("pull: the graph has no hash table '", ids_msg.table(), "'");
    }
    ASSIGN_OR_RETURN(Tensor ids, IdsFromBytes(ids_msg.ids(), "pull of table " + tp->node));
    const int64_t n = ids.NumElements();
    for (int64_t id : ids.flat<int64_t>()) {
      if (PsShardOf(id, options_.num_ps) != options_.task_index) {
        return errors::InvalidArgument("pull of table '", tp->node, "': id ", id,
                                       " belongs to ps task ", PsShardOf(id, options_.num_ps),
                                       ", not ", options_.task_index,
                                       " (do all tasks agree on the number of ps tasks?)");
      }
    }
    ASSIGN_OR_RETURN(embedding::HashEmbeddingTable * table, LookupTable(session_.get(), *tp));
    TableRows* rows = response->add_rows();
    rows->set_table(tp->node);
    rows->set_dim(table->dim());
    std::string* values = rows->mutable_values();
    values->resize(static_cast<size_t>(n * table->dim()) * sizeof(float));
    RETURN_IF_ERROR(table->Lookup(
        ids.flat<int64_t>(),
        absl::Span<float>(reinterpret_cast<float*>(values->data()), n * table->dim()),
        request.training() ? embedding::LookupMode::kTrain : embedding::LookupMode::kReadOnly));
  }
  return absl::OkStatus();
}

absl::Status PsServer::FeedsOfPush(const PushRequest& request,
                                   std::vector<std::pair<std::string, Tensor>>* feeds,
                                   std::vector<std::string>* targets) const {
  std::set<std::string> target_set;
  std::map<std::string, int> fed_endpoints;  // apply node -> endpoints fed
  for (const TensorBytes& g : request.dense_grads()) {
    auto it = apply_by_endpoint_.find(g.name());
    if (it == apply_by_endpoint_.end() || it->second->table ||
        (it->second->ps != options_.task_index && it->second->ps != kPartitioned)) {
      return errors::InvalidArgument("push to ps task ", options_.task_index,
                                     ": no update op here takes gradient '", g.name(), "'");
    }
    ASSIGN_OR_RETURN(Tensor t, FromWire(g));
    if (g.name() == it->second->grad && t.dtype() != it->second->grad_dtype) {
      return errors::InvalidArgument("push: gradient '", g.name(), "' is ",
                                     DataTypeString(t.dtype()), ", update op '",
                                     it->second->node, "' takes ",
                                     DataTypeString(it->second->grad_dtype));
    }
    feeds->emplace_back(g.name(), std::move(t));
    ++fed_endpoints[it->second->node];
    target_set.insert(it->second->node);
  }
  for (const auto& [node, count] : fed_endpoints) {
    const ApplyPlacement* a = apply_by_node_.at(node);
    if (count != (a->indices.empty() ? 1 : 2)) {
      return errors::InvalidArgument("push: update op '", node, "' needs ",
                                     a->indices.empty() ? "its gradient" : "its gradient and ids",
                                     ", the push has ", count, " of them");
    }
  }
  for (const SparseGrad& g : request.sparse_grads()) {
    auto it = apply_by_node_.find(g.apply_node());
    if (it == apply_by_node_.end() || !it->second->table) {
      return errors::InvalidArgument("push: '", g.apply_node(),
                                     "' is not a hash table update op of the graph");
    }
    const ApplyPlacement& a = *it->second;
    const int64_t dim = table_dims_.at(a.target);
    ASSIGN_OR_RETURN(Tensor ids, IdsFromBytes(g.ids(), "push to " + a.node));
    ASSIGN_OR_RETURN(Tensor rows,
                     RowsFromBytes(g.values(), ids.NumElements(), dim, "push to " + a.node));
    for (int64_t id : ids.flat<int64_t>()) {
      if (PsShardOf(id, options_.num_ps) != options_.task_index) {
        return errors::InvalidArgument("push to '", a.node, "': id ", id, " belongs to ps task ",
                                       PsShardOf(id, options_.num_ps), ", not ",
                                       options_.task_index);
      }
    }
    if (ids.NumElements() == 0) continue;
    feeds->emplace_back(a.indices, std::move(ids));
    feeds->emplace_back(a.grad, std::move(rows));
    target_set.insert(a.node);
  }
  targets->assign(target_set.begin(), target_set.end());
  return absl::OkStatus();
}

absl::Status PsServer::ApplyLocked(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                   const std::vector<std::string>& targets,
                                   int64_t worker_step) {
  ASSIGN_OR_RETURN(int64_t step, ReadStep());
  const bool chief_ps = options_.task_index == 0;
  if (!chief_ps && worker_step > step) {
    RETURN_IF_ERROR(WriteStep(worker_step));
    step = worker_step;
  }
  std::vector<Tensor> unused;
  std::vector<std::pair<std::string, Tensor>> fed;
  fed.reserve(feeds.size());
  for (const auto& [endpoint, t] : feeds) fed.emplace_back(feed_name_.at(endpoint), t);
  if (!targets.empty()) RETURN_IF_ERROR(session_->Run(fed, {}, targets, &unused));
  if (!plan_.post_update_nodes.empty()) {
    RETURN_IF_ERROR(session_->Run({}, {}, plan_.post_update_nodes, &unused));
  }
  applied_.fetch_add(1);
  return WriteStep(chief_ps ? step + 1 : std::max(step, worker_step + 1));
}

absl::Status PsServer::Push(const PushRequest& request, PushResponse* response) {
  if (options_.sync) return PushSync(request, response);
  std::shared_lock<std::shared_mutex> lock(state_mu_);
  RETURN_IF_ERROR(CheckServing(request.graph_fingerprint(), request.worker()));
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<std::string> targets;
  RETURN_IF_ERROR(FeedsOfPush(request, &feeds, &targets));
  std::lock_guard<std::mutex> apply_lock(apply_mu_);
  auto seq = last_seq_.find(request.worker());
  if (seq != last_seq_.end() && request.seq() <= seq->second) {
    dropped_.fetch_add(1);
    response->set_applied(false);
    response->set_note(absl::StrCat("push ", request.seq(), " of worker ", request.worker(),
                                    " was applied already"));
  } else {
    if (options_.task_index == 0) {
      ASSIGN_OR_RETURN(int64_t now, ReadStep());
      const int64_t stale = std::max<int64_t>(0, now - request.global_step());
      staleness_sum_ += stale;
      staleness_max_ = std::max(staleness_max_, stale);
      ++staleness_count_;
    }
    RETURN_IF_ERROR(ApplyLocked(feeds, targets, request.global_step()));
    last_seq_[request.worker()] = request.seq();
    response->set_applied(true);
  }
  ASSIGN_OR_RETURN(int64_t step, ReadStep());
  response->set_global_step(step);
  return absl::OkStatus();
}

absl::Status PsServer::Accumulate(const PushRequest& request, Accumulator* acc) const {
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<std::string> targets;
  RETURN_IF_ERROR(FeedsOfPush(request, &feeds, &targets));
  // Sparse gradients (table updates and sparse variable updates) are summed
  // per id; dense ones elementwise.
  std::map<std::string, Tensor> ids_of, rows_of;  // apply node ->
  for (auto& [endpoint, t] : feeds) {
    const ApplyPlacement* sp = apply_by_endpoint_.at(endpoint);
    if (sp->indices.empty()) {
      auto [it, inserted] = acc->dense.try_emplace(endpoint, t);
      if (inserted) {
        Tensor copy(t.dtype(), t.shape());
        std::memcpy(copy.raw_data(), t.raw_data(), t.NumElements() * DataTypeSize(t.dtype()));
        it->second = copy;
      } else if (it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) {
        return errors::InvalidArgument("push: gradient '", endpoint, "' has shape ",
                                       t.shape().DebugString(), ", this round's has ",
                                       it->second.shape().DebugString());
      } else if (t.dtype() == DT_DOUBLE) {
        AddInto<double>(&it->second, t);
      } else {
        AddInto<float>(&it->second, t);
      }
    } else if (endpoint == sp->indices) {
      ids_of[sp->node] = t;
    } else {
      rows_of[sp->node] = t;
    }
  }
  for (const auto& [node, ids] : ids_of) {
    const Tensor& rows = rows_of.at(node);
    if (rows.dtype() != DT_FLOAT || rows.dims() < 1) {
      return errors::Unimplemented("sync training of '", node,
                                   "': sparse gradients must be float rows");
    }
    const int64_t n = ids.NumElements();
    const int64_t dim = n == 0 ? 0 : rows.NumElements() / n;
    acc->sparse_dim[node] = dim;
    acc->sparse_ids_dtype[node] = ids.dtype();
    auto& by_id = acc->sparse[node];
    const float* r = rows.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = ids.dtype() == DT_INT32 ? ids.data<int32_t>()[i] : ids.data<int64_t>()[i];
      auto& sum = by_id[id];
      if (sum.empty()) sum.assign(dim, 0.f);
      for (int64_t k = 0; k < dim; ++k) sum[k] += r[i * dim + k];
    }
  }
  acc->workers.push_back(request.worker());
  return absl::OkStatus();
}

absl::Status PsServer::ApplyRoundLocked(int64_t round) {
  const int k = static_cast<int>(acc_.workers.size());
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::set<std::string> targets;
  for (auto& [endpoint, sum] : acc_.dense) {
    if (sum.dtype() == DT_DOUBLE) {
      Scale<double>(&sum, 1.0 / k);
    } else {
      Scale<float>(&sum, 1.0 / k);
    }
    feeds.emplace_back(endpoint, sum);
    targets.insert(apply_by_endpoint_.at(endpoint)->node);
  }
  for (auto& [node, by_id] : acc_.sparse) {
    const ApplyPlacement& a = *apply_by_node_.at(node);
    const int64_t dim = acc_.sparse_dim[node];
    const int64_t n = static_cast<int64_t>(by_id.size());
    Tensor rows(DT_FLOAT, TensorShape({n, dim}));
    std::vector<int64_t> ids;
    ids.reserve(n);
    int64_t i = 0;
    for (const auto& [id, sum] : by_id) {
      ids.push_back(id);
      for (int64_t d = 0; d < dim; ++d) rows.data<float>()[i * dim + d] = sum[d] / k;
      ++i;
    }
    Tensor ids_t = Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids));
    if (acc_.sparse_ids_dtype[node] == DT_INT32) {
      std::vector<int32_t> narrow(ids.begin(), ids.end());
      ids_t = Tensor::FromVector<int32_t>(absl::MakeConstSpan(narrow));
    }
    feeds.emplace_back(a.indices, std::move(ids_t));
    feeds.emplace_back(a.grad, std::move(rows));
    targets.insert(node);
  }
  if (k < options_.replicas_to_aggregate) {
    LOG(WARNING) << "ps task " << options_.task_index << ": round " << round
                 << " applied with " << k << " of " << options_.replicas_to_aggregate
                 << " gradients after waiting " << absl::FormatDuration(options_.round_timeout)
                 << " (a worker is dead or slow)";
  }
  absl::Status s = ApplyLocked(feeds, std::vector<std::string>(targets.begin(), targets.end()),
                               round);
  acc_ = Accumulator();
  round_ = round + 1;
  round_cv_.notify_all();
  return s;
}

absl::Status PsServer::PushSync(const PushRequest& request, PushResponse* response) {
  std::shared_lock<std::shared_mutex> lock(state_mu_);
  RETURN_IF_ERROR(CheckServing(request.graph_fingerprint(), request.worker()));
  std::unique_lock<std::mutex> apply_lock(apply_mu_);
  if (round_ < 0) {
    ASSIGN_OR_RETURN(round_, ReadStep());
  }
  auto answer = [&](bool applied, std::string note) -> absl::Status {
    response->set_applied(applied);
    response->set_note(std::move(note));
    ASSIGN_OR_RETURN(int64_t step, ReadStep());
    response->set_global_step(step);
    return absl::OkStatus();
  };
  if (request.global_step() < round_) {
    dropped_.fetch_add(1);
    return answer(false, absl::StrCat("stale: pulled at step ", request.global_step(),
                                      ", round ", round_, " is being accumulated"));
  }
  if (request.global_step() > round_) {
    if (!acc_.workers.empty()) {
      LOG(WARNING) << "ps task " << options_.task_index << ": dropping round " << round_
                   << " (" << acc_.workers.size() << " gradients): a worker is at step "
                   << request.global_step();
      acc_ = Accumulator();
    }
    round_ = request.global_step();
  }
  const int64_t my_round = round_;
  if (std::find(acc_.workers.begin(), acc_.workers.end(), request.worker()) ==
      acc_.workers.end()) {
    RETURN_IF_ERROR(Accumulate(request, &acc_));
  }
  if (static_cast<int>(acc_.workers.size()) >= options_.replicas_to_aggregate) {
    RETURN_IF_ERROR(ApplyRoundLocked(my_round));
    return answer(true, "");
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        absl::ToChronoMilliseconds(options_.round_timeout);
  while (round_ == my_round && !finished_.load()) {
    if (round_cv_.wait_until(apply_lock, deadline) == std::cv_status::timeout &&
        round_ == my_round) {
      RETURN_IF_ERROR(ApplyRoundLocked(my_round));
      break;
    }
  }
  if (finished_.load() && round_ == my_round) {
    return errors::OutOfRange("ps task ", options_.task_index, ": training is finished");
  }
  return answer(true, "");
}

absl::Status PsServer::Init(const InitRequest& request, InitResponse* response) {
  std::unique_lock<std::shared_mutex> lock(state_mu_);
  if (session_ == nullptr && !request.graph_def().empty()) {
    tensorflow::GraphDef graph;
    if (!graph.ParseFromString(request.graph_def())) {
      return errors::InvalidArgument("ps task ", options_.task_index,
                                     ": init: graph_def is not a serialized GraphDef");
    }
    absl::Status s = AdoptGraph(graph, request.partition_bytes());
    if (!s.ok()) {
      return errors::Annotate(s, absl::StrCat("ps task ", options_.task_index,
                                              ": the training graph of the init"));
    }
    if (!request.init_node().empty()) init_node_ = request.init_node();
    LOG(INFO) << "ps task " << options_.task_index << " adopted the chief's training graph ("
              << graph.node_size() << " nodes, " << plan_.PrimaryVariablesOn(options_.task_index).size()
              << " variables placed here)";
  }
  if (session_ == nullptr) {
    return errors::FailedPrecondition("ps task ", options_.task_index,
                                      " has no training graph: it was started without one and "
                                      "the init did not bring one");
  }
  if (request.graph_fingerprint() != 0 && request.graph_fingerprint() != plan_.graph_fingerprint) {
    return errors::FailedPrecondition(
        "ps task ", options_.task_index, " runs a different training graph (fingerprint ",
        plan_.graph_fingerprint, ", the caller's ", request.graph_fingerprint(),
        "): every task must build the same model (same code, same placement)");
  }
  if (request.only_if_uninitialized() && initialized_) {
    response->set_initialized_now(false);
    ASSIGN_OR_RETURN(int64_t step, ReadStep());
    response->set_global_step(step);
    return absl::OkStatus();
  }
  // From here on the state is rewritten: a failure below (a checkpoint that
  // does not restore) must leave the ps refusing Pull and Push as
  // uninitialized, not serving initializer values or a half-restored model
  // as if it were the trained one. The chief's next Init starts over.
  initialized_ = false;
  std::vector<Tensor> unused;
  std::vector<std::string> init_targets;
  if (session_->graph()->FindNode(init_node_) != nullptr) init_targets.push_back(init_node_);
  if (!init_targets.empty()) RETURN_IF_ERROR(session_->Run({}, {}, init_targets, &unused));
  for (const TablePlacement& t : plan_.tables) {
    ASSIGN_OR_RETURN(embedding::HashEmbeddingTable * table, LookupTable(session_.get(), t));
    table->Clear();
  }
  RETURN_IF_ERROR(SlicePartitioned());
  if (!request.checkpoint_prefix().empty()) {
    ResourceMgr* rm = session_->device()->resource_manager();
    std::vector<checkpoint::Saveable> saveables;
    const int part = options_.task_index;
    for (const VariablePlacement& v : plan_.variables) {
      if (v.ps != options_.task_index && v.ps >= 0) continue;
      if (v.ps == kPartitioned) {
        // This ps's rows, from the whole variable or from its parts.
        checkpoint::Saveable sv;
        sv.name = v.node;
        Session* session = session_.get();
        sv.restore = [v, part, session](const checkpoint::BundleReader& reader,
                                        const std::string& name) -> absl::Status {
          ASSIGN_OR_RETURN(Tensor whole, checkpoint::ReadTensorOrParts(reader, name));
          if (whole.dims() < 1 || whole.dim_size(0) != v.part_offsets.back()) {
            return errors::InvalidArgument("checkpoint tensor '", name, "' has shape ",
                                           whole.shape().DebugString(), "; the graph's is ",
                                           v.shape.DebugString());
          }
          ASSIGN_OR_RETURN(auto var, LookupVar(session, v));
          return var->Assign(SliceRows(whole, v.part_offsets[part], v.part_offsets[part + 1]),
                             /*validate_shape=*/false);
        };
        saveables.push_back(std::move(sv));
        continue;
      }
      checkpoint::VarRef ref;
      ref.checkpoint_key = v.node;
      ref.container = v.container;
      ref.name = v.shared_name;
      ref.dtype = v.dtype;
      ref.shape = v.shape;
      saveables.push_back(checkpoint::VarSaveable(rm, std::move(ref)));
    }
    const int task = options_.task_index, num_ps = options_.num_ps;
    for (const TablePlacement& t : plan_.tables) {
      train::TableRef ref;
      ref.checkpoint_key = t.node;
      ref.container = t.container;
      ref.name = t.shared_name;
      train::TableSaveableOptions topts;
      topts.env = options_.env;
      topts.keep_id = [task, num_ps](int64_t id) { return PsShardOf(id, num_ps) == task; };
      saveables.push_back(train::TableSaveable(rm, std::move(ref), topts));
    }
    // Read straight from the bundle: a Saver on the model directory would
    // clean up temporary files there, which may be a chief's save in flight.
    const std::string& prefix = request.checkpoint_prefix();
    absl::Status s = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(options_.env, prefix));
      ASSIGN_OR_RETURN(auto delta, checkpoint::ReadDeltaInfo(*reader));
      if (delta.has_value()) {
        return errors::InvalidArgument(
            "it is an incremental checkpoint; a cluster restores full checkpoints (cluster "
            "checkpoints are always full; save a full one from the single-process job)");
      }
      for (const checkpoint::Saveable& saveable : saveables) {
        RETURN_IF_ERROR(saveable.restore(*reader, saveable.name));
      }
      return absl::OkStatus();
    }();
    if (!s.ok()) {
      return errors::Annotate(s, absl::StrCat("ps task ", task, ": restoring ", prefix));
    }
  }
  initialized_ = true;
  state_id_ = (static_cast<uint64_t>(std::random_device()()) << 32) ^ std::random_device()();
  round_ = -1;
  acc_ = Accumulator();
  ASSIGN_OR_RETURN(int64_t step, ReadStep());
  response->set_initialized_now(true);
  response->set_global_step(step);
  LOG(INFO) << "ps task " << options_.task_index << " initialized at step " << step
            << (request.checkpoint_prefix().empty() ? " (initializers)"
                                                    : " from " + request.checkpoint_prefix());
  return absl::OkStatus();
}

absl::Status PsServer::SlicePartitioned() {
  const int p = options_.task_index;
  // The initializers ran for the whole graph: drop the variables other ps
  // tasks hold, so this one keeps only its share of the model in memory.
  ResourceMgr* rm = session_->device()->resource_manager();
  for (const VariablePlacement& v : plan_.variables) {
    if (v.ps < 0 || v.ps == p) continue;
    const std::string container = v.container.empty() ? rm->default_container() : v.container;
    rm->Delete<Var>(container, v.shared_name).IgnoreError();
  }
  for (const VariablePlacement& v : plan_.variables) {
    if (v.ps != kPartitioned) continue;
    ASSIGN_OR_RETURN(auto var, LookupVar(session_.get(), v));
    ASSIGN_OR_RETURN(Tensor whole, var->Read());
    if (whole.dims() < 1 || whole.dim_size(0) != v.part_offsets.back()) continue;  // sliced
    RETURN_IF_ERROR(var->Assign(SliceRows(whole, v.part_offsets[p], v.part_offsets[p + 1]),
                                /*validate_shape=*/false));
  }
  return absl::OkStatus();
}

bool PsServer::AllWorkersGone() const {
  std::lock_guard<std::mutex> l(workers_mu_);
  for (int w : workers_seen_) {
    if (workers_gone_.count(w) == 0) return false;
  }
  return true;
}

absl::Status PsServer::GetStatus(StatusResponse* response, const StatusRequest& request) {
  {
    std::lock_guard<std::mutex> l(workers_mu_);
    if (request.leaving()) workers_gone_.insert(request.worker());
    for (int w : workers_seen_) response->add_workers_seen(w);
    for (int w : workers_gone_) response->add_workers_gone(w);
  }
  std::shared_lock<std::shared_mutex> lock(state_mu_);
  response->set_task_index(options_.task_index);
  response->set_initialized(initialized_);
  response->set_graph_fingerprint(plan_.graph_fingerprint);
  response->set_has_graph(session_ != nullptr);
  response->set_pushes_applied(applied_.load());
  response->set_pushes_dropped(dropped_.load());
  response->set_finished(finished_.load());
  {
    std::lock_guard<std::mutex> l(apply_mu_);
    response->set_mean_staleness(staleness_count_ > 0 ? double(staleness_sum_) / staleness_count_
                                                      : 0.0);
    response->set_max_staleness(staleness_max_);
  }
  if (initialized_) {
    ASSIGN_OR_RETURN(int64_t step, ReadStep());
    response->set_global_step(step);
  }
  int64_t rows = 0;
  for (const TablePlacement& t : plan_.tables) {
    auto table = LookupTable(session_.get(), t);
    if (table.ok()) rows += (*table)->size();
  }
  response->set_table_rows(rows);
  return absl::OkStatus();
}

absl::Status PsServer::Save(const SaveRequest& request, SaveResponse* response) {
  std::unique_lock<std::shared_mutex> lock(state_mu_);
  if (!initialized_ || session_ == nullptr) {
    return errors::FailedPrecondition("ps task ", options_.task_index,
                                      " cannot save: it is not initialized");
  }
  if (request.prefix().empty()) return errors::InvalidArgument("save: empty prefix");
  std::lock_guard<std::mutex> apply_lock(apply_mu_);
  ASSIGN_OR_RETURN(auto writer, checkpoint::BundleWriter::Create(options_.env, request.prefix()));
  for (const VariablePlacement* v : plan_.SavedVariablesOn(options_.task_index)) {
    ASSIGN_OR_RETURN(auto var, LookupVar(session_.get(), *v));
    ASSIGN_OR_RETURN(Tensor value, var->Read());
    RETURN_IF_ERROR(writer->Add(
        v->ps == kPartitioned ? absl::StrCat(v->node, "/part_", options_.task_index) : v->node,
        value));
  }
  for (const TablePlacement& t : plan_.tables) {
    ASSIGN_OR_RETURN(embedding::HashEmbeddingTable * table, LookupTable(session_.get(), t));
    RETURN_IF_ERROR(embedding::SaveTable(table, writer.get(),
                                         embedding::TablePartKey(t.node, request.part()), -1));
  }
  const int64_t bytes = static_cast<int64_t>(writer->data_bytes());
  RETURN_IF_ERROR(writer->Finish());
  ASSIGN_OR_RETURN(int64_t step, ReadStep());
  response->set_global_step(step);
  response->set_bytes(bytes);
  return absl::OkStatus();
}

absl::Status PsServer::PublishUpdate(const PublishUpdateRequest& request,
                                     PublishUpdateResponse* response) {
  // Exclusive, as Save: a pull's training lookup inserts rows.
  std::unique_lock<std::shared_mutex> lock(state_mu_);
  if (!initialized_ || session_ == nullptr) {
    return errors::FailedPrecondition("ps task ", options_.task_index,
                                      " cannot publish a model update: it is not initialized");
  }
  if (request.prefix().empty()) return errors::InvalidArgument("publish update: empty prefix");
  if (!request.full() && request.since_step() < 0) {
    return errors::InvalidArgument("publish update: a delta needs since_step >= 0, got ",
                                   request.since_step());
  }
  const std::set<std::string> wanted(request.variables().begin(), request.variables().end());
  std::lock_guard<std::mutex> apply_lock(apply_mu_);
  ASSIGN_OR_RETURN(int64_t step, ReadStep());
  checkpoint::BundleWriterOptions wo;
  wo.direct_io = false;  // small, and read back by servers at once
  ASSIGN_OR_RETURN(auto writer, checkpoint::BundleWriter::Create(options_.env, request.prefix(), wo));
  for (const VariablePlacement* v : plan_.SavedVariablesOn(options_.task_index)) {
    if (!wanted.contains(v->node)) continue;
    ASSIGN_OR_RETURN(auto var, LookupVar(session_.get(), *v));
    ASSIGN_OR_RETURN(Tensor value, var->Read());
    RETURN_IF_ERROR(writer->Add(
        v->ps == kPartitioned ? absl::StrCat(v->node, "/part_", options_.task_index) : v->node,
        value));
  }
  const int64_t since = request.full() ? -1 : request.since_step();
  embedding::TableBundleOptions to;
  to.save_slots = false;
  int64_t rows = 0;
  for (const TablePlacement& t : plan_.tables) {
    ASSIGN_OR_RETURN(embedding::HashEmbeddingTable * table, LookupTable(session_.get(), t));
    const std::string key = embedding::TablePartKey(t.node, request.part());
    RETURN_IF_ERROR(embedding::SaveTable(table, writer.get(), key, since, to));
    table->KeepDeletionsAfter(request.full() ? step : since);
  }
  const int64_t bytes = static_cast<int64_t>(writer->data_bytes());
  RETURN_IF_ERROR(writer->Finish());
  // Row counts from the index (cheap).
  if (auto reader = checkpoint::BundleReader::Open(options_.env, request.prefix()); reader.ok()) {
    for (const TablePlacement& t : plan_.tables) {
      auto info = (*reader)->GetInfo(embedding::TablePartKey(t.node, request.part()) + "/keys");
      if (info.ok()) rows += info->shape.num_elements();
    }
  }
  response->set_global_step(step);
  response->set_state_id(state_id_);
  response->set_rows(rows);
  response->set_bytes(bytes);
  return absl::OkStatus();
}

void PsServer::Shutdown(const std::string& reason) {
  if (finished_.exchange(true)) return;
  if (!reason.empty()) LOG(INFO) << "ps task " << options_.task_index << ": " << reason;
  {
    std::lock_guard<std::mutex> l(apply_mu_);
    round_cv_.notify_all();
  }
  std::lock_guard<std::mutex> l(shutdown_mu_);
  shutdown_cv_.notify_all();
}

bool PsServer::WaitForShutdown(absl::Duration timeout) {
  std::unique_lock<std::mutex> l(shutdown_mu_);
  if (timeout == absl::InfiniteDuration()) {
    shutdown_cv_.wait(l, [&] { return finished_.load(); });
    return true;
  }
  return shutdown_cv_.wait_for(l, absl::ToChronoMilliseconds(timeout),
                               [&] { return finished_.load(); });
}

}  // namespace recflow::distributed
