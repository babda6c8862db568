#include "recflow/runtime/gradient_checker.h"

#include <cmath>

#include "recflow/core/status.h"
#include "recflow/framework/gradients.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

double Get(const Tensor& t, int64_t i) {
  return t.dtype() == DT_DOUBLE ? t.flat<double>()[i] : static_cast<double>(t.flat<float>()[i]);
}
void Set(Tensor* t, int64_t i, double v) {
  if (t->dtype() == DT_DOUBLE) {
    t->flat<double>()[i] = v;
  } else {
    t->flat<float>()[i] = static_cast<float>(v);
  }
}

}  // namespace

absl::StatusOr<double> ComputeGradientError(const Scope& scope, const std::vector<Output>& xs,
                                            const std::vector<Tensor>& x_values,
                                            const std::vector<Output>& ys,
                                            const GradientCheckOptions& options) {
  RETURN_IF_ERROR(scope.status());
  if (xs.size() != x_values.size()) {
    return errors::InvalidArgument(xs.size(), " xs but ", x_values.size(), " values");
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i].node()->op() != "Placeholder") {
      return errors::InvalidArgument("x '", xs[i].name(), "' must be a Placeholder");
    }
    if (x_values[i].dtype() != DT_FLOAT && x_values[i].dtype() != DT_DOUBLE) {
      return errors::InvalidArgument("x '", xs[i].name(), "' must be float or double");
    }
  }
  std::vector<Output> dys;
  for (const Output& y : ys) {
    NodeBuilder b(scope.GetUniqueNameForOp("grad_check_dy"), "Placeholder");
    b.Attr("dtype", BaseType(y.type()));
    dys.push_back(Output(scope.AddNode(b)));
  }
  std::vector<Output> grads;
  RETURN_IF_ERROR(AddSymbolicGradients(scope, ys, xs, dys, &grads));
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, scope.ToGraphDef());
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(SessionOptions{1, 1}, def));

  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < xs.size(); ++i) feeds.emplace_back(xs[i].name(), x_values[i]);
  std::vector<std::string> y_names, grad_names;
  for (const Output& y : ys) y_names.push_back(y.name());
  std::vector<size_t> grad_index;  // which xs have a gradient
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].valid()) {
      grad_index.push_back(i);
      grad_names.push_back(grads[i].name());
    }
  }
  std::vector<Tensor> y_values;
  RETURN_IF_ERROR(session->Run(feeds, y_names, {}, &y_values));

  // Symbolic Jacobian: row (y k, element j) = gradients for dy = e_j.
  // jac[k][j][i][e]: d y_k[j] / d x_i[e].
  std::vector<std::vector<std::vector<std::vector<double>>>> symbolic(ys.size());
  for (size_t k = 0; k < ys.size(); ++k) {
    const int64_t ny = y_values[k].NumElements();
    symbolic[k].resize(ny);
    for (int64_t j = 0; j < ny; ++j) {
      auto run_feeds = feeds;
      for (size_t m = 0; m < ys.size(); ++m) {
        Tensor dy(y_values[m].dtype(), y_values[m].shape());
        for (int64_t q = 0; q < dy.NumElements(); ++q) Set(&dy, q, (m == k && q == j) ? 1.0 : 0.0);
        run_feeds.emplace_back(dys[m].name(), dy);
      }
      std::vector<Tensor> g;
      if (!grad_names.empty()) RETURN_IF_ERROR(session->Run(run_feeds, grad_names, {}, &g));
      symbolic[k][j].resize(xs.size());
      for (size_t i = 0; i < xs.size(); ++i) {
        symbolic[k][j][i].assign(x_values[i].NumElements(), 0.0);
      }
      for (size_t gi = 0; gi < grad_index.size(); ++gi) {
        const size_t i = grad_index[gi];
        if (g[gi].NumElements() != x_values[i].NumElements()) {
          return errors::InvalidArgument("gradient for x '", xs[i].name(), "' has shape ",
                                         g[gi].shape().DebugString(), " but x has shape ",
                                         x_values[i].shape().DebugString());
        }
        for (int64_t e = 0; e < g[gi].NumElements(); ++e) symbolic[k][j][i][e] = Get(g[gi], e);
      }
    }
  }

  // Numeric Jacobian, column by column, and the largest difference.
  double max_error = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double delta =
        options.delta > 0 ? options.delta : (x_values[i].dtype() == DT_DOUBLE ? 1e-6 : 1e-3);
    for (int64_t e = 0; e < x_values[i].NumElements(); ++e) {
      std::vector<Tensor> plus, minus;
      for (int sign : {+1, -1}) {
        Tensor moved = x_values[i].DeepCopy();
        Set(&moved, e, Get(x_values[i], e) + sign * delta);
        auto run_feeds = feeds;
        run_feeds[i].second = moved;
        RETURN_IF_ERROR(session->Run(run_feeds, y_names, {}, sign > 0 ? &plus : &minus));
      }
      for (size_t k = 0; k < ys.size(); ++k) {
        for (int64_t j = 0; j < plus[k].NumElements(); ++j) {
          const double numeric = (Get(plus[k], j) - Get(minus[k], j)) / (2 * delta);
          const double err = std::abs(numeric - symbolic[k][j][i][e]);
          if (std::isnan(err)) return std::numeric_limits<double>::infinity();
          max_error = std::max(max_error, err);
        }
      }
    }
  }
  return max_error;
}

}  // namespace recflow
