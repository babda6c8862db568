#include "recflow/core/logging.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace recflow {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class LoggingDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST(LoggingTest, LogWritesOneLineWithPrefix) {
  ::testing::internal::CaptureStderr();
  LOG(INFO) << "hello " << 42;
  LOG(WARNING) << "careful";
  LOG(ERROR) << "bad";
  std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, ContainsRegex("^I[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\."
                                 "[0-9]{6} logging_test\\.cc:[0-9]+\\] hello "
                                 "42\n"));
  EXPECT_THAT(out, ContainsRegex("\nW[0-9]{4} .* logging_test\\.cc:[0-9]+\\] "
                                 "careful\n"));
  EXPECT_THAT(out, ContainsRegex("\nE[0-9]{4} .*\\] bad\n$"));
}

TEST(LoggingTest, MinLogLevelDropsLowerSeverities) {
  SetMinLogLevel(LogSeverity::kError);
  ::testing::internal::CaptureStderr();
  LOG(INFO) << "dropped";
  LOG(WARNING) << "dropped";
  LOG(ERROR) << "kept";
  std::string out = ::testing::internal::GetCapturedStderr();
  SetMinLogLevel(LogSeverity::kInfo);
  EXPECT_THAT(out, Not(HasSubstr("dropped")));
  EXPECT_THAT(out, HasSubstr("kept"));
}

TEST(LoggingTest, VlogAndLogIf) {
  int evaluated = 0;
  auto count = [&] { return ++evaluated; };
  SetVlogLevel(1);
  ::testing::internal::CaptureStderr();
  VLOG(1) << "v1 " << count();
  VLOG(2) << "v2 " << count();  // Off: its arguments are not evaluated.
  LOG_IF(INFO, true) << "if-true";
  LOG_IF(INFO, false) << "if-false " << count();
  std::string out = ::testing::internal::GetCapturedStderr();
  SetVlogLevel(0);
  EXPECT_EQ(evaluated, 1);
  EXPECT_THAT(out, HasSubstr("v1 1"));
  EXPECT_THAT(out, Not(HasSubstr("v2")));
  EXPECT_THAT(out, HasSubstr("if-true"));
  EXPECT_THAT(out, Not(HasSubstr("if-false")));
  EXPECT_TRUE(VLOG_IS_ON(0));
  EXPECT_FALSE(VLOG_IS_ON(1));
}

TEST(LoggingTest, PassingChecksAreSilentAndEvaluateOnce) {
  int calls = 0;
  auto next = [&] { return ++calls; };
  ::testing::internal::CaptureStderr();
  CHECK(next() == 1) << "unused";
  CHECK_EQ(next(), 2);
  CHECK_NE(next(), 0);
  CHECK_LT(next(), 5);
  CHECK_LE(next(), 5);
  CHECK_GT(next(), 5);
  CHECK_GE(next(), 7);
  CHECK_OK(absl::OkStatus());
  CHECK_OK(absl::StatusOr<int>(3));
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), IsEmpty());
  EXPECT_EQ(calls, 7);

  // Mixed signedness compares values, not bit patterns.
  std::vector<int> v(3);
  CHECK_LT(-1, v.size());
  CHECK_GT(v.size(), -1);
  CHECK_NE(uint64_t{0xffffffffffffffffu}, -1);
  CHECK_EQ(int8_t{3}, uint64_t{3});

  // Pointers, nullptr, enums, strings.
  int x = 0;
  int* p = &x;
  CHECK_NE(p, nullptr);
  enum class Color { kRed, kBlue };
  CHECK_EQ(Color::kRed, Color::kRed);
  CHECK_EQ(std::string("a"), "a");
  std::unique_ptr<int> owned;
  CHECK_EQ(owned, nullptr);
}

TEST(LoggingTest, ChecksWorkAsStatementsInIfElse) {
  int branch = 0;
  if (branch == 0)
    CHECK_EQ(branch, 0) << "x";
  else
    branch = 2;
  if (branch == 1)
    CHECK(false);
  else
    branch = 3;
  EXPECT_EQ(branch, 3);
}

TEST(LoggingTest, DcheckIsCompiledOutUnderNdebug) {
  int evaluated = 0;
  auto count = [&] { return ++evaluated; };
  DCHECK(count() > 0);
  DCHECK_EQ(count(), 2);
  DCHECK_OK((count(), absl::OkStatus()));
#ifdef NDEBUG
  EXPECT_EQ(evaluated, 0);
#else
  EXPECT_EQ(evaluated, 3);
#endif
}

TEST_F(LoggingDeathTest, FatalAborts) {
  EXPECT_DEATH(LOG(FATAL) << "fatal message " << 7,
               "F[0-9]{4} .*logging_test\\.cc:[0-9]+\\] fatal message 7");
}

TEST_F(LoggingDeathTest, CheckFailureMessages) {
  int a = 3;
  int b = 4;
  EXPECT_DEATH(CHECK(a == b) << "context", "Check failed: a == b context");
  EXPECT_DEATH(CHECK_EQ(a, b) << "ctx",
               "Check failed: a == b \\(3 vs. 4\\) ctx");
  EXPECT_DEATH(CHECK_GT(a, b), "Check failed: a > b \\(3 vs. 4\\)");
  EXPECT_DEATH(CHECK_GE(-1, std::vector<int>(3).size()), "\\(-1 vs. 3\\)");
  EXPECT_DEATH(CHECK_EQ('a', 'b'), "'a' \\(97\\) vs. 'b' \\(98\\)");
  EXPECT_DEATH(CHECK_OK(absl::NotFoundError("no file 'x'")) << "while loading",
               "Check failed: absl::NotFoundError\\(\"no file 'x'\"\\) is OK "
               "\\(NOT_FOUND: no file 'x'\\) while loading");
  absl::StatusOr<int> bad = absl::InternalError("boom");
  EXPECT_DEATH(CHECK_OK(bad), "bad is OK \\(INTERNAL: boom\\)");
#ifndef NDEBUG
  EXPECT_DEATH(DCHECK_LT(b, a), "Check failed: b < a \\(4 vs. 3\\)");
#endif
}

}  // namespace
}  // namespace recflow
