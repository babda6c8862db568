// End-to-end tests of `recflow ckpt inspect|merge|diff`: bundles are written
// here with BundleWriter, then the built `recflow` binary (next to
// recflow_tests in the build directory) is run on them. Skipped when the
// binary has not been built.
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/checkpoint/tensor_slice.h"
#include "recflow/core/env.h"
#include "recflow/core/tensor.h"
#include "recflow/core/testing/tf_testdata.h"

namespace recflow::cli {
namespace {

using checkpoint::BundleReader;
using checkpoint::BundleWriter;
using testing::HasSubstr;
using testing::Not;

const std::string kTfBundle = TfTestDataPath(kHalfPlusTwoTf) + "/variables/variables";

struct Result {
  int rc = -1;
  std::string out;  // stdout and stderr
};

std::string Binary() { return std::string(RECFLOW_BINARY_DIR) + "/recflow"; }

Result RunRecflow(const std::string& args) {
  Result r;
  const std::string cmd = "'" + Binary() + "' " + args + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
  const int status = pclose(f);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

Tensor RandomFloats(const TensorShape& shape, uint32_t seed) {
  Tensor t(DT_FLOAT, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : t.flat<float>()) v = u(rng);
  return t;
}

class CkptCommandTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!Env::Default()->FileExists(Binary())) {
      GTEST_SKIP() << Binary() << " is not built";
    }
    std::string pattern = (std::filesystem::path(testing::TempDir()) / "ckpt_cmd_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Writes a bundle of `tensors` at dir_/name (max_shard_bytes as given).
  std::string Write(const std::string& name, const std::vector<std::pair<std::string, Tensor>>& tensors,
                    uint64_t max_shard_bytes = 0) {
    checkpoint::BundleWriterOptions o;
    o.sync = false;
    o.max_shard_bytes = max_shard_bytes;
    auto w = BundleWriter::Create(Env::Default(), Path(name), o);
    EXPECT_TRUE(w.ok()) << w.status();
    for (const auto& [n, t] : tensors) EXPECT_TRUE((*w)->Add(n, t).ok()) << n;
    EXPECT_TRUE((*w)->Finish().ok());
    return Path(name);
  }

  // A small bundle of several dtypes over two shards.
  std::string WriteSmall(const std::string& name) {
    return Write(name,
                 {{"dense/w", RandomFloats({8, 4}, 1)},
                  {"dense/b", RandomFloats({4}, 2)},
                  {"global_step", Tensor::Scalar<int64_t>(42)},
                  {"ids", Tensor::FromVector<int32_t>({3, 1, 4, 1, 5})},
                  {"vocab", Tensor::FromVector<std::string>({"alpha", "beta", "gamma"})},
                  {"scale", Tensor::FromVector<double>({0.25, -1.5})}},
                 /*max_shard_bytes=*/64);
  }

  std::string dir_;
};

TEST_F(CkptCommandTest, InspectListsEveryTensorAndChecksCrcs) {
  const std::string p = WriteSmall("small");
  const Result r = RunRecflow("ckpt inspect " + p);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("6 tensors"));
  EXPECT_THAT(r.out, testing::ContainsRegex("dense/w +float +\\[8,4\\] +128 "));
  EXPECT_THAT(r.out, testing::ContainsRegex("global_step +int64 +\\[\\] +8 "));
  EXPECT_THAT(r.out, testing::ContainsRegex("vocab +string +\\[3\\] .* ok"));
  EXPECT_THAT(r.out, HasSubstr("crc32c checked for 6 tensors (small bundle: checked by default), 0 bad"));
  EXPECT_THAT(r.out, Not(HasSubstr("BAD")));
}

TEST_F(CkptCommandTest, InspectTensorValuesTruncated) {
  Tensor v(DT_FLOAT, {100});
  for (int i = 0; i < 100; ++i) v.data<float>()[i] = i * 0.5f;
  const std::string p = Write("vals", {{"v", v}});
  Result r = RunRecflow("ckpt inspect " + p + " --tensor v --max_values 4");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("v: float [100], 400 bytes, shard 0, crc ok"));
  EXPECT_THAT(r.out, HasSubstr("0 0.5 1 1.5"));
  EXPECT_THAT(r.out, HasSubstr("(96 more not shown)"));
  r = RunRecflow("ckpt inspect " + p + " --tensor nope");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("nope"));
  r = RunRecflow("ckpt inspect " + p + " --max_values=-3");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("--max_values must be a non-negative integer, got '-3'"));
}

TEST_F(CkptCommandTest, InspectDirectoryUsesStateFile) {
  Write("model.ckpt-5", {{"x", RandomFloats({3}, 3)}});
  Write("model.ckpt-9", {{"x", RandomFloats({3}, 4)}});
  tensorflow::CheckpointState state;
  state.set_model_checkpoint_path("model.ckpt-9");
  state.add_all_model_checkpoint_paths("model.ckpt-5");
  state.add_all_model_checkpoint_paths("model.ckpt-9");
  ASSERT_TRUE(checkpoint::WriteCheckpointState(Env::Default(), dir_, state).ok());
  const Result r = RunRecflow("ckpt inspect " + dir_);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("model.ckpt-9\n"));
  // A directory without a state file.
  std::filesystem::create_directory(Path("empty"));
  const Result e = RunRecflow("ckpt inspect " + Path("empty"));
  EXPECT_EQ(e.rc, 1);
  EXPECT_THAT(e.out, HasSubstr("no checkpoint in " + Path("empty")));
  // A damaged state file: the checkpoint training would resume from (the
  // newest intact one), with a warning; before: "names no checkpoint".
  for (const std::string text : {"", "model_checkpoint_path: \"/etc/passwd\"\n", "{{"}) {
    std::ofstream(Path("checkpoint")) << text;
    const Result d = RunRecflow("ckpt inspect " + dir_);
    EXPECT_EQ(d.rc, 0) << d.out;
    EXPECT_THAT(d.out, HasSubstr("warning: checkpoint state file"));
    EXPECT_THAT(d.out, HasSubstr("using " + Path("model.ckpt-9") + ", the newest intact"));
  }
}

TEST_F(CkptCommandTest, InspectTensorFlowBundle) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  Result r = RunRecflow(std::string("ckpt inspect ") + kTfBundle + " --verify");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, testing::ContainsRegex("\na +float +\\[\\] +4 +0 +ok"));
  EXPECT_THAT(r.out, HasSubstr("5 tensors"));
  r = RunRecflow(std::string("ckpt inspect ") + kTfBundle + " --tensor b");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("values: [2]"));
}

// A tensor TensorFlow saved in two parts (rows [0,2) and [2,4)): inspect
// lists it once, with its whole size, and checks it by assembling the parts.
TEST_F(CkptCommandTest, InspectSlicedTensor) {
  const Tensor w = RandomFloats({4, 3}, 7);
  const checkpoint::TensorSlice top = {{0, 2}, {0, -1}}, bottom = {{2, 2}, {0, -1}};
  const std::string p = Write("sliced", {{checkpoint::EncodeTensorNameSlice("w", top), w.Slice(0, 2)},
                                         {checkpoint::EncodeTensorNameSlice("w", bottom), w.Slice(2, 4)},
                                         {"step", Tensor::Scalar<int64_t>(3)}});
  {
    auto reader = BundleReader::Open(Env::Default(), p).value();
    std::map<std::string, tensorflow::BundleEntryProto, std::less<>> entries;
    ASSERT_TRUE(reader->ForEachEntry([&](absl::string_view n, const auto& e) {
      entries[std::string(n)] = e;
      return absl::OkStatus();
    }).ok());
    tensorflow::BundleEntryProto& e = entries["w"];
    e.set_dtype(tensorflow::DT_FLOAT);
    e.mutable_shape()->add_dim()->set_size(4);
    e.mutable_shape()->add_dim()->set_size(3);
    for (int64_t start : {0, 2}) {
      auto* ext = e.add_slices()->add_extent();
      ext->set_start(start);
      ext->set_length(2);
      e.mutable_slices()->rbegin()->add_extent();  // the whole second dimension
    }
    ASSERT_TRUE(checkpoint::WriteBundleIndex(Env::Default(), p, reader->header(), entries, false)
                    .ok());
  }
  const Result r = RunRecflow("ckpt inspect " + p + " --verify");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("2 tensors"));
  EXPECT_THAT(r.out, testing::ContainsRegex("\nw +float +\\[4,3\\] +48 +- +ok \\(2 slices\\)"));
  const Result v = RunRecflow("ckpt inspect " + p + " --tensor w");
  EXPECT_EQ(v.rc, 0) << v.out;
}

TEST_F(CkptCommandTest, MissingAndTruncatedIndex) {
  Result r = RunRecflow("ckpt inspect " + Path("nothing"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("no checkpoint at '" + Path("nothing") + "'"));
  const std::string p = WriteSmall("t");
  std::filesystem::resize_file(p + ".index", std::filesystem::file_size(p + ".index") / 2);
  r = RunRecflow("ckpt inspect " + p);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(p + ".index"));
  EXPECT_THAT(r.out, Not(HasSubstr("tensors,")));
  r = RunRecflow("ckpt diff " + p + " " + p);
  EXPECT_EQ(r.rc, 2);
  r = RunRecflow("ckpt merge --out " + Path("m") + " " + p);
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr(p + ".index"));
}

TEST_F(CkptCommandTest, CorruptedDataNamesTensorAndFile) {
  Tensor w = RandomFloats({64}, 7);
  const std::string p = Write("c", {{"a", RandomFloats({16}, 8)}, {"w", w}});
  const std::string data = checkpoint::DataFilename(p, 0, 1);
  {
    std::FILE* f = std::fopen(data.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 16 * 4 + 10, SEEK_SET);  // inside 'w'
    std::fputc(0x5a, f);
    std::fclose(f);
  }
  Result r = RunRecflow("ckpt inspect " + p);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, testing::ContainsRegex("\nw +float +\\[64\\] +256 +0 +BAD"));
  EXPECT_THAT(r.out, testing::ContainsRegex("error: .*'?w'?.*" + data));
  EXPECT_THAT(r.out, testing::ContainsRegex("\na +float .* ok"));
  r = RunRecflow("ckpt merge --out " + Path("m") + " " + p);
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("copying 'w'"));
  EXPECT_FALSE(Env::Default()->FileExists(Path("m.index")));
  r = RunRecflow("ckpt diff " + p + " " + p);
  EXPECT_EQ(r.rc, 2);
  // Truncated data file: found without reading the tensors.
  std::filesystem::resize_file(data, 100);
  r = RunRecflow("ckpt inspect " + p);
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("TRUNCATED (100 bytes, entries need 320)"));
}

TEST_F(CkptCommandTest, MergeStreamsTensorsAndKeepsValues) {
  // 10 MiB tensor: more than one 8 MiB read chunk.
  Tensor big = RandomFloats({10 << 18}, 11);
  const std::string a = WriteSmall("a");
  const std::string b = Write("b", {{"emb/values", big}, {"emb/keys", Tensor::FromVector<int64_t>({7, -3})}});
  const Result r = RunRecflow("ckpt merge --out " + Path("out/merged") + " " + a + " " + b);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("8 tensors"));
  auto reader = BundleReader::Open(Env::Default(), Path("out/merged"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto got = (*reader)->Lookup("emb/values");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(std::memcmp(got->raw_data(), big.raw_data(), big.TotalBytes()), 0);
  auto vocab = (*reader)->Lookup("vocab");
  ASSERT_TRUE(vocab.ok());
  EXPECT_EQ(vocab->data<std::string>()[2], "gamma");
  // The merged bundle holds exactly A's tensors plus B's.
  Result d = RunRecflow("ckpt diff " + a + " " + Path("out/merged"));
  EXPECT_EQ(d.rc, 1);
  EXPECT_THAT(d.out, HasSubstr("6 tensors equal, 0 with different values, 0 with different dtype "
                               "or shape, 0 only in A, 2 only in B"));
  // Output exists.
  const Result again = RunRecflow("ckpt merge --out " + Path("out/merged") + " " + a);
  EXPECT_EQ(again.rc, 1);
  EXPECT_THAT(again.out, HasSubstr("already exists"));
  // Bad command lines.
  EXPECT_EQ(RunRecflow("ckpt merge " + a).rc, 2);
  EXPECT_EQ(RunRecflow("ckpt merge --out " + Path("x")).rc, 2);
}

TEST_F(CkptCommandTest, MergeDuplicateKeys) {
  const std::string a = Write("a", {{"x", Tensor::FromVector<float>({1, 2})}});
  const std::string b = Write("b", {{"x", Tensor::FromVector<float>({3, 4})}, {"y", Tensor::Scalar<int32_t>(1)}});
  Result r = RunRecflow("ckpt merge --out " + Path("m") + " " + a + " " + b);
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("tensor 'x' is in both '" + a + "' and '" + b + "'"));
  EXPECT_FALSE(Env::Default()->FileExists(Path("m.index")));
  r = RunRecflow("ckpt merge --allow_overwrite --out " + Path("m") + " " + a + " " + b);
  EXPECT_EQ(r.rc, 0) << r.out;
  auto reader = BundleReader::Open(Env::Default(), Path("m"));
  ASSERT_TRUE(reader.ok());
  auto x = (*reader)->Lookup("x");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->data<float>()[0], 3);  // the later input wins
  EXPECT_EQ(RunRecflow("ckpt diff " + b + " " + Path("m")).rc, 0);
}

TEST_F(CkptCommandTest, MergeTensorFlowBundleWithOurs) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  const std::string a = Write("a", {{"extra", Tensor::FromVector<float>({1, 2})}});
  Result r = RunRecflow("ckpt merge --out " + Path("m") + " " + kTfBundle + " " + a);
  EXPECT_EQ(r.rc, 0) << r.out;
  r = RunRecflow("ckpt diff " + std::string(kTfBundle) + " " + Path("m"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("only in B: extra float [2]"));
  EXPECT_THAT(r.out, HasSubstr("5 tensors equal"));
}

TEST_F(CkptCommandTest, DiffReportsEveryKindOfDifference) {
  const std::string a = Write("a", {{"same", Tensor::FromVector<int64_t>({1, 2, 3})},
                                    {"close", Tensor::FromVector<double>({1.0, 2.0, 3.0})},
                                    {"shape", Tensor::FromVector<float>({1, 2})},
                                    {"words", Tensor::FromVector<std::string>({"a", "b"})},
                                    {"gone", Tensor::Scalar<float>(1)}});
  const std::string b = Write("b", {{"same", Tensor::FromVector<int64_t>({1, 2, 3})},
                                    {"close", Tensor::FromVector<double>({1.0, 2.001, 3.01})},
                                    {"shape", Tensor::FromVector<float>({1, 2, 3})},
                                    {"words", Tensor::FromVector<std::string>({"a", "c"})},
                                    {"new", Tensor::Scalar<float>(1)}});
  Result r = RunRecflow("ckpt diff " + a + " " + b);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("only in A: gone float []"));
  EXPECT_THAT(r.out, HasSubstr("only in B: new float []"));
  EXPECT_THAT(r.out, HasSubstr("differs: shape: A is float [2], B is float [3]"));
  EXPECT_THAT(r.out, HasSubstr("differs: close: 2 of 3 elements, max abs diff 0.01"));
  EXPECT_THAT(r.out, HasSubstr("differs: words: 1 of 2 elements"));
  EXPECT_THAT(r.out, HasSubstr("1 tensors equal"));
  r = RunRecflow("ckpt diff --atol 0.005 " + a + " " + b);
  EXPECT_THAT(r.out, HasSubstr("differs: close: 1 of 3 elements"));
  // Equal within atol: exit 0.
  const std::string c = Write("c", {{"v", Tensor::FromVector<float>({1.0f, 2.0f})}});
  const std::string d = Write("d", {{"v", Tensor::FromVector<float>({1.0f, 2.0001f})}});
  EXPECT_EQ(RunRecflow("ckpt diff " + c + " " + d).rc, 1);
  r = RunRecflow("ckpt diff " + c + " " + d + " --atol=0.001");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("equal: 1 tensors equal (atol 0.001)"));
  // Bad command lines and inputs.
  EXPECT_EQ(RunRecflow("ckpt diff " + c).rc, 2);
  r = RunRecflow("ckpt diff " + c + " " + d + " --atol=abc");
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("--atol must be a non-negative number, got 'abc'"));
  r = RunRecflow("ckpt diff " + c + " " + Path("missing"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.out, HasSubstr("no checkpoint at '" + Path("missing") + "'"));
  EXPECT_EQ(RunRecflow("ckpt frobnicate").rc, 2);
}

TEST_F(CkptCommandTest, DiffStreamsBigTensors) {
  // 36 MiB: above diff's 32 MiB streaming threshold, several 8 MiB pieces.
  Tensor big = RandomFloats({9 << 20}, 21);
  const std::string a = Write("a", {{"big", big}});
  Tensor changed = big.DeepCopy();
  changed.data<float>()[5] += 0.5f;
  changed.data<float>()[(9 << 20) - 1] = 7.0f;  // in the last piece
  const std::string b = Write("b", {{"big", changed}});
  Result r = RunRecflow("ckpt diff " + a + " " + b);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("differs: big: 2 of 9437184 elements, max abs diff"));
  EXPECT_EQ(RunRecflow("ckpt diff " + a + " " + a).rc, 0);
  // A corrupted byte in the middle: the crc error names the tensor and file.
  const std::string data = checkpoint::DataFilename(b, 0, 1);
  {
    std::FILE* f = std::fopen(data.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 20 << 20, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, 20 << 20, SEEK_SET);
    std::fputc(c ^ 0x40, f);
    std::fclose(f);
  }
  r = RunRecflow("ckpt diff " + a + " " + b);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("checksum mismatch for tensor 'big' in " + data));
}

}  // namespace
}  // namespace recflow::cli
