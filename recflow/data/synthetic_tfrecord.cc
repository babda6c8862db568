#include "recflow/data/synthetic_tfrecord.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "recflow/core/record_io.h"
#include "recflow/core/status.h"
#include "recflow/proto/example.pb.h"

namespace recflow::data {
namespace {

class TfRecordSink : public SyntheticRecordSink {
 public:
  explicit TfRecordSink(WritableFile* file) : writer_(file) {}
  absl::Status Write(absl::string_view record) override {
    return writer_.WriteRecord(record);
  }
  absl::Status Flush() override { return writer_.Flush(); }
  int64_t bytes_written() const override { return writer_.bytes_written(); }

 private:
  RecordWriter writer_;
};

// Feature names, built once.
struct Names {
  std::string dense[kSyntheticNumDense];
  std::string categorical[kSyntheticNumCategorical];
  Names() {
    for (int j = 0; j < kSyntheticNumDense; ++j)
      dense[j] = absl::StrCat("I", j + 1);
    for (int f = 0; f < kSyntheticNumCategorical; ++f)
      categorical[f] = absl::StrCat("C", f + 1);
  }
};

const Names& FeatureNames() {
  static const Names* names = new Names();
  return *names;
}

}  // namespace

bool TfRecordSinkAvailable() { return true; }

absl::StatusOr<std::unique_ptr<SyntheticRecordSink>> NewTfRecordSink(
    WritableFile* file) {
  return std::unique_ptr<SyntheticRecordSink>(new TfRecordSink(file));
}

std::string SerializeSyntheticExample(const SyntheticRow& row) {
  const Names& names = FeatureNames();
  // One arena per thread, reset now and then: the map nodes and strings of
  // an Example cost a bump of a pointer instead of ~80 heap allocations.
  thread_local google::protobuf::Arena arena;
  if (arena.SpaceUsed() > (1 << 20)) arena.Reset();
  tensorflow::Example& example =
      *google::protobuf::Arena::CreateMessage<tensorflow::Example>(&arena);
  auto& features = *example.mutable_features()->mutable_feature();
  features["label"].mutable_float_list()->add_value(row.label);
  for (int j = 0; j < kSyntheticNumDense; ++j) {
    if (row.has_dense(j))
      features[names.dense[j]].mutable_int64_list()->add_value(row.dense[j]);
  }
  std::string hex;
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    if (!row.has_categorical(f)) continue;
    hex.clear();
    SyntheticGenerator::AppendHex(row.hashed[f], &hex);
    features[names.categorical[f]].mutable_bytes_list()->add_value(hex);
  }
  // Deterministic: map entries sorted by key, so files are byte-identical
  // from run to run.
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    example.SerializeToCodedStream(&coded);
  }
  return out;
}

}  // namespace recflow::data
