// Tests of BundleWriter / BundleReader / MergeBundles: round trips of every
// dtype, sharding, chunked writes, TensorFlow's own files, atomicity, and a
// clear error for each kind of bad input.
#include <map>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/table.h"
#include "recflow/core/crc32c.h"
#include "recflow/core/status.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/testing/tf_testdata.h"

namespace recflow::checkpoint {
namespace {

using testing::HasSubstr;

const std::string kHalfPlusTwo = TfTestDataPath(kHalfPlusTwoTf) + "/variables/variables";

template <typename T>
Tensor RandomTensor(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  for (T& v : t.flat<T>()) {
    if constexpr (std::is_same_v<T, bool>) {
      v = (*rng)() % 2;
    } else if constexpr (std::is_floating_point_v<T>) {
      v = std::uniform_real_distribution<T>(-5, 5)(*rng);
    } else {
      v = static_cast<T>((*rng)());
    }
  }
  return t;
}

Tensor RandomStrings(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DT_STRING, shape);
  for (std::string& s : t.flat<std::string>()) {
    s.resize((*rng)() % 3 == 0 ? 0 : (*rng)() % 300);
    for (char& c : s) c = static_cast<char>((*rng)());
  }
  return t;
}

// A mix of dtypes and shapes (scalars, empty tensors, strings).
std::map<std::string, Tensor> RandomModel(std::mt19937* rng) {
  std::map<std::string, Tensor> m;
  m["dense/kernel"] = RandomTensor<float>({17, 33}, rng);
  m["dense/bias"] = RandomTensor<float>({33}, rng);
  m["global_step"] = Tensor::Scalar<int64_t>(123456789012345);
  m["emb/ids"] = RandomTensor<int64_t>({1000}, rng);
  m["d"] = RandomTensor<double>({3, 4, 5}, rng);
  m["i32"] = RandomTensor<int32_t>({7}, rng);
  m["u8"] = RandomTensor<uint8_t>({2, 9}, rng);
  m["flags"] = RandomTensor<bool>({11}, rng);
  m["empty"] = Tensor(DT_FLOAT, TensorShape({0, 4}));
  m["vocab"] = RandomStrings({50}, rng);
  m["vocab2d"] = RandomStrings({3, 4}, rng);
  m["no_strings"] = Tensor(DT_STRING, TensorShape({0}));
  m["one_string"] = Tensor::Scalar<std::string>("hello");
  return m;
}

absl::Status WriteModel(Env* env, const std::string& prefix,
                        const std::map<std::string, Tensor>& model,
                        BundleWriterOptions options = {}) {
  ASSIGN_OR_RETURN(auto writer, BundleWriter::Create(env, prefix, options));
  for (const auto& [name, t] : model) RETURN_IF_ERROR(writer->Add(name, t));
  return writer->Finish();
}

void ExpectModel(Env* env, const std::string& prefix, const std::map<std::string, Tensor>& model) {
  auto reader = BundleReader::Open(env, prefix);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto list = (*reader)->ListTensors();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), model.size());
  auto want = model.begin();
  for (const TensorInfo& info : *list) {
    EXPECT_EQ(info.name, want->first);
    EXPECT_EQ(info.dtype, want->second.dtype()) << info.name;
    EXPECT_EQ(info.shape, want->second.shape()) << info.name;
    auto t = (*reader)->Lookup(info.name);
    ASSERT_TRUE(t.ok()) << info.name << ": " << t.status();
    EXPECT_TRUE(TensorsEqual(*t, want->second)) << info.name;
    ++want;
  }
}

std::vector<std::string> Children(Env* env, const std::string& dir) {
  auto c = env->GetChildren(dir);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : std::vector<std::string>();
}

TEST(BundleTest, RoundTripEveryDtype) {
  std::mt19937 rng(1);
  MemEnv env;
  const auto model = RandomModel(&rng);
  ASSERT_TRUE(WriteModel(&env, "/ckpt/model", model).ok());
  ExpectModel(&env, "/ckpt/model", model);
  // Exactly the published files: no temporaries left.
  EXPECT_THAT(Children(&env, "/ckpt"),
              testing::ElementsAre("model.data-00000-of-00001", "model.index"));
}

TEST(BundleTest, RoundTripOnDisk) {
  std::mt19937 rng(2);
  Env* env = Env::Default();
  const std::string dir = testing::TempDir() + "/bundle_test_disk";
  DeleteRecursively(env, dir).IgnoreError();
  const auto model = RandomModel(&rng);
  ASSERT_TRUE(WriteModel(env, dir + "/sub/model.ckpt-1", model).ok());
  ExpectModel(env, dir + "/sub/model.ckpt-1", model);
  DeleteRecursively(env, dir).IgnoreError();
}

TEST(BundleTest, ShardsBySize) {
  std::mt19937 rng(3);
  MemEnv env;
  std::map<std::string, Tensor> model;
  for (int i = 0; i < 10; ++i) {
    model["t" + std::to_string(i)] = RandomTensor<float>({100 + 37 * i}, &rng);
  }
  model["strings"] = RandomStrings({40}, &rng);
  BundleWriterOptions opts;
  opts.max_shard_bytes = 1500;
  opts.buffer_bytes = 1000;  // small buffer: large tensors bypass it
  ASSERT_TRUE(WriteModel(&env, "/c/m", model, opts).ok());
  ExpectModel(&env, "/c/m", model);
  auto reader = BundleReader::Open(&env, "/c/m");
  ASSERT_TRUE(reader.ok());
  const int n = (*reader)->num_shards();
  EXPECT_GT(n, 5);
  std::vector<std::string> want = {"m.index"};
  for (int i = 0; i < n; ++i) want.push_back(Basename(DataFilename("/c/m", i, n)));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(Children(&env, "/c"), want);
  // Every shard but the last respects the limit unless it holds one tensor.
  auto list = (*reader)->ListTensors();
  std::map<int, std::pair<uint64_t, int>> per_shard;  // bytes, tensors
  for (const auto& info : *list) {
    per_shard[info.shard_id].first += info.size;
    per_shard[info.shard_id].second += 1;
  }
  for (const auto& [shard, bt] : per_shard) {
    if (bt.second > 1) {
      EXPECT_LE(bt.first, opts.max_shard_bytes) << "shard " << shard;
    }
  }
}

// Large fixed-size tensors start on 4 KiB boundaries (zero padding before
// them, covered by no entry), so direct reads fill them in place; small
// ones and strings stay packed; 0 packs everything, as TensorFlow does.
TEST(BundleTest, LargeTensorsStartAligned) {
  std::mt19937 rng(21);
  std::map<std::string, Tensor> model;
  model["a_small"] = RandomTensor<float>({3}, &rng);
  model["b_big"] = RandomTensor<float>({300, 1000}, &rng);  // 1.2 MB
  model["c_words"] = RandomStrings({5}, &rng);
  model["d_big"] = RandomTensor<int64_t>({140000}, &rng);  // 1.12 MB, via AddChunks below
  for (uint64_t threshold : {uint64_t{1} << 20, uint64_t{0}}) {
    MemEnv env;
    BundleWriterOptions options;
    options.align_tensors_from_bytes = threshold;
    auto writer = BundleWriter::Create(&env, "/m", options);
    ASSERT_TRUE(writer.ok());
    for (const char* name : {"a_small", "b_big", "c_words"}) {
      ASSERT_TRUE((*writer)->Add(name, model[name]).ok());
    }
    const Tensor& d = model["d_big"];
    ASSERT_TRUE((*writer)->AddChunks("d_big", DT_INT64, d.shape(), [&](const auto& sink) {
      return sink(absl::string_view(d.raw_data(), d.TotalBytes()));
    }).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
    auto reader = BundleReader::Open(&env, "/m").value();
    const TensorInfo a = reader->GetInfo("a_small").value();
    const TensorInfo b = reader->GetInfo("b_big").value();
    const TensorInfo c = reader->GetInfo("c_words").value();
    const TensorInfo dd = reader->GetInfo("d_big").value();
    EXPECT_EQ(a.offset, 0u);
    EXPECT_EQ(c.offset, b.offset + b.size);  // packed after the big one
    if (threshold > 0) {
      EXPECT_EQ(b.offset, 4096u);
      EXPECT_EQ(dd.offset % 4096, 0u);
      EXPECT_GT(dd.offset, c.offset + c.size);
    } else {
      EXPECT_EQ(b.offset, a.size);
      EXPECT_EQ(dd.offset, c.offset + c.size);
    }
    ExpectModel(&env, "/m", model);
  }
}

TEST(BundleTest, ParallelLookupMatchesSequential) {
  std::mt19937 rng(4);
  MemEnv env;
  const auto model = RandomModel(&rng);
  ASSERT_TRUE(WriteModel(&env, "/m", model).ok());
  auto reader = BundleReader::Open(&env, "/m");
  ASSERT_TRUE(reader.ok());
  std::vector<std::string> names;
  for (const auto& [name, t] : model) names.push_back(name);
  ThreadPool pool("ckpt_test", 3);
  auto got = (*reader)->LookupMany(names, &pool);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_TRUE(TensorsEqual((*got)[i], model.at(names[i]))) << names[i];
  }
  auto all = (*reader)->ReadAll(&pool);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), model.size());
  for (const auto& [name, t] : *all) EXPECT_TRUE(TensorsEqual(t, model.at(name))) << name;
  names.push_back("missing");
  auto bad = (*reader)->LookupMany(names, &pool);
  EXPECT_TRUE(absl::IsNotFound(bad.status())) << bad.status();
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'missing'"));
}

TEST(BundleTest, AddChunksAndReadChunks) {
  std::mt19937 rng(5);
  MemEnv env;
  const Tensor big = RandomTensor<float>({1000, 37}, &rng);
  const Tensor small = RandomTensor<int64_t>({5}, &rng);
  {
    BundleWriterOptions opts;
    opts.buffer_bytes = 4096;
    auto writer = BundleWriter::Create(&env, "/m", opts);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Add("a_small", small).ok());
    absl::Status s = (*writer)->AddChunks(
        "emb", DT_FLOAT, big.shape(), [&](const BundleWriter::ChunkSink& sink) -> absl::Status {
          // Random piece sizes, some bigger than the buffer.
          const char* p = big.raw_data();
          size_t left = big.TotalBytes();
          while (left > 0) {
            const size_t n = std::min<size_t>(left, 1 + rng() % 9000);
            RETURN_IF_ERROR(sink(absl::string_view(p, n)));
            p += n;
            left -= n;
          }
          return absl::OkStatus();
        });
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  ExpectModel(&env, "/m", {{"a_small", small}, {"emb", big}});
  auto reader = BundleReader::Open(&env, "/m", BundleReaderOptions{5000});
  ASSERT_TRUE(reader.ok());
  std::string streamed;
  int pieces = 0;
  ASSERT_TRUE((*reader)->ReadChunks("emb", [&](absl::string_view piece) {
    streamed.append(piece.data(), piece.size());
    ++pieces;
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(streamed, std::string(big.raw_data(), big.TotalBytes()));
  EXPECT_GT(pieces, 20);
}

TEST(BundleTest, AddChunksWrongTotalKillsWriter) {
  MemEnv env;
  auto writer = BundleWriter::Create(&env, "/m");
  ASSERT_TRUE(writer.ok());
  const std::string bytes(12, 'x');
  absl::Status s = (*writer)->AddChunks("t", DT_FLOAT, TensorShape({4}),
                                        [&](const BundleWriter::ChunkSink& sink) {
                                          return sink(bytes);  // 12 of 16 bytes
                                        });
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected 16"));
  EXPECT_FALSE((*writer)->Finish().ok());
  s = (*writer)->AddChunks("u", DT_STRING, TensorShape({1}),
                           [](const BundleWriter::ChunkSink&) { return absl::OkStatus(); });
  EXPECT_FALSE(s.ok());
  writer->reset();
  EXPECT_FALSE(env.FileExists("/m.index"));
  EXPECT_THAT(Children(&env, "/"), testing::IsEmpty());
}

TEST(BundleTest, BadAdds) {
  MemEnv env;
  {
    auto w = BundleWriter::Create(&env, "/m");
    ASSERT_TRUE((*w)->Add("", Tensor::Scalar<float>(1)).ok() == false);
  }
  {
    auto w = BundleWriter::Create(&env, "/m");
    ASSERT_TRUE((*w)->Add("x", Tensor::Scalar<float>(1)).ok());
    absl::Status s = (*w)->Add("x", Tensor::Scalar<float>(2));
    EXPECT_THAT(std::string(s.message()), HasSubstr("added twice"));
  }
  {
    auto w = BundleWriter::Create(&env, "/m");
    absl::Status s = (*w)->Add("h", Tensor(DT_RESOURCE, TensorShape({})));
    EXPECT_TRUE(absl::IsInvalidArgument(s));
    EXPECT_THAT(std::string(s.message()), HasSubstr("resource"));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(BundleWriter::Create(&env, "/dir/").status()));
  EXPECT_THAT(Children(&env, "/"), testing::IsEmpty());
}

// --- TensorFlow's own files ----------------------------------------------------

TEST(BundleCompatTest, ReadsTensorFlowSavedModelVariables) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  Env* env = Env::Default();
  auto reader = BundleReader::Open(env, kHalfPlusTwo);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->num_shards(), 1);
  EXPECT_EQ((*reader)->header().version().producer(), 1);
  auto list = (*reader)->ListTensors();
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<std::string> names;
  for (const auto& info : *list) names.push_back(info.name);
  EXPECT_THAT(names, testing::Contains("a"));
  EXPECT_THAT(names, testing::Contains("b"));
  for (const auto& info : *list) {
    auto t = (*reader)->Lookup(info.name);
    ASSERT_TRUE(t.ok()) << info.name << ": " << t.status();
    EXPECT_EQ(t->dtype(), info.dtype);
    EXPECT_EQ(t->shape(), info.shape);
  }
  auto a = (*reader)->Lookup("a");
  auto b = (*reader)->Lookup("b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->scalar<float>(), 0.5f);
  EXPECT_EQ(b->scalar<float>(), 2.0f);
}

// Re-saving TensorFlow's tensors in name order reproduces its data file byte
// for byte and its index entries field for field; our index is an
// uncompressed table with TensorFlow's footer.
TEST(BundleCompatTest, RewriteMatchesTensorFlowBytes) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  Env* env = Env::Default();
  auto tf = BundleReader::Open(env, kHalfPlusTwo);
  ASSERT_TRUE(tf.ok()) << tf.status();
  MemEnv mem;
  auto writer = BundleWriter::Create(&mem, "/re");
  ASSERT_TRUE(writer.ok());
  std::map<std::string, std::string> tf_entries;
  ASSERT_TRUE((*tf)->ForEachEntry([&](absl::string_view name,
                                      const tensorflow::BundleEntryProto& e) -> absl::Status {
    tf_entries[std::string(name)] = e.SerializeAsString();
    ASSIGN_OR_RETURN(Tensor t, (*tf)->Lookup(name));
    return (*writer)->Add(name, t);
  }).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  std::string tf_data, our_data;
  ASSERT_TRUE(ReadFileToString(env, DataFilename(kHalfPlusTwo, 0, 1), &tf_data).ok());
  ASSERT_TRUE(ReadFileToString(&mem, DataFilename("/re", 0, 1), &our_data).ok());
  EXPECT_EQ(our_data, tf_data);
  auto ours = BundleReader::Open(&mem, "/re");
  ASSERT_TRUE(ours.ok());
  std::map<std::string, std::string> our_entries;
  ASSERT_TRUE((*ours)->ForEachEntry([&](absl::string_view name,
                                        const tensorflow::BundleEntryProto& e) {
    our_entries[std::string(name)] = e.SerializeAsString();
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(our_entries, tf_entries);
  // The index: footer magic, uncompressed blocks.
  std::string index;
  ASSERT_TRUE(ReadFileToString(&mem, "/re.index", &index).ok());
  ASSERT_GE(index.size(), table::kFooterSize);
  EXPECT_EQ(table::DecodeFixed64(index.data() + index.size() - 8), table::kTableMagicNumber);
  table::Footer footer;
  ASSERT_TRUE(footer.DecodeFrom(absl::string_view(index).substr(index.size() - 48), "i").ok());
  EXPECT_EQ(index[footer.index_handle.offset + footer.index_handle.size], table::kNoCompression);
  EXPECT_EQ(index[footer.metaindex_handle.offset + footer.metaindex_handle.size],
            table::kNoCompression);
}

// --- Atomicity ------------------------------------------------------------------

TEST(BundleTest, AbandonedWriterLeavesNothing) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDir("/d").ok());
  {
    auto w = BundleWriter::Create(&env, "/d/m");
    ASSERT_TRUE((*w)->Add("x", Tensor::Scalar<float>(1)).ok());
  }
  EXPECT_THAT(Children(&env, "/d"), testing::IsEmpty());
}

TEST(BundleTest, DiskFullAtEveryByteLeavesOldBundleIntact) {
  std::mt19937 rng(6);
  MemEnv env;
  const auto old_model = RandomModel(&rng);
  BundleWriterOptions opts;
  opts.buffer_bytes = 512;
  opts.max_shard_bytes = 4000;
  ASSERT_TRUE(WriteModel(&env, "/d/old", old_model, opts).ok());
  const auto new_model = RandomModel(&rng);
  for (int64_t budget = 0; budget < 60000; budget += 997) {
    env.FailAfterBytes(budget);
    absl::Status s = WriteModel(&env, "/d/new", new_model, opts);
    env.FailAfterBytes(-1);
    if (s.ok()) {
      ExpectModel(&env, "/d/new", new_model);
      break;
    }
    EXPECT_FALSE(env.FileExists("/d/new.index")) << budget;
    ExpectModel(&env, "/d/old", old_model);
    for (const std::string& f : Children(&env, "/d")) {
      EXPECT_THAT(f, testing::Not(HasSubstr("tempstate"))) << budget;
    }
  }
}

TEST(BundleTest, FailedRenameLeavesNoIndex) {
  MemEnv env;
  auto w = BundleWriter::Create(&env, "/m");
  ASSERT_TRUE((*w)->Add("x", Tensor::Scalar<float>(1)).ok());
  env.FailRenames(true);
  EXPECT_FALSE((*w)->Finish().ok());
  env.FailRenames(false);
  EXPECT_FALSE(env.FileExists("/m.index"));
  EXPECT_TRUE(absl::IsNotFound(BundleReader::Open(&env, "/m").status()));
}

// --- Bad input to the reader ---------------------------------------------------

class BundleBadInputTest : public testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(7);
    model_["a"] = RandomTensor<float>({64}, &rng);
    model_["b"] = RandomStrings({10}, &rng);
    model_["c"] = RandomTensor<int64_t>({8}, &rng);
    ASSERT_TRUE(WriteModel(&env_, "/m", model_).ok());
    ASSERT_TRUE(ReadFileToString(&env_, "/m.index", &index_).ok());
    ASSERT_TRUE(ReadFileToString(&env_, DataFilename("/m", 0, 1), &data_).ok());
    ASSERT_TRUE(BundleReader::Open(&env_, "/m").value()->ForEachEntry(
        [&](absl::string_view n, const tensorflow::BundleEntryProto& entry) {
          original_[std::string(n)] = entry;
          return absl::OkStatus();
        }).ok());
  }
  // Writes an index with one hand-made entry "t" over the existing data.
  void WriteEntry(const tensorflow::BundleEntryProto& entry, int num_shards = 1) {
    tensorflow::BundleHeaderProto header;
    header.set_num_shards(num_shards);
    header.mutable_version()->set_producer(1);
    std::map<std::string, tensorflow::BundleEntryProto, std::less<>> entries;
    entries["t"] = entry;
    ASSERT_TRUE(WriteBundleIndex(&env_, "/m", header, entries, false).ok());
  }
  // The entry `name` had in the bundle SetUp wrote.
  tensorflow::BundleEntryProto EntryOf(const std::string& name) { return original_.at(name); }
  absl::Status LookupT() {
    ASSIGN_OR_RETURN(auto r, BundleReader::Open(&env_, "/m"));
    return r->Lookup("t").status();
  }

  MemEnv env_;
  std::map<std::string, Tensor> model_;
  std::string index_, data_;
  std::map<std::string, tensorflow::BundleEntryProto> original_;
};

TEST_F(BundleBadInputTest, MissingFiles) {
  auto r = BundleReader::Open(&env_, "/nope");
  EXPECT_TRUE(absl::IsNotFound(r.status()));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/nope.index"));
  ASSERT_TRUE(env_.DeleteFile(DataFilename("/m", 0, 1)).ok());
  auto reader = BundleReader::Open(&env_, "/m");
  ASSERT_TRUE(reader.ok());
  auto t = (*reader)->Lookup("a");
  EXPECT_TRUE(absl::IsNotFound(t.status()));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("m.data-00000-of-00001"));
  EXPECT_THAT(std::string((*reader)->Lookup("zz").status().message()), HasSubstr("'zz'"));
}

TEST_F(BundleBadInputTest, TruncatedIndex) {
  for (size_t len : {size_t{0}, size_t{20}, index_.size() - 1, index_.size() / 2}) {
    ASSERT_TRUE(WriteStringToFile(&env_, "/m.index", index_.substr(0, len)).ok());
    auto r = BundleReader::Open(&env_, "/m");
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << len << ": " << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("/m.index"));
  }
}

TEST_F(BundleBadInputTest, CorruptedIndex) {
  std::string bad = index_;
  bad[bad.size() - 3] ^= 1;  // footer magic
  ASSERT_TRUE(WriteStringToFile(&env_, "/m.index", bad).ok());
  EXPECT_THAT(std::string(BundleReader::Open(&env_, "/m").status().message()),
              HasSubstr("bad magic"));
  bad = index_;
  bad[5] ^= 1;  // inside the (single) data block
  ASSERT_TRUE(WriteStringToFile(&env_, "/m.index", bad).ok());
  auto r = BundleReader::Open(&env_, "/m");
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("checksum"));
}

TEST_F(BundleBadInputTest, TruncatedData) {
  ASSERT_TRUE(WriteStringToFile(&env_, DataFilename("/m", 0, 1), data_.substr(0, 100)).ok());
  auto reader = BundleReader::Open(&env_, "/m");
  ASSERT_TRUE(reader.ok());
  auto t = (*reader)->Lookup("c");
  EXPECT_TRUE(absl::IsDataLoss(t.status())) << t.status();
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("truncated"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("'c'"));
}

TEST_F(BundleBadInputTest, CorruptedDataNamesTensorAndFile) {
  const TensorInfo info = BundleReader::Open(&env_, "/m").value()->GetInfo("a").value();
  for (const std::string name : {"a", "b", "c"}) {
    const TensorInfo i = BundleReader::Open(&env_, "/m").value()->GetInfo(name).value();
    std::string bad = data_;
    bad[i.offset + i.size - 1] ^= 0x20;
    ASSERT_TRUE(WriteStringToFile(&env_, DataFilename("/m", 0, 1), bad).ok());
    auto t = BundleReader::Open(&env_, "/m").value()->Lookup(name);
    EXPECT_TRUE(absl::IsDataLoss(t.status())) << name << ": " << t.status();
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("'" + name + "'"));
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("m.data-00000-of-00001"));
  }
  (void)info;
  // A corrupted string length is caught by the length checksum.
  const TensorInfo b = BundleReader::Open(&env_, "/m").value()->GetInfo("b").value();
  std::string bad = data_;
  bad[b.offset] ^= 0x01;
  ASSERT_TRUE(WriteStringToFile(&env_, DataFilename("/m", 0, 1), bad).ok());
  auto t = BundleReader::Open(&env_, "/m").value()->Lookup("b");
  EXPECT_TRUE(absl::IsDataLoss(t.status())) << t.status();
}

TEST_F(BundleBadInputTest, OversizedSizes) {
  tensorflow::BundleEntryProto e = EntryOf("a");
  e.set_size(int64_t{1} << 40);  // disagrees with [64] float
  WriteEntry(e);
  EXPECT_THAT(std::string(LookupT().message()), HasSubstr("should take 256 bytes"));
  e = EntryOf("a");
  e.mutable_shape()->mutable_dim(0)->set_size(int64_t{1} << 38);
  e.set_size(int64_t{1} << 40);  // consistent, but past the end of the file
  WriteEntry(e);
  absl::Status s = LookupT();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("truncated"));
  e = EntryOf("a");
  e.mutable_shape()->mutable_dim(0)->set_size(int64_t{1} << 62);
  e.mutable_shape()->add_dim()->set_size(16);  // element count overflows
  WriteEntry(e);
  EXPECT_TRUE(absl::IsDataLoss(LookupT()));
  e = EntryOf("b");
  e.mutable_shape()->mutable_dim(0)->set_size(int64_t{1} << 40);  // strings can't fit
  WriteEntry(e);
  EXPECT_THAT(std::string(LookupT().message()), HasSubstr("cannot fit"));
  e = EntryOf("a");
  e.set_shard_id(3);
  WriteEntry(e);
  EXPECT_THAT(std::string(LookupT().message()), HasSubstr("shard 3 of 1"));
  e = EntryOf("a");
  e.set_offset(-5);
  WriteEntry(e);
  EXPECT_TRUE(absl::IsDataLoss(LookupT()));
}

TEST_F(BundleBadInputTest, WrongTypes) {
  tensorflow::BundleEntryProto e = EntryOf("a");
  e.set_dtype(static_cast<tensorflow::DataType>(77));
  WriteEntry(e);
  EXPECT_THAT(std::string(LookupT().message()), HasSubstr("invalid dtype 77"));
  e.set_dtype(tensorflow::DT_VARIANT);
  WriteEntry(e);
  EXPECT_TRUE(absl::IsUnimplemented(LookupT()));
  e = EntryOf("a");
  e.set_dtype(tensorflow::DT_DOUBLE);  // [64] double needs 512 bytes, not 256
  WriteEntry(e);
  EXPECT_TRUE(absl::IsDataLoss(LookupT()));
  e = EntryOf("a");
  e.add_slices();  // a whole-tensor slice whose part is missing
  WriteEntry(e);
  EXPECT_TRUE(absl::IsDataLoss(LookupT()));
  EXPECT_THAT(std::string(LookupT().message()), HasSubstr("has no entry"));
  // An entry that is not a BundleEntryProto at all.
  std::map<std::string, tensorflow::BundleEntryProto, std::less<>> none;
  auto file = env_.NewWritableFile("/m.index");
  table::TableBuilder b({}, file->get());
  tensorflow::BundleHeaderProto header;
  header.set_num_shards(1);
  ASSERT_TRUE(b.Add("", header.SerializeAsString()).ok());
  ASSERT_TRUE(b.Add("t", "\xff\xff\xff").ok());
  ASSERT_TRUE(b.Finish().ok());
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_THAT(std::string(LookupT().message()), HasSubstr("does not parse"));
}

TEST_F(BundleBadInputTest, BadHeader) {
  tensorflow::BundleHeaderProto header;
  header.set_num_shards(0);
  std::map<std::string, tensorflow::BundleEntryProto, std::less<>> entries;
  ASSERT_TRUE(WriteBundleIndex(&env_, "/m", header, entries, false).ok());
  EXPECT_TRUE(absl::IsDataLoss(BundleReader::Open(&env_, "/m").status()));
  header.set_num_shards(1);
  header.set_endianness(tensorflow::BundleHeaderProto::BIG);
  ASSERT_TRUE(WriteBundleIndex(&env_, "/m", header, entries, false).ok());
  EXPECT_TRUE(absl::IsUnimplemented(BundleReader::Open(&env_, "/m").status()));
  header.set_endianness(tensorflow::BundleHeaderProto::LITTLE);
  header.mutable_version()->set_min_consumer(5);
  ASSERT_TRUE(WriteBundleIndex(&env_, "/m", header, entries, false).ok());
  EXPECT_THAT(std::string(BundleReader::Open(&env_, "/m").status().message()),
              HasSubstr("min_consumer 5"));
}

// --- MergeBundles --------------------------------------------------------------

TEST(MergeBundlesTest, MergesShardsAndDeletesOldIndexes) {
  std::mt19937 rng(8);
  MemEnv env;
  std::map<std::string, Tensor> a, b, all;
  for (int i = 0; i < 6; ++i) {
    Tensor t = RandomTensor<float>({10 + i}, &rng);
    (i % 2 ? a : b)["v" + std::to_string(i)] = t;
    all["v" + std::to_string(i)] = t;
  }
  BundleWriterOptions opts;
  opts.max_shard_bytes = 50;  // a has several shards
  ASSERT_TRUE(WriteModel(&env, "/tmp/part-0", a, opts).ok());
  ASSERT_TRUE(WriteModel(&env, "/tmp/part-1", b).ok());
  ASSERT_TRUE(MergeBundles(&env, {"/tmp/part-0", "/tmp/part-1"}, "/out/model", false).ok());
  ExpectModel(&env, "/out/model", all);
  EXPECT_FALSE(env.FileExists("/tmp/part-0.index"));
  EXPECT_FALSE(env.FileExists("/tmp/part-1.index"));
  EXPECT_THAT(Children(&env, "/tmp"), testing::IsEmpty());
}

TEST(MergeBundlesTest, DuplicatesAndMissing) {
  MemEnv env;
  ASSERT_TRUE(WriteModel(&env, "/p0", {{"x", Tensor::Scalar<float>(1)}}).ok());
  ASSERT_TRUE(WriteModel(&env, "/p1", {{"x", Tensor::Scalar<float>(2)}}).ok());
  absl::Status s = MergeBundles(&env, {"/p0", "/p1"}, "/out", false);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'x'"));
  s = MergeBundles(&env, {"/p0", "/gone"}, "/out", false);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  ASSERT_TRUE(MergeBundles(&env, {"/p0", "/gone"}, "/p0", true).ok());
  ExpectModel(&env, "/p0", {{"x", Tensor::Scalar<float>(1)}});
  EXPECT_TRUE(absl::IsNotFound(MergeBundles(&env, {"/gone"}, "/out", true)));
}

}  // namespace
}  // namespace recflow::checkpoint
