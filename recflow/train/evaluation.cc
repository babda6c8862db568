#include "recflow/train/evaluation.h"

#include <chrono>
#include <utility>
#include <vector>

#include "recflow/checkpoint/checkpoint_state.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/train/input_hooks.h"
#include "recflow/train/monitored_session.h"

namespace recflow::train {

absl::StatusOr<BinaryMetricsResult> EvaluateBatches(const data::Dataset& ds, int64_t max_batches,
                                                    const EvalStep& step, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(data::Iterator iter, ds.MakeIterator());
  BinaryMetrics metrics;
  Tensor probs;
  for (int64_t b = 0; max_batches <= 0 || b < max_batches; ++b) {
    data::Element e;
    bool end = false;
    RETURN_IF_ERROR(iter.GetNext(&e, &end));
    if (end) break;
    RETURN_IF_ERROR(step(e, &probs));
    const Tensor& labels = e[0];
    RETURN_IF_ERROR(metrics.Add(absl::MakeConstSpan(probs.data<float>(), probs.NumElements()),
                                absl::MakeConstSpan(labels.data<float>(), labels.NumElements())));
  }
  if (seconds != nullptr) {
    *seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (metrics.count() == 0) return errors::InvalidArgument("the eval data has no examples");
  return metrics.Result();
}

absl::StatusOr<BinaryMetricsResult> Evaluate(Session* session, const data::Dataset& ds,
                                             int64_t max_batches, double* seconds,
                                             const std::string& probabilities) {
  std::vector<Tensor> out;
  return EvaluateBatches(
      ds, max_batches,
      [&](const data::Element& e, Tensor* probs) -> absl::Status {
        RETURN_IF_ERROR(session->Run(BatchFeeds(e), {probabilities}, {}, &out));
        *probs = out[0];
        return absl::OkStatus();
      },
      seconds);
}

absl::StatusOr<CheckpointEvaluation> EvaluateCheckpoint(const tensorflow::GraphDef& graph_def,
                                                        const std::string& dir,
                                                        const std::string& prefix,
                                                        const data::Dataset& ds,
                                                        const EvaluateCheckpointOptions& options) {
  CheckpointEvaluation r;
  r.prefix = prefix;
  if (r.prefix.empty()) {
    ASSIGN_OR_RETURN(checkpoint::LatestCheckpointInfo found,
                     checkpoint::FindLatestCheckpoint(Env::Default(), dir));
    if (!found.recovery.empty() && options.log != nullptr) {
      std::fprintf(options.log, "warning: %s\n", found.recovery.c_str());
    }
    r.prefix = found.prefix;
  }
  SessionOptions so;
  so.inter_op_threads = so.intra_op_threads = options.threads;
  ASSIGN_OR_RETURN(auto session, Session::Create(so, graph_def));
  RETURN_IF_ERROR(RestoreModel(session.get(), dir, r.prefix));
  ASSIGN_OR_RETURN(r.metrics, Evaluate(session.get(), ds, options.max_batches, &r.seconds));
  return r;
}

}  // namespace recflow::train
