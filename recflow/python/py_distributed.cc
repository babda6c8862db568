// The C++ half of recflow's between-graph ps/worker training from Python
// (recflow/training/server_lib.py, recflow/client/distributed.py;
// docs/python.md "Distributed training from Python"), on recflow's
// distributed runtime (recflow/distributed/, docs/distributed.md):
//
//   parse_tf_config / check_cluster   TF_CONFIG and cluster dicts through
//                                     distributed::ClusterSpec (its errors
//                                     become ValueError)
//   PsTask      a ps task: a PsServer started without a graph (it adopts the
//               chief's training graph from the chief's Init) served over
//               gRPC until the chief ends the job or stop() is called
//   TaskServer  a training task's own gRPC server (health service)
//   Worker      a training task's session: the training graph (the nodes the
//               update ops, the train ops and the initializers need) planned
//               by PlanTraining and run as pull, compute, push
//               (distributed::Worker); the rest of the Python graph extended
//               into the same local session for other fetches
//
// Every blocking call releases the GIL. Not thread-safe per object (one
// training loop per Worker), as distributed::Worker.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "recflow/distributed/cluster_checkpoint.h"
#include "recflow/distributed/cluster_spec.h"
#include "recflow/distributed/ps_grpc.h"
#include "recflow/distributed/ps_server.h"
#include "recflow/distributed/training_task.h"
#include "recflow/distributed/worker.h"
#include "recflow/distributed/worker_session.h"
#include "recflow/framework/graph.h"
#include "recflow/python/py_graph.h"
#include "recflow/python/py_status.h"
#include "recflow/python/py_tensor.h"
#include "recflow/runtime/session.h"

namespace py = pybind11;

namespace recflow {
namespace python {
namespace {

using distributed::ClusterConfig;
using distributed::ClusterSpec;

// The node of the training graph that runs every variable initializer on a
// ps task (InitRequest::init_node).
constexpr char kPsInitNode[] = "_recflow_ps_init";

template <typename T>
T ValueOrValueError(absl::StatusOr<T> v) {
  if (!v.ok()) throw py::value_error(std::string(v.status().message()));
  return std::move(v).value();
}

py::dict ConfigToDict(const ClusterConfig& c) {
  py::dict cluster;
  for (const auto& [job, addresses] : c.cluster.jobs()) cluster[py::str(job)] = py::cast(addresses);
  py::dict task;
  task["type"] = c.task.job;
  task["index"] = c.task.index;
  py::dict out;
  out["cluster"] = cluster;
  out["task"] = task;
  out["is_chief"] = c.is_chief();
  out["training_index"] = c.training_worker_index();
  out["num_training_workers"] = c.num_training_workers();
  return out;
}

ClusterConfig MakeConfig(const std::map<std::string, std::vector<std::string>>& jobs,
                         const std::string& job, int index) {
  ClusterConfig c;
  c.cluster = ValueOrValueError(ClusterSpec::Create(jobs));
  c.task = {job, index};
  if (!c.cluster.HasJob(job)) {
    std::string listed;
    for (const auto& [name, unused] : c.cluster.jobs()) {
      absl::StrAppend(&listed, listed.empty() ? "" : ", ", name);
    }
    throw py::value_error(absl::StrCat("job_name '", job, "' is not a job of the cluster; its jobs are: ",
                                       listed));
  }
  if (index < 0 || index >= c.cluster.NumTasks(job)) {
    throw py::value_error(absl::StrCat("task_index ", index, " is out of range: job \"", job,
                                       "\" has ", c.cluster.NumTasks(job), " tasks (indices 0..",
                                       c.cluster.NumTasks(job) - 1, ")"));
  }
  return c;
}

class PyPsTask {
 public:
  PyPsTask(const std::map<std::string, std::vector<std::string>>& jobs, int index, int threads) {
    config_ = MakeConfig(jobs, distributed::kPsJob, index);
    distributed::PsOptions o;
    o.task_index = index;
    o.num_ps = config_.num_ps();
    o.devices = config_.cluster.Devices();
    o.session.inter_op_threads = o.session.intra_op_threads = threads;
    ps_ = ValueOrThrow(distributed::PsServer::Create(tensorflow::GraphDef(), o));
    const std::string listen = ValueOrThrow(config_.cluster.ListenAddress(config_.task));
    py::gil_scoped_release release;
    server_ = ValueOrThrow(distributed::PsGrpcServer::Start(ps_.get(), listen));
  }
  ~PyPsTask() { Stop(""); }

  // Serves until the chief ends the job (then lingers, up to a minute,
  // until every worker that called has left or been told), or stop().
  // Python signal handlers run every 0.2 s; an exception from one (Ctrl-C's
  // KeyboardInterrupt) stops the task and propagates.
  void Join() {
    for (;;) {
      bool done;
      {
        py::gil_scoped_release release;
        done = ps_ == nullptr || ps_->WaitForShutdown(absl::Milliseconds(200));
      }
      if (done) break;
      if (PyErr_CheckSignals() != 0) {
        Stop("interrupted");
        throw py::error_already_set();
      }
    }
    if (ps_ == nullptr || stopped_) return;
    const auto start = std::chrono::steady_clock::now();
    auto since = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    while (since() < 1 || (!ps_->AllWorkersGone() && since() < 60)) {
      {
        py::gil_scoped_release release;
        absl::SleepFor(absl::Milliseconds(100));
      }
      if (PyErr_CheckSignals() != 0) {
        Stop("interrupted");
        throw py::error_already_set();
      }
    }
    Stop("");
  }

  void Stop(const std::string& reason) {
    if (stopped_ || ps_ == nullptr) return;
    stopped_ = true;
    py::gil_scoped_release release;
    ps_->Shutdown(reason.empty() ? "stopped" : reason);
    if (server_ != nullptr) server_->Stop();
  }

  int port() const { return server_ == nullptr ? 0 : server_->port(); }
  bool finished() const { return ps_->WaitForShutdown(absl::ZeroDuration()); }

  py::dict Status() {
    distributed::StatusResponse st;
    ThrowIfError(ps_->GetStatus(&st));
    py::dict d;
    d["has_graph"] = st.has_graph();
    d["initialized"] = st.initialized();
    d["global_step"] = st.global_step();
    d["pushes_applied"] = st.pushes_applied();
    d["finished"] = st.finished();
    return d;
  }

 private:
  ClusterConfig config_;
  std::unique_ptr<distributed::PsServer> ps_;
  std::unique_ptr<distributed::PsGrpcServer> server_;
  bool stopped_ = false;
};

class PyTaskServer {
 public:
  explicit PyTaskServer(const std::string& address) {
    py::gil_scoped_release release;
    server_ = ValueOrThrow(distributed::StartTaskServer(address, &port_));
  }
  ~PyTaskServer() { Stop(); }
  void Stop() {
    if (server_ == nullptr) return;
    py::gil_scoped_release release;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_.reset();
  }
  int port() const { return port_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// A node of the Python graph to mark for the distributed runtime.
struct Marks {
  std::map<std::string, bool> variables;  // global variable -> trainable
  std::set<std::string> initializers;
  std::string global_step;
};

void Mark(tensorflow::NodeDef* n, const Marks& m) {
  auto v = m.variables.find(n->name());
  if (v != m.variables.end()) {
    (*n->mutable_attr())["_recflow_trainable"].set_b(v->second);
  }
  if (m.initializers.count(n->name()) > 0) {
    (*n->mutable_attr())["_recflow_initializer"].set_b(true);
  }
  if (!m.global_step.empty() && n->name() == m.global_step) {
    (*n->mutable_attr())["_recflow_global_step"].set_b(true);
  }
}

std::vector<std::pair<std::string, Tensor>> Feeds(const std::vector<std::string>& names,
                                                  const py::sequence& values,
                                                  const std::vector<int>& types) {
  if (py::len(values) != names.size() || types.size() != names.size()) {
    throw py::value_error("run: feed names, values and dtypes differ in number");
  }
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t k = 0; k < names.size(); ++k) {
    if (!DataTypeIsValid(types[k])) throw py::value_error("feed: not a DataType");
    feeds.emplace_back(names[k], TensorFromPython(values[k], static_cast<DataType>(types[k]),
                                                  absl::StrCat("feed '", names[k], "'")));
  }
  return feeds;
}

py::list Results(std::vector<Tensor>* outputs, const std::vector<std::string>& fetches) {
  py::list out;
  for (size_t i = 0; i < outputs->size(); ++i) {
    out.append(FetchToPython(std::move((*outputs)[i]), absl::StrCat("fetch '", fetches[i], "'")));
  }
  return out;
}

class PyWorker {
 public:
  // `train_nodes`: the names of the training graph's nodes (the same on
  // every task); the graph's first `num_nodes` nodes go to the local
  // session, those first, annotated with `variables` (global variable ->
  // trainable), `initializers` and `global_step`.
  PyWorker(const std::vector<std::string>& ps_addresses, int worker_index, bool is_chief,
           const std::vector<std::string>& devices, int inter_op_threads, int intra_op_threads,
           bool optimize, const PyGraph& graph, int num_nodes,
           const std::vector<std::string>& train_nodes,
           const std::map<std::string, bool>& variables,
           const std::vector<std::string>& initializers, const std::string& global_step)
      : client_(ps_addresses), worker_index_(worker_index), chief_(is_chief) {
    Marks marks{variables, {initializers.begin(), initializers.end()}, global_step};
    const tensorflow::GraphDef all = graph.ToGraphDef(0, num_nodes);
    const std::set<std::string> train(train_nodes.begin(), train_nodes.end());
    tensorflow::GraphDef train_def, rest_def;
    *train_def.mutable_versions() = all.versions();
    *rest_def.mutable_versions() = all.versions();
    // Both halves carry the functions (a dataset's map, a one-shot iterator's
    // factory): either may call them.
    *train_def.mutable_library() = all.library();
    *rest_def.mutable_library() = all.library();
    for (const tensorflow::NodeDef& n : all.node()) {
      if (train.count(n.name()) == 0) {
        *rest_def.add_node() = n;
        continue;
      }
      tensorflow::NodeDef* t = train_def.add_node();
      *t = n;
      Mark(t, marks);
    }
    tensorflow::NodeDef* init = train_def.add_node();
    init->set_name(kPsInitNode);
    init->set_op("NoOp");
    for (const std::string& i : initializers) init->add_input("^" + i);
    SessionOptions so;
    so.inter_op_threads = inter_op_threads;
    so.intra_op_threads = intra_op_threads;
    if (!optimize) so.optimizer = GraphOptimizerOptions::Disabled();
    distributed::WorkerOptions wo;
    wo.worker_index = worker_index;
    wo.is_chief = is_chief;
    wo.devices = devices;
    wo.loss = "";
    wo.partition_bytes = 0;  // as TF's replica_device_setter: each variable whole on one ps
    wo.ps_graph = train_def.SerializeAsString();
    wo.ps_init_node = kPsInitNode;
    wo.max_staleness = 0;  // TF's asynchronous training: unbounded
    wo.latest_checkpoint = [this]() -> absl::StatusOr<std::string> { return latest_; };
    py::gil_scoped_release release;
    session_ = ValueOrThrow(Session::Create(so, train_def));
    worker_ = ValueOrThrow(distributed::Worker::Create(session_.get(), &client_, std::move(wo)));
    if (rest_def.node_size() > 0) ThrowIfError(session_->Extend(rest_def));
  }

  void Extend(const PyGraph& graph, int start, int end) {
    const tensorflow::GraphDef def = graph.ToGraphDef(start, end);
    py::gil_scoped_release release;
    ThrowIfError(session_->Extend(def));
  }

  // The chief: initializes (or restores from `prefix`) every ps task not
  // initialized yet, sending the training graph to ps tasks without one.
  int64_t StartCluster(const std::string& prefix) {
    py::gil_scoped_release release;
    if (!prefix.empty()) latest_ = prefix;
    ThrowIfError(worker_->StartCluster(prefix));
    return ValueOrThrow(worker_->FetchGlobalStep());
  }

  int64_t WaitForCluster() {
    py::gil_scoped_release release;
    ThrowIfError(worker_->WaitForCluster());
    return ValueOrThrow(worker_->FetchGlobalStep());
  }

  bool IsUpdateTarget(const std::string& node) const {
    // A target that (through its inputs) runs an update op: the step is a
    // distributed training step.
    std::set<std::string> updates;
    for (const auto& a : worker_->plan().applies) updates.insert(a.node);
    std::shared_ptr<const Graph> g = session_->graph();
    const Node* n = g->FindNode(node);
    if (n == nullptr) return false;
    std::set<const Node*> seen{n};
    std::vector<const Node*> stack{n};
    while (!stack.empty()) {
      const Node* x = stack.back();
      stack.pop_back();
      if (updates.count(x->name()) > 0) return true;
      for (const Edge* e : x->in_edges()) {
        if (seen.insert(e->src).second) stack.push_back(e->src);
      }
    }
    return false;
  }

  // One training step: pull, compute (fetches, targets), push. Returns the
  // fetched values and the global step after the push.
  py::tuple TrainStep(const std::vector<std::string>& feed_names, const py::sequence& feed_values,
                      const std::vector<int>& feed_types, const std::vector<std::string>& fetches,
                      const std::vector<std::string>& targets) {
    auto feeds = Feeds(feed_names, feed_values, feed_types);
    std::vector<Tensor> outputs;
    absl::StatusOr<distributed::Worker::StepResult> r;
    {
      py::gil_scoped_release release;
      r = worker_->TrainStep(feeds, fetches, &outputs, targets);
      feeds.clear();
    }
    ThrowIfError(r.status());
    return py::make_tuple(Results(&outputs, fetches), r->global_step, r->applied);
  }

  // Forward only, on the current model (pulled read-only).
  py::list Evaluate(const std::vector<std::string>& feed_names, const py::sequence& feed_values,
                    const std::vector<int>& feed_types, const std::vector<std::string>& fetches,
                    const std::vector<std::string>& targets) {
    auto feeds = Feeds(feed_names, feed_values, feed_types);
    std::vector<Tensor> outputs;
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = worker_->Evaluate(feeds, fetches, &outputs, targets);
      feeds.clear();
    }
    ThrowIfError(s);
    return Results(&outputs, fetches);
  }

  // Runs locally only (local variables' initializers and the like).
  py::list RunLocal(const std::vector<std::string>& feed_names, const py::sequence& feed_values,
                    const std::vector<int>& feed_types, const std::vector<std::string>& fetches,
                    const std::vector<std::string>& targets) {
    auto feeds = Feeds(feed_names, feed_values, feed_types);
    std::vector<Tensor> outputs;
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = session_->Run(feeds, fetches, targets, &outputs);
      feeds.clear();
    }
    ThrowIfError(s);
    return Results(&outputs, fetches);
  }

  int64_t GlobalStep() {
    py::gil_scoped_release release;
    return ValueOrThrow(worker_->FetchGlobalStep());
  }

  // The chief: a cluster checkpoint DIRECTORY/BASENAME-STEP (every ps
  // writes its part; merged, published in DIRECTORY/checkpoint).
  std::string Save(const std::string& directory, const std::string& basename, int max_to_keep,
                   int64_t step) {
    py::gil_scoped_release release;
    const std::string key = absl::StrCat(directory, "\n", basename, "\n", max_to_keep);
    auto& ckpt = checkpointers_[key];
    if (ckpt == nullptr) {
      distributed::ClusterCheckpointer::Options o;
      o.directory = directory;
      o.basename = basename;
      o.max_to_keep = max_to_keep;
      ckpt = ValueOrThrow(distributed::ClusterCheckpointer::Create(o));
    }
    distributed::ClusterSaver saver(ckpt.get(), worker_.get(), latest_, nullptr);
    std::string prefix = ValueOrThrow(saver.Save(step));
    latest_ = prefix;
    return prefix;
  }

  // A training worker that is done tells the ps tasks (best effort).
  void Leave() {
    py::gil_scoped_release release;
    for (int ps = 0; ps < client_.num_ps(); ++ps) client_.Leave(ps, worker_index_).IgnoreError();
  }

  // The chief ends the job: waits (see distributed::WaitForWorkers) for the
  // other training workers to leave, then shuts every ps task down.
  void EndJob(int num_training_workers) {
    py::gil_scoped_release release;
    distributed::WaitForWorkers(&client_, num_training_workers, worker_index_, nullptr)
        .IgnoreError();
    for (int ps = 0; ps < client_.num_ps(); ++ps) {
      client_.Leave(ps, worker_index_).IgnoreError();
      client_.Shutdown(ps, "the chief finished the job").IgnoreError();
    }
  }

  py::dict Stats() const {
    const auto& st = worker_->stats();
    py::dict d;
    d["steps"] = st.steps;
    d["bytes_sent"] = st.bytes_sent;
    d["bytes_received"] = st.bytes_received;
    d["retries"] = st.retries;
    py::dict placement;
    for (const auto& v : worker_->plan().variables) placement[py::str(v.node)] = v.ps;
    d["placement"] = placement;
    d["graph_fingerprint"] = worker_->plan().graph_fingerprint;
    return d;
  }

  bool is_chief() const { return chief_; }

  void Close() {
    py::gil_scoped_release release;
    worker_.reset();
    session_.reset();
  }

 private:
  distributed::PsClient client_;
  int worker_index_;
  bool chief_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<distributed::Worker> worker_;
  std::string latest_;  // the newest checkpoint (a restarted ps is restored from it)
  std::map<std::string, std::unique_ptr<distributed::ClusterCheckpointer>> checkpointers_;
};

}  // namespace

void RegisterDistributedBindings(py::module_& m) {
  m.def(
      "parse_tf_config",
      [](const std::string& json) {
        return ConfigToDict(ValueOrValueError(ClusterSpec::FromTfConfig(json)));
      },
      py::arg("json"), "TF_CONFIG's JSON, checked by distributed::ClusterSpec (ValueError).");
  m.def(
      "check_cluster",
      [](const std::map<std::string, std::vector<std::string>>& jobs) {
        return ValueOrValueError(ClusterSpec::Create(jobs)).Devices();
      },
      py::arg("jobs"), "Validates a cluster (ValueError); returns its device names.");
  m.def(
      "task_config",
      [](const std::map<std::string, std::vector<std::string>>& jobs, const std::string& job,
         int index) { return ConfigToDict(MakeConfig(jobs, job, index)); },
      py::arg("jobs"), py::arg("job"), py::arg("index"));
  py::class_<PyPsTask>(m, "PsTask")
      .def(py::init<const std::map<std::string, std::vector<std::string>>&, int, int>(),
           py::arg("jobs"), py::arg("index"), py::arg("threads") = 0)
      .def("join", &PyPsTask::Join)
      .def("stop", &PyPsTask::Stop, py::arg("reason") = "")
      .def("status", &PyPsTask::Status)
      .def_property_readonly("port", &PyPsTask::port)
      .def_property_readonly("finished", &PyPsTask::finished);
  py::class_<PyTaskServer>(m, "TaskServer")
      .def(py::init<const std::string&>(), py::arg("address"))
      .def("stop", &PyTaskServer::Stop)
      .def_property_readonly("port", &PyTaskServer::port);
  py::class_<PyWorker>(m, "Worker")
      .def(py::init<const std::vector<std::string>&, int, bool, const std::vector<std::string>&,
                    int, int, bool, const PyGraph&, int, const std::vector<std::string>&,
                    const std::map<std::string, bool>&, const std::vector<std::string>&,
                    const std::string&>(),
           py::arg("ps_addresses"), py::arg("worker_index"), py::arg("is_chief"),
           py::arg("devices"), py::arg("inter_op_threads"), py::arg("intra_op_threads"),
           py::arg("optimize"), py::arg("graph"), py::arg("num_nodes"), py::arg("train_nodes"),
           py::arg("variables"), py::arg("initializers"), py::arg("global_step"))
      .def("extend", &PyWorker::Extend)
      .def("start_cluster", &PyWorker::StartCluster, py::arg("restore_prefix") = "")
      .def("wait_for_cluster", &PyWorker::WaitForCluster)
      .def("is_update_target", &PyWorker::IsUpdateTarget)
      .def("train_step", &PyWorker::TrainStep)
      .def("evaluate", &PyWorker::Evaluate)
      .def("run_local", &PyWorker::RunLocal)
      .def("global_step", &PyWorker::GlobalStep)
      .def("save", &PyWorker::Save)
      .def("leave", &PyWorker::Leave)
      .def("end_job", &PyWorker::EndJob)
      .def("stats", &PyWorker::Stats)
      .def("close", &PyWorker::Close)
      .def_property_readonly("is_chief", &PyWorker::is_chief);
}

}  // namespace python
}  // namespace recflow
