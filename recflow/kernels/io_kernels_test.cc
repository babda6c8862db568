// Tests of the SaveV2 / RestoreV2 / MergeV2Checkpoints kernels through a
// Session, including TensorFlow's own save/restore subgraph of a SavedModel
// and the Saver over a Session's variables.
#include <fstream>
#include <random>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/testing/tf_testdata.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/io_ops.h"
#include "recflow/ops/state_ops.h"
#include "recflow/proto/saved_model.pb.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

const std::string kSavedModelDir = TfTestDataPath(kHalfPlusTwoTf);

std::string TempDir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/io_kernels_test_" + name;
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  EXPECT_TRUE(Env::Default()->RecursivelyCreateDir(dir).ok());
  return dir;
}

Tensor Strings(const std::vector<std::string>& v) {
  Tensor t(DT_STRING, TensorShape({static_cast<int64_t>(v.size())}));
  for (size_t i = 0; i < v.size(); ++i) t.flat<std::string>()[i] = v[i];
  return t;
}

template <typename T>
Tensor Random(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  for (T& v : t.flat<T>()) {
    if constexpr (std::is_floating_point_v<T>) {
      v = std::uniform_real_distribution<T>(-2, 2)(*rng);
    } else {
      v = static_cast<T>((*rng)() % 100000);
    }
  }
  return t;
}

// A graph saving fed tensors and one restoring them (prefix, names and
// slices are fed too).
struct SaveRestoreGraph {
  std::unique_ptr<Session> session;
  std::vector<std::string> restored;  // fetch names

  explicit SaveRestoreGraph(const std::vector<DataType>& dtypes) {
    Scope root = Scope::NewRootScope();
    Output prefix = ops::Placeholder(root.WithOpName("prefix"), DT_STRING);
    Output names = ops::Placeholder(root.WithOpName("names"), DT_STRING);
    Output slices = ops::Placeholder(root.WithOpName("slices"), DT_STRING);
    std::vector<Output> values;
    for (size_t i = 0; i < dtypes.size(); ++i) {
      values.push_back(ops::Placeholder(root.WithOpName("v" + std::to_string(i)), dtypes[i]));
    }
    ops::SaveV2(root.WithOpName("save"), prefix, names, slices, values);
    for (const Output& o :
         ops::RestoreV2(root.WithOpName("restore"), prefix, names, slices, dtypes)) {
      restored.push_back(o.name());
    }
    auto def = root.ToGraphDef();
    EXPECT_TRUE(def.ok()) << def.status();
    auto s = Session::Create({}, *def);
    EXPECT_TRUE(s.ok()) << s.status();
    session = *std::move(s);
  }

  absl::Status Save(const std::string& prefix, const std::vector<std::string>& names,
                    const std::vector<Tensor>& values, const std::vector<std::string>& slices) {
    std::vector<std::pair<std::string, Tensor>> feeds = {
        {"prefix", Tensor::Scalar<std::string>(prefix)},
        {"names", Strings(names)},
        {"slices", Strings(slices)}};
    for (size_t i = 0; i < values.size(); ++i) feeds.push_back({"v" + std::to_string(i), values[i]});
    return session->Run(feeds, {}, {"save"}, nullptr);
  }

  absl::Status Restore(const std::string& prefix, const std::vector<std::string>& names,
                       const std::vector<std::string>& slices, std::vector<Tensor>* out) {
    return session->Run({{"prefix", Tensor::Scalar<std::string>(prefix)},
                         {"names", Strings(names)},
                         {"slices", Strings(slices)}},
                        restored, {}, out);
  }
};

TEST(IoKernelsTest, SaveV2ThenRestoreV2) {
  std::mt19937 rng(1);
  const std::vector<DataType> dtypes = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_STRING};
  SaveRestoreGraph g(dtypes);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<Tensor> values = {
        Random<float>({1 + static_cast<int64_t>(rng() % 40), 7}, &rng),
        Random<double>({static_cast<int64_t>(rng() % 5)}, &rng),
        Random<int32_t>({3, 2, 2}, &rng), Random<int64_t>({}, &rng),
        Strings({"", "abc", std::string(1000, 'z'), std::to_string(rng())})};
    const std::vector<std::string> names = {"dense/kernel", "x", "layer/b", "global_step",
                                            "vocab"};
    const std::string prefix = TempDir("roundtrip") + "/model.ckpt-" + std::to_string(trial);
    const std::vector<std::string> empty(5, "");
    absl::Status s = g.Save(prefix, names, values, empty);
    ASSERT_TRUE(s.ok()) << s;
    std::vector<Tensor> out;
    s = g.Restore(prefix, names, empty, &out);
    ASSERT_TRUE(s.ok()) << s;
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_TRUE(TensorsEqual(out[i], values[i])) << names[i];
    }
    // The same tensors in another order come back in that order.
    std::vector<std::string> rev(names.rbegin(), names.rend());
    SaveRestoreGraph g2({DT_STRING, DT_INT64, DT_INT32, DT_DOUBLE, DT_FLOAT});
    ASSERT_TRUE(g2.Restore(prefix, rev, empty, &out).ok());
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_TRUE(TensorsEqual(out[4 - i], values[i])) << names[i];
    }
  }
}

TEST(IoKernelsTest, BadInputs) {
  SaveRestoreGraph g({DT_FLOAT, DT_INT64});
  const std::string prefix = TempDir("bad") + "/m";
  const std::vector<Tensor> values = {Tensor::Scalar<float>(1.5f), Tensor::Scalar<int64_t>(7)};
  // A bad slice spec is InvalidArgument naming the tensor and the spec;
  // nothing is written.
  absl::Status s = g.Save(prefix, {"a", "b"}, values, {"", "4 0;2"});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'b'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"4 0;2\""));
  EXPECT_FALSE(Env::Default()->FileExists(prefix + ".index"));
  // A tensor whose shape is not the spec's slice shape (a scalar cannot be
  // the [2] slice "4 0,2").
  s = g.Save(prefix, {"a", "b"}, values, {"", "4 0,2"});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'b' is []"));
  EXPECT_FALSE(Env::Default()->FileExists(prefix + ".index"));
  // Mismatched lengths.
  s = g.Save(prefix, {"a"}, values, {""});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("must both be [2]"));
  ASSERT_TRUE(g.Save(prefix, {"a", "b"}, values, {"", ""}).ok());
  std::vector<Tensor> out;
  // Stored dtype differs from the requested one.
  s = g.Restore(prefix, {"b", "a"}, {"", ""}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'b' is stored"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("dtypes[0] is float"));
  // Missing tensor, missing checkpoint.
  s = g.Restore(prefix, {"a", "c"}, {"", ""}, &out);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("'c'"));
  s = g.Restore(prefix + "_nope", {"a", "b"}, {"", ""}, &out);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  // A slice of a scalar, whose full shape differs from the stored one.
  s = g.Restore(prefix, {"a", "b"}, {"", "1 0,1"}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'b'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not match the shape stored"));
  s = g.Restore(prefix, {"a", "b"}, {"1 0,x", ""}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'a'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"1 0,x\""));
}

// Extracts rows [start, start + n) of a 2-D float tensor.
Tensor Rows(const Tensor& t, int64_t start, int64_t n) {
  Tensor out(DT_FLOAT, TensorShape({n, t.dim_size(1)}));
  for (int64_t i = 0; i < out.NumElements(); ++i) {
    out.flat<float>()[i] = t.flat<float>()[start * t.dim_size(1) + i];
  }
  return out;
}

// A partitioned variable as TensorFlow's Saver writes it: one SaveV2 with a
// spec per part under one name; RestoreV2 reads any slice back, from that
// layout and from a tensor saved whole.
TEST(IoKernelsTest, SlicedSaveAndRestore) {
  std::mt19937 rng(3);
  const Tensor full = Random<float>({9, 4}, &rng);
  const Tensor bias = Random<float>({1}, &rng);
  SaveRestoreGraph g({DT_FLOAT, DT_FLOAT, DT_FLOAT, DT_FLOAT});
  const std::string prefix = TempDir("sliced") + "/model.ckpt";
  absl::Status s = g.Save(prefix, {"emb", "emb", "emb", "linear/bias_weights"},
                          {Rows(full, 0, 3), Rows(full, 3, 3), Rows(full, 6, 3), bias},
                          {"9 4 0,3:-", "9 4 3,3:0,4", "9 4 6,3:-", "1 0,1"});
  ASSERT_TRUE(s.ok()) << s;
  auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
  ASSERT_TRUE(reader.ok());
  auto info = (*reader)->GetInfo("emb");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->slices.size(), 3u);
  EXPECT_EQ(info->shape, TensorShape({9, 4}));
  // "1 0,1" covers all of a [1] tensor: an ordinary entry.
  info = (*reader)->GetInfo("linear/bias_weights");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->slices.empty());
  std::vector<Tensor> out;
  s = g.Restore(prefix, {"emb", "emb", "emb", "linear/bias_weights"},
                {"", "9 4 2,5:-", "9 4 3,3:0,4", "1 0,1"}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(TensorsEqual(out[0], full));
  EXPECT_TRUE(TensorsEqual(out[1], Rows(full, 2, 5)));
  EXPECT_TRUE(TensorsEqual(out[2], Rows(full, 3, 3)));
  EXPECT_TRUE(TensorsEqual(out[3], bias));
  // Slices of a tensor saved whole.
  const std::string whole = TempDir("sliced_whole") + "/m";
  ASSERT_TRUE(g.Save(whole, {"a", "b", "c", "d"}, {full, full, full, bias},
                     {"", "", "", ""}).ok());
  s = g.Restore(whole, {"a", "b", "c", "d"}, {"9 4 8,1:-", "9 4 -:1,2", "", "1 -"}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(TensorsEqual(out[0], Rows(full, 8, 1)));
  ASSERT_EQ(out[1].shape(), TensorShape({9, 2}));
  for (int64_t r = 0; r < 9; ++r) {
    EXPECT_EQ(out[1].flat<float>()[r * 2], full.flat<float>()[r * 4 + 1]);
    EXPECT_EQ(out[1].flat<float>()[r * 2 + 1], full.flat<float>()[r * 4 + 2]);
  }
  EXPECT_TRUE(TensorsEqual(out[3], bias));
}

// Each of two shards saves some parts of a partitioned variable (a sharded
// Saver over two devices); MergeV2Checkpoints merges their slice lists.
TEST(IoKernelsTest, MergeV2CheckpointsOfSlices) {
  std::mt19937 rng(4);
  const Tensor full = Random<float>({6, 3}, &rng);
  const std::string dir = TempDir("merge_sliced");
  SaveRestoreGraph g({DT_FLOAT, DT_FLOAT});
  ASSERT_TRUE(g.Save(dir + "/tmp0/part", {"w", "w"}, {Rows(full, 0, 2), Rows(full, 4, 2)},
                     {"6 3 0,2:-", "6 3 4,2:-"}).ok());
  SaveRestoreGraph g1({DT_FLOAT});
  ASSERT_TRUE(g1.Save(dir + "/tmp1/part", {"w"}, {Rows(full, 2, 2)}, {"6 3 2,2:-"}).ok());
  Scope root = Scope::NewRootScope();
  Output srcs = ops::Placeholder(root.WithOpName("srcs"), DT_STRING);
  Output dst = ops::Placeholder(root.WithOpName("dst"), DT_STRING);
  ops::MergeV2Checkpoints(root.WithOpName("merge"), srcs, dst);
  auto session = Session::Create({}, root.ToGraphDef().value());
  ASSERT_TRUE(session.ok());
  absl::Status s = (*session)->Run({{"srcs", Strings({dir + "/tmp0/part", dir + "/tmp1/part"})},
                                    {"dst", Tensor::Scalar<std::string>(dir + "/model")}},
                                   {}, {"merge"}, nullptr);
  ASSERT_TRUE(s.ok()) << s;
  std::vector<Tensor> out;
  s = g1.Restore(dir + "/model", {"w"}, {""}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(TensorsEqual(out[0], full));
  s = g1.Restore(dir + "/model", {"w"}, {"6 3 1,4:-"}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(TensorsEqual(out[0], Rows(full, 1, 4)));
}

TEST(IoKernelsTest, MergeV2Checkpoints) {
  std::mt19937 rng(2);
  const std::string dir = TempDir("merge");
  SaveRestoreGraph g({DT_FLOAT, DT_FLOAT});
  const Tensor a = Random<float>({4, 4}, &rng), b = Random<float>({9}, &rng);
  const Tensor c = Random<float>({2}, &rng), d = Random<float>({3, 1}, &rng);
  ASSERT_TRUE(g.Save(dir + "/tmp0/part", {"a", "b"}, {a, b}, {"", ""}).ok());
  ASSERT_TRUE(g.Save(dir + "/tmp1/part", {"c", "d"}, {c, d}, {"", ""}).ok());
  Scope root = Scope::NewRootScope();
  Output srcs = ops::Placeholder(root.WithOpName("srcs"), DT_STRING);
  Output dst = ops::Placeholder(root.WithOpName("dst"), DT_STRING);
  ops::MergeV2Checkpoints(root.WithOpName("merge"), srcs, dst);
  auto session = Session::Create({}, root.ToGraphDef().value());
  ASSERT_TRUE(session.ok());
  absl::Status s = (*session)->Run({{"srcs", Strings({dir + "/tmp0/part", dir + "/tmp1/part"})},
                                    {"dst", Tensor::Scalar<std::string>(dir + "/model")}},
                                   {}, {"merge"}, nullptr);
  ASSERT_TRUE(s.ok()) << s;
  // delete_old_dirs: the emptied temporary directories are gone.
  EXPECT_FALSE(Env::Default()->FileExists(dir + "/tmp0"));
  EXPECT_FALSE(Env::Default()->FileExists(dir + "/tmp1"));
  std::vector<Tensor> out;
  SaveRestoreGraph r({DT_FLOAT, DT_FLOAT, DT_FLOAT, DT_FLOAT});
  ASSERT_TRUE(r.Restore(dir + "/model", {"d", "a", "c", "b"}, {"", "", "", ""}, &out).ok());
  EXPECT_TRUE(TensorsEqual(out[0], d));
  EXPECT_TRUE(TensorsEqual(out[1], a));
  EXPECT_TRUE(TensorsEqual(out[2], c));
  EXPECT_TRUE(TensorsEqual(out[3], b));
  auto reader = checkpoint::BundleReader::Open(Env::Default(), dir + "/model");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->num_shards(), 2);
  // A missing source fails unless allowed.
  s = (*session)->Run({{"srcs", Strings({dir + "/gone/part"})},
                       {"dst", Tensor::Scalar<std::string>(dir + "/m2")}},
                      {}, {"merge"}, nullptr);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
}

// TensorFlow's own restore subgraph (save/RestoreV2 feeding save/Assign ops)
// in the half_plus_two SavedModel loads its variables through our kernels.
TEST(IoKernelsTest, RunsTensorFlowRestoreGraph) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  std::ifstream in(std::string(kSavedModelDir) + "/saved_model.pb", std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  tensorflow::SavedModel sm;
  ASSERT_TRUE(sm.ParseFromString(buf.str()));
  const auto& mg = sm.meta_graphs(0);
  auto session = Session::Create({}, mg.graph_def());
  ASSERT_TRUE(session.ok()) << session.status();
  const std::string filename = mg.saver_def().filename_tensor_name();
  const std::string restore = mg.saver_def().restore_op_name();
  ASSERT_FALSE(filename.empty());
  absl::Status s = (*session)->Run(
      {{filename, Tensor::Scalar<std::string>(std::string(kSavedModelDir) + "/variables/variables")}},
      {}, {restore}, nullptr);
  ASSERT_TRUE(s.ok()) << s;
  std::vector<Tensor> out;
  s = (*session)->Run({{"x:0", Tensor::FromVector<float>({1.f, 2.f}, TensorShape({2, 1}))}},
                      {"y:0"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out[0].flat<float>()[0], 2.5f);
  EXPECT_EQ(out[0].flat<float>()[1], 3.0f);
}

// The Saver over a Session's variables (what train/ does): save, change,
// restore into a new Session before its initializers ever run.
TEST(IoKernelsTest, SaverOverSessionVariables) {
  std::mt19937 rng(3);
  Scope root = Scope::NewRootScope();
  Output v = ops::Variable(root.WithOpName("dense/w"), PartialShape({4, 3}), DT_FLOAT);
  Output init_value = ops::Placeholder(root.WithOpName("init_value"), DT_FLOAT);
  ops::Assign(root.WithOpName("assign"), v, init_value);
  ops::Identity(root.WithOpName("read"), v);
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  auto session = Session::Create({}, *def);
  ASSERT_TRUE(session.ok());
  const Tensor w0 = Random<float>({4, 3}, &rng);
  ASSERT_TRUE((*session)->Run({{"init_value", w0}}, {}, {"assign"}, nullptr).ok());
  checkpoint::SaverOptions opts;
  opts.directory = TempDir("saver");
  checkpoint::VarRef ref{"dense/w", "", "dense/w", DT_FLOAT, PartialShape({4, 3})};
  auto saver = checkpoint::Saver::Create(
      opts, {checkpoint::VarSaveable((*session)->device()->resource_manager(), ref)});
  ASSERT_TRUE(saver.ok()) << saver.status();
  auto path = (*saver)->Save(7);
  ASSERT_TRUE(path.ok()) << path.status();
  // A new job: restore before anything runs, then read through the graph.
  auto session2 = Session::Create({}, *def);
  auto saver2 = checkpoint::Saver::Create(
      opts, {checkpoint::VarSaveable((*session2)->device()->resource_manager(), ref)});
  auto latest = checkpoint::LatestCheckpoint(Env::Default(), opts.directory);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_TRUE((*saver2)->Restore(*latest).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session2)->Run({}, {"read"}, {}, &out).ok());
  EXPECT_TRUE(TensorsEqual(out[0], w0));
}

}  // namespace
}  // namespace recflow
