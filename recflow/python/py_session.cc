// PySession: the C++ half of recflow's Python Session
// (recflow/client/session.py): a recflow Session (runtime/session.h), the
// graph extended into it, and Run with NumPy in and out (py_tensor.h).
//
// Threading: Run releases the GIL while the graph runs, so other Python
// threads (and other Runs of the same session: Session::Run is thread-safe)
// proceed meanwhile. Close drops the session; Runs already in flight keep it
// alive until they return (they hold their own reference), and any later
// call raises RuntimeError. Ownership: the Python object owns the PySession,
// which shares the Session with in-flight Runs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/threadpool.h"
#include "recflow/python/py_graph.h"
#include "recflow/python/py_status.h"
#include "recflow/python/py_tensor.h"
#include "recflow/runtime/session.h"
#include "recflow/runtime/step_stats.h"

namespace py = pybind11;

namespace recflow {
namespace python {
namespace {

class PySession {
 public:
  PySession(int inter_op_threads, int intra_op_threads, bool optimize) {
    SessionOptions options;
    options.inter_op_threads = inter_op_threads;
    options.intra_op_threads = intra_op_threads;
    if (!optimize) options.optimizer = GraphOptimizerOptions::Disabled();
    session_ = ValueOrThrow(Session::Create(options));
  }

  // Sends nodes [start, end) of `graph` to the session.
  void Extend(const PyGraph& graph, int start, int end) {
    std::shared_ptr<Session> session = Get();
    const tensorflow::GraphDef def = graph.ToGraphDef(start, end);
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = session->Extend(def);
    }
    ThrowIfError(s);
  }

  py::object Run(const std::vector<std::string>& feed_names,
                 const py::sequence& feed_values,
                 const std::vector<int>& feed_types,
                 const std::vector<std::string>& fetches,
                 const std::vector<std::string>& targets, bool trace) {
    std::shared_ptr<Session> session = Get();
    const size_t num_feeds = feed_names.size();
    if (py::len(feed_values) != num_feeds || feed_types.size() != num_feeds) {
      throw py::value_error(absl::StrCat("run: ", num_feeds, " feed names, ",
                                         py::len(feed_values), " values and ",
                                         feed_types.size(), " dtypes"));
    }
    std::vector<std::pair<std::string, Tensor>> feeds;
    feeds.reserve(num_feeds);
    for (size_t k = 0; k < num_feeds; ++k) {
      if (!DataTypeIsValid(feed_types[k])) {
        throw py::value_error(absl::StrCat("feed '", feed_names[k],
                                           "': ", feed_types[k],
                                           " is not a DataType"));
      }
      feeds.emplace_back(
          feed_names[k],
          TensorFromPython(feed_values[k], static_cast<DataType>(feed_types[k]),
                           absl::StrCat("feed '", feed_names[k], "'")));
    }
    std::vector<Tensor> outputs;
    RunOptions options;
    options.trace = trace;
    RunMetadata metadata;
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = session->Run(options, feeds, fetches, targets, &outputs,
                       trace ? &metadata : nullptr);
      feeds.clear();  // before the fetches: a fetched feed then owns its buffer
                      // alone
    }
    ThrowIfError(s);
    py::list results;
    for (size_t i = 0; i < outputs.size(); ++i) {
      results.append(FetchToPython(std::move(outputs[i]),
                                   absl::StrCat("fetch '", fetches[i], "'")));
    }
    if (!trace) return results;
    py::list nodes;
    for (const NodeExecStats& n : metadata.step_stats.nodes) {
      py::dict d;
      d["node_name"] = n.node_name;
      d["op"] = n.op;
      d["start_micros"] = n.start_micros;
      d["end_micros"] = n.end_micros;
      d["thread_id"] = n.thread_id;
      d["thread_name"] = n.thread_name;
      nodes.append(d);
    }
    return py::make_tuple(results, nodes,
                          StepStatsToChromeTrace(metadata.step_stats));
  }

  void Close() {
    std::shared_ptr<Session> last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last = std::move(session_);
    }
    if (last != nullptr) {
      py::gil_scoped_release
          release;  // joining the session's threads needs no Python
      last.reset();
    }
  }

  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return session_ == nullptr;
  }

 private:
  std::shared_ptr<Session> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (session_ == nullptr)
      throw std::runtime_error("Attempted to use a closed Session.");
    return session_;
  }

  mutable std::mutex mu_;
  std::shared_ptr<Session> session_;  // null once closed
};

}  // namespace

void RegisterSessionBindings(py::module_& m) {
  py::class_<PySession>(m, "Session",
                        "The C++ half of a Python Session (see py_session.cc).")
      .def(py::init<int, int, bool>(), py::arg("inter_op_threads"),
           py::arg("intra_op_threads"), py::arg("optimize"))
      .def("extend", &PySession::Extend, py::arg("graph"), py::arg("start"),
           py::arg("end"))
      .def("run", &PySession::Run, py::arg("feed_names"),
           py::arg("feed_values"), py::arg("feed_types"), py::arg("fetches"),
           py::arg("targets"), py::arg("trace") = false)
      .def("close", &PySession::Close)
      .def_property_readonly("closed", &PySession::closed);
  m.def("num_schedulable_cpus", &NumSchedulableCPUs);
}

}  // namespace python
}  // namespace recflow
