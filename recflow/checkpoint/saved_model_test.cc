#include "recflow/checkpoint/saved_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/testing/half_plus_two.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/testing/tf_testdata.h"

namespace recflow::checkpoint {
namespace {

using ::testing::HasSubstr;

const std::string kHalfPlusTwo = TfTestDataPath(kHalfPlusTwoTf);

// TensorFlow's half_plus_two when the fixture is there, else recflow's
// stand-in (for the tests of recflow's reader rather than of TF's bytes).
const std::string& AnyHalfPlusTwo() {
  static const std::string* dir = [] {
    if (HaveTfTestData(kHalfPlusTwoTf)) return new std::string(kHalfPlusTwo);
    auto* d = new std::string(testing::TempDir() + "/saved_model_test_half_plus_two");
    DeleteRecursively(Env::Default(), *d).IgnoreError();
    absl::Status s = testutil::WriteHalfPlusTwo(Env::Default(), *d);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }();
  return *dir;
}

std::string TempDir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/saved_model_test_" + name;
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  EXPECT_TRUE(Env::Default()->RecursivelyCreateDir(dir).ok());
  return dir;
}

TEST(SavedModelTest, ReadsTensorFlowModel) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  auto sm = ReadSavedModel(Env::Default(), kHalfPlusTwo);
  ASSERT_TRUE(sm.ok()) << sm.status();
  EXPECT_THAT(TagSets(*sm), ::testing::ElementsAre("serve"));
  auto mg = FindMetaGraph(*sm, {"serve"});
  ASSERT_TRUE(mg.ok()) << mg.status();
  auto sig = FindSignature(**mg, kDefaultServingSignatureDefKey);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ((*sig)->method_name(), kPredictMethodName);
  EXPECT_EQ((*sig)->inputs().at("x").name(), "x:0");
  EXPECT_EQ(VariablesPrefix("/m/1"), "/m/1/variables/variables");
  EXPECT_TRUE(MaybeSavedModelDirectory(Env::Default(), kHalfPlusTwo));
}

TEST(SavedModelTest, LookupErrorsListWhatExists) {
  auto sm = ReadSavedModel(Env::Default(), AnyHalfPlusTwo());
  ASSERT_TRUE(sm.ok());
  auto mg = FindMetaGraph(*sm, {"serve", "gpu"});
  EXPECT_EQ(mg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mg.status().message(), HasSubstr("available tag sets: {serve}"));
  auto sig = FindSignature(sm->meta_graphs(0), "nope");
  EXPECT_EQ(sig.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(sig.status().message(), HasSubstr("classify_x_to_y"));
  EXPECT_THAT(sig.status().message(), HasSubstr("serving_default"));
}

TEST(SavedModelTest, BadDirectoriesAndFiles) {
  Env* env = Env::Default();
  auto missing = ReadSavedModel(env, "/nonexistent/saved_model_dir");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("/nonexistent/saved_model_dir"));

  auto file =
      ReadSavedModel(env, AnyHalfPlusTwo() + "/saved_model.pb");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr("is not a directory"));

  const std::string empty = TempDir("empty");
  auto no_file = ReadSavedModel(env, empty);
  EXPECT_EQ(no_file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(no_file.status().message(), HasSubstr("saved_model.pb"));

  // A truncated copy.
  std::string data;
  ASSERT_TRUE(ReadFileToString(
                  env, AnyHalfPlusTwo() + "/saved_model.pb", &data)
                  .ok());
  const std::string trunc = TempDir("truncated");
  ASSERT_TRUE(WriteStringToFile(env, trunc + "/saved_model.pb",
                                data.substr(0, data.size() / 3))
                  .ok());
  auto t = ReadSavedModel(env, trunc);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(t.status().message(), HasSubstr(trunc + "/saved_model.pb"));

  // Corrupt bytes.
  const std::string corrupt = TempDir("corrupt");
  ASSERT_TRUE(WriteStringToFile(env, corrupt + "/saved_model.pb",
                                "\xff\xff\xff\xff garbage")
                  .ok());
  EXPECT_EQ(ReadSavedModel(env, corrupt).status().code(),
            absl::StatusCode::kDataLoss);

  // Oversized (a sparse file: no disk used), refused before reading.
  const std::string big = TempDir("oversized");
  {
    std::FILE* f = std::fopen((big + "/saved_model.pb").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(ftruncate(fileno(f), static_cast<off_t>(kMaxSavedModelBytes + 1)),
              0);
    std::fclose(f);
  }
  auto o = ReadSavedModel(env, big);
  EXPECT_EQ(o.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(o.status().message(), HasSubstr("saved_model.pb"));

  // Bad text proto, and a valid but empty one.
  const std::string text = TempDir("text");
  ASSERT_TRUE(
      WriteStringToFile(env, text + "/saved_model.pbtxt", "meta_graphs { oops")
          .ok());
  auto bad_text = ReadSavedModel(env, text);
  EXPECT_EQ(bad_text.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad_text.status().message(), HasSubstr("line 1:"));
  ASSERT_TRUE(WriteStringToFile(env, text + "/saved_model.pbtxt", "").ok());
  auto e = ReadSavedModel(env, text);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("no MetaGraph"));
}

TEST(SavedModelTest, WriteIsAtomicAndRefusesExistingDir) {
  Env* env = Env::Default();
  const std::string base = TempDir("write");
  const std::string dir = base + "/export/1";
  tensorflow::SavedModel sm;
  sm.set_saved_model_schema_version(1);
  auto* mg = sm.add_meta_graphs();
  mg->mutable_meta_info_def()->add_tags("serve");
  (*mg->mutable_signature_def())["serving_default"].set_method_name(
      kPredictMethodName);
  SavedModelWriteOptions options;
  options.write_variables = [&](const std::string& prefix) -> absl::Status {
    BundleWriterOptions wo;
    wo.sync = false;
    auto w = BundleWriter::Create(env, prefix, wo);
    if (!w.ok()) return w.status();
    RETURN_IF_ERROR((*w)->Add("v", Tensor::FromVector<float>({1.5f, -2.f})));
    return (*w)->Finish();
  };
  options.assets["vocab.txt"] = "a\nb\n";
  options.assets_extra["warmup"] = "w";
  ASSERT_TRUE(WriteSavedModel(env, dir, sm, options).ok());
  auto back = ReadSavedModel(env, dir);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(FindMetaGraph(*back, {"serve"}).ok());
  EXPECT_TRUE(env->FileExists(VariablesPrefix(dir) + ".index"));
  std::string vocab;
  ASSERT_TRUE(ReadFileToString(env, dir + "/assets/vocab.txt", &vocab).ok());
  EXPECT_EQ(vocab, "a\nb\n");
  EXPECT_TRUE(env->FileExists(dir + "/assets.extra/warmup"));

  absl::Status again = WriteSavedModel(env, dir, sm, options);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr(dir));

  // A failing variables writer leaves neither DIR nor a temporary behind.
  const std::string failed = base + "/export/2";
  options.write_variables = [](const std::string&) {
    return absl::InternalError("disk full");
  };
  absl::Status s = WriteSavedModel(env, failed, sm, options);
  EXPECT_THAT(s.message(), HasSubstr("disk full"));
  EXPECT_FALSE(env->FileExists(failed));
  auto children = env->GetChildren(base + "/export");
  ASSERT_TRUE(children.ok());
  EXPECT_THAT(*children, ::testing::ElementsAre("1"));

  // Bad asset names are refused.
  options.write_variables = nullptr;
  options.assets = {{"../evil", "x"}};
  EXPECT_EQ(WriteSavedModel(env, base + "/export/3", sm, options).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(env->FileExists(base + "/export/3"));

  // Text format round trip.
  SavedModelWriteOptions text;
  text.as_text = true;
  ASSERT_TRUE(WriteSavedModel(env, base + "/export/4", sm, text).ok());
  EXPECT_TRUE(env->FileExists(base + "/export/4/saved_model.pbtxt"));
  EXPECT_TRUE(ReadSavedModel(env, base + "/export/4").ok());
}

}  // namespace
}  // namespace recflow::checkpoint
