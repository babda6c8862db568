#include "recflow/train/saved_model_export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/env.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/serving/saved_model_bundle.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const std::string dir =
      testing::TempDir() + "/saved_model_export_test_" + name;
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  EXPECT_TRUE(Env::Default()->RecursivelyCreateDir(dir).ok());
  return dir;
}

Tensor Random(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DT_FLOAT, shape);
  for (float& v : t.flat<float>())
    v = std::uniform_real_distribution<float>(-2, 2)(*rng);
  return t;
}

// y = x @ w + b with a TF1 variable w and a resource variable b, trained
// (here: assigned) to values different from their initializers.
struct Model {
  Scope root = Scope::NewRootScope();
  Output x, y;
  std::unique_ptr<Session> session;

  explicit Model(std::mt19937* rng) {
    x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 3}));
    Output w = Variable(root, "w", PartialShape({3, 2}), DT_FLOAT,
                        ops::Const(root, Random({3, 2}, rng)));
    Output b =
        Variable(root, "b", PartialShape({2}), DT_FLOAT,
                 ops::Const(root, Random({2}, rng)), {.use_resource = true});
    y = ops::Add(root.WithOpName("y"), ops::MatMul(root, x, ReadValue(root, w)),
                 ReadValue(root, b));
    GlobalVariablesInitializer(root);
    AssignValue(root.WithOpName("train_w"), w,
                ops::Const(root, Random({3, 2}, rng)));
    AssignValue(root.WithOpName("train_b"), b,
                ops::Const(root, Random({2}, rng)));
    auto def = root.ToGraphDef();
    EXPECT_TRUE(def.ok()) << def.status();
    auto s = Session::Create({}, *def);
    EXPECT_TRUE(s.ok()) << s.status();
    session = std::move(*s);
    EXPECT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
    EXPECT_TRUE(session->Run({}, {}, {"train_w", "train_b"}, nullptr).ok());
  }
  std::map<std::string, ExportSignature> Signatures() const {
    std::map<std::string, ExportSignature> sigs;
    sigs[checkpoint::kDefaultServingSignatureDefKey] = {.inputs = {{"x", x}},
                                                        .outputs = {{"y", y}}};
    return sigs;
  }
};

TEST(SavedModelExportTest, ExportLoadRunMatches) {
  std::mt19937 rng(11);
  Model m(&rng);
  const Tensor x = Random({5, 3}, &rng);
  std::vector<Tensor> want;
  ASSERT_TRUE(m.session->Run({{"x", x}}, {"y:0"}, {}, &want).ok());

  const std::string dir = TempDir("roundtrip") + "/model/1";
  ExportOptions options;
  options.writer.sync = false;
  options.assets["vocab.txt"] = "a\nb\n";
  absl::Status s =
      ExportSavedModel(m.session.get(), m.Signatures(), dir, options);
  ASSERT_TRUE(s.ok()) << s;

  auto bundle = serving::LoadSavedModel({}, dir, {"serve"});
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  auto out = serving::RunSignature(*bundle, "serving_default", {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& got = out->at("y");
  ASSERT_EQ(got.shape(), want[0].shape());
  for (int64_t i = 0; i < got.NumElements(); ++i) {
    EXPECT_EQ(got.flat<float>()[i], want[0].flat<float>()[i]) << i;
  }
  EXPECT_TRUE(Env::Default()->FileExists(dir + "/assets/vocab.txt"));

  // Exporting onto an existing directory fails and leaves it alone.
  absl::Status again =
      ExportSavedModel(m.session.get(), m.Signatures(), dir, options);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(serving::LoadSavedModel({}, dir, {"serve"}).ok());
}

TEST(SavedModelExportTest, SavedModelIsTensorFlowShaped) {
  std::mt19937 rng(12);
  Model m(&rng);
  const std::string dir = TempDir("layout") + "/1";
  ExportOptions options;
  options.writer.sync = false;
  ASSERT_TRUE(
      ExportSavedModel(m.session.get(), m.Signatures(), dir, options).ok());

  std::string data;
  ASSERT_TRUE(
      ReadFileToString(Env::Default(), dir + "/saved_model.pb", &data).ok());
  tensorflow::SavedModel sm;
  ASSERT_TRUE(sm.ParseFromString(data));
  ASSERT_EQ(sm.meta_graphs_size(), 1);
  const auto& mg = sm.meta_graphs(0);
  EXPECT_THAT(mg.meta_info_def().tags(), ::testing::ElementsAre("serve"));
  EXPECT_EQ(mg.saver_def().filename_tensor_name(), "save/Const:0");
  EXPECT_EQ(mg.saver_def().save_tensor_name(), "save/control_dependency:0");
  EXPECT_EQ(mg.saver_def().restore_op_name(), "save/restore_all");
  EXPECT_EQ(mg.saver_def().version(), tensorflow::SaverDef::V2);
  const auto& sig = mg.signature_def().at("serving_default");
  EXPECT_EQ(sig.method_name(), "tensorflow/serving/predict");
  EXPECT_EQ(sig.inputs().at("x").name(), "x:0");
  EXPECT_EQ(sig.inputs().at("x").dtype(), tensorflow::DT_FLOAT);
  EXPECT_EQ(sig.inputs().at("x").tensor_shape().dim_size(), 2);
  EXPECT_EQ(sig.inputs().at("x").tensor_shape().dim(1).size(), 3);
  EXPECT_EQ(sig.outputs().at("y").name(), "y:0");

  // The saver subgraph uses only TensorFlow's op names and attrs.
  const std::set<std::string> tf_ops = {"Const",
                                        "PlaceholderWithDefault",
                                        "SaveV2",
                                        "RestoreV2",
                                        "Identity",
                                        "Assign",
                                        "AssignVariableOp",
                                        "ReadVariableOp",
                                        "NoOp"};
  int saver_nodes = 0;
  std::set<std::string> stripped;
  for (const auto& op : mg.meta_info_def().stripped_op_list().op())
    stripped.insert(op.name());
  for (const auto& node : mg.graph_def().node()) {
    EXPECT_TRUE(stripped.contains(node.op())) << node.op();
    if (node.name().rfind("save/", 0) != 0) continue;
    ++saver_nodes;
    EXPECT_TRUE(tf_ops.contains(node.op()))
        << node.name() << " is " << node.op();
  }
  EXPECT_GE(saver_nodes, 10);

  // The variables bundle holds both variables under their node names.
  auto reader = checkpoint::BundleReader::Open(
      Env::Default(), checkpoint::VariablesPrefix(dir));
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->Contains("w"));
  EXPECT_TRUE((*reader)->Contains("b"));

  // The graph's own save subgraph writes a checkpoint when run.
  auto bundle = serving::LoadSavedModel({}, dir, {"serve"});
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const std::string ckpt = TempDir("layout_ckpt") + "/model.ckpt";
  std::vector<Tensor> out;
  absl::Status s = bundle->session->Run(
      {{"save/Const:0", Tensor::Scalar<std::string>(ckpt)}},
      {"save/control_dependency:0"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(Env::Default()->FileExists(ckpt + ".index"));
}

// An asset's path reaches the graph through main_op, as in TensorFlow.
TEST(SavedModelExportTest, AssetsAndMainOp) {
  std::mt19937 rng(14);
  Model m(&rng);
  // The model's graph plus a string variable set from the asset's path.
  Scope& root = m.root;
  Output path = ops::PlaceholderWithDefault(
      root.WithOpName("vocab_path"), ops::Const(root, std::string("unset")),
      PartialShape(TensorShape({})));
  Output vocab =
      Variable(root, "vocab_file", PartialShape(TensorShape({})), DT_STRING,
               ops::Const(root, std::string("")), {.trainable = false});
  Output main_op = AssignValue(root.WithOpName("main_op"), vocab, path);
  ops::Identity(root.WithOpName("vocab_value"), vocab);
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok()) << def.status();
  auto session = Session::Create({}, *def);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}, nullptr).ok());

  const std::string dir = TempDir("assets") + "/1";
  ExportOptions options;
  options.writer.sync = false;
  options.assets["vocab.txt"] = "a\nb\n";
  options.asset_tensors["vocab.txt"] = path;
  options.main_op = main_op;
  options.variable_names = {"w", "b"};
  absl::Status s =
      ExportSavedModel(session->get(), m.Signatures(), dir, options);
  ASSERT_TRUE(s.ok()) << s;
  auto bundle = serving::LoadSavedModel({}, dir, {"serve"});
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  ASSERT_EQ(bundle->meta_graph_def.asset_file_def_size(), 1);
  EXPECT_EQ(bundle->meta_graph_def.asset_file_def(0).tensor_info().name(),
            "vocab_path:0");
  std::vector<Tensor> out;
  ASSERT_TRUE(bundle->session->Run({}, {"vocab_value:0"}, {}, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].scalar<std::string>(), dir + "/assets/vocab.txt");

  options.asset_tensors = {{"other.txt", path}};
  s = ExportSavedModel(session->get(), m.Signatures(),
                       TempDir("assets2") + "/1", options);
  EXPECT_THAT(s.message(),
              HasSubstr("'other.txt', which is not one of the assets"));
}

TEST(SavedModelExportTest, BadSignatures) {
  std::mt19937 rng(13);
  Model m(&rng);
  const std::string base = TempDir("bad");
  EXPECT_EQ(ExportSavedModel(m.session.get(), {}, base + "/1").code(),
            absl::StatusCode::kInvalidArgument);
  Scope other = Scope::NewRootScope();
  Output stranger = ops::Placeholder(other.WithOpName("stranger"), DT_FLOAT);
  std::map<std::string, ExportSignature> sigs = m.Signatures();
  sigs["serving_default"].inputs["z"] = stranger;
  absl::Status s = ExportSavedModel(m.session.get(), sigs, base + "/2");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("stranger"));
  EXPECT_FALSE(Env::Default()->FileExists(base + "/2"));
  ExportOptions options;
  options.variable_names = {"y"};
  s = ExportSavedModel(m.session.get(), m.Signatures(), base + "/3", options);
  EXPECT_THAT(s.message(), HasSubstr("'y' is not a variable"));
}

}  // namespace
}  // namespace recflow::train
