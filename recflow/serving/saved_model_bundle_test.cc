#include "recflow/serving/saved_model_bundle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "recflow/checkpoint/saved_model.h"
#include "recflow/checkpoint/testing/half_plus_two.h"
#include "recflow/core/env.h"
#include "recflow/core/testing/tf_testdata.h"
#include "recflow/proto/example.pb.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;

// TensorFlow's half_plus_two when the fixture is there, else recflow's
// stand-in: these tests exercise the loader, not TensorFlow's bytes.
const std::string& HalfPlusTwoDir() {
  static const std::string* dir = [] {
    if (HaveTfTestData(kHalfPlusTwoTf)) return new std::string(TfTestDataPath(kHalfPlusTwoTf));
    auto* d = new std::string(testing::TempDir() + "/saved_model_bundle_test_half_plus_two");
    DeleteRecursively(Env::Default(), *d).IgnoreError();
    absl::Status s = checkpoint::testutil::WriteHalfPlusTwo(Env::Default(), *d);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }();
  return *dir;
}

SavedModelBundle Load() {
  auto bundle = LoadSavedModel({}, HalfPlusTwoDir(), {"serve"});
  EXPECT_TRUE(bundle.ok()) << bundle.status();
  return std::move(*bundle);
}

// Serialized tf.Examples with one float feature "x" each.
Tensor Examples(const std::vector<float>& xs) {
  Tensor t(DT_STRING, TensorShape({static_cast<int64_t>(xs.size())}));
  for (size_t i = 0; i < xs.size(); ++i) {
    tensorflow::Example ex;
    (*ex.mutable_features()->mutable_feature())["x"]
        .mutable_float_list()
        ->add_value(xs[i]);
    t.flat<std::string>()[i] = ex.SerializeAsString();
  }
  return t;
}

TEST(SavedModelBundleTest, ServingDefaultOnTensorFlowModel) {
  SavedModelBundle bundle = Load();
  ASSERT_NE(bundle.session, nullptr);
  auto out = RunSignature(
      bundle, "serving_default",
      {{"x", Tensor::FromVector<float>({1.f, 2.f, 5.f}, TensorShape({3, 1}))}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = out->at("y");
  ASSERT_EQ(y.shape(), TensorShape({3, 1}));
  EXPECT_EQ(y.flat<float>()[0], 2.5f);
  EXPECT_EQ(y.flat<float>()[1], 3.0f);
  EXPECT_EQ(y.flat<float>()[2], 4.5f);
}

TEST(SavedModelBundleTest, ClassifyAndRegressOnExamples) {
  SavedModelBundle bundle = Load();
  auto cls = RunSignature(bundle, "classify_x_to_y",
                          {{"inputs", Examples({1.f, 2.f, 5.f, -4.f})}});
  ASSERT_TRUE(cls.ok()) << cls.status();
  const Tensor& scores = cls->at("scores");
  ASSERT_EQ(scores.NumElements(), 4);
  EXPECT_EQ(scores.flat<float>()[0], 2.5f);
  EXPECT_EQ(scores.flat<float>()[1], 3.0f);
  EXPECT_EQ(scores.flat<float>()[2], 4.5f);
  EXPECT_EQ(scores.flat<float>()[3], 0.0f);
  auto reg = RunSignature(bundle, "regress_x_to_y",
                          {{"inputs", Examples({3.f, 8.f})}});
  ASSERT_TRUE(reg.ok()) << reg.status();
  const Tensor& y = reg->at("outputs");
  ASSERT_EQ(y.NumElements(), 2);
  EXPECT_EQ(y.flat<float>()[0], 3.5f);
  EXPECT_EQ(y.flat<float>()[1], 6.0f);
}

// The stand-in answers every signature as TensorFlow's model does, and
// declares the same SignatureDefs (compared when TensorFlow's is present).
TEST(SavedModelBundleTest, RecflowHalfPlusTwoMatchesTensorFlows) {
  const std::string dir = testing::TempDir() + "/saved_model_bundle_test_stand_in";
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  ASSERT_TRUE(checkpoint::testutil::WriteHalfPlusTwo(Env::Default(), dir).ok());
  auto ours = LoadSavedModel({}, dir, {"serve"});
  ASSERT_TRUE(ours.ok()) << ours.status();
  std::vector<SavedModelBundle> bundles;
  bundles.push_back(std::move(*ours));
  if (HaveTfTestData(kHalfPlusTwoTf)) {
    auto tf = LoadSavedModel({}, TfTestDataPath(kHalfPlusTwoTf), {"serve"});
    ASSERT_TRUE(tf.ok()) << tf.status();
    bundles.push_back(std::move(*tf));
    const auto& a = bundles[0].meta_graph_def.signature_def();
    const auto& b = bundles[1].meta_graph_def.signature_def();
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [key, sig] : b) {
      ASSERT_TRUE(a.contains(key)) << key;
      EXPECT_EQ(a.at(key).SerializeAsString(), sig.SerializeAsString()) << key;
    }
  }
  std::vector<std::vector<float>> results;
  for (const SavedModelBundle& bundle : bundles) {
    std::vector<float> r;
    auto append = [&](const absl::StatusOr<std::map<std::string, Tensor>>& out,
                      const std::string& key) {
      ASSERT_TRUE(out.ok()) << out.status();
      for (float v : out->at(key).flat<float>()) r.push_back(v);
    };
    append(RunSignature(bundle, "serving_default",
                        {{"x", Tensor::FromVector<float>({1.f, -3.f}, TensorShape({2, 1}))}}),
           "y");
    append(RunSignature(bundle, "classify_x_to_y", {{"inputs", Examples({7.f})}}), "scores");
    append(RunSignature(bundle, "regress_x_to_y2", {{"inputs", Examples({2.f, 4.f})}}),
           "outputs");
    append(RunSignature(bundle, "regress_x2_to_y3",
                        {{"inputs", Tensor::FromVector<float>({6.f}, TensorShape({1, 1}))}}),
           "outputs");
    results.push_back(r);
  }
  EXPECT_EQ(results[0], (std::vector<float>{2.5f, 0.5f, 5.5f, 4.f, 5.f, 6.f}));
  if (results.size() == 2) {
    EXPECT_EQ(results[1], results[0]);
  }
}

TEST(SavedModelBundleTest, RunSignatureErrorsNameTheCulprit) {
  SavedModelBundle bundle = Load();
  const Tensor x = Tensor::FromVector<float>({1.f}, TensorShape({1, 1}));
  auto unknown_sig = RunSignature(bundle, "nope", {{"x", x}});
  EXPECT_EQ(unknown_sig.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown_sig.status().message(), HasSubstr("serving_default"));

  auto unknown_key = RunSignature(bundle, "serving_default", {{"z", x}});
  EXPECT_EQ(unknown_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown_key.status().message(),
              HasSubstr("no input 'z'; its inputs are: x"));

  auto missing = RunSignature(bundle, "serving_default", {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("'x' is missing"));

  auto dtype = RunSignature(
      bundle, "serving_default",
      {{"x", Tensor::FromVector<int32_t>({1}, TensorShape({1, 1}))}});
  EXPECT_EQ(dtype.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dtype.status().message(), HasSubstr("input 'x' must be float"));

  auto shape = RunSignature(
      bundle, "serving_default",
      {{"x", Tensor::FromVector<float>({1.f, 2.f}, TensorShape({1, 2}))}});
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("input 'x' must have shape"));

  auto out_key = RunSignature(bundle, "serving_default", {{"x", x}}, {"w"});
  EXPECT_EQ(out_key.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(out_key.status().message(), HasSubstr("no output 'w'"));
}

TEST(SavedModelBundleTest, LoadErrors) {
  auto missing = LoadSavedModel({}, "/nonexistent/model/1", {"serve"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto tags = LoadSavedModel({}, HalfPlusTwoDir(), {"train"});
  EXPECT_EQ(tags.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tags.status().message(), HasSubstr("{serve}"));
}

// A copy of half_plus_two with some of its parts.
std::string CopyModel(const std::string& name, bool variables, bool assets) {
  Env* env = Env::Default();
  const std::string dir =
      testing::TempDir() + "/saved_model_bundle_test_" + name;
  DeleteRecursively(env, dir).IgnoreError();
  EXPECT_TRUE(env->RecursivelyCreateDir(dir).ok());
  auto copy = [&](const std::string& rel) {
    std::string data;
    EXPECT_TRUE(
        ReadFileToString(env, HalfPlusTwoDir() + "/" + rel, &data)
            .ok());
    EXPECT_TRUE(env->RecursivelyCreateDir(Dirname(dir + "/" + rel)).ok());
    EXPECT_TRUE(WriteStringToFile(env, dir + "/" + rel, data).ok());
  };
  copy("saved_model.pb");
  if (variables) {
    copy("variables/variables.index");
    copy("variables/variables.data-00000-of-00001");
  }
  if (assets) copy("assets/foo.txt");
  return dir;
}

TEST(SavedModelBundleTest, MissingAssetIsNamed) {
  const std::string dir = CopyModel("no_assets", true, false);
  auto bundle = LoadSavedModel({}, dir, {"serve"});
  EXPECT_EQ(bundle.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(bundle.status().message(), HasSubstr(dir + "/assets/foo.txt"));
}

TEST(SavedModelBundleTest, NoVariablesDirectoryLoadsWithoutRestoring) {
  const std::string dir = CopyModel("no_variables", false, true);
  auto bundle = LoadSavedModel({}, dir, {"serve"});
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  // Nothing restored the variables, so using them fails cleanly.
  auto out = RunSignature(
      *bundle, "serving_default",
      {{"x", Tensor::FromVector<float>({1.f}, TensorShape({1, 1}))}});
  EXPECT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("serving_default"));
}

TEST(SavedModelBundleTest, CorruptVariablesFailTheLoad) {
  const std::string dir = CopyModel("bad_variables", true, true);
  ASSERT_TRUE(
      WriteStringToFile(Env::Default(),
                        dir + "/variables/variables.data-00000-of-00001", "xx")
          .ok());
  auto bundle = LoadSavedModel({}, dir, {"serve"});
  EXPECT_FALSE(bundle.ok());
  EXPECT_THAT(bundle.status().message(), HasSubstr("restoring the variables"));
}

TEST(SavedModelBundleTest, ConcurrentRunSignature) {
  SavedModelBundle bundle = Load();
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const float x = static_cast<float>(t * 100 + i);
        auto out = RunSignature(
            bundle, "serving_default",
            {{"x", Tensor::FromVector<float>({x}, TensorShape({1, 1}))}});
        if (!out.ok() || out->at("y").flat<float>()[0] != 0.5f * x + 2.f) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace recflow::serving
