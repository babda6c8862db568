// The model update stream: a replica mirrors a trainer's update log byte for
// byte (data files first, the index last), follows new updates, survives
// the stream being dropped and restored, drops what a full update
// replaces; bad requests and unreachable trainers are clear.
#include "recflow/serving/update_stream.h"

#include <chrono>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/serving/update_stream.grpc.pb.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/update_stream_test_" + name;
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  EXPECT_TRUE(Env::Default()->RecursivelyCreateDir(dir).ok());
  return dir;
}

// An update bundle with `bytes` bytes of payload.
void WriteUpdate(const std::string& dir, int64_t sequence, bool full, int64_t bytes = 100) {
  checkpoint::UpdateMeta meta;
  meta.sequence = sequence;
  meta.step = sequence * 10;
  meta.full = full;
  meta.since_step = full ? -1 : (sequence - 1) * 10;
  meta.time_micros = 1;
  auto w = checkpoint::BundleWriter::Create(Env::Default(),
                                            checkpoint::UpdatePrefix(dir, sequence), {});
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<float> payload(bytes / 4, static_cast<float>(sequence));
  ASSERT_TRUE((*w)->Add("w", Tensor::FromVector<float>(payload)).ok());
  ASSERT_TRUE((*w)
                  ->Add(checkpoint::kUpdateMetaKey,
                        Tensor::Scalar<std::string>(checkpoint::FormatUpdateMeta(meta)))
                  .ok());
  ASSERT_TRUE((*w)->Finish().ok());
}

std::string Contents(const std::string& path) {
  std::string s;
  EXPECT_TRUE(ReadFileToString(Env::Default(), path, &s).ok()) << path;
  return s;
}

bool WaitFor(const std::function<bool()>& done, double seconds = 20) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

std::vector<int64_t> Sequences(const std::string& dir) {
  std::vector<int64_t> out;
  auto listed = checkpoint::ListUpdates(Env::Default(), dir);
  EXPECT_TRUE(listed.ok());
  for (const auto& [seq, prefix] : *listed) out.push_back(seq);
  return out;
}

TEST(UpdateStreamTest, MirrorsFollowsReconnectsAndPrunes) {
  const std::string log = FreshDir("log"), mirror = FreshDir("mirror");
  WriteUpdate(log, 1, /*full=*/true);
  // Bigger than one chunk (1 MiB): sent in pieces.
  WriteUpdate(log, 2, /*full=*/false, int64_t{3} << 20);
  auto server = UpdateStreamServer::Start(log, "127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto replica = UpdateStreamReplica::Start(absl::StrCat("127.0.0.1:", port), mirror);
  ASSERT_TRUE(replica.ok()) << replica.status();
  ASSERT_TRUE((*replica)->WaitCaughtUp(20));
  EXPECT_EQ((*replica)->newest(), 2);
  for (int64_t seq : {1, 2}) {
    const std::string a = checkpoint::UpdatePrefix(log, seq);
    const std::string b = checkpoint::UpdatePrefix(mirror, seq);
    EXPECT_EQ(Contents(a + ".index"), Contents(b + ".index"));
    EXPECT_EQ(Contents(a + ".data-00000-of-00001"), Contents(b + ".data-00000-of-00001"));
  }

  // A new update follows.
  WriteUpdate(log, 3, /*full=*/false);
  EXPECT_TRUE(WaitFor([&] { return (*replica)->newest() == 3; }));

  // The stream dropped (the trainer gone) and restored on the same port.
  server->reset();
  WriteUpdate(log, 4, /*full=*/false);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ((*replica)->newest(), 3);
  auto again = UpdateStreamServer::Start(log, absl::StrCat("127.0.0.1:", port));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(WaitFor([&] { return (*replica)->newest() == 4; }));
  EXPECT_GE((*replica)->connections(), 2);

  // A full update replaces what came before it.
  WriteUpdate(log, 5, /*full=*/true);
  EXPECT_TRUE(WaitFor([&] { return (*replica)->newest() == 5; }));
  EXPECT_THAT(Sequences(mirror), ::testing::ElementsAre(5));
  // Nothing half-arrived is left.
  auto children = Env::Default()->GetChildren(mirror);
  ASSERT_TRUE(children.ok());
  for (const std::string& c : *children) EXPECT_EQ(c.find("tempstate"), std::string::npos) << c;
}

TEST(UpdateStreamTest, AReplicaStartsAtTheNewestFullUpdate) {
  const std::string log = FreshDir("log2"), mirror = FreshDir("mirror2");
  WriteUpdate(log, 1, true);
  WriteUpdate(log, 2, false);
  WriteUpdate(log, 3, true);
  WriteUpdate(log, 4, false);
  auto server = UpdateStreamServer::Start(log, "127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  auto replica =
      UpdateStreamReplica::Start(absl::StrCat("127.0.0.1:", (*server)->port()), mirror);
  ASSERT_TRUE(replica.ok()) << replica.status();
  ASSERT_TRUE((*replica)->WaitCaughtUp(20));
  EXPECT_THAT(Sequences(mirror), ::testing::ElementsAre(3, 4));
}

// A follower stuck on the mirror asks for a full update there; the replica
// forwards the request to the trainer's log (resync).
TEST(UpdateStreamTest, AReplicaForwardsFullUpdateRequests) {
  const std::string log = FreshDir("log_request");
  WriteUpdate(log, 1, true);
  auto server = UpdateStreamServer::Start(log, "127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string mirror = FreshDir("mirror_request");
  UpdateStreamReplica::Options o;
  o.request_poll_seconds = 0.01;
  auto replica =
      UpdateStreamReplica::Start(absl::StrCat("127.0.0.1:", (*server)->port()), mirror, o);
  ASSERT_TRUE(replica.ok()) << replica.status();
  ASSERT_TRUE((*replica)->WaitCaughtUp(20));
  ASSERT_TRUE(checkpoint::RequestFullUpdate(Env::Default(), mirror, "stuck at 1").ok());
  EXPECT_TRUE(WaitFor([&] {
    return checkpoint::PendingFullUpdateRequest(Env::Default(), log).has_value();
  }));
  EXPECT_EQ(checkpoint::PendingFullUpdateRequest(Env::Default(), log), "stuck at 1");
  EXPECT_TRUE(WaitFor([&] {
    return !checkpoint::PendingFullUpdateRequest(Env::Default(), mirror).has_value();
  }));

  // Straight to the service: a long reason with newlines is kept to one
  // line of 4096 bytes.
  auto stub = ModelUpdateStream::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  FullUpdateRequest request;
  request.set_reason("a\nb" + std::string(10000, 'x'));
  FullUpdateResponse response;
  ASSERT_TRUE(stub->RequestFullUpdate(&ctx, request, &response).ok());
  const auto kept = checkpoint::PendingFullUpdateRequest(Env::Default(), log);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->size(), 4096u);
  EXPECT_EQ(kept->substr(0, 4), "a bx");
}

TEST(UpdateStreamTest, BadRequestsAndUnreachableTrainersAreClear) {
  const std::string log = FreshDir("log3");
  auto server = UpdateStreamServer::Start(log, "127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = ModelUpdateStream::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  SubscribeRequest request;
  request.set_after_sequence(-1);
  auto reader = stub->Subscribe(&ctx, request);
  UpdateChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  grpc::Status st = reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("after_sequence must be >= 0"));

  // Nothing listens there: not caught up, and stopping is prompt.
  auto lonely = UpdateStreamReplica::Start("127.0.0.1:1", FreshDir("mirror3"));
  ASSERT_TRUE(lonely.ok()) << lonely.status();
  EXPECT_FALSE((*lonely)->WaitCaughtUp(0.3));
  EXPECT_EQ((*lonely)->newest(), 0);
  lonely->reset();

  EXPECT_THAT(UpdateStreamReplica::Start("", FreshDir("mirror4")).status().message(),
              HasSubstr("no address"));
  // The port is taken.
  auto twice = UpdateStreamServer::Start(log, absl::StrCat("127.0.0.1:", (*server)->port()));
  EXPECT_THAT(twice.status().message(), HasSubstr("cannot serve model updates"));
}

}  // namespace
}  // namespace recflow::serving
