#include "recflow/serving/json_example.h"

#include <gtest/gtest.h>

#include <string>

namespace recflow::serving {
namespace {

TEST(JsonExampleTest, ExamplesRequest) {
  std::string sig;
  ExampleInput input;
  ASSERT_TRUE(ParseExamplesRequestJson(R"({
      "signature_name": "classify_x",
      "context": {"user": 42, "country": "fr", "ctr": [0.5, 1.25]},
      "examples": [{"item": 7, "price": 2.5, "raw": {"b64": "AAE="}},
                   {"item": [8, 9], "flag": true}]})",
                                       {}, &sig, &input)
                  .ok());
  EXPECT_EQ(sig, "classify_x");
  ASSERT_TRUE(input.context.has_value());
  const auto& ctx = input.context->features().feature();
  EXPECT_EQ(ctx.at("user").int64_list().value(0), 42);
  EXPECT_EQ(ctx.at("country").bytes_list().value(0), "fr");
  EXPECT_EQ(ctx.at("ctr").float_list().value(1), 1.25f);
  ASSERT_EQ(input.examples.size(), 2u);
  const auto& e0 = input.examples[0].features().feature();
  EXPECT_EQ(e0.at("price").float_list().value(0), 2.5f);
  EXPECT_EQ(e0.at("raw").bytes_list().value(0), std::string("\0\1", 2));
  const auto& e1 = input.examples[1].features().feature();
  EXPECT_EQ(e1.at("item").int64_list().value_size(), 2);
  EXPECT_EQ(e1.at("flag").int64_list().value(0), 1);

  auto err = [](const std::string& json) {
    std::string s;
    ExampleInput in;
    return ParseExamplesRequestJson(json, {}, &s, &in);
  };
  EXPECT_NE(err(R"({"examples": [{"a": [1, 2.5]}]})").message().find(
                "feature 'a' mixes int64 and float"),
            std::string::npos);
  EXPECT_NE(err(R"({"examples": [{"a": null}]})").message().find("feature 'a'"),
            std::string::npos);
  EXPECT_NE(err(R"({"examples": [{"a": [[1]]}]})").message().find("example 0"),
            std::string::npos);
  EXPECT_NE(err(R"({"context": {}})").message().find("lacks 'examples'"),
            std::string::npos);
  EXPECT_NE(err(R"({"examples": []})").message().find("empty"), std::string::npos);
  EXPECT_NE(err(R"({"examples": [1]})").message().find("example 0 must be a JSON object"),
            std::string::npos);
  EXPECT_NE(err(R"({"context": [1], "examples": [{}]})").message().find("'context'"),
            std::string::npos);
  EXPECT_NE(err(R"({"examples": [{"a": 18446744073709551615}]})").message().find(
                "beyond int64"),
            std::string::npos);

  // Strings are bounded by max_string_bytes, plain or base64.
  JsonLimits limits;
  limits.max_string_bytes = 8;
  std::string s;
  ExampleInput in;
  absl::Status status =
      ParseExamplesRequestJson(R"({"examples": [{"a": "ten bytes!"}]})", limits, &s, &in);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_TRUE(ParseExamplesRequestJson(R"({"examples": [{"a": "8 bytes!"}]})", limits, &s,
                                       &in)
                  .ok());
}

}  // namespace
}  // namespace recflow::serving
