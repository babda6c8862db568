// recflow.metrics: the evaluation metrics of `recflow train` / `recflow eval`
// (train/metrics.h: exact tie-aware AUC, GAUC over user groups, logloss)
// over NumPy arrays. One call accumulates everything and returns a dict.
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "absl/types/span.h"
#include "recflow/python/py_status.h"
#include "recflow/train/metrics.h"

namespace py = pybind11;

namespace recflow {
namespace python {
namespace {

template <typename T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

template <typename T>
absl::Span<const T> Flat(const Array<T>& a) {
  return absl::Span<const T>(a.data(), static_cast<size_t>(a.size()));
}

py::dict BinaryMetricsOf(const Array<float>& labels, const Array<float>& predictions,
                         py::object weights, py::object groups, double threshold,
                         double eps) {
  Array<float> w;
  Array<int64_t> g;
  if (!weights.is_none()) w = weights.cast<Array<float>>();
  if (!groups.is_none()) g = groups.cast<Array<int64_t>>();
  train::BinaryMetricsResult r;
  {
    py::gil_scoped_release release;
    train::BinaryMetrics m(threshold, eps);
    ThrowIfError(m.Add(Flat(predictions), Flat(labels),
                       weights.is_none() ? absl::Span<const float>() : Flat(w),
                       groups.is_none() ? absl::Span<const int64_t>() : Flat(g)));
    r = m.Result();
  }
  py::dict d;
  d["count"] = r.count;
  d["weight"] = r.weight;
  d["auc"] = r.auc;
  d["logloss"] = r.logloss;
  d["mean_prediction"] = r.mean_prediction;
  d["observed_ctr"] = r.observed_ctr;
  d["calibration"] = r.calibration;
  d["accuracy"] = r.accuracy;
  if (!groups.is_none()) {
    d["gauc"] = r.gauc;
    d["gauc_users"] = r.gauc_users;
  }
  return d;
}

}  // namespace

void RegisterMetricsBindings(py::module_& m) {
  m.def("binary_metrics", &BinaryMetricsOf, py::arg("labels"), py::arg("predictions"),
        py::arg("weights") = py::none(), py::arg("groups") = py::none(),
        py::arg("threshold") = 0.5, py::arg("eps") = 1e-7,
        "train::BinaryMetrics over arrays: auc, logloss, gauc (with groups), ...");
}

}  // namespace python
}  // namespace recflow
