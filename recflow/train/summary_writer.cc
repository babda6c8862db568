#include "recflow/train/summary_writer.h"

#include <unistd.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::train {

const std::vector<double>& DefaultHistogramBucketLimits() {
  return histogram::DefaultBucketLimits();
}

void HistogramToProto(const histogram::Histogram& histo, tensorflow::HistogramProto* proto) {
  histogram::EncodedHistogram h = histo.Encode(/*preserve_zero_buckets=*/false);
  proto->set_min(h.min);
  proto->set_max(h.max);
  proto->set_num(h.num);
  proto->set_sum(h.sum);
  proto->set_sum_squares(h.sum_squares);
  proto->mutable_bucket_limit()->Assign(h.bucket_limit.begin(), h.bucket_limit.end());
  proto->mutable_bucket()->Assign(h.bucket.begin(), h.bucket.end());
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
  const std::string stem =
      JoinPath(logdir, absl::StrCat("events.out.tfevents.", now / 1000000, ".", host));
  // A writer reopened within the same second must not truncate the file
  // before it: number the later ones (TensorBoard reads any "tfevents" name).
  std::string path = absl::StrCat(stem, filename_suffix);
  for (int n = 1; env->FileExists(path); ++n) {
    path = absl::StrCat(stem, ".", n, filename_suffix);
  }
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
  histogram::Histogram histo;
  for (float f : values) {
    if (!std::isnan(f)) histo.Add(f);
  }
  tensorflow::Event e;
  e.set_step(step);
  tensorflow::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  HistogramToProto(histo, v->mutable_histo());
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
