#include "recflow/train/summary_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::train {

const std::vector<double>& DefaultHistogramBucketLimits() {
  static const std::vector<double>* limits = [] {
    std::vector<double> positive;
    for (double v = 1e-12; v < 1e20; v *= 1.1) positive.push_back(v);
    auto* out = new std::vector<double>;
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) out->push_back(-*it);
    out->push_back(0.0);
    out->insert(out->end(), positive.begin(), positive.end());
    out->push_back(DBL_MAX);
    return out;
  }();
  return *limits;
}

SummaryWriter::SummaryWriter(Env* env, std::string path,
                             std::unique_ptr<WritableFile> file)
    : env_(env), path_(std::move(path)), file_(std::move(file)),
      writer_(std::make_unique<RecordWriter>(file_.get())) {}

SummaryWriter::~SummaryWriter() { Close().IgnoreError(); }

absl::StatusOr<std::unique_ptr<SummaryWriter>> SummaryWriter::Create(
    Env* env, const std::string& logdir, const std::string& filename_suffix) {
  if (env == nullptr) env = Env::Default();
  RETURN_IF_ERROR(env->RecursivelyCreateDir(logdir));
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const uint64_t now = env->NowUnixMicros();
  const std::string path = JoinPath(
      logdir, absl::StrCat("events.out.tfevents.", now / 1000000, ".", host,
                           filename_suffix));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(path));
  std::unique_ptr<SummaryWriter> w(new SummaryWriter(env, path, std::move(file)));
  tensorflow::Event first;
  first.set_file_version("brain.Event:2");
  RETURN_IF_ERROR(w->WriteEvent(std::move(first)));
  RETURN_IF_ERROR(w->Flush());
  return w;
}

absl::Status SummaryWriter::WriteEvent(tensorflow::Event event) {
  if (writer_ == nullptr) {
    return errors::FailedPrecondition("summary writer for ", path_, " is closed");
  }
  if (event.wall_time() == 0) event.set_wall_time(env_->NowUnixMicros() / 1e6);
  std::string bytes;
  event.SerializeToString(&bytes);
  return writer_->WriteRecord(bytes);
}

absl::Status SummaryWriter::AddScalar(const std::string& tag, int64_t step,
                                      double value) {
  tensorflow::Event e;
  e.set_step(step);
  tensorflow::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  return WriteEvent(std::move(e));
}

absl::Status SummaryWriter::AddHistogram(const std::string& tag, int64_t step,
                                         absl::Span<const float> values) {
  const std::vector<double>& limits = DefaultHistogramBucketLimits();
  std::vector<double> counts(limits.size(), 0.0);
  double lo = DBL_MAX, hi = -DBL_MAX, num = 0, sum = 0, sum_sq = 0;
  for (float f : values) {
    if (std::isnan(f)) continue;
    const double x = f;
    const size_t b = std::upper_bound(limits.begin(), limits.end(), x) - limits.begin();
    counts[std::min(b, limits.size() - 1)] += 1;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    num += 1;
    sum += x;
    sum_sq += x * x;
  }
  tensorflow::Event e;
  e.set_step(step);
  tensorflow::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  tensorflow::HistogramProto* h = v->mutable_histo();
  h->set_min(num > 0 ? lo : 0);
  h->set_max(num > 0 ? hi : 0);
  h->set_num(num);
  h->set_sum(sum);
  h->set_sum_squares(sum_sq);
  for (size_t i = 0; i < limits.size(); ++i) {
    if (counts[i] == 0) continue;
    h->add_bucket_limit(limits[i]);
    h->add_bucket(counts[i]);
  }
  return WriteEvent(std::move(e));
}

absl::Status SummaryWriter::AddGraph(const tensorflow::GraphDef& graph) {
  tensorflow::Event e;
  graph.SerializeToString(e.mutable_graph_def());
  return WriteEvent(std::move(e));
}

absl::Status SummaryWriter::Flush() {
  if (file_ == nullptr) return absl::OkStatus();
  return file_->Flush();
}

absl::Status SummaryWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  absl::Status s = file_->Flush();
  absl::Status c = file_->Close();
  writer_.reset();
  file_.reset();
  return s.ok() ? c : s;
}

}  // namespace recflow::train
