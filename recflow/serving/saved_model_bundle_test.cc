#include "recflow/serving/saved_model_bundle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/env.h"
#include "recflow/proto/example.pb.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;

constexpr char kHalfPlusTwo[] = RECFLOW_SOURCE_DIR
    "/../shared/testdata/tf_serving/saved_model_half_plus_two_cpu/00000123";

SavedModelBundle Load() {
  auto bundle = LoadSavedModel({}, kHalfPlusTwo, {"serve"});
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
  auto tags = LoadSavedModel({}, kHalfPlusTwo, {"train"});
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
        ReadFileToString(env, std::string(kHalfPlusTwo) + "/" + rel, &data)
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
