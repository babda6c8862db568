// ServerCore::PredictWithInputBuilder: the version a request resolves to is
// resolved once and held from building the inputs (by its signature) to
// running them, whatever is published or unloaded in between (issue 23
// item 9: REST predict used to resolve the version twice).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "recflow/core/env.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testutil::FreshDir;
using testutil::WriteAffineModel;

// Builds x = {1, 2} typed by the signature's dtype for x; records the dtype.
struct Builder {
  ServerCore* core = nullptr;
  std::function<void()> in_between;  // runs after the signature is seen
  tensorflow::DataType seen = tensorflow::DT_INVALID;
  int calls = 0;

  absl::Status operator()(const SignatureMap& signatures, PredictRequest* r) {
    ++calls;
    seen = signatures.at("serving_default").inputs().at("x").dtype();
    if (in_between) in_between();
    r->inputs["x"] = seen == tensorflow::DT_DOUBLE
                         ? Tensor::FromVector<double>({1, 2}, {2})
                         : Tensor::FromVector<float>({1, 2}, {2});
    return absl::OkStatus();
  }
};

double Y(const PredictResponse& response, int i) {
  const Tensor& y = response.outputs.at("y");
  return y.dtype() == DT_DOUBLE ? y.data<double>()[i] : y.data<float>()[i];
}

TEST(ServerCoreResolveOnceTest, InputsRunOnTheVersionTheyWereBuiltFor) {
  const std::string base = FreshDir("resolve_once");
  // Version 1 takes float x and computes x + 1; version 2 double x, x + 2.
  ASSERT_TRUE(WriteAffineModel(base + "/1", 1.f, 1.f).ok());
  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig("m", base);
  options.file_system_poll_wait_seconds = 0;  // polls only when told
  options.session.inter_op_threads = 1;
  options.session.intra_op_threads = 1;
  auto core = ServerCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();

  // Version 2 is published, and version 1 unloaded (latest {1}), after the
  // inputs were built for version 1 and before they run.
  Builder build;
  build.in_between = [&] {
    ASSERT_TRUE(WriteAffineModel(base + "/2", 1.f, 2.f, {},
                                 tensorflow::DT_DOUBLE)
                    .ok());
    (*core)->PollNow();
    ASSERT_EQ((*core)->AvailableVersions("m"), std::vector<int64_t>{2});
  };
  PredictRequest request;
  request.model_spec.name = "m";
  PredictResponse response;
  absl::Status s = (*core)->PredictWithInputBuilder(
      request, [&](const SignatureMap& m, PredictRequest* r) { return build(m, r); },
      &response);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(build.calls, 1);
  EXPECT_EQ(build.seen, tensorflow::DT_FLOAT);
  EXPECT_EQ(*response.model_spec.version, 1);
  EXPECT_EQ(Y(response, 0), 2);
  EXPECT_EQ(Y(response, 1), 3);

  // The next request is built for, and runs on, version 2.
  build.in_between = nullptr;
  s = (*core)->PredictWithInputBuilder(
      request, [&](const SignatureMap& m, PredictRequest* r) { return build(m, r); },
      &response);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(build.seen, tensorflow::DT_DOUBLE);
  EXPECT_EQ(*response.model_spec.version, 2);
  EXPECT_EQ(Y(response, 1), 4);

  // Counted as predict requests of the version that answered; no metadata
  // request is made.
  const std::string metrics = (*core)->MetricsText();
  EXPECT_THAT(metrics, HasSubstr("recflow_serving_request_count{model=\"m\",version=\"1\","
                                 "api=\"predict\",status=\"OK\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("recflow_serving_request_count{model=\"m\",version=\"2\","
                                 "api=\"predict\",status=\"OK\"} 1"));
  EXPECT_THAT(metrics, Not(HasSubstr("api=\"metadata\"")));
}

TEST(ServerCoreResolveOnceTest, ErrorsOfResolvingAndBuilding) {
  const std::string base = FreshDir("resolve_once_errors");
  ASSERT_TRUE(WriteAffineModel(base + "/1", 1.f, 1.f).ok());
  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig("m", base);
  options.file_system_poll_wait_seconds = 0;
  auto core = ServerCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();
  int calls = 0;
  auto build = [&](const SignatureMap&, PredictRequest*) {
    ++calls;
    return absl::InvalidArgumentError("bad body");
  };
  PredictRequest request;
  request.model_spec.name = "m";
  request.model_spec.version = 7;
  PredictResponse response;
  absl::Status s = (*core)->PredictWithInputBuilder(request, build, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("version 7 of model 'm' is not available"));
  EXPECT_EQ(calls, 0);  // nothing to build for
  request.model_spec.version.reset();
  s = (*core)->PredictWithInputBuilder(request, build, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), "bad body");
  EXPECT_EQ(calls, 1);
  // The unknown version is a failed predict; the refused body is not a
  // request the model saw.
  const std::string metrics = (*core)->MetricsText();
  EXPECT_THAT(metrics, HasSubstr("api=\"predict\",status=\"NOT_FOUND\"} 1"));
  EXPECT_THAT(metrics, Not(HasSubstr("INVALID_ARGUMENT")));
}

}  // namespace
}  // namespace recflow::serving
