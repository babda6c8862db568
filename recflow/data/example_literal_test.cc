#include "recflow/data/example_literal.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/data/example_parser.h"

namespace recflow::data {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

const tensorflow::Feature& F(const tensorflow::Example& ex,
                             const std::string& key) {
  return ex.features().feature().at(key);
}

TEST(ExampleLiteralTest, ValuesGoToTheListOfTheirKind) {
  absl::StatusOr<std::vector<tensorflow::Example>> ex = ParseExampleLiterals(
      R"( [ {"x": [1.0, 2e3, -0.5], "id": [7, -3], "name": ["a", "b\"c\\d"]},
            {"x": 5.0, "n": nan, "i": -inf, "e": [], "k" : 12} ] )");
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_EQ(ex->size(), 2u);
  const tensorflow::Example& a = (*ex)[0];
  EXPECT_THAT(F(a, "x").float_list().value(),
              ElementsAre(1.0f, 2000.0f, -0.5f));
  EXPECT_THAT(F(a, "id").int64_list().value(), ElementsAre(7, -3));
  EXPECT_THAT(F(a, "name").bytes_list().value(), ElementsAre("a", "b\"c\\d"));
  const tensorflow::Example& b = (*ex)[1];
  EXPECT_THAT(F(b, "x").float_list().value(), ElementsAre(5.0f));
  EXPECT_TRUE(std::isnan(F(b, "n").float_list().value(0)));
  EXPECT_EQ(F(b, "i").float_list().value(0), -INFINITY);
  EXPECT_EQ(F(b, "e").kind_case(), tensorflow::Feature::KIND_NOT_SET);
  EXPECT_THAT(F(b, "k").int64_list().value(), ElementsAre(12));

  ex = ParseExampleLiterals("[]");
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_TRUE(ex->empty());
  ex = ParseExampleLiterals("[{}]");
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ(ex->size(), 1u);
  EXPECT_TRUE((*ex)[0].features().feature().empty());
}

// What the parser builds is what the data pipeline's parser reads.
TEST(ExampleLiteralTest, SerializedExamplesParseInThePipeline) {
  absl::StatusOr<std::vector<tensorflow::Example>> ex = ParseExampleLiterals(
      R"([{"x": [1.5], "id": [4, 5]}, {"x": [-2.0], "id": [6]}])");
  ASSERT_TRUE(ex.ok()) << ex.status();
  ExampleSpec spec;
  spec.dense.push_back(
      {.key = "x", .dtype = DT_FLOAT, .shape = TensorShape({1})});
  spec.var_len.push_back({.key = "id", .dtype = DT_INT64});
  absl::StatusOr<std::unique_ptr<ExampleParser>> parser =
      ExampleParser::Create(spec);
  ASSERT_TRUE(parser.ok()) << parser.status();
  std::vector<std::string> serialized;
  for (const tensorflow::Example& e : *ex)
    serialized.push_back(e.SerializeAsString());
  std::vector<absl::string_view> views(serialized.begin(), serialized.end());
  absl::StatusOr<ParsedExamples> r = (*parser)->Parse(views);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dense[0].flat<float>()[1], -2.0f);
  EXPECT_EQ(r->var_len[0].values.flat<int64_t>()[2], 6);
}

TEST(ExampleLiteralTest, RefusesMalformedText) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {R"([{"x": [3.0]})", "expected ']' at position 13"},
           {R"([{"x": [3.0])", "expected '}' at position 12"},
           {R"([{"x": [3.0, "a"]}])",
            "feature 'x' mixes kinds of values at position 13"},
           {R"([{"x": [3, 4.5]}])", "feature 'x' mixes kinds of values"},
           {R"([{"x": ["a", 1]}])", "feature 'x' mixes kinds of values"},
           {R"([{"x": 1, "x": 2}])", "feature 'x' given twice"},
           {R"([{"x": [1.0x]}])", "'1.0x' is not a number"},
           {R"([{"x": [9223372036854775808]}])",
            "'9223372036854775808' is not a number"},
           {R"([{"x": ["abc]}])", "unterminated string"},
           {R"([{x: 1}])", "expected '\"' at position 2"},
           {R"([{"x" 1}])", "expected ':'"},
           {R"({"x": 1})", "expected '[' at position 0"},
           {R"([{"x": 1}] extra)",
            "unexpected text after the list at position 11"},
           {"", "expected '['"},
       }) {
    absl::StatusOr<std::vector<tensorflow::Example>> ex =
        ParseExampleLiterals(c.text);
    EXPECT_EQ(ex.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(ex.status().message(), HasSubstr(c.error)) << c.text;
  }
}

}  // namespace
}  // namespace recflow::data
