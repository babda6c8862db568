#include "recflow/distributed/cluster_updates.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/status.h"
#include "recflow/distributed/task_threads.h"
#include "recflow/embedding/graph_tables.h"
#include "recflow/train/variables.h"

namespace recflow::distributed {
namespace {

// Where a publish writes its parts before they are merged: a hidden
// directory beside the updates (ListUpdates never sees it).
constexpr char kTempDirPrefix[] = ".tmp-update-";

std::string RandomSuffix() {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return absl::StrFormat("%016x", r);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterUpdatePublisher>> ClusterUpdatePublisher::Create(
    ClusterUpdateOptions options) {
  if (options.directory.empty()) {
    return errors::InvalidArgument("the model update directory is empty");
  }
  if (options.num_ps < 1 || !options.publish_part) {
    return errors::InvalidArgument("publishing model updates in a cluster needs the ps tasks (",
                                   options.num_ps, ") and a way to ask them");
  }
  Env* env = options.env;
  RETURN_IF_ERROR(env->RecursivelyCreateDir(options.directory));
  // A crashed publish: its parts' directory, and files of an unfinished
  // merge (they hold no index, so no reader lists them).
  if (auto children = env->GetChildren(options.directory); children.ok()) {
    for (const std::string& child : *children) {
      if (absl::StartsWith(child, kTempDirPrefix)) {
        DeleteRecursively(env, JoinPath(options.directory, child)).IgnoreError();
      }
    }
  }
  checkpoint::RemoveUpdateTemporaries(env, options.directory);
  ASSIGN_OR_RETURN(auto listed, checkpoint::ListUpdates(env, options.directory));
  std::unique_ptr<ClusterUpdatePublisher> p(new ClusterUpdatePublisher(std::move(options)));
  p->last_sequence_ = listed.empty() ? 0 : listed.back().first;
  p->since_.assign(p->options_.num_ps, -1);
  p->state_ids_.assign(p->options_.num_ps, 0);
  return p;
}

absl::StatusOr<train::PublishResult> ClusterUpdatePublisher::Publish(int64_t step, bool full) {
  absl::StatusOr<train::PublishResult> result =
      PublishOnce(step, /*full=*/full || !last_step_.has_value());
  if (absl::IsAborted(result.status())) {
    // A ps restored an older state since the previous update: everything.
    result = PublishOnce(step, /*full=*/true);
  }
  return result;
}

absl::StatusOr<train::PublishResult> ClusterUpdatePublisher::PublishOnce(int64_t step,
                                                                         bool full) {
  Env* env = options_.env;
  train::PublishResult result;
  checkpoint::UpdateMeta& meta = result.meta;
  meta.sequence = last_sequence_ + 1;
  meta.step = step;
  meta.full = full;
  meta.since_step = meta.full ? -1 : *last_step_;
  meta.time_micros = static_cast<int64_t>(env->NowUnixMicros());
  meta.tables = options_.tables;
  meta.variables = options_.variables;
  result.prefix = checkpoint::UpdatePrefix(options_.directory, meta.sequence);

  const std::string temp_dir = JoinPath(
      options_.directory, absl::StrCat(kTempDirPrefix, meta.sequence, "-", RandomSuffix()));
  RETURN_IF_ERROR(env->RecursivelyCreateDir(temp_dir));
  struct RemoveTemp {
    Env* env;
    std::string dir;
    ~RemoveTemp() { DeleteRecursively(env, dir).IgnoreError(); }
  } remove_temp{env, temp_dir};

  // Every ps task's part, at once.
  const int n = options_.num_ps;
  std::vector<std::string> parts(n + 1);
  std::vector<PublishUpdateResponse> responses(n);
  std::vector<absl::Status> statuses =
      RunOnThreads("publish_update", n, [&](int ps) -> absl::Status {
        parts[ps] = JoinPath(temp_dir, absl::StrCat("part-", ps));
        PublishUpdateRequest request;
        request.set_prefix(parts[ps]);
        request.set_part(ps);
        request.set_full(meta.full);
        request.set_since_step(meta.full ? -1 : since_[ps]);
        for (const std::string& v : options_.variables) request.add_variables(v);
        return options_.publish_part(ps, request, &responses[ps]);
      });
  for (int ps = 0; ps < n; ++ps) {
    RETURN_IF_ERROR(errors::Annotate(statuses[ps], absl::StrCat("ps task ", ps, " of ", n)));
  }
  for (int ps = 0; ps < n && !meta.full; ++ps) {
    if (responses[ps].state_id() != state_ids_[ps]) {
      return errors::Aborted("ps task ", ps, " restored its state since the previous update");
    }
  }
  // The chief's part: the metadata and the step times.
  parts[n] = JoinPath(temp_dir, "meta");
  {
    checkpoint::BundleWriterOptions wo;
    wo.direct_io = false;
    ASSIGN_OR_RETURN(auto writer, checkpoint::BundleWriter::Create(env, parts[n], wo));
    const std::vector<int64_t> times = step_times_.Between(meta.since_step, step);
    if (!times.empty()) {
      const int64_t rows = static_cast<int64_t>(times.size() / 2);
      RETURN_IF_ERROR(writer->Add(checkpoint::kUpdateStepTimesKey,
                                  Tensor::FromVector<int64_t>(times, {rows, 2})));
    }
    RETURN_IF_ERROR(writer->Add(checkpoint::kUpdateMetaKey,
                                Tensor::Scalar<std::string>(checkpoint::FormatUpdateMeta(meta))));
    RETURN_IF_ERROR(writer->Finish());
  }
  // The commit point: the merged index, written last.
  RETURN_IF_ERROR(checkpoint::MergeBundles(env, parts, result.prefix,
                                           /*allow_missing_files=*/false, /*sync=*/false));

  last_sequence_ = meta.sequence;
  last_step_ = step;
  for (int ps = 0; ps < n; ++ps) {
    since_[ps] = responses[ps].global_step();
    state_ids_[ps] = responses[ps].state_id();
    result.rows += responses[ps].rows();
    result.bytes += responses[ps].bytes();
  }
  step_times_.DropThrough(step);
  return result;
}

train::UpdateWriterFactory ClusterUpdateWriterFactory(ClusterUpdateOptions options) {
  return [options = std::move(options)](
             Session* session) -> absl::StatusOr<std::unique_ptr<train::UpdateWriter>> {
    ClusterUpdateOptions o = options;
    const Graph& graph = *session->graph();
    ASSIGN_OR_RETURN(std::vector<embedding::TableNode> tables,
                     embedding::FindGraphTables(graph, *session->device()->resource_manager()));
    o.tables.clear();
    for (const embedding::TableNode& t : tables) o.tables.push_back(t.node);
    ASSIGN_OR_RETURN(std::vector<Output> vars, train::PublishedVariables(graph, {}));
    o.variables.clear();
    for (const Output& v : vars) o.variables.push_back(train::VariableName(v));
    ASSIGN_OR_RETURN(auto p, ClusterUpdatePublisher::Create(std::move(o)));
    return std::unique_ptr<train::UpdateWriter>(std::move(p));
  };
}

}  // namespace recflow::distributed
