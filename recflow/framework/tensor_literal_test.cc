#include "recflow/framework/tensor_literal.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace recflow {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

std::vector<double> Values(const TensorLiteral& a) {
  return std::vector<double>(a.values.begin(), a.values.end());
}

TEST(TensorLiteralTest, ParsesScalarsListsAndBooleans) {
  absl::StatusOr<TensorLiteral> a = ParseTensorLiteral(" 3.5 ");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->shape.empty());
  EXPECT_THAT(Values(*a), ElementsAre(3.5));

  a = ParseTensorLiteral("[[1, -2e3], [ 0x10 ,True],[false,.25]]");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(3, 2));
  EXPECT_THAT(Values(*a), ElementsAre(1, -2000, 16, 1, 0, 0.25));

  a = ParseTensorLiteral("[]");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(0));
  a = ParseTensorLiteral("[[], []]");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(2, 0));
  EXPECT_TRUE(a->values.empty());
}

// A random rectangular literal reads back with its shape and values.
TEST(TensorLiteralTest, RandomNestedListsRoundTrip) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> dims(1 + rng() % 4);
    int64_t n = 1;
    for (int64_t& d : dims) {
      d = 1 + rng() % 4;
      n *= d;
    }
    std::vector<int64_t> want(n);
    for (int64_t& v : want) v = static_cast<int64_t>(rng() % 2001) - 1000;
    int64_t next = 0;
    std::function<std::string(size_t)> text = [&](size_t depth) {
      if (depth == dims.size()) return absl::StrCat(want[next++]);
      std::vector<std::string> parts;
      for (int64_t i = 0; i < dims[depth]; ++i)
        parts.push_back(text(depth + 1));
      return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
    };
    const std::string literal = text(0);
    absl::StatusOr<TensorLiteral> a = ParseTensorLiteral(literal);
    ASSERT_TRUE(a.ok()) << literal << ": " << a.status();
    EXPECT_EQ(a->shape, dims) << literal;
    ASSERT_EQ(a->values.size(), want.size());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(a->values[i], want[i]) << literal;
  }
}

TEST(TensorLiteralTest, RefusesMalformedText) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {"[1.0x]", "'1.0x' is not a number at position 1 of '[1.0x]'"},
           {"[[1],[2,3]]", "ragged nested list (lengths 1 and 2 at depth 1)"},
           {"[[1],2]", "ragged nested list (numbers at different depths)"},
           {"[1,[]]", "ragged nested list (a list where a number was seen)"},
           {"[[],1]", "ragged nested list (a number where a list was seen)"},
           {"[1,2", "expected ',' or ']' at position 4"},
           {"[1,", "expected a number, a string or '[' at position 3"},
           {"", "expected a number, a string or '['"},
           {"1 2", "unexpected text after the value at position 2"},
           {"[1,,2]", "'' is not a number"},
           {"x", "'x' is not a number"},
       }) {
    absl::StatusOr<TensorLiteral> a = ParseTensorLiteral(c.text);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(a.status().message(), HasSubstr(c.error)) << c.text;
  }
  // Deep nesting is refused before it costs stack.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  absl::StatusOr<TensorLiteral> a = ParseTensorLiteral(deep);
  EXPECT_THAT(a.status().message(), HasSubstr("lists nested too deeply"));
  EXPECT_TRUE(
      ParseTensorLiteral(std::string(32, '[') + "1" + std::string(32, ']'))
          .ok());
  EXPECT_FALSE(
      ParseTensorLiteral(std::string(33, '[') + "1" + std::string(33, ']'))
          .ok());
}

TEST(TensorLiteralTest, CastsToTheDtype) {
  TensorLiteral a = *ParseTensorLiteral("[1, 2.5, -3]");
  absl::StatusOr<Tensor> t =
      TensorLiteralToTensor(a, DT_FLOAT, PartialShape(), "x");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), TensorShape({3}));
  EXPECT_EQ(t->flat<float>()[1], 2.5f);
  t = TensorLiteralToTensor(a, DT_DOUBLE, PartialShape(), "x");
  EXPECT_EQ(t->flat<double>()[2], -3.0);
  t = TensorLiteralToTensor(a, DT_BOOL, PartialShape(), "x");
  EXPECT_TRUE(t->flat<bool>()[2]);

  TensorLiteral big =
      *ParseTensorLiteral("[9223372036854775807, -9223372036854775808]");
  t = TensorLiteralToTensor(big, DT_INT64, PartialShape(), "x");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->flat<int64_t>()[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(t->flat<int64_t>()[1], std::numeric_limits<int64_t>::min());
}

TEST(TensorLiteralTest, RefusesValuesOutsideAnIntegerDtype) {
  for (const char* text :
       {"[1.5]", "[2147483648]", "[-2147483649]", "[nan]", "[inf]"}) {
    absl::StatusOr<Tensor> t = TensorLiteralToTensor(
        *ParseTensorLiteral(text), DT_INT32, PartialShape(), "input 'x'");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(t.status().message(), HasSubstr("input 'x' is int32 but value"))
        << text;
  }
  absl::StatusOr<Tensor> t =
      TensorLiteralToTensor(*ParseTensorLiteral("[9223372036854775808]"),
                            DT_INT64, PartialShape(), "input 'y'");
  EXPECT_THAT(t.status().message(), HasSubstr("input 'y' is int64 but value"));
  t = TensorLiteralToTensor(*ParseTensorLiteral("[1]"), DT_STRING,
                            PartialShape(), "input 'z'");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(),
              HasSubstr("input 'z' is string but the value is a number"));
  t = TensorLiteralToTensor(*ParseTensorLiteral("[1]"), DT_COMPLEX64,
                            PartialShape(), "input 'c'");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(), HasSubstr("input 'c' is complex64"));
}

// saved_model_cli feeds any dtype: every integer dtype range-checked, the
// 16-bit floats rounded, strings written as Python writes them.
TEST(TensorLiteralTest, EveryDtypeAndStrings) {
  struct Case {
    DataType dtype;
    const char* ok;         // in range
    const char* too_big;    // one past the top
    const char* too_small;  // one below the bottom
  };
  for (const Case& c : std::vector<Case>{
           {DT_INT8, "[-128, 127]", "[128]", "[-129]"},
           {DT_INT16, "[-32768, 32767]", "[32768]", "[-32769]"},
           {DT_UINT8, "[0, 255]", "[256]", "[-1]"},
           {DT_UINT16, "[0, 65535]", "[65536]", "[-1]"},
           {DT_UINT32, "[0, 4294967295]", "[4294967296]", "[-1]"},
           {DT_UINT64, "[0, 18446744073709551615]", "[18446744073709551616]",
            "[-1]"}}) {
    absl::StatusOr<Tensor> t = TensorLiteralToTensor(
        *ParseTensorLiteral(c.ok), c.dtype, PartialShape(), "input 'i'");
    ASSERT_TRUE(t.ok()) << DataTypeString(c.dtype) << ": " << t.status();
    absl::StatusOr<TensorLiteral> back = TensorLiteralFromTensor(*t);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->values, ParseTensorLiteral(c.ok)->values)
        << DataTypeString(c.dtype);
    for (const char* bad : {c.too_big, c.too_small, "[1.5]"}) {
      t = TensorLiteralToTensor(*ParseTensorLiteral(bad), c.dtype,
                                PartialShape(), "input 'i'");
      EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument)
          << DataTypeString(c.dtype) << " " << bad;
      EXPECT_THAT(t.status().message(), HasSubstr("not an integer in range"));
    }
  }
  absl::StatusOr<Tensor> h = TensorLiteralToTensor(
      *ParseTensorLiteral("[0.5, 3.25, 70000]"), DT_HALF, PartialShape(), "h");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(static_cast<float>(h->flat<half>()[1]), 3.25f);
  EXPECT_TRUE(std::isinf(static_cast<float>(h->flat<half>()[2])));
  absl::StatusOr<Tensor> bf = TensorLiteralToTensor(
      *ParseTensorLiteral("[-1.5]"), DT_BFLOAT16, PartialShape(), "b");
  ASSERT_TRUE(bf.ok()) << bf.status();
  EXPECT_EQ(static_cast<float>(bf->flat<bfloat16>()[0]), -1.5f);
  EXPECT_THAT(Values(*TensorLiteralFromTensor(*h)),
              ElementsAre(0.5, 3.25, std::numeric_limits<double>::infinity()));

  absl::StatusOr<TensorLiteral> s =
      ParseTensorLiteral(R"([["a b", 'it\'s'], [b"\x00\xff", b'\n"']])");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->shape, ElementsAre(2, 2));
  const std::vector<std::string> want = {"a b", "it's",
                                         std::string("\0\xff", 2), "\n\""};
  EXPECT_EQ(s->strings, want);
  absl::StatusOr<Tensor> st =
      TensorLiteralToTensor(*s, DT_STRING, PartialShape(), "input 's'");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->flat<std::string>()[1], "it's");
  EXPECT_EQ(TensorLiteralFromTensor(*st)->strings, want);
  st = TensorLiteralToTensor(*s, DT_FLOAT, PartialShape(), "input 'f'");
  EXPECT_THAT(st.status().message(),
              HasSubstr("input 'f' is float but the value holds strings"));
  for (const char* bad : {R"(["a", 1])", R"([1, "a"])", R"("abc)", R"("\q")",
                          R"("\x4")"}) {
    absl::StatusOr<TensorLiteral> b = ParseTensorLiteral(bad);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(TensorLiteralTest, FitsAVectorToTheOneLayoutThatHoldsIt) {
  TensorLiteral a = *ParseTensorLiteral("[1, 2, 5, 6]");
  bool reshaped = false;
  absl::StatusOr<Tensor> t =
      TensorLiteralToTensor(a, DT_FLOAT, PartialShape({-1, 1}), "x", &reshaped);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(reshaped);
  EXPECT_EQ(t->shape(), TensorShape({4, 1}));
  t = TensorLiteralToTensor(a, DT_FLOAT, PartialShape({2, -1}), "x", &reshaped);
  EXPECT_TRUE(reshaped);
  EXPECT_EQ(t->shape(), TensorShape({2, 2}));
  t = TensorLiteralToTensor(a, DT_FLOAT, PartialShape({2, 2}), "x", &reshaped);
  EXPECT_TRUE(reshaped);
  EXPECT_EQ(t->shape(), TensorShape({2, 2}));
  // A scalar for [?,1].
  t = TensorLiteralToTensor(*ParseTensorLiteral("7"), DT_INT64,
                            PartialShape({-1, 1}), "x", &reshaped);
  EXPECT_TRUE(reshaped);
  EXPECT_EQ(t->shape(), TensorShape({1, 1}));

  // Kept as written: it fits, no layout holds it, two unknown dims, or it
  // is not a vector.
  for (const PartialShape& want :
       {PartialShape({-1}), PartialShape({3, -1}), PartialShape({-1, -1}),
        PartialShape({8}), PartialShape()}) {
    t = TensorLiteralToTensor(a, DT_FLOAT, want, "x", &reshaped);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_FALSE(reshaped) << want.DebugString();
    EXPECT_EQ(t->shape(), TensorShape({4})) << want.DebugString();
  }
  t = TensorLiteralToTensor(*ParseTensorLiteral("[[1, 2]]"), DT_FLOAT,
                            PartialShape({-1, 1}), "x", &reshaped);
  EXPECT_FALSE(reshaped);
  EXPECT_EQ(t->shape(), TensorShape({1, 2}));
}

TEST(TensorLiteralTest, FromTensor) {
  Tensor src(DT_INT64, TensorShape({2, 1}));
  src.flat<int64_t>()[0] = std::numeric_limits<int64_t>::min();
  src.flat<int64_t>()[1] = 42;
  absl::StatusOr<TensorLiteral> a = TensorLiteralFromTensor(src);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(2, 1));
  absl::StatusOr<Tensor> back =
      TensorLiteralToTensor(*a, DT_INT64, PartialShape(), "x");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->flat<int64_t>()[0], std::numeric_limits<int64_t>::min());

  Tensor b(DT_BOOL, TensorShape({2}));
  b.flat<bool>()[0] = true;
  b.flat<bool>()[1] = false;
  EXPECT_THAT(Values(*TensorLiteralFromTensor(b)), ElementsAre(1, 0));
  EXPECT_EQ(TensorLiteralFromTensor(Tensor(DT_COMPLEX64, TensorShape({1})))
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace recflow
