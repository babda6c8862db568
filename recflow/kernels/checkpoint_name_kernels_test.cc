// Kernel tests of StringJoin, ShardedFilename and ShardedFilespec against
// plain references, and TensorFlow's sharded save path (which uses them) run
// on the half_plus_two SavedModel.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/env.h"
#include "recflow/core/testing/tf_testdata.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/checkpoint_name_ops.h"
#include "recflow/proto/saved_model.pb.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using ::testing::HasSubstr;

const std::string kHalfPlusTwo = TfTestDataPath(kHalfPlusTwoTf);

std::string RandomString(std::mt19937* rng) {
  std::string s(1 + (*rng)() % 6, 'a');
  for (char& ch : s) ch = static_cast<char>('a' + (*rng)() % 26);
  return s;
}

Tensor RandomStrings(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DT_STRING, shape);
  for (std::string& s : t.flat<std::string>()) s = RandomString(rng);
  return t;
}

absl::StatusOr<std::vector<Tensor>> RunFetches(
    const Scope& root, const std::vector<std::string>& fetches) {
  ASSIGN_OR_RETURN(auto def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create({}, def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({}, fetches, {}, &out));
  return out;
}

TEST(CheckpointNameKernelsTest, StringJoinMatchesReference) {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 20; ++trial) {
    const TensorShape shape({1 + static_cast<int64_t>(rng() % 4),
                             1 + static_cast<int64_t>(rng() % 5)});
    const int n = 1 + rng() % 4;
    std::vector<Tensor> inputs;
    Scope root = Scope::NewRootScope();
    std::vector<Output> outs;
    for (int i = 0; i < n; ++i) {
      const bool scalar = rng() % 3 == 0;
      inputs.push_back(scalar ? Tensor::Scalar<std::string>(RandomString(&rng))
                              : RandomStrings(shape, &rng));
      outs.push_back(ops::Const(root, inputs.back()));
    }
    const std::string sep = trial % 2 ? "/" : "";
    ops::StringJoin(root.WithOpName("join"), outs, {.separator = sep});
    auto got = RunFetches(root, {"join:0"});
    ASSERT_TRUE(got.ok()) << got.status();
    bool any_vector = false;
    for (const Tensor& t : inputs) any_vector |= t.dims() > 0;
    ASSERT_EQ((*got)[0].shape(), any_vector ? shape : TensorShape({}));
    for (int64_t j = 0; j < (*got)[0].NumElements(); ++j) {
      std::string want;
      for (int i = 0; i < n; ++i) {
        if (i > 0) want += sep;
        want += inputs[i].dims() == 0 ? inputs[i].scalar<std::string>()
                                      : inputs[i].flat<std::string>()[j];
      }
      EXPECT_EQ((*got)[0].flat<std::string>()[j], want) << trial << " " << j;
    }
  }
}

TEST(CheckpointNameKernelsTest, StringJoinShapeMismatchIsAnError) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), DT_STRING);
  Output b = ops::Placeholder(root.WithOpName("b"), DT_STRING);
  ops::StringJoin(root.WithOpName("join"), {a, b});
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  auto session = Session::Create({}, *def);
  ASSERT_TRUE(session.ok());
  std::mt19937 rng(22);
  std::vector<Tensor> out;
  absl::Status s =
      (*session)->Run({{"a", RandomStrings(TensorShape({2}), &rng)},
                       {"b", RandomStrings(TensorShape({3}), &rng)}},
                      {"join:0"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      s.message(),
      HasSubstr("non-scalar inputs must have one shape, got [2] and [3]"));
}

TEST(CheckpointNameKernelsTest, ShardedFilenameAndSpec) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 10; ++trial) {
    const std::string base = "/tmp/" + RandomString(&rng);
    const int32_t num = 1 + rng() % 200000;
    const int32_t shard = rng() % num;
    Scope root = Scope::NewRootScope();
    Output b = ops::Const(root, base);
    ops::ShardedFilename(root.WithOpName("name"), b, ops::Const(root, shard),
                         ops::Const(root, num));
    ops::ShardedFilespec(root.WithOpName("spec"), b, ops::Const(root, num));
    auto got = RunFetches(root, {"name:0", "spec:0"});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].scalar<std::string>(),
              absl::StrFormat("%s-%05d-of-%05d", base, shard, num));
    EXPECT_EQ((*got)[1].scalar<std::string>(),
              absl::StrFormat("%s-\?\?\?\?\?-of-%05d", base, num));
  }
  EXPECT_EQ(absl::StrFormat("%s-%05d-of-%05d", "m", 3, 12), "m-00003-of-00012");
}

TEST(CheckpointNameKernelsTest, BadShardIsAnError) {
  Scope root = Scope::NewRootScope();
  ops::ShardedFilename(
      root.WithOpName("name"), ops::Const(root, std::string("m")),
      ops::Const(root, int32_t{5}), ops::Const(root, int32_t{5}));
  auto got = RunFetches(root, {"name:0"});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(),
              HasSubstr("shard 5 is not in [0, num_shards = 5)"));
  Scope root2 = Scope::NewRootScope();
  ops::ShardedFilespec(root2.WithOpName("spec"),
                       ops::Const(root2, std::string("m")),
                       ops::Const(root2, int32_t{0}));
  got = RunFetches(root2, {"spec:0"});
  EXPECT_THAT(got.status().message(),
              HasSubstr("num_shards must be positive, got 0"));
}

// TensorFlow's own sharded save path (save/StringJoin, save/ShardedFilename,
// SaveV2, MergeV2Checkpoints) saves the model's variables, and its restore
// path reads them back.
TEST(CheckpointNameKernelsTest, RunsTensorFlowSaveGraph) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  Env* env = Env::Default();
  std::string data;
  ASSERT_TRUE(ReadFileToString(
                  env, std::string(kHalfPlusTwo) + "/saved_model.pb", &data)
                  .ok());
  tensorflow::SavedModel sm;
  ASSERT_TRUE(sm.ParseFromString(data));
  const auto& mg = sm.meta_graphs(0);
  auto session = Session::Create({}, mg.graph_def());
  ASSERT_TRUE(session.ok()) << session.status();
  const auto& saver = mg.saver_def();
  absl::Status s =
      (*session)->Run({{saver.filename_tensor_name(),
                        Tensor::Scalar<std::string>(std::string(kHalfPlusTwo) +
                                                    "/variables/variables")}},
                      {}, {saver.restore_op_name()}, nullptr);
  ASSERT_TRUE(s.ok()) << s;

  const std::string dir = testing::TempDir() + "/checkpoint_name_kernels_test";
  DeleteRecursively(env, dir).IgnoreError();
  ASSERT_TRUE(env->RecursivelyCreateDir(dir).ok());
  const std::string prefix = dir + "/model.ckpt";
  std::vector<Tensor> out;
  s = (*session)->Run(
      {{saver.filename_tensor_name(), Tensor::Scalar<std::string>(prefix)}},
      {saver.save_tensor_name()}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out[0].scalar<std::string>(), prefix);
  EXPECT_TRUE(env->FileExists(prefix + ".index"));

  // A fresh session restores from what was saved and computes y = 0.5x + 2.
  auto fresh = Session::Create({}, mg.graph_def());
  ASSERT_TRUE(fresh.ok());
  s = (*fresh)->Run(
      {{saver.filename_tensor_name(), Tensor::Scalar<std::string>(prefix)}}, {},
      {saver.restore_op_name()}, nullptr);
  ASSERT_TRUE(s.ok()) << s;
  s = (*fresh)->Run(
      {{"x:0", Tensor::FromVector<float>({4.f}, TensorShape({1, 1}))}}, {"y:0"},
      {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out[0].flat<float>()[0], 4.f);
}

}  // namespace
}  // namespace recflow
