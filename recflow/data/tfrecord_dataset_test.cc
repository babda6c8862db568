// Dataset::TFRecord: order, sharding, batching of records, origins, bad
// records per ErrorPolicy, Save/Restore, and a tf.Example pipeline.

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/record_io.h"
#include "recflow/data/dataset.h"
#include "recflow/data/example_parser.h"
#include "recflow/proto/example.pb.h"

namespace recflow::data {
namespace {

using testing::AllOf;
using testing::ElementsAre;
using testing::HasSubstr;

// All components of every element, flattened to strings.
struct Read {
  std::vector<std::string> records;
  std::vector<std::string> origins;
  std::vector<int64_t> sizes;  // elements' record counts (-1: scalar)
  std::vector<absl::Status> errors;
};

absl::Status Next(Iterator& it, Read* r, bool* end) {
  Element e;
  absl::Status s = it.GetNext(&e, end);
  if (!s.ok()) {
    r->errors.push_back(s);
    return s;
  }
  if (*end) return s;
  r->sizes.push_back(e[0].dims() == 0 ? -1 : e[0].dim_size(0));
  for (const std::string& x : e[0].flat<std::string>()) r->records.push_back(x);
  if (e.size() > 1) {
    for (const std::string& x : e[1].flat<std::string>())
      r->origins.push_back(x);
  }
  return s;
}

// Reads to the end; errors are recorded and reading goes on.
Read ReadAll(Iterator& it, int max_errors = 100) {
  Read r;
  bool end = false;
  while (!end) {
    if (!Next(it, &r, &end).ok() &&
        static_cast<int>(r.errors.size()) >= max_errors)
      break;
  }
  return r;
}

class TFRecordDatasetTest : public testing::Test {
 protected:
  TFRecordDatasetTest() { EXPECT_TRUE(env_.CreateDir("/d").ok()); }

  // Writes file `name` with records "<name>-<i>" for i < n; returns the path.
  std::string WriteFile(const std::string& name, int n) {
    std::vector<std::string> records;
    for (int i = 0; i < n; ++i) records.push_back(absl::StrCat(name, "-", i));
    return WriteRecords(name, records);
  }
  std::string WriteRecords(const std::string& name,
                           const std::vector<std::string>& records) {
    std::string path = "/d/" + name;
    EXPECT_TRUE(WriteRecordsToFile(&env_, path, records).ok());
    return path;
  }
  void Corrupt(const std::string& path, size_t pos) {
    std::string bytes;
    ASSERT_TRUE(ReadFileToString(&env_, path, &bytes).ok());
    bytes[pos] ^= 0x20;
    ASSERT_TRUE(WriteStringToFile(&env_, path, bytes).ok());
  }
  void Truncate(const std::string& path, size_t size) {
    std::string bytes;
    ASSERT_TRUE(ReadFileToString(&env_, path, &bytes).ok());
    ASSERT_TRUE(WriteStringToFile(&env_, path, bytes.substr(0, size)).ok());
  }
  Iterator Make(const Dataset& ds, ErrorMode mode = ErrorMode::kSkip) {
    IteratorContext ctx;
    ctx.env = &env_;
    ctx.error_policy.mode = mode;
    auto it = ds.MakeIterator(ctx);
    EXPECT_TRUE(it.ok()) << it.status();
    return std::move(*it);
  }

  MemEnv env_;
};

TEST_F(TFRecordDatasetTest, ReadsFilesInOrder) {
  std::vector<std::string> files = {WriteFile("a", 3), WriteFile("b", 0),
                                    WriteFile("c", 2)};
  Dataset ds = Dataset::TFRecord(files);
  EXPECT_EQ(ds.DebugString(), "TFRecord(3 files)");
  EXPECT_EQ(ds.impl()->output_dtypes(), std::vector<DataType>{DT_STRING});
  EXPECT_EQ(ds.impl()->output_shapes()[0], PartialShape({}));
  Iterator it = Make(ds);
  Read r = ReadAll(it);
  EXPECT_THAT(r.records, ElementsAre("a-0", "a-1", "a-2", "c-0", "c-1"));
  EXPECT_THAT(r.sizes, ElementsAre(-1, -1, -1, -1, -1));
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(it.stats().records_read(), 5);
  // End of sequence stays.
  Element e;
  bool end = false;
  ASSERT_TRUE(it.GetNext(&e, &end).ok());
  EXPECT_TRUE(end);
}

TEST_F(TFRecordDatasetTest, RecordsPerElementAndOrigins) {
  std::vector<std::string> files = {WriteFile("a", 4), WriteFile("b", 3)};
  Dataset ds = Dataset::TFRecord(
      files, {}, {.records_per_element = 3, .emit_origin = true});
  EXPECT_EQ(ds.impl()->output_shapes()[0], PartialShape({-1}));
  EXPECT_EQ(ds.impl()->output_dtypes().size(), 2u);
  Iterator it = Make(ds);
  Read r = ReadAll(it);
  EXPECT_THAT(r.records,
              ElementsAre("a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "b-2"));
  EXPECT_THAT(r.sizes, ElementsAre(3, 3, 1));  // elements span files
  EXPECT_THAT(r.origins,
              ElementsAre("/d/a:record 0", "/d/a:record 1", "/d/a:record 2",
                          "/d/a:record 3", "/d/b:record 0", "/d/b:record 1",
                          "/d/b:record 2"));
}

// Issue 22: an element of up to 1e9 records was a tensor of 1e9 strings
// made before reading (32 GB: the allocation failed and the reader wrote
// through a null buffer). The records are gathered as they are read.
TEST_F(TFRecordDatasetTest, HugeRecordsPerElementReadsWhatThereIs) {
  std::vector<std::string> files = {WriteFile("a", 4), WriteFile("b", 3)};
  for (bool origin : {false, true}) {
    Iterator it = Make(Dataset::TFRecord(
        files, {}, {.records_per_element = 1000000000, .emit_origin = origin}));
    Read r = ReadAll(it);
    EXPECT_THAT(r.records, ElementsAre("a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "b-2"));
    EXPECT_THAT(r.sizes, ElementsAre(7));
    EXPECT_EQ(r.origins.size(), origin ? 7u : 0u);
    EXPECT_TRUE(r.errors.empty());
  }
}

TEST_F(TFRecordDatasetTest, ShardsByFile) {
  std::vector<std::string> files;
  for (int f = 0; f < 5; ++f)
    files.push_back(WriteFile(absl::StrCat("f", f), 2));
  Dataset ds = Dataset::TFRecord(files, {.num_shards = 2, .shard_index = 1});
  EXPECT_EQ(ds.DebugString(), "TFRecord(2 files of 5, shard 1/2)");
  Iterator it = Make(ds);
  EXPECT_THAT(ReadAll(it).records, ElementsAre("f1-0", "f1-1", "f3-0", "f3-1"));
  Iterator it0 =
      Make(Dataset::TFRecord(files, {.num_shards = 2, .shard_index = 0}));
  EXPECT_EQ(ReadAll(it0).records.size(), 6u);
}

TEST_F(TFRecordDatasetTest, InvalidOptions) {
  for (Dataset ds :
       {Dataset::TFRecord({"/x"}, {.num_shards = 2, .shard_index = 2}),
        Dataset::TFRecord({"/x"}, {}, {.records_per_element = 0}),
        Dataset::TFRecord({"/x"}, {}, {.read_buffer_bytes = 0})}) {
    IteratorContext ctx;
    ctx.env = &env_;
    auto it = ds.MakeIterator(ctx);
    EXPECT_TRUE(absl::IsInvalidArgument(it.status())) << it.status();
    EXPECT_THAT(it.status().message(), HasSubstr("TFRecord"));
  }
}

// Record i of a file of records "x-0".."x-9" starts at 19 * i (3 + 16 bytes).
constexpr size_t kRecordBytes = 19;

TEST_F(TFRecordDatasetTest, BadCrcSkipsTheRecordAndGoesOn) {
  std::string a = WriteFile("a", 10);
  Corrupt(a, 3 * kRecordBytes + 12 + 1);  // data of record 3
  Corrupt(a, 7 * kRecordBytes + 16);      // data crc of record 7
  std::string b = WriteFile("b", 1);
  Iterator it = Make(Dataset::TFRecord({a, b}));
  Read r = ReadAll(it);
  EXPECT_THAT(r.records, ElementsAre("a-0", "a-1", "a-2", "a-4", "a-5", "a-6",
                                     "a-8", "a-9", "b-0"));
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(it.stats().records_skipped(), 2);
  EXPECT_THAT(it.stats().skipped_by_reason(),
              ElementsAre(testing::Pair("bad_crc", 2)));
  EXPECT_THAT(it.stats().first_skip_detail().at("bad_crc"),
              AllOf(HasSubstr("/d/a"), HasSubstr("record 3")));
  EXPECT_EQ(it.stats().records_read(), 11);

  // kFail: the error at its position, naming path, offset and record index;
  // then the file goes on.
  Iterator failing =
      Make(Dataset::TFRecord({a, b}, {}, {.records_per_element = 2}),
           ErrorMode::kFail);
  r = ReadAll(failing);
  EXPECT_THAT(r.records, ElementsAre("a-0", "a-1", "a-2", "a-4", "a-5", "a-6",
                                     "a-8", "a-9", "b-0"));
  EXPECT_THAT(r.sizes, ElementsAre(2, 1, 2, 1, 2, 1));
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_TRUE(absl::IsDataLoss(r.errors[0]));
  EXPECT_THAT(r.errors[0].message(),
              AllOf(HasSubstr("/d/a"), HasSubstr("corrupted"),
                    HasSubstr(absl::StrCat("offset ", 3 * kRecordBytes)),
                    HasSubstr("(record 3)")));
  EXPECT_THAT(r.errors[1].message(), HasSubstr("(record 7)"));
}

TEST_F(TFRecordDatasetTest, TruncationEndsTheFile) {
  std::string a = WriteFile("a", 5);
  Truncate(a, 3 * kRecordBytes + 14);  // inside record 3's data
  std::string b = WriteFile("b", 5);
  Corrupt(b, 2 * kRecordBytes + 9);  // record 2's length crc: framing lost
  std::string c = WriteFile("c", 1);
  Iterator it = Make(Dataset::TFRecord({a, b, c}));
  Read r = ReadAll(it);
  EXPECT_THAT(r.records, ElementsAre("a-0", "a-1", "a-2", "b-0", "b-1", "c-0"));
  EXPECT_THAT(it.stats().skipped_by_reason(),
              ElementsAre(testing::Pair("truncated", 2)));

  Iterator failing = Make(Dataset::TFRecord({a, b, c}), ErrorMode::kFail);
  r = ReadAll(failing);
  EXPECT_THAT(r.records, ElementsAre("a-0", "a-1", "a-2", "b-0", "b-1", "c-0"));
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_THAT(r.errors[0].message(),
              AllOf(HasSubstr("/d/a"), HasSubstr("truncated"),
                    HasSubstr("(record 3)")));
  EXPECT_THAT(r.errors[1].message(),
              AllOf(HasSubstr("/d/b"), HasSubstr("corrupted"),
                    HasSubstr("(record 2)")));
}

TEST_F(TFRecordDatasetTest, OverlongRecordsAndUnreadableFiles) {
  std::string a = WriteRecords("a", {"small", std::string(1000, 'x'), "after"});
  Iterator it =
      Make(Dataset::TFRecord({"/d/missing", a}, {}, {.max_record_bytes = 100}));
  Read r = ReadAll(it);
  EXPECT_THAT(r.records, ElementsAre("small", "after"));
  EXPECT_THAT(it.stats().skipped_by_reason(),
              ElementsAre(testing::Pair("record_too_long", 1),
                          testing::Pair("unreadable_file", 1)));
  Iterator failing =
      Make(Dataset::TFRecord({"/d/missing", a}), ErrorMode::kFail);
  r = ReadAll(failing);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(r.errors[0])) << r.errors[0];
  EXPECT_THAT(r.errors[0].message(), HasSubstr("/d/missing"));
  EXPECT_EQ(r.records.size(), 3u);
}

TEST_F(TFRecordDatasetTest, SaveAndRestoreAtEveryPosition) {
  std::string a = WriteFile("a", 5);
  Corrupt(a, 2 * kRecordBytes + 13);  // a bad record, kept as a pending error
  std::vector<std::string> files = {a, WriteFile("b", 0), WriteFile("c", 4)};
  for (int64_t k : {1, 2, 3}) {
    Dataset ds = Dataset::TFRecord(files, {},
                                   {.read_buffer_bytes = 32,
                                    .records_per_element = k,
                                    .emit_origin = true});
    Iterator full = Make(ds, ErrorMode::kFail);
    Read expected = ReadAll(full);
    ASSERT_EQ(expected.errors.size(), 1u);
    for (size_t stop = 0; stop <= expected.sizes.size() + 1; ++stop) {
      SCOPED_TRACE(testing::Message() << "k " << k << " stop " << stop);
      Iterator first = Make(ds, ErrorMode::kFail);
      Read head;
      bool end = false;
      for (size_t i = 0; i < stop && !end; ++i) (void)Next(first, &head, &end);
      auto saved = first.SaveToString();
      ASSERT_TRUE(saved.ok()) << saved.status();
      Iterator second = Make(ds, ErrorMode::kFail);
      ASSERT_TRUE(second.RestoreFromString(*saved).ok());
      Read tail = ReadAll(second);
      std::vector<std::string> all = head.records;
      all.insert(all.end(), tail.records.begin(), tail.records.end());
      EXPECT_EQ(all, expected.records);
      std::vector<std::string> origins = head.origins;
      origins.insert(origins.end(), tail.origins.begin(), tail.origins.end());
      EXPECT_EQ(origins, expected.origins);
      EXPECT_EQ(head.errors.size() + tail.errors.size(), 1u);
    }
  }
}

// TFRecord files of tf.Examples -> batches in the recflow layout.
TEST_F(TFRecordDatasetTest, ExamplePipeline) {
  std::mt19937_64 rng(3);
  std::vector<std::string> files;
  std::vector<float> labels;
  std::vector<int64_t> ids;
  for (int f = 0; f < 3; ++f) {
    std::vector<std::string> records;
    for (int i = 0; i < 7; ++i) {
      tensorflow::Example ex;
      auto& m = *ex.mutable_features()->mutable_feature();
      labels.push_back(static_cast<float>(rng() % 2));
      m["label"].mutable_float_list()->add_value(labels.back());
      ids.push_back(static_cast<int64_t>(rng() % 1000));
      m["item"].mutable_int64_list()->add_value(ids.back());
      m["price"].mutable_float_list()->add_value(0.5f * i);
      records.push_back(ex.SerializeAsString());
    }
    files.push_back(WriteRecords(absl::StrCat("ex", f), records));
  }
  ExampleBatchSpec spec;
  spec.label_key = "label";
  spec.dense_keys = {"price"};
  spec.sparse = {{"item", ""}};
  auto parser = ExampleBatchParser::Create(spec);
  ASSERT_TRUE(parser.ok()) << parser.status();
  std::shared_ptr<const ExampleBatchParser> shared = std::move(*parser);
  Dataset ds = Dataset::TFRecord(
                   files, {}, {.records_per_element = 8, .emit_origin = true})
                   .Map(ParseExampleFn(shared), 2, shared->output_dtypes(),
                        shared->output_shapes());
  Iterator it = Make(ds);
  std::vector<float> got_labels;
  std::vector<int64_t> got_ids;
  std::vector<int64_t> sizes;
  bool end = false;
  while (true) {
    Element e;
    ASSERT_TRUE(it.GetNext(&e, &end).ok());
    if (end) break;
    auto batch = Batch::FromElement(shared->schema(), e);
    ASSERT_TRUE(batch.ok()) << batch.status();
    sizes.push_back(batch->batch_size);
    for (float x : batch->labels.flat<float>()) got_labels.push_back(x);
    for (int64_t x : batch->sparse[0].ids.flat<int64_t>()) got_ids.push_back(x);
  }
  EXPECT_THAT(sizes, ElementsAre(8, 8, 5));
  EXPECT_EQ(got_labels, labels);
  EXPECT_EQ(got_ids, ids);
}

}  // namespace
}  // namespace recflow::data
