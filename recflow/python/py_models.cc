// The model zoo and its input for Python (recflow.models, docs/python.md):
//
//   zoo_schema(yaml, filename)          the batch components a run config's
//                                       data gives: [(name, dtype, shape)]
//   zoo_build(graph, yaml, filename, scope_name, components, trainable)
//                                       models::BuildModel into the Python
//                                       graph's C++ Graph (the builders
//                                       `recflow train` runs), over
//                                       models::Placeholders or over the
//                                       given batch components
//                                       (models::InputsFromBatch)
//   ZooBatches(yaml, filename, files, epochs)
//                                       the config's batches as `recflow
//                                       train` reads them
//                                       (models::MakeRunDataset), as NumPy
//                                       arrays in the schema's order
//
// Configs arrive as YAML text (Python passes its dict as JSON, which YAML
// reads), parsed by models::ParseRunConfig, so errors name the key as they
// do for `recflow train --config`. Node references go back to Python as
// (id, index) pairs; Python wraps them (recflow/models.py).
//
// Thread-safety: as PyGraph (the GIL serializes graph building);
// ZooBatches::Next releases the GIL while it waits for a batch, and one
// ZooBatches must not be used from two threads at once.
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/data/dataset.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/models/config.h"
#include "recflow/models/input_pipeline.h"
#include "recflow/models/model.h"
#include "recflow/ops/array_ops.h"
#include "recflow/python/py_graph.h"
#include "recflow/python/py_status.h"
#include "recflow/python/py_tensor.h"
#include "recflow/train/variables.h"

namespace py = pybind11;

namespace recflow {
namespace python {
namespace {

models::RunConfig ParseConfig(const std::string& yaml, const std::string& filename) {
  return ValueOrThrow(models::ParseRunConfig(yaml, filename));
}

py::tuple Pair(const Output& o) { return py::make_tuple(o.node()->id(), o.index()); }

py::object PairOrNone(const Output& o) {
  return o.valid() ? py::object(Pair(o)) : py::object(py::none());
}

py::list Pairs(const std::vector<Output>& outputs) {
  py::list out;
  for (const Output& o : outputs) out.append(Pair(o));
  return out;
}

py::dict PairMap(const std::map<std::string, Output>& outputs) {
  py::dict out;
  for (const auto& [name, o] : outputs) out[py::str(name)] = Pair(o);
  return out;
}

py::list Schema(const models::RunConfig& config) {
  models::InputPipeline p = ValueOrThrow(models::MakeInputPipeline(config));
  const std::vector<std::string> names = p.schema.component_names();
  const std::vector<DataType> dtypes = p.schema.dtypes();
  const std::vector<PartialShape> shapes = models::ComponentShapes(p.schema);
  py::list out;
  for (size_t i = 0; i < names.size(); ++i) {
    py::list dims;
    for (int64_t d : shapes[i].dims()) {
      dims.append(d < 0 ? py::object(py::none()) : py::object(py::int_(d)));
    }
    out.append(py::make_tuple(names[i], static_cast<int>(dtypes[i]), dims));
  }
  return out;
}

bool BoolAttr(const Node* n, const char* name) {
  bool v = false;
  return GetNodeAttr(AttrSlice(n->def()), name, &v).ok() && v;
}

// The variables and hash tables the build added (node ids >= before):
// variables as (variable id, initializer id, trainable), tables as (id,
// trainable).
void CollectState(const Graph& graph, int before, py::dict* out) {
  py::list variables, tables;
  for (int id = before; id < graph.num_nodes(); ++id) {
    const Node* n = graph.nodes()[id].get();
    if (n->op() == "HashEmbeddingTableOp") {
      tables.append(py::make_tuple(id, BoolAttr(n, train::internal::kTrainableAttr)));
    }
    if (!BoolAttr(n, train::internal::kInitializerAttr)) continue;
    const Edge* e = n->input_edge(0);
    if (e == nullptr) continue;
    const Node* var = e->src;
    variables.append(py::make_tuple(var->id(), id,
                                    BoolAttr(var, train::internal::kTrainableAttr),
                                    BoolAttr(var, train::internal::kGlobalStepAttr)));
  }
  (*out)["variables"] = variables;
  (*out)["tables"] = tables;
}

py::dict Build(PyGraph& g, const std::string& yaml, const std::string& filename,
               const std::string& scope_name, const py::object& components, bool trainable) {
  g.CheckUsable();
  const models::RunConfig config = ParseConfig(yaml, filename);
  const Scope& root = g.root_scope();
  if (!root.ok()) {
    throw StatusError(absl::FailedPreconditionError(absl::StrCat(
        "the model zoo cannot build into this graph: an earlier C++ builder failed in it (",
        root.status().message(), "); build the graph anew")));
  }
  Graph* graph = g.graph();
  const int before = graph->num_nodes();
  const Scope scope = scope_name.empty() ? root : root.NewSubScope(scope_name);
  models::ModelInputs inputs;
  py::dict out;
  if (components.is_none()) {
    inputs = models::Placeholders(scope, config.model);
  } else {
    models::InputPipeline p = ValueOrThrow(models::MakeInputPipeline(config));
    std::vector<Output> batch;
    for (py::handle h : components) {
      py::tuple t = py::cast<py::tuple>(h);
      batch.push_back(Output(g.NodeAt(py::cast<int>(t[0])), py::cast<int>(t[1])));
    }
    if (static_cast<int>(batch.size()) != p.schema.num_components()) {
      throw py::value_error(absl::StrCat("the config's data has ", p.schema.num_components(),
                                         " batch components, but ", batch.size(),
                                         " were given"));
    }
    inputs = ValueOrThrow(models::InputsFromBatch(scope, config, p.schema, batch));
  }
  absl::StatusOr<models::Model> built =
      models::BuildModel(scope, config.model, inputs, {.trainable = trainable});
  absl::Status s = built.status();
  if (!root.ok()) {
    // The builder recorded an error in the scope: C++ builders can no
    // longer use this graph (the scope keeps its first error).
    if (graph->num_nodes() > before) g.MarkBroken(root.status(), graph->nodes()[before]->name());
    throw StatusError(s.ok() ? root.status() : s);
  }
  // An error returned before anything was wrong in the scope leaves whole
  // nodes (the placeholders, ...) that nothing uses: the graph stays usable.
  ThrowIfError(s);
  const models::Model& m = *built;
  py::dict in;
  in["labels"] = Pair(inputs.labels);
  in["dense"] = Pair(inputs.dense);
  for (size_t i = 0; i < inputs.sparse.size(); ++i) {
    const std::string& f = config.model.sparse_features[i].name;
    in[py::str(f + "/ids")] = Pair(inputs.sparse[i].ids);
    in[py::str(f + "/row_splits")] = Pair(inputs.sparse[i].row_splits);
  }
  out["inputs"] = in;
  out["logits"] = Pair(m.logits);
  out["probabilities"] = Pair(m.probabilities);
  out["loss"] = Pair(m.loss);
  out["train_op"] = m.train_op.valid() ? py::object(py::int_(m.train_op.node()->id()))
                                       : py::object(py::none());
  out["global_step"] = PairOrNone(m.global_step);
  out["outputs"] = PairMap(m.outputs);
  out["embedding_variables"] = Pairs(m.embedding_variables);
  out["dense_variables"] = Pairs(m.dense_variables);
  out["num_parameters"] = m.num_parameters;
  py::dict sigs;
  for (const auto& [name, sig] : models::ServingSignatures(config.model, inputs, m)) {
    py::dict d;
    d["inputs"] = PairMap(sig.inputs);
    d["outputs"] = PairMap(sig.outputs);
    d["method_name"] = sig.method_name;
    sigs[py::str(name)] = d;
  }
  out["signatures"] = sigs;
  out["model_type"] = config.model.type;
  out["batch_size"] = config.train.batch_size;
  CollectState(*graph, before, &out);
  return out;
}

// A run config's batches, read as `recflow train` reads them.
class ZooBatches {
 public:
  ZooBatches(const std::string& yaml, const std::string& filename, const std::string& files,
             int64_t epochs) {
    models::RunConfig config = ParseConfig(yaml, filename);
    if (!files.empty()) config.data.train = files;
    if (config.data.train.empty()) {
      throw py::value_error(absl::StrCat(
          filename, ": no data to read: give files, or data.train in the config"));
    }
    pipeline_ = ValueOrThrow(models::MakeInputPipeline(config));
    data::Dataset ds =
        ValueOrThrow(models::MakeRunDataset(config, pipeline_, config.data.train, epochs));
    iterator_ = std::make_unique<data::Iterator>(ValueOrThrow(ds.MakeIterator()));
    num_components_ = pipeline_.schema.num_components();
  }

  // The next batch's components, or None at the end of the data.
  py::object Next() {
    if (iterator_ == nullptr) throw py::value_error("ZooBatches: already closed");
    data::Element batch;
    bool end = false;
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = iterator_->GetNext(&batch, &end);
    }
    ThrowIfError(s);
    if (end) return py::none();
    py::list out;
    for (int i = 0; i < num_components_ && i < static_cast<int>(batch.size()); ++i) {
      out.append(TensorToNumpy(std::move(batch[i]), "batch component"));
    }
    return out;
  }

  // Lines skipped as bad records so far.
  int64_t BadRecords() const {
    return pipeline_.stats == nullptr ? 0 : pipeline_.stats->records_skipped();
  }

  void Close() { iterator_.reset(); }

 private:
  models::InputPipeline pipeline_;
  std::unique_ptr<data::Iterator> iterator_;
  int num_components_ = 0;
};

}  // namespace

void RegisterModelBindings(py::module_& m) {
  m.def(
      "zoo_schema",
      [](const std::string& yaml, const std::string& filename) {
        return Schema(ParseConfig(yaml, filename));
      },
      py::arg("yaml"), py::arg("filename"),
      "The batch components (name, dtype number, shape) of a run config's data.");
  m.def("zoo_build", &Build, py::arg("graph"), py::arg("yaml"), py::arg("filename"),
        py::arg("scope_name"), py::arg("components"), py::arg("trainable"),
        "Builds the run config's zoo model into the graph (see recflow/models.py).");
  py::class_<ZooBatches>(m, "ZooBatches")
      .def(py::init<const std::string&, const std::string&, const std::string&, int64_t>(),
           py::arg("yaml"), py::arg("filename"), py::arg("files"), py::arg("epochs"))
      .def("next", &ZooBatches::Next)
      .def("bad_records", &ZooBatches::BadRecords)
      .def("close", &ZooBatches::Close);
}

}  // namespace python
}  // namespace recflow
