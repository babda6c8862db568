// DecodeCSV through a Session: TensorFlow's documented semantics on fixed
// cases, a round trip of random tables written with RFC 4180 quoting, and
// bad records (each error names the record and the field).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.flat<T>().begin(), t.flat<T>().end());
}

Tensor Strings(const std::vector<std::string>& v) {
  return Tensor::FromVector<std::string>(
      v, TensorShape({static_cast<int64_t>(v.size())}));
}

// A default of one value, or an empty (required) one.
template <typename T>
Tensor Default(T v) {
  return Tensor::FromVector<T>({v}, TensorShape({1}));
}
Tensor Required(DataType dt) { return Tensor(dt, TensorShape({0})); }

struct CsvAttrs {
  std::string field_delim = ",";
  bool use_quote_delim = true;
  std::string na_value;
  std::vector<int64_t> select_cols;
};

// Runs DecodeCSV over `records` with constant defaults.
absl::StatusOr<std::vector<Tensor>> Decode(const Tensor& records,
                                           const std::vector<Tensor>& defaults,
                                           const CsvAttrs& attrs = {}) {
  Scope root = Scope::NewRootScope();
  Output rec = ops::Placeholder(root.WithOpName("records"), DT_STRING);
  std::vector<Output> defs;
  std::vector<DataType> types;
  for (const Tensor& d : defaults) {
    defs.push_back(ops::Const(root, d));
    types.push_back(d.dtype());
  }
  NodeBuilder b("csv", "DecodeCSV");
  b.Input(rec)
      .Input(defs)
      .Attr("OUT_TYPE", absl::MakeConstSpan(types))
      .Attr("field_delim", attrs.field_delim)
      .Attr("use_quote_delim", attrs.use_quote_delim)
      .Attr("na_value", attrs.na_value)
      .Attr("select_cols", absl::MakeConstSpan(attrs.select_cols));
  root.AddNode(b);
  if (!root.ok()) return root.status();
  ASSIGN_OR_RETURN(auto def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create({}, def));
  std::vector<std::string> fetches;
  for (size_t i = 0; i < defaults.size(); ++i)
    fetches.push_back("csv:" + std::to_string(i));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({{"records", records}}, fetches, {}, &out));
  return out;
}

TEST(DecodeCsvKernelTest, TypesDefaultsQuotesAndSpaces) {
  auto out = Decode(
      Strings({"1,2.5,abc,7,0.125", " -3 , 1e3 ,\"q,\"\"x\"\"\",,",
               "2147483647,-inf,,-9223372036854775808,nan"}),
      {Default<int32_t>(0), Default<float>(0.f), Default<std::string>("dflt"),
       Default<int64_t>(42), Default<double>(-1.0)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(1, -3, 2147483647));
  const std::vector<float> f = Values<float>((*out)[1]);
  EXPECT_EQ(f[0], 2.5f);
  EXPECT_EQ(f[1], 1000.f);
  EXPECT_TRUE(std::isinf(f[2]) && f[2] < 0);
  EXPECT_THAT(Values<std::string>((*out)[2]),
              ElementsAre("abc", "q,\"x\"", "dflt"));
  EXPECT_THAT(Values<int64_t>((*out)[3]),
              ElementsAre(7, 42, INT64_MIN));
  const std::vector<double> d = Values<double>((*out)[4]);
  EXPECT_EQ(d[0], 0.125);
  EXPECT_EQ(d[1], -1.0);  // a trailing delimiter: an empty last field
  EXPECT_TRUE(std::isnan(d[2]));
}

TEST(DecodeCsvKernelTest, KeepsTheRecordsShape) {
  Tensor records = Tensor::FromVector<std::string>({"1,a", "2,b", "3,c", "4,d"},
                                                   TensorShape({2, 2}));
  auto out = Decode(records, {Default<int64_t>(0), Required(DT_STRING)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({2, 2}));
  EXPECT_THAT(Values<int64_t>((*out)[0]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Values<std::string>((*out)[1]), ElementsAre("a", "b", "c", "d"));
  auto scalar = Decode(Tensor::Scalar<std::string>("5|x"),
                       {Default<int32_t>(0), Required(DT_STRING)},
                       {.field_delim = "|"});
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ((*scalar)[0].shape(), TensorShape({}));
  EXPECT_EQ((*scalar)[1].flat<std::string>()[0], "x");
}

TEST(DecodeCsvKernelTest, NaValueSelectColsDelimAndNoQuoting) {
  // na_value marks a missing field; without a default it is required.
  auto na = Decode(Strings({"NA,3", "4,NA"}),
                   {Default<float>(-1.f), Default<int64_t>(-2)},
                   {.na_value = "NA"});
  ASSERT_TRUE(na.ok()) << na.status();
  EXPECT_THAT(Values<float>((*na)[0]), ElementsAre(-1.f, 4.f));
  EXPECT_THAT(Values<int64_t>((*na)[1]), ElementsAre(3, -2));
  // select_cols decodes columns 1 and 3 only; the others are not converted
  // (only split), and fields after the last selected one are not read.
  auto sel = Decode(Strings({"x\t7\ty\t8.5\tz\"", "w\t9\t\t0.5"}),
                    {Required(DT_INT32), Default<float>(0.f)},
                    {.field_delim = "\t", .select_cols = {1, 3}});
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_THAT(Values<int32_t>((*sel)[0]), ElementsAre(7, 9));
  EXPECT_THAT(Values<float>((*sel)[1]), ElementsAre(8.5f, 0.5f));
  // Without quote handling '"' is an ordinary character.
  auto raw = Decode(Strings({"\"a\",b\"c"}),
                    {Required(DT_STRING), Required(DT_STRING)},
                    {.use_quote_delim = false});
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_THAT(Values<std::string>((*raw)[0]), ElementsAre("\"a\""));
  EXPECT_THAT(Values<std::string>((*raw)[1]), ElementsAre("b\"c"));
}

// Writes random tables as RFC 4180 CSV (quoting fields that need it, and
// some that do not) and decodes them back.
TEST(DecodeCsvKernelTest, RoundTripsRandomTables) {
  std::mt19937_64 rng(99);
  const std::string alphabet = "ab ,\"xy;";
  for (int trial = 0; trial < 20; ++trial) {
    const int rows = 1 + static_cast<int>(rng() % 50);
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::vector<std::string> strs, records;
    for (int r = 0; r < rows; ++r) {
      ints.push_back(static_cast<int64_t>(rng()) >> (rng() % 60));
      floats.push_back(static_cast<float>(static_cast<int>(rng() % 20001) - 10000) /
                       64.f);
      std::string s;
      for (int k = 1 + static_cast<int>(rng() % 6); k > 0; --k)
        s.push_back(alphabet[rng() % alphabet.size()]);
      strs.push_back(s);
      std::string field = s;
      if (s.find_first_of(",\"") != std::string::npos || rng() % 3 == 0) {
        field = "\"";
        for (char c : s) {
          field.push_back(c);
          if (c == '"') field.push_back('"');
        }
        field.push_back('"');
      }
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.9g", floats.back());
      records.push_back(std::to_string(ints.back()) + "," + field + "," + buf);
    }
    auto out = Decode(Strings(records),
                      {Required(DT_INT64), Required(DT_STRING), Required(DT_FLOAT)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<int64_t>((*out)[0]), ints);
    EXPECT_EQ(Values<std::string>((*out)[1]), strs);
    EXPECT_EQ(Values<float>((*out)[2]), floats);
  }
}

void ExpectError(const std::vector<std::string>& records,
                 const std::vector<Tensor>& defaults,
                 const std::vector<std::string>& parts, CsvAttrs attrs = {}) {
  auto out = Decode(Strings(records), defaults, attrs);
  ASSERT_FALSE(out.ok()) << "no error for " << records.back();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument)
      << out.status();
  for (const std::string& p : parts) {
    EXPECT_THAT(std::string(out.status().message()), HasSubstr(p));
  }
}

TEST(DecodeCsvKernelTest, BadRecordsNameTheRecordAndField) {
  const std::vector<Tensor> two = {Default<int32_t>(0), Default<float>(0.f)};
  ExpectError({"1,2", "1,2,3"}, two,
              {"expect 2 fields but have 3 in record 1", "'1,2,3'", "csv"});
  ExpectError({"1,2", "1"}, two, {"expect 2 fields but have 1 in record 1"});
  ExpectError({""}, two, {"expect 2 fields but have 0 in record 0"});
  ExpectError({"1,2", ",2"}, {Required(DT_INT32), Default<float>(0.f)},
              {"field 0 is required but missing in record 1"});
  ExpectError({"x,2"}, two, {"field 0 in record 0 is not a valid int32: 'x'"});
  ExpectError({"2147483648,2"}, two, {"is not a valid int32: '2147483648'"});
  ExpectError({"1,2.5.1"}, two, {"field 1 in record 0 is not a valid float"});
  ExpectError({"1,\"2"}, two, {"record 0, field 1", "no closing quote"});
  ExpectError({"1,\"2\"x"}, two, {"record 0, field 1", "escaped by another quote"});
  ExpectError({"1,2\""}, two, {"unquoted fields cannot have quotes"});
  ExpectError({"1,2,3,4", "5,6,7,8", "1"}, two,
              {"expect at least 4 fields", "record 2"},
              {.select_cols = {0, 3}});
}

TEST(DecodeCsvKernelTest, DefaultsCheckedAtRunTime) {
  // A default with two values passes the shape function when its shape is
  // unknown (a placeholder) and is refused by the kernel.
  Scope root = Scope::NewRootScope();
  Output rec = ops::Placeholder(root.WithOpName("records"), DT_STRING);
  Output def = ops::Placeholder(root.WithOpName("def"), DT_INT64);
  NodeBuilder b("csv", "DecodeCSV");
  b.Input(rec)
      .Input(std::vector<Output>{def})
      .Attr("OUT_TYPE", absl::MakeConstSpan(std::vector<DataType>{DT_INT64}))
      .Attr("na_value", std::string("NA"));
  root.AddNode(b);
  ASSERT_TRUE(root.ok()) << root.status();
  auto graph = root.ToGraphDef();
  ASSERT_TRUE(graph.ok());
  auto session = Session::Create({}, *graph);
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  absl::Status s = (*session)->Run(
      {{"records", Strings({"1"})},
       {"def", Tensor::FromVector<int64_t>({1, 2}, TensorShape({2}))}},
      {"csv:0"}, {}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("record_defaults[0] has shape [2]"));
  s = (*session)->Run({{"records", Strings({"NA", "5"})},
                       {"def", Tensor::Scalar<int64_t>(3)}},
                      {"csv:0"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;  // a scalar default is accepted too
  EXPECT_THAT(Values<int64_t>(out[0]), ElementsAre(3, 5));
}

}  // namespace
}  // namespace recflow
