// The `checkpoint` state file and FindLatestCheckpoint: a usable state file
// is followed (TensorFlow's relative and absolute paths); an empty,
// damaged or dangling one, or one naming a path outside the directory, is
// never a silent "no checkpoint": the newest intact checkpoint is used and
// the recovery said, or it is an error; retention never adopts (and so
// never deletes) a path outside the directory.
#include "recflow/checkpoint/checkpoint_state.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/mem_env.h"

namespace recflow::checkpoint {
namespace {

using testing::HasSubstr;

void WriteBundle(Env* env, const std::string& prefix, int64_t step) {
  auto writer = BundleWriter::Create(env, prefix);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Add("global_step", Tensor::Scalar<int64_t>(step)).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
}

// /m holds model.ckpt-10 and model.ckpt-20 and the state file `state`.
class CheckpointStateTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_.RecursivelyCreateDir("/m").ok());
    WriteBundle(&env_, "/m/model.ckpt-10", 10);
    WriteBundle(&env_, "/m/model.ckpt-20", 20);
  }
  void State(const std::string& text) {
    ASSERT_TRUE(WriteStringToFile(&env_, "/m/checkpoint", text).ok());
  }
  MemEnv env_;
};

TEST_F(CheckpointStateTest, UsableStateFileIsFollowed) {
  State("model_checkpoint_path: \"model.ckpt-10\"\n");
  auto found = FindLatestCheckpoint(&env_, "/m");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->prefix, "/m/model.ckpt-10");  // the state file, not the newest step
  EXPECT_EQ(found->recovery, "");
  // Absolute paths inside the directory, as TensorFlow writes them.
  State("model_checkpoint_path: \"/m/model.ckpt-20\"\n");
  EXPECT_EQ(LatestCheckpoint(&env_, "/m").value(), "/m/model.ckpt-20");
  State("model_checkpoint_path: \"./sub/../model.ckpt-10\"\n");
  EXPECT_EQ(LatestCheckpoint(&env_, "/m").value(), "/m/model.ckpt-10");
}

TEST_F(CheckpointStateTest, UnusableStateFileRecoversTheNewestIntactCheckpoint) {
  struct Case {
    std::string state;
    std::string why;
  };
  for (const Case& c : std::vector<Case>{
           {"", "names no checkpoint"},
           {"garbage {{{", "is not a CheckpointState"},
           {"model_checkpoint_path: \"model.ckpt-30\"\n", "model.ckpt-30, which cannot be restored"},
           {"model_checkpoint_path: \"/etc/passwd\"\n", "names '/etc/passwd', which is not in /m"},
           {"model_checkpoint_path: \"../m2/model.ckpt-5\"\n", "which is not in /m"}}) {
    State(c.state);
    auto found = FindLatestCheckpoint(&env_, "/m");
    ASSERT_TRUE(found.ok()) << c.state << ": " << found.status();
    EXPECT_EQ(found->prefix, "/m/model.ckpt-20") << c.state;
    EXPECT_THAT(found->recovery, HasSubstr(c.why)) << c.state;
    EXPECT_THAT(found->recovery, HasSubstr("using /m/model.ckpt-20, the newest intact checkpoint"));
    // Every user of the directory agrees.
    EXPECT_EQ(LatestCheckpoint(&env_, "/m").value(), "/m/model.ckpt-20") << c.state;
  }
  // No state file at all (a crash before the first one was written).
  ASSERT_TRUE(env_.DeleteFile("/m/checkpoint").ok());
  auto found = FindLatestCheckpoint(&env_, "/m");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->prefix, "/m/model.ckpt-20");
  EXPECT_THAT(found->recovery, HasSubstr("/m has no checkpoint state file"));
}

TEST_F(CheckpointStateTest, PathOutsideTheDirectoryIsNeverRead) {
  // A real bundle at /etc/passwd: followed, it would be restored.
  ASSERT_TRUE(env_.RecursivelyCreateDir("/etc").ok());
  WriteBundle(&env_, "/etc/passwd", 99);
  State("model_checkpoint_path: \"/etc/passwd\"\n"
        "all_model_checkpoint_paths: \"/etc/passwd\"\n");
  EXPECT_EQ(LatestCheckpoint(&env_, "/m").value(), "/m/model.ckpt-20");
  // Retention adopts only what is inside: saving and dropping old
  // checkpoints never deletes /etc/passwd's files.
  Tensor x = Tensor::Scalar<float>(1);
  SaverOptions opts;
  opts.env = &env_;
  opts.directory = "/m";
  opts.max_to_keep = 1;
  auto saver = Saver::Create(
      opts, {TensorSaveable(
                "x", [&]() -> absl::StatusOr<Tensor> { return x; },
                [&](const Tensor& t) {
                  x = t;
                  return absl::OkStatus();
                })});
  ASSERT_TRUE(saver.ok()) << saver.status();
  EXPECT_THAT((*saver)->checkpoints(),
              testing::ElementsAre("/m/model.ckpt-10", "/m/model.ckpt-20"));
  ASSERT_TRUE((*saver)->Save(30).ok());
  ASSERT_TRUE((*saver)->Save(40).ok());
  EXPECT_TRUE(env_.FileExists("/etc/passwd.index"));
  EXPECT_FALSE(env_.FileExists("/m/model.ckpt-10.index"));
  auto state = ReadCheckpointState(&env_, "/m");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->model_checkpoint_path(), "model.ckpt-40");
  EXPECT_THAT(state->all_model_checkpoint_paths(), testing::ElementsAre("model.ckpt-40"));
}

TEST_F(CheckpointStateTest, DamagedNewestCheckpointFallsBackToAnIntactOne) {
  WriteBundle(&env_, "/m/model.ckpt-30", 30);
  ASSERT_TRUE(WriteStringToFile(&env_, "/m/model.ckpt-30.index", "not a table").ok());
  State("model_checkpoint_path: \"model.ckpt-30\"\n");
  auto found = FindLatestCheckpoint(&env_, "/m");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->prefix, "/m/model.ckpt-20");
  EXPECT_THAT(found->recovery, HasSubstr("model.ckpt-30, which cannot be restored"));
  // A checkpoint without its data file is not intact either.
  State("model_checkpoint_path: \"model.ckpt-20\"\n");
  ASSERT_TRUE(env_.DeleteFile(DataFilename("/m/model.ckpt-20", 0, 1)).ok());
  found = FindLatestCheckpoint(&env_, "/m");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->prefix, "/m/model.ckpt-10");
  EXPECT_THAT(found->recovery, HasSubstr("no data file /m/model.ckpt-20.data-00000-of-00001"));
}

TEST(CheckpointStateErrorsTest, NothingToRecover) {
  MemEnv env;
  ASSERT_TRUE(env.RecursivelyCreateDir("/m").ok());
  // Nothing at all: a fresh start.
  EXPECT_TRUE(absl::IsNotFound(FindLatestCheckpoint(&env, "/m").status()));
  EXPECT_TRUE(absl::IsNotFound(FindLatestCheckpoint(&env, "/missing").status()));
  // A state file that cannot be used, and no checkpoint: an error.
  for (const std::string text : {"", "model_checkpoint_path: \"model.ckpt-7\"\n", "}{"}) {
    ASSERT_TRUE(WriteStringToFile(&env, "/m/checkpoint", text).ok());
    auto found = FindLatestCheckpoint(&env, "/m");
    EXPECT_TRUE(absl::IsDataLoss(found.status())) << text << ": " << found.status();
    EXPECT_THAT(found.status().message(), HasSubstr("/m/checkpoint"));
    EXPECT_THAT(found.status().message(), HasSubstr("no intact checkpoint"));
  }
  // Only a damaged checkpoint, no state file: an error too.
  ASSERT_TRUE(env.DeleteFile("/m/checkpoint").ok());
  ASSERT_TRUE(WriteStringToFile(&env, "/m/model.ckpt-3.index", "x").ok());
  EXPECT_TRUE(absl::IsDataLoss(FindLatestCheckpoint(&env, "/m").status()));
}

TEST(CheckpointStateErrorsTest, WriterNamesOnlyPathsInsideTheDirectory) {
  MemEnv env;
  ASSERT_TRUE(env.RecursivelyCreateDir("/m").ok());
  for (const std::string bad : {"/etc/passwd", "../x/model.ckpt-1", "", "a/../../b"}) {
    tensorflow::CheckpointState state;
    state.set_model_checkpoint_path(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(WriteCheckpointState(&env, "/m", state))) << bad;
    state.set_model_checkpoint_path("model.ckpt-1");
    state.add_all_model_checkpoint_paths(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(WriteCheckpointState(&env, "/m", state))) << bad;
  }
  EXPECT_FALSE(env.FileExists("/m/checkpoint"));
  EXPECT_EQ(CheckpointPathInDir("/m", "/m/sub/model.ckpt-1").value(), "/m/sub/model.ckpt-1");
  EXPECT_FALSE(CheckpointPathInDir("/m", "/m").has_value());
  EXPECT_FALSE(CheckpointPathInDir("/m", "/mm/model.ckpt-1").has_value());
}

}  // namespace
}  // namespace recflow::checkpoint
