#include "recflow/data/example_parser.h"

#include <time.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/fingerprint.h"
#include "recflow/core/threadpool.h"
#include "recflow/proto/example.pb.h"

namespace recflow::data {
namespace {

using testing::AllOf;
using testing::ElementsAre;
using testing::HasSubstr;

// CPU time of this thread: rates stay meaningful on a loaded machine.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Builders for test Examples.
class ExampleBuilder {
 public:
  ExampleBuilder& Floats(const std::string& key, std::vector<float> v) {
    auto* l = Feature(key).mutable_float_list();
    for (float x : v) l->add_value(x);
    return *this;
  }
  ExampleBuilder& Int64s(const std::string& key, std::vector<int64_t> v) {
    auto* l = Feature(key).mutable_int64_list();
    for (int64_t x : v) l->add_value(x);
    return *this;
  }
  ExampleBuilder& Bytes(const std::string& key, std::vector<std::string> v) {
    auto* l = Feature(key).mutable_bytes_list();
    for (const std::string& x : v) l->add_value(x);
    return *this;
  }
  ExampleBuilder& Empty(const std::string& key) {
    Feature(key);
    return *this;
  }
  std::string Serialize() const { return ex_.SerializeAsString(); }

 private:
  tensorflow::Feature& Feature(const std::string& key) {
    return (*ex_.mutable_features()->mutable_feature())[key];
  }
  tensorflow::Example ex_;
};

std::vector<absl::string_view> Views(const std::vector<std::string>& v) {
  return std::vector<absl::string_view>(v.begin(), v.end());
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.flat<T>().begin(), t.flat<T>().end());
}

std::unique_ptr<ExampleParser> MakeParser(ExampleSpec spec,
                                          ExampleParserOptions opts = {}) {
  auto p = ExampleParser::Create(std::move(spec), std::move(opts));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

DenseFeature Dense(std::string key, DataType dtype, TensorShape shape,
                   Tensor def = Tensor()) {
  DenseFeature f;
  f.key = std::move(key);
  f.dtype = dtype;
  f.shape = std::move(shape);
  f.default_value = std::move(def);
  return f;
}

VarLenFeature VarLen(std::string key, DataType dtype) {
  VarLenFeature f;
  f.key = std::move(key);
  f.dtype = dtype;
  return f;
}

TEST(ExampleParserTest, DenseFeaturesWithDefaults) {
  ExampleSpec spec;
  spec.dense.push_back(Dense("x", DT_FLOAT, TensorShape({1})));
  spec.dense.push_back(
      Dense("pair", DT_INT64, TensorShape({2}),
            Tensor::FromVector<int64_t>({-1, -2}, TensorShape({2}))));
  spec.dense.push_back(
      Dense("name", DT_STRING, TensorShape(),
            Tensor::FromVector<std::string>({"none"}, TensorShape())));
  auto parser = MakeParser(spec);
  std::vector<std::string> ex = {
      ExampleBuilder()
          .Floats("x", {1.5f})
          .Int64s("pair", {3, 4})
          .Bytes("name", {"a"})
          .Serialize(),
      ExampleBuilder().Floats("x", {-2.f}).Serialize(),
      ExampleBuilder()
          .Floats("x", {7.f})
          .Int64s("pair", {int64_t{1} << 40, -5})
          .Serialize()};
  auto out = parser->Parse(Views(ex));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->batch_size, 3);
  EXPECT_TRUE(out->kept_rows.empty());
  ASSERT_EQ(out->dense.size(), 3u);
  EXPECT_EQ(out->dense[0].shape(), TensorShape({3, 1}));
  EXPECT_THAT(Values<float>(out->dense[0]), ElementsAre(1.5f, -2.f, 7.f));
  EXPECT_EQ(out->dense[1].shape(), TensorShape({3, 2}));
  EXPECT_THAT(Values<int64_t>(out->dense[1]),
              ElementsAre(3, 4, -1, -2, int64_t{1} << 40, -5));
  EXPECT_EQ(out->dense[2].shape(), TensorShape({3}));
  EXPECT_THAT(Values<std::string>(out->dense[2]),
              ElementsAre("a", "none", "none"));
}

TEST(ExampleParserTest, VarLenFeatures) {
  ExampleSpec spec;
  spec.var_len = {VarLen("ids", DT_INT64), VarLen("w", DT_FLOAT),
                  VarLen("tags", DT_STRING)};
  auto parser = MakeParser(spec);
  std::vector<std::string> ex = {
      ExampleBuilder().Int64s("ids", {5, 6, 7}).Floats("w", {0.5f}).Serialize(),
      ExampleBuilder().Serialize(),  // nothing: empty rows
      ExampleBuilder()
          .Int64s("ids", {})
          .Bytes("tags", {"p", "", "q"})
          .Empty("w")
          .Serialize(),
      ExampleBuilder().Int64s("ids", {-9}).Floats("w", {1.f, 2.f}).Serialize()};
  auto out = parser->Parse(Views(ex));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->var_len.size(), 3u);
  EXPECT_THAT(Values<int64_t>(out->var_len[0].values),
              ElementsAre(5, 6, 7, -9));
  EXPECT_THAT(Values<int64_t>(out->var_len[0].row_splits),
              ElementsAre(0, 3, 3, 3, 4));
  EXPECT_THAT(Values<float>(out->var_len[1].values),
              ElementsAre(0.5f, 1.f, 2.f));
  EXPECT_THAT(Values<int64_t>(out->var_len[1].row_splits),
              ElementsAre(0, 1, 1, 1, 3));
  EXPECT_THAT(Values<std::string>(out->var_len[2].values),
              ElementsAre("p", "", "q"));
  EXPECT_THAT(Values<int64_t>(out->var_len[2].row_splits),
              ElementsAre(0, 0, 0, 3, 3));
}

TEST(ExampleParserTest, EmptyBatch) {
  ExampleSpec spec;
  spec.dense.push_back(Dense("x", DT_FLOAT, TensorShape({2, 3})));
  spec.var_len = {VarLen("ids", DT_INT64)};
  auto out = MakeParser(spec)->Parse({});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dense[0].shape(), TensorShape({0, 2, 3}));
  EXPECT_EQ(out->var_len[0].values.shape(), TensorShape({0}));
  EXPECT_THAT(Values<int64_t>(out->var_len[0].row_splits), ElementsAre(0));
}

// Hand-encoded wire bytes: unpacked repeated values, unknown fields, a
// repeated map key (the last wins), an entry without a value.
std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
  return s;
}
std::string Field(int number, int wire_type, const std::string& payload) {
  std::string s = Varint(static_cast<uint64_t>(number) << 3 | wire_type);
  if (wire_type == 2) s += Varint(payload.size());
  return s + payload;
}
std::string Entry(const std::string& key, const std::string* feature) {
  std::string e = Field(1, 2, key);
  if (feature != nullptr) e += Field(2, 2, *feature);
  return Field(1, 2, e);
}

TEST(ExampleParserTest, WireFormatCornerCases) {
  // Int64List with unpacked values 5, 7 and an unknown fixed64 field.
  const std::string unpacked_ints =
      Field(3, 2,
            Field(1, 0, Varint(5)) + Field(9, 1, std::string(8, 'z')) +
                Field(1, 0, Varint(7)));
  // FloatList with an unpacked float 2.5 and then a packed 3.5.
  float a = 2.5f, b = 3.5f;
  const std::string unpacked_floats =
      Field(2, 2,
            Field(1, 5, std::string(reinterpret_cast<char*>(&a), 4)) +
                Field(1, 2, std::string(reinterpret_cast<char*>(&b), 4)));
  const std::string first = Field(3, 2, Field(1, 2, Varint(1)));
  std::string features = Entry("ids", &first) + Entry("ids", &unpacked_ints) +
                         Entry("f", &unpacked_floats) +
                         Entry("nothing", nullptr) +
                         Field(7, 0, Varint(99));  // unknown Features field
  const std::string example = Field(1, 2, features) + Field(5, 2, "junk");
  ExampleSpec spec;
  spec.var_len = {VarLen("ids", DT_INT64), VarLen("f", DT_FLOAT),
                  VarLen("nothing", DT_STRING)};
  auto out = MakeParser(spec)->Parse({example});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int64_t>(out->var_len[0].values), ElementsAre(5, 7));
  EXPECT_THAT(Values<float>(out->var_len[1].values), ElementsAre(2.5f, 3.5f));
  EXPECT_EQ(out->var_len[2].values.NumElements(), 0);
  // And the same bytes parse with protobuf to the same thing.
  tensorflow::Example ex;
  ASSERT_TRUE(ex.ParseFromString(example));
  EXPECT_EQ(ex.features().feature().at("ids").int64_list().value_size(), 2);
}

TEST(ExampleParserTest, ErrorsNameTheExampleTheKeyAndTheProblem) {
  ExampleSpec spec;
  spec.dense.push_back(Dense("x", DT_FLOAT, TensorShape({2})));
  spec.dense.push_back(
      Dense("s", DT_STRING, TensorShape(),
            Tensor::FromVector<std::string>({""}, TensorShape())));
  spec.dense.back().validate_utf8 = true;
  spec.var_len = {VarLen("ids", DT_INT64)};
  auto parser = MakeParser(spec);
  const std::string good = ExampleBuilder().Floats("x", {1, 2}).Serialize();
  struct Case {
    std::string bad;
    std::vector<std::string> expected;
  } cases[] = {
      {ExampleBuilder().Int64s("x", {1, 2}).Serialize(),
       {"example 1", "'x'", "expected float_list, got int64_list",
        "[wrong_type]"}},
      {ExampleBuilder().Floats("x", {1, 2}).Floats("ids", {1}).Serialize(),
       {"example 1", "'ids'", "expected int64_list, got float_list",
        "[wrong_type]"}},
      {ExampleBuilder().Floats("x", {1, 2, 3}).Serialize(),
       {"example 1", "'x'", "expected 2 values (shape [2]), got 3",
        "[wrong_length]"}},
      {ExampleBuilder().Int64s("ids", {1}).Serialize(),
       {"example 1", "'x'", "required feature is missing",
        "[missing_feature]"}},
      {std::string("\x0a\x05\x0a\x03", 4),
       {"example 1", "not a valid serialized Example", "[unparseable]"}},
      {ExampleBuilder()
           .Floats("x", {1, 2})
           .Bytes("s", {"ok\xc3\x28"})
           .Serialize(),
       {"example 1", "'s'", "not valid UTF-8", "[invalid_utf8]"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> ex = {good, c.bad, good};
    auto out = parser->Parse(Views(ex));
    ASSERT_FALSE(out.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(out.status())) << out.status();
    for (const std::string& e : c.expected) {
      EXPECT_THAT(out.status().message(), HasSubstr(e));
    }
  }
  // Names appear in the message.
  std::vector<std::string> ex = {good, cases[0].bad};
  std::vector<absl::string_view> names = {"a.tfrecord:record 4",
                                          "a.tfrecord:record 5"};
  auto out = parser->Parse(Views(ex), names);
  EXPECT_THAT(out.status().message(),
              HasSubstr("example 1 (a.tfrecord:record 5), feature 'x'"));
  // Names of the wrong count.
  EXPECT_TRUE(
      absl::IsInvalidArgument(parser->Parse(Views(ex), {names[0]}).status()));
}

TEST(ExampleParserTest, SkipPolicyDropsAndCountsBadExamples) {
  ExampleSpec spec;
  spec.dense.push_back(Dense("x", DT_FLOAT, TensorShape({1})));
  spec.var_len = {VarLen("ids", DT_INT64), VarLen("tags", DT_STRING)};
  spec.var_len[1].validate_utf8 = true;
  auto stats = std::make_shared<DataStats>();
  auto parser =
      MakeParser(spec, {.policy = {ErrorMode::kSkip}, .stats = stats});
  std::vector<std::string> ex = {
      ExampleBuilder().Floats("x", {1}).Int64s("ids", {1, 2}).Serialize(),
      // Bad after its ids were appended: they must be rolled back.
      ExampleBuilder()
          .Floats("x", {2})
          .Int64s("ids", {3})
          .Bytes("tags", {"\xff"})
          .Serialize(),
      ExampleBuilder().Int64s("x", {3}).Serialize(),
      ExampleBuilder()
          .Floats("x", {4})
          .Int64s("ids", {4})
          .Bytes("tags", {"t"})
          .Serialize(),
      "garbage\xff"};
  auto out = parser->Parse(Views(ex));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->batch_size, 2);
  EXPECT_THAT(out->kept_rows, ElementsAre(0, 3));
  EXPECT_EQ(out->dense[0].shape(), TensorShape({2, 1}));
  EXPECT_THAT(Values<float>(out->dense[0]), ElementsAre(1.f, 4.f));
  EXPECT_THAT(Values<int64_t>(out->var_len[0].values), ElementsAre(1, 2, 4));
  EXPECT_THAT(Values<int64_t>(out->var_len[0].row_splits),
              ElementsAre(0, 2, 3));
  EXPECT_THAT(Values<std::string>(out->var_len[1].values), ElementsAre("t"));
  EXPECT_EQ(stats->records_skipped(), 3);
  EXPECT_THAT(stats->skipped_by_reason(),
              testing::UnorderedElementsAre(testing::Pair("invalid_utf8", 1),
                                            testing::Pair("wrong_type", 1),
                                            testing::Pair("unparseable", 1)));
}

TEST(ExampleParserTest, BadSpecs) {
  auto err = [](ExampleSpec spec) {
    auto p = ExampleParser::Create(std::move(spec));
    return p.ok() ? std::string("OK") : std::string(p.status().message());
  };
  ExampleSpec s;
  s.dense.push_back(Dense("x", DT_FLOAT, TensorShape({1})));
  s.var_len.push_back(VarLen("x", DT_INT64));
  EXPECT_THAT(err(s), HasSubstr("'x' appears more than once"));
  s = {};
  s.dense.push_back(Dense("x", DT_DOUBLE, TensorShape({1})));
  EXPECT_THAT(err(s), HasSubstr("dtype double is not supported"));
  s = {};
  s.dense.push_back(Dense("x", DT_FLOAT, TensorShape({2}),
                          Tensor::FromVector<float>({1.f}, TensorShape({1}))));
  EXPECT_THAT(err(s), HasSubstr("the default must be 2 float values"));
  s = {};
  s.var_len.push_back(VarLen("", DT_INT64));
  EXPECT_THAT(err(s), HasSubstr("empty key"));
  s = {};
  s.var_len.push_back(VarLen("y", DT_FLOAT));
  s.var_len.back().hash_bytes = true;
  EXPECT_THAT(err(s), HasSubstr("hash_bytes needs dtype int64"));
}

// Random Examples against a reference computed from the protobuf message.
TEST(ExampleParserTest, MatchesProtobufReferenceOnRandomExamples) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    const int dense_len = 1 + static_cast<int>(rng() % 4);
    ExampleSpec spec;
    spec.dense.push_back(Dense("d", DT_FLOAT, TensorShape({dense_len}),
                               Tensor(DT_FLOAT, TensorShape({dense_len}))));
    for (int i = 0; i < dense_len; ++i)
      spec.dense[0].default_value.data<float>()[i] = -1.f - i;
    spec.var_len = {VarLen("i", DT_INT64), VarLen("f", DT_FLOAT),
                    VarLen("b", DT_STRING)};
    auto parser = MakeParser(spec);
    const int batch = static_cast<int>(rng() % 50);
    std::vector<std::string> ex;
    for (int e = 0; e < batch; ++e) {
      ExampleBuilder b;
      if (rng() % 4 != 0) {
        std::vector<float> v(dense_len);
        for (float& x : v)
          x = static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 7;
        b.Floats("d", v);
      }
      if (rng() % 3 != 0) {
        std::vector<int64_t> v(rng() % 6);
        for (int64_t& x : v) x = static_cast<int64_t>(rng());
        b.Int64s("i", v);
      }
      if (rng() % 3 != 0) {
        std::vector<float> v(rng() % 6);
        for (float& x : v) x = static_cast<float>(rng() % 1000) * 0.25f;
        b.Floats("f", v);
      }
      if (rng() % 3 != 0) {
        std::vector<std::string> v(rng() % 4);
        for (std::string& x : v)
          x = std::string(rng() % 20, static_cast<char>('a' + rng() % 26));
        b.Bytes("b", v);
      }
      b.Int64s("unrelated", {1, 2, 3});
      ex.push_back(b.Serialize());
    }
    auto out = parser->Parse(Views(ex));
    ASSERT_TRUE(out.ok()) << out.status();
    // Reference.
    std::vector<float> dense;
    std::vector<int64_t> ids, isplit = {0}, fsplit = {0}, bsplit = {0};
    std::vector<float> floats;
    std::vector<std::string> bytes;
    for (const std::string& s : ex) {
      tensorflow::Example e;
      ASSERT_TRUE(e.ParseFromString(s));
      const auto& fm = e.features().feature();
      if (fm.count("d")) {
        for (float x : fm.at("d").float_list().value()) dense.push_back(x);
      } else {
        for (int i = 0; i < dense_len; ++i) dense.push_back(-1.f - i);
      }
      if (fm.count("i"))
        for (int64_t x : fm.at("i").int64_list().value()) ids.push_back(x);
      if (fm.count("f"))
        for (float x : fm.at("f").float_list().value()) floats.push_back(x);
      if (fm.count("b"))
        for (const std::string& x : fm.at("b").bytes_list().value())
          bytes.push_back(x);
      isplit.push_back(ids.size());
      fsplit.push_back(floats.size());
      bsplit.push_back(bytes.size());
    }
    EXPECT_EQ(out->dense[0].shape(), TensorShape({batch, dense_len}));
    EXPECT_EQ(Values<float>(out->dense[0]), dense);
    EXPECT_EQ(Values<int64_t>(out->var_len[0].values), ids);
    EXPECT_EQ(Values<int64_t>(out->var_len[0].row_splits), isplit);
    EXPECT_EQ(Values<float>(out->var_len[1].values), floats);
    EXPECT_EQ(Values<int64_t>(out->var_len[1].row_splits), fsplit);
    EXPECT_EQ(Values<std::string>(out->var_len[2].values), bytes);
    EXPECT_EQ(Values<int64_t>(out->var_len[2].row_splits), bsplit);
  }
}

// Parsing in chunks on a pool gives exactly the serial result, including
// the kept rows and the first error's example index.
TEST(ExampleParserTest, ParallelParseEqualsSerial) {
  std::mt19937_64 rng(99);
  ExampleSpec spec;
  spec.dense.push_back(
      Dense("d", DT_FLOAT, TensorShape({2}),
            Tensor::FromVector<float>({-1.f, -2.f}, TensorShape({2}))));
  spec.dense.push_back(
      Dense("s", DT_STRING, TensorShape(),
            Tensor::FromVector<std::string>({"-"}, TensorShape())));
  spec.var_len = {VarLen("i", DT_INT64), VarLen("b", DT_STRING)};
  std::vector<std::string> ex;
  for (int e = 0; e < 3000; ++e) {
    ExampleBuilder b;
    if (rng() % 5 != 0)
      b.Floats("d", {static_cast<float>(e), static_cast<float>(rng() % 7)});
    if (rng() % 2 != 0) b.Bytes("s", {std::to_string(rng() % 1000)});
    std::vector<int64_t> ids(rng() % 4);
    for (int64_t& x : ids) x = static_cast<int64_t>(rng() % 100);
    b.Int64s("i", ids);
    if (rng() % 3 == 0) b.Bytes("b", {"x", std::to_string(e)});
    if (rng() % 97 == 0) b.Floats("i", {1.f});  // bad: wrong type
    ex.push_back(b.Serialize());
  }
  ThreadPool pool("parse_test", 3);
  auto skip_stats = std::make_shared<DataStats>();
  auto skipping =
      MakeParser(spec, {.policy = {ErrorMode::kSkip}, .stats = skip_stats});
  auto serial = skipping->Parse(Views(ex));
  auto parallel = skipping->Parse(Views(ex), {}, &pool);
  ASSERT_TRUE(serial.ok() && parallel.ok());
  EXPECT_GT(serial->kept_rows.size(), 0u);
  EXPECT_EQ(parallel->batch_size, serial->batch_size);
  EXPECT_EQ(parallel->kept_rows, serial->kept_rows);
  for (int d = 0; d < 2; ++d)
    EXPECT_TRUE(TensorsEqual(parallel->dense[d], serial->dense[d])) << d;
  for (int v = 0; v < 2; ++v) {
    EXPECT_TRUE(
        TensorsEqual(parallel->var_len[v].values, serial->var_len[v].values))
        << v;
    EXPECT_TRUE(TensorsEqual(parallel->var_len[v].row_splits,
                             serial->var_len[v].row_splits));
  }
  auto failing = MakeParser(spec);
  auto s1 = failing->Parse(Views(ex));
  auto s2 = failing->Parse(Views(ex), {}, &pool);
  ASSERT_FALSE(s1.ok());
  EXPECT_EQ(s1.status(), s2.status());
}

// Truncating a valid Example anywhere gives an error or a valid parse,
// never a crash or a read outside the bytes (run under ASan).
TEST(ExampleParserTest, TruncatedBytesNeverCrash) {
  ExampleSpec spec;
  spec.var_len = {VarLen("i", DT_INT64), VarLen("f", DT_FLOAT),
                  VarLen("b", DT_STRING)};
  auto parser = MakeParser(spec, {.policy = {ErrorMode::kSkip}});
  const std::string full = ExampleBuilder()
                               .Int64s("i", {1, -1, int64_t{1} << 50})
                               .Floats("f", {1.f, 2.f})
                               .Bytes("b", {"hello", "world"})
                               .Serialize();
  for (size_t n = 0; n < full.size(); ++n) {
    std::string cut = full.substr(0, n);
    auto out = parser->Parse({cut});
    ASSERT_TRUE(out.ok()) << out.status();
  }
}

// ---------------------------------------------------------------------------
// The batch layout.

TEST(ExampleBatchParserTest, MapsOntoTheBatchLayout) {
  ExampleBatchSpec spec;
  spec.label_key = "clicked";
  spec.dense_keys = {"I1", "I2"};
  spec.dense_default = -1.f;
  spec.sparse = {{"user", ""}, {"items", "item_w"}};
  auto parser = ExampleBatchParser::Create(spec);
  ASSERT_TRUE(parser.ok()) << parser.status();
  const BatchSchema& schema = (*parser)->schema();
  EXPECT_THAT(schema.dense_names, ElementsAre("I1", "I2"));
  ASSERT_EQ(schema.sparse.size(), 2u);
  EXPECT_FALSE(schema.sparse[0].weighted);
  EXPECT_TRUE(schema.sparse[1].weighted);
  std::vector<std::string> ex = {ExampleBuilder()
                                     .Int64s("clicked", {1})
                                     .Floats("I1", {0.5f})
                                     .Int64s("I2", {3})
                                     .Bytes("user", {"alice"})
                                     .Int64s("items", {10, 11})
                                     .Floats("item_w", {0.1f, 0.2f})
                                     .Serialize(),
                                 ExampleBuilder()
                                     .Floats("clicked", {0.f})
                                     .Int64s("user", {77})
                                     .Int64s("items", {12})
                                     .Serialize()};
  auto batch = (*parser)->Parse(Views(ex));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->Validate(schema).ok()) << batch->Validate(schema);
  EXPECT_THAT(Values<float>(batch->labels), ElementsAre(1.f, 0.f));
  EXPECT_EQ(batch->dense.shape(), TensorShape({2, 2}));
  EXPECT_THAT(Values<float>(batch->dense), ElementsAre(0.5f, 3.f, -1.f, -1.f));
  EXPECT_THAT(Values<int64_t>(batch->sparse[0].ids),
              ElementsAre(static_cast<int64_t>(Fingerprint64("alice")), 77));
  EXPECT_THAT(Values<int64_t>(batch->sparse[0].row_splits),
              ElementsAre(0, 1, 2));
  EXPECT_THAT(Values<int64_t>(batch->sparse[1].ids), ElementsAre(10, 11, 12));
  EXPECT_THAT(Values<float>(batch->sparse[1].weights),
              ElementsAre(0.1f, 0.2f, 1.f));
  // As an element, with origins.
  Tensor serialized =
      Tensor::FromVector<std::string>({ex[0], ex[1]}, TensorShape({2}));
  Tensor origins = Tensor::FromVector<std::string>({"f:record 0", "f:record 1"},
                                                   TensorShape({2}));
  auto element = (*parser)->ParseElement({serialized, origins});
  ASSERT_TRUE(element.ok()) << element.status();
  EXPECT_EQ(element->size(), static_cast<size_t>(schema.num_components()));
  // A missing label is an error naming the origin; mismatched weights too.
  Tensor bad =
      Tensor::FromVector<std::string>({ex[0], ExampleBuilder()
                                                  .Int64s("items", {1, 2})
                                                  .Floats("item_w", {1})
                                                  .Serialize()},
                                      TensorShape({2}));
  auto e = (*parser)->ParseElement({bad, origins});
  EXPECT_THAT(e.status().message(),
              AllOf(HasSubstr("f:record 1"), HasSubstr("'clicked'"),
                    HasSubstr("missing")));
  spec.label_default = 0.f;
  auto lenient = ExampleBatchParser::Create(spec);
  ASSERT_TRUE(lenient.ok());
  e = (*lenient)->ParseElement({bad, origins});
  EXPECT_THAT(e.status().message(),
              AllOf(HasSubstr("f:record 1"), HasSubstr("'item_w'"),
                    HasSubstr("has 1 value but feature 'items' has 2 ids"),
                    HasSubstr("[wrong_length]")));
}

// A Criteo-like Example: 26 bytes features and 13 int64 features plus a
// label. Prints the parse rate on one thread.
TEST(ExampleBatchParserTest, ParseRate) {
  std::mt19937_64 rng(7);
  ExampleBatchSpec spec;
  spec.label_key = "label";
  for (int i = 1; i <= 13; ++i)
    spec.dense_keys.push_back("I" + std::to_string(i));
  for (int i = 1; i <= 26; ++i)
    spec.sparse.push_back({"C" + std::to_string(i), ""});
  auto parser = ExampleBatchParser::Create(spec);
  ASSERT_TRUE(parser.ok());
  std::vector<std::string> ex;
  int64_t bytes = 0;
  for (int e = 0; e < 4096; ++e) {
    ExampleBuilder b;
    b.Floats("label", {static_cast<float>(rng() % 2)});
    for (int i = 1; i <= 13; ++i)
      b.Int64s("I" + std::to_string(i), {static_cast<int64_t>(rng() % 1000)});
    for (int i = 1; i <= 26; ++i) {
      char hex[9];
      std::snprintf(hex, sizeof(hex), "%08x", static_cast<unsigned>(rng()));
      b.Bytes("C" + std::to_string(i), {hex});
    }
    ex.push_back(b.Serialize());
    bytes += ex.back().size();
  }
  std::vector<absl::string_view> views = Views(ex);
  const int reps = 10;
  const double t0 = ThreadCpuSeconds();
  for (int r = 0; r < reps; ++r) {
    auto batch = (*parser)->Parse(views);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_EQ(batch->sparse[25].ids.NumElements(), 4096);
  }
  const double secs = ThreadCpuSeconds() - t0;
  std::printf(
      "ExampleBatchParser: 26 sparse + 13 dense (+ label), %lld B/example: "
      "%.0f examples/s, %.0f MB/s on one thread\n",
      static_cast<long long>(bytes / 4096), reps * 4096 / secs,
      reps * bytes / secs / 1e6);
}

}  // namespace
}  // namespace recflow::data
