#include "recflow/data/text_parsers.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/fingerprint.h"
#include "recflow/core/tensor.h"
#include "recflow/data/batch.h"
#include "recflow/data/dataset.h"

namespace recflow::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<absl::string_view> Views(const std::vector<std::string>& v) {
  return std::vector<absl::string_view>(v.begin(), v.end());
}

template <typename T>
std::vector<T> Vec(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.NumElements());
}

float Log1p(double x) { return static_cast<float>(std::log1p(x)); }

// A Criteo line from 40 fields.
std::string CriteoLine(const std::vector<std::string>& fields) {
  return absl::StrJoin(fields, "\t");
}

std::vector<std::string> CriteoFields(const std::string& label) {
  std::vector<std::string> f(40);
  f[0] = label;
  for (int j = 0; j < 13; ++j) f[1 + j] = absl::StrCat(j * 7);
  for (int k = 0; k < 26; ++k)
    f[14 + k] = absl::StrFormat("%08x", 0x1000 * k + 5);
  return f;
}

std::unique_ptr<CriteoParser> Criteo(CriteoOptions o = {}) {
  auto p = CriteoParser::Create(std::move(o));
  CHECK(p.ok()) << p.status();
  return *std::move(p);
}

// --- Criteo: exact parses
// -----------------------------------------------------

TEST(CriteoParserTest, SchemaNames) {
  auto p = Criteo();
  const BatchSchema& s = p->schema();
  ASSERT_EQ(s.dense_names.size(), 13u);
  EXPECT_EQ(s.dense_names[0], "I1");
  EXPECT_EQ(s.dense_names[12], "I13");
  ASSERT_EQ(s.sparse.size(), 26u);
  EXPECT_EQ(s.sparse[0].name, "C1");
  EXPECT_EQ(s.sparse[25].name, "C26");
  EXPECT_FALSE(s.sparse[3].weighted);
  EXPECT_EQ(p->output_dtypes().size(), 2u + 2 * 26);
  EXPECT_EQ(p->output_shapes()[1].DebugString(), "[?,13]");
}

TEST(CriteoParserTest, ExactValuesMissingFieldsAndCr) {
  std::vector<std::string> a = CriteoFields("1");
  a[1] = "0";
  a[2] = "";                       // missing dense
  a[3] = "-5";                     // clamps to 0
  a[4] = "4095";                   // table edge
  a[5] = "4096";                   // computed
  a[6] = "123456789012345678901";  // too long for the integer path
  a[7] = "2.5";                    // decimal accepted
  a[14] = "68fd1e64";
  a[15] = "";          // missing categorical
  a[16] = "ABCDEF01";  // upper case
  a[17] = "7";         // short hex
  std::vector<std::string> b = CriteoFields("0");
  for (int k = 0; k < 26; ++k) b[14 + k] = "";
  b[39] = "ffffffff";
  std::vector<std::string> lines = {CriteoLine(a), CriteoLine(b) + "\r"};
  auto p = Criteo();
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->Validate(p->schema()).ok());
  EXPECT_EQ(batch->batch_size, 2);
  EXPECT_THAT(Vec<float>(batch->labels), ElementsAre(1.0f, 0.0f));
  const float* d = batch->dense.data<float>();
  EXPECT_EQ(d[0], 0.0f);
  EXPECT_EQ(d[1], 0.0f);  // missing -> dense_default
  EXPECT_EQ(d[2], 0.0f);  // negative clamps
  EXPECT_EQ(d[3], Log1p(4095));
  EXPECT_EQ(d[4], Log1p(4096));
  EXPECT_EQ(d[5], Log1p(static_cast<double>(123456789012345678901.0f)));
  EXPECT_EQ(d[6], Log1p(2.5));
  EXPECT_EQ(d[7], Log1p(7 * 7));
  EXPECT_EQ(d[13 + 12], Log1p(12 * 7));  // row 1, I13
  const auto& s = batch->sparse;
  EXPECT_THAT(Vec<int64_t>(s[0].ids), ElementsAre(CriteoHexId(0, 0x68fd1e64)));
  EXPECT_THAT(Vec<int64_t>(s[0].row_splits), ElementsAre(0, 1, 1));
  EXPECT_THAT(Vec<int64_t>(s[1].ids), ElementsAre());
  EXPECT_THAT(Vec<int64_t>(s[1].row_splits), ElementsAre(0, 0, 0));
  EXPECT_THAT(Vec<int64_t>(s[2].ids),
              ElementsAre((int64_t{2} << 32) | 0xabcdef01));
  EXPECT_THAT(Vec<int64_t>(s[3].ids), ElementsAre(CriteoHexId(3, 7)));
  EXPECT_THAT(Vec<int64_t>(s[25].ids),
              ElementsAre(CriteoHexId(25, 0x1000 * 25 + 5),
                          CriteoHexId(25, 0xffffffff)));
  EXPECT_THAT(Vec<int64_t>(s[25].row_splits), ElementsAre(0, 1, 2));
}

TEST(CriteoParserTest, NoLogTransformDefaultAndHashMode) {
  std::vector<std::string> a = CriteoFields("0");
  a[1] = "-3";
  a[2] = "";
  a[14] = "not hex at all";
  a[15] = "";
  CriteoOptions o;
  o.log_transform = false;
  o.dense_default = -1.5f;
  o.id_mode = CriteoOptions::IdMode::kHash;
  auto p = Criteo(o);
  std::vector<std::string> lines = {CriteoLine(a)};
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->dense.data<float>()[0], -3.0f);
  EXPECT_EQ(batch->dense.data<float>()[1], -1.5f);
  EXPECT_EQ(batch->dense.data<float>()[2], 14.0f);
  EXPECT_THAT(
      Vec<int64_t>(batch->sparse[0].ids),
      ElementsAre(static_cast<int64_t>(Fingerprint64("not hex at all"))));
  EXPECT_THAT(Vec<int64_t>(batch->sparse[1].ids), ElementsAre());
  EXPECT_THAT(Vec<int64_t>(batch->sparse[2].ids),
              ElementsAre(static_cast<int64_t>(Fingerprint64(a[16]))));
}

TEST(CriteoParserTest, CustomFieldCounts) {
  CriteoOptions o;
  o.num_dense = 2;
  o.num_categorical = 1;
  auto p = Criteo(o);
  std::vector<std::string> lines = {"1\t3\t\tab", "0\t\t\t", "1\t1\t2"};
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->batch_size, 2);  // the third has 3 fields
  EXPECT_THAT(Vec<float>(batch->dense), ElementsAre(Log1p(3), 0, 0, 0));
  EXPECT_THAT(Vec<int64_t>(batch->sparse[0].ids), ElementsAre(0xab));
  EXPECT_THAT(Vec<int64_t>(batch->sparse[0].row_splits), ElementsAre(0, 1, 1));
}

TEST(CriteoParserTest, EmptyBatch) {
  auto p = Criteo();
  auto batch = p->Parse({});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->batch_size, 0);
  EXPECT_TRUE(batch->Validate(p->schema()).ok());
}

TEST(CriteoParserTest, BadOptions) {
  CriteoOptions o;
  o.num_dense = -1;
  EXPECT_EQ(CriteoParser::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- Criteo: bad records
// ----------------------------------------------------------

struct BadCase {
  std::string line;
  std::string reason;
  std::string field;  // substring expected in the message ("" for whole-line)
};

std::vector<BadCase> CriteoBadCases() {
  std::vector<BadCase> cases;
  cases.push_back({"", "empty_line", ""});
  {
    auto f = CriteoFields("1");
    f.pop_back();
    cases.push_back({CriteoLine(f), "wrong_field_count", "39 fields"});
    f = CriteoFields("1");
    f.push_back("12");
    cases.push_back({CriteoLine(f), "wrong_field_count", "41 fields"});
    cases.push_back({"1", "wrong_field_count", "1 fields"});
  }
  {
    auto f = CriteoFields("2");
    cases.push_back({CriteoLine(f), "bad_label", "field 0 (label)"});
    f = CriteoFields("");
    cases.push_back({CriteoLine(f), "bad_label", "field 0 (label)"});
    f = CriteoFields("x");
    cases.push_back({CriteoLine(f), "bad_label", "field 0 (label)"});
  }
  {
    auto f = CriteoFields("1");
    f[5] = "12a";
    cases.push_back(
        {CriteoLine(f), "not_a_number", "field 5 (I5): not_a_number"});
    f = CriteoFields("1");
    f[1] = " 3";
    cases.push_back({CriteoLine(f), "not_a_number", "field 1 (I1)"});
    f = CriteoFields("0");
    f[13] = "nan";
    cases.push_back({CriteoLine(f), "not_a_number", "field 13 (I13)"});
  }
  {
    auto f = CriteoFields("1");
    f[20] = "68fd1e6g";
    cases.push_back({CriteoLine(f), "bad_id", "field 20 (C7): bad_id"});
    f = CriteoFields("1");
    f[39] = "123456789";
    cases.push_back({CriteoLine(f), "bad_id", "field 39 (C26)"});
    f = CriteoFields("1");
    f[39] = "1234 ";
    cases.push_back({CriteoLine(f), "bad_id", "field 39 (C26)"});
  }
  {
    auto f = CriteoFields("1");
    f[14] = std::string(300, 'a');
    cases.push_back({CriteoLine(f), "line_too_long", ""});
  }
  return cases;
}

TEST(CriteoParserTest, EveryBadKindSkipped) {
  CriteoOptions o;
  o.bad_records.max_line_bytes = 400;
  o.bad_records.stats = std::make_shared<DataStats>();
  auto p = Criteo(o);
  const std::vector<BadCase> cases = CriteoBadCases();
  std::vector<std::string> lines;
  std::map<std::string, int64_t> want;
  int good = 0;
  for (const BadCase& c : cases) {
    lines.push_back(CriteoLine(CriteoFields(good % 2 ? "1" : "0")));
    ++good;
    lines.push_back(c.line);
    ++want[c.reason];
  }
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->Validate(p->schema()).ok());
  EXPECT_EQ(batch->batch_size, good);
  for (int64_t r = 0; r < good; ++r) {
    EXPECT_EQ(batch->labels.data<float>()[r], r % 2 ? 1.0f : 0.0f);
  }
  for (int k = 0; k < 26; ++k) {
    ASSERT_EQ(batch->sparse[k].ids.NumElements(), good);
    EXPECT_EQ(batch->sparse[k].ids.data<int64_t>()[good - 1],
              CriteoHexId(k, 0x1000 * k + 5));
  }
  EXPECT_EQ(o.bad_records.stats->skipped_by_reason(), want);
  EXPECT_EQ(o.bad_records.stats->records_skipped(),
            static_cast<int64_t>(cases.size()));
  // The first detail names the row (no origins) and the reason.
  EXPECT_THAT(o.bad_records.stats->first_skip_detail()["bad_id"],
              HasSubstr("criteo line row "));
}

TEST(CriteoParserTest, EveryBadKindFailsNamingOriginFieldAndText) {
  CriteoOptions o;
  o.bad_records.max_line_bytes = 400;
  o.bad_records.policy.mode = ErrorMode::kFail;
  auto p = Criteo(o);
  for (const BadCase& c : CriteoBadCases()) {
    std::vector<std::string> lines = {CriteoLine(CriteoFields("1")), c.line};
    std::vector<std::string> origins = {"data/day_0.tsv:41",
                                        "data/day_0.tsv:42"};
    auto batch = p->Parse(Views(lines), Views(origins));
    ASSERT_FALSE(batch.ok()) << c.reason;
    EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string msg(batch.status().message());
    EXPECT_THAT(msg, HasSubstr("criteo line data/day_0.tsv:42")) << msg;
    EXPECT_THAT(msg, HasSubstr(c.reason)) << msg;
    EXPECT_THAT(msg, HasSubstr(c.field)) << msg;
    EXPECT_LT(msg.size(), 400u) << "offending text must be truncated";
    // Without origins: the row in the batch.
    batch = p->Parse(Views(lines));
    ASSERT_FALSE(batch.ok());
    EXPECT_THAT(std::string(batch.status().message()),
                HasSubstr("criteo line row 1 of the batch"));
  }
  // The offending text is shown.
  auto f = CriteoFields("1");
  f[5] = "12a";
  std::vector<std::string> lines = {CriteoLine(f)};
  EXPECT_THAT(std::string(p->Parse(Views(lines)).status().message()),
              HasSubstr("'12a'"));
}

TEST(CriteoParserTest, SkipWithoutStatsStillDrops) {
  auto p = Criteo();
  std::vector<std::string> lines = {"garbage", CriteoLine(CriteoFields("1"))};
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->batch_size, 1);
}

TEST(CriteoParserTest, OriginsOfTheWrongSizeAreAnError) {
  auto p = Criteo();
  std::vector<std::string> lines = {CriteoLine(CriteoFields("1"))};
  std::vector<std::string> origins = {"a:1", "a:2"};
  EXPECT_EQ(p->Parse(Views(lines), Views(origins)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- Criteo: random round trip
// ---------------------------------------------------

TEST(CriteoParserTest, RandomRoundTrip) {
  std::mt19937_64 rng(17);
  for (bool log_transform : {true, false}) {
    CriteoOptions o;
    o.log_transform = log_transform;
    o.dense_default = 0.25f;
    auto p = Criteo(o);
    const int n = 777;
    std::vector<std::string> lines;
    std::vector<float> labels, dense;
    std::vector<std::vector<int64_t>> ids(26),
        splits(26, std::vector<int64_t>{0});
    for (int r = 0; r < n; ++r) {
      std::vector<std::string> f(40);
      labels.push_back(rng() % 2);
      f[0] = labels.back() ? "1" : "0";
      for (int j = 0; j < 13; ++j) {
        if (rng() % 8 == 0) {
          dense.push_back(0.25f);
          continue;
        }
        int64_t x;
        switch (rng() % 4) {
          case 0:
            x = static_cast<int64_t>(rng() % 10);
            break;
          case 1:
            x = static_cast<int64_t>(rng() % 100000);
            break;
          case 2:
            x = -static_cast<int64_t>(rng() % 50);
            break;
          default:
            x = static_cast<int64_t>(rng() % (int64_t{1} << 40));
            break;
        }
        f[1 + j] = absl::StrCat(x);
        const double xd = static_cast<double>(x);
        dense.push_back(log_transform ? (x > 0 ? Log1p(xd) : 0.0f)
                                      : static_cast<float>(x));
      }
      for (int k = 0; k < 26; ++k) {
        if (rng() % 6 != 0) {
          const uint32_t h = static_cast<uint32_t>(rng() >> (rng() % 32));
          f[14 + k] =
              rng() % 2 ? absl::StrFormat("%08x", h) : absl::StrFormat("%X", h);
          ids[k].push_back(CriteoHexId(k, h));
        }
        splits[k].push_back(static_cast<int64_t>(ids[k].size()));
      }
      lines.push_back(CriteoLine(f) + (rng() % 5 == 0 ? "\r" : ""));
    }
    auto batch = p->Parse(Views(lines));
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(batch->Validate(p->schema()).ok());
    EXPECT_EQ(Vec<float>(batch->labels), labels);
    EXPECT_EQ(Vec<float>(batch->dense), dense);
    for (int k = 0; k < 26; ++k) {
      EXPECT_EQ(Vec<int64_t>(batch->sparse[k].ids), ids[k]) << k;
      EXPECT_EQ(Vec<int64_t>(batch->sparse[k].row_splits), splits[k]) << k;
    }
  }
}

// --- Fuzz: random bytes and truncated lines never crash
// ---------------------------------

// Mutations of valid lines: truncation, random byte flips, random garbage.
std::vector<std::string> FuzzLines(const std::vector<std::string>& valid,
                                   uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  const std::string alphabet = "0123456789abcdefABX:|,\"\t \r\n#-+.eE";
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string s = valid[rng() % valid.size()];
    switch (rng() % 4) {
      case 0:
        s.resize(s.empty() ? 0 : rng() % s.size());
        break;
      case 1:
        for (int m = 0; m < 3 && !s.empty(); ++m) {
          s[rng() % s.size()] = alphabet[rng() % alphabet.size()];
        }
        break;
      case 2:
        s.resize(rng() % 200);
        for (char& c : s) c = static_cast<char>(rng());
        break;
      default:
        s.insert(rng() % (s.size() + 1), 1, alphabet[rng() % alphabet.size()]);
        break;
    }
    out.push_back(std::move(s));
  }
  return out;
}

void FuzzParser(const TextParser& parser,
                const std::vector<std::string>& valid) {
  const std::vector<std::string> lines = FuzzLines(valid, 99, 3000);
  auto batch = parser.Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_TRUE(batch->Validate(parser.schema()).ok());
  EXPECT_LE(batch->batch_size, 3000);
  // One by one, too, so that every line is seen alone (and by kFail).
  for (size_t i = 0; i < 300; ++i) {
    auto one = parser.Parse(Views({lines[i]}));
    ASSERT_TRUE(one.ok());
    EXPECT_TRUE(one->Validate(parser.schema()).ok());
  }
}

TEST(CriteoParserTest, FuzzNeverCrashes) {
  std::vector<std::string> valid;
  for (int i = 0; i < 10; ++i) {
    auto f = CriteoFields(i % 2 ? "1" : "0");
    f[1 + i] = "";
    f[20 + i] = "";
    valid.push_back(CriteoLine(f));
  }
  FuzzParser(*Criteo(), valid);
  CriteoOptions o;
  o.id_mode = CriteoOptions::IdMode::kHash;
  FuzzParser(*Criteo(o), valid);
  o.bad_records.policy.mode = ErrorMode::kFail;
  auto strict = Criteo(o);
  for (const std::string& s : FuzzLines(valid, 5, 500)) {
    auto b = strict->Parse(Views({s}));
    if (b.ok()) {
      EXPECT_EQ(b->batch_size, 1);
    }
  }
}

// --- Tensors, elements, MapFn
// -------------------------------------------------------

Tensor Strings(const std::vector<std::string>& v) {
  Tensor t(DT_STRING, TensorShape({static_cast<int64_t>(v.size())}));
  for (size_t i = 0; i < v.size(); ++i) t.data<std::string>()[i] = v[i];
  return t;
}

TEST(TextParserTest, ParseFnOverElementsWithOrigins) {
  std::shared_ptr<const TextParser> parser = Criteo();
  MapFn fn = ParseFn(parser);
  Tensor lines =
      Strings({CriteoLine(CriteoFields("1")), CriteoLine(CriteoFields("0"))});
  auto e = fn({lines});
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(static_cast<int>(e->size()), parser->schema().num_components());
  auto batch = Batch::FromElement(parser->schema(), *e);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->batch_size, 2);

  CriteoOptions o;
  o.bad_records.policy.mode = ErrorMode::kFail;
  MapFn strict = ParseFn(Criteo(o));
  Tensor bad = Strings({CriteoLine(CriteoFields("1")), "1\t2"});
  auto r = strict({bad, Strings({"f.tsv:9", "f.tsv:10"})});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("f.tsv:10"));

  // A scalar line is a batch of one.
  Tensor scalar(DT_STRING, TensorShape());
  scalar.scalar<std::string>() = CriteoLine(CriteoFields("1"));
  auto one = fn({scalar});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)[0].NumElements(), 1);

  // Bad element structure.
  EXPECT_FALSE(fn({}).ok());
  EXPECT_FALSE(fn({Tensor(DT_FLOAT, TensorShape({2}))}).ok());
  EXPECT_FALSE(fn({lines, Strings({"a:1"})}).ok());
}

// --- libsvm
// ---------------------------------------------------------------------------

std::unique_ptr<LibsvmParser> Libsvm(LibsvmOptions o = {}) {
  auto p = LibsvmParser::Create(std::move(o));
  CHECK(p.ok()) << p.status();
  return *std::move(p);
}

TEST(LibsvmParserTest, ExactParse) {
  auto p = Libsvm();
  EXPECT_EQ(p->schema().sparse[0].name, "features");
  EXPECT_TRUE(p->schema().sparse[0].weighted);
  std::vector<std::string> lines = {"1 3:0.5 10:-2", "-1\t7:1e3   \t",
                                    "  +1 qid:4 2:1 # comment 5:5", "0",
                                    "1.0 0:0\r"};
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->Validate(p->schema()).ok());
  EXPECT_THAT(Vec<float>(batch->labels), ElementsAre(1, 0, 1, 0, 1));
  EXPECT_EQ(batch->dense.dim_size(1), 0);
  EXPECT_THAT(Vec<int64_t>(batch->sparse[0].ids), ElementsAre(3, 10, 7, 2, 0));
  EXPECT_THAT(Vec<float>(batch->sparse[0].weights),
              ElementsAre(0.5f, -2, 1000, 1, 0));
  EXPECT_THAT(Vec<int64_t>(batch->sparse[0].row_splits),
              ElementsAre(0, 2, 3, 4, 4, 5));

  LibsvmOptions o;
  o.binary_labels = false;
  o.feature_name = "x";
  auto q = Libsvm(o);
  std::vector<std::string> reg = {"3.25 1:1", "-1 2:2"};
  batch = q->Parse(Views(reg));
  ASSERT_TRUE(batch.ok());
  EXPECT_THAT(Vec<float>(batch->labels), ElementsAre(3.25f, -1.0f));
}

TEST(LibsvmParserTest, BadRecordsBothModes) {
  const std::vector<BadCase> cases = {
      {"", "empty_line", ""},
      {"   # only a comment", "empty_line", ""},
      {"2 1:1", "bad_label", "field 0 (label)"},
      {"abc 1:1", "bad_label", "field 0 (label)"},
      {"1 1:1 5", "bad_id", "field 2 (token 2)"},
      {"1 -3:1", "bad_id", "field 1 (token 1)"},
      {"1 x:1", "bad_id", "field 1"},
      {"1 3:abc", "not_a_number", "field 1"},
      {"1 3:", "not_a_number", "field 1"},
      {"1 3:inf", "not_a_number", "field 1"},
      {"1 " + std::string(100, '1') + ":1", "line_too_long", ""},
  };
  LibsvmOptions o;
  o.bad_records.max_line_bytes = 64;
  o.bad_records.stats = std::make_shared<DataStats>();
  auto p = Libsvm(o);
  std::vector<std::string> lines;
  std::map<std::string, int64_t> want;
  for (const BadCase& c : cases) {
    lines.push_back("1 1:1 2:2");
    lines.push_back(c.line);
    ++want[c.reason];
  }
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->Validate(p->schema()).ok());
  EXPECT_EQ(batch->batch_size, static_cast<int64_t>(cases.size()));
  EXPECT_EQ(batch->sparse[0].ids.NumElements(),
            2 * static_cast<int64_t>(cases.size()));
  EXPECT_EQ(o.bad_records.stats->skipped_by_reason(), want);

  o.bad_records.policy.mode = ErrorMode::kFail;
  auto strict = Libsvm(o);
  for (const BadCase& c : cases) {
    std::vector<std::string> l = {"0 4:4", c.line};
    std::vector<std::string> origins = {"x.svm:1", "x.svm:2"};
    auto r = strict->Parse(Views(l), Views(origins));
    ASSERT_FALSE(r.ok()) << c.line;
    const std::string msg(r.status().message());
    EXPECT_THAT(msg, HasSubstr("libsvm line x.svm:2")) << msg;
    EXPECT_THAT(msg, HasSubstr(c.reason)) << msg;
    EXPECT_THAT(msg, HasSubstr(c.field)) << msg;
  }
}

TEST(LibsvmParserTest, RandomRoundTripAndFuzz) {
  std::mt19937_64 rng(3);
  auto p = Libsvm();
  std::vector<std::string> lines;
  std::vector<float> labels, weights;
  std::vector<int64_t> ids, splits = {0};
  for (int r = 0; r < 500; ++r) {
    const int label = static_cast<int>(rng() % 2);
    std::string line =
        label ? (rng() % 2 ? "+1" : "1") : (rng() % 2 ? "-1" : "0");
    labels.push_back(label);
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      const int64_t id = static_cast<int64_t>(rng() % 1000000);
      const float w =
          static_cast<float>(static_cast<int>(rng() % 20001) - 10000) / 64.0f;
      absl::StrAppend(&line, rng() % 3 ? " " : " \t ", id, ":",
                      absl::StrFormat("%.9g", w));
      ids.push_back(id);
      weights.push_back(w);
    }
    splits.push_back(static_cast<int64_t>(ids.size()));
    lines.push_back(line);
  }
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(Vec<float>(batch->labels), labels);
  EXPECT_EQ(Vec<int64_t>(batch->sparse[0].ids), ids);
  EXPECT_EQ(Vec<float>(batch->sparse[0].weights), weights);
  EXPECT_EQ(Vec<int64_t>(batch->sparse[0].row_splits), splits);
  FuzzParser(*p, std::vector<std::string>(lines.begin(), lines.begin() + 20));
}

// --- CSV
// ----------------------------------------------------------------------------------

CsvOptions CsvSchema() {
  CsvOptions o;
  o.columns = {
      {.name = "click", .kind = CsvColumn::Kind::kLabel},
      {.name = "price", .kind = CsvColumn::Kind::kDense, .default_value = -1},
      {.name = "user", .kind = CsvColumn::Kind::kSparse},
      {.name = "note", .kind = CsvColumn::Kind::kIgnore},
      {.name = "tags",
       .kind = CsvColumn::Kind::kSparse,
       .id_type = CsvColumn::IdType::kInt64,
       .multi_value_separator = '|'},
      {.name = "age", .kind = CsvColumn::Kind::kDense},
  };
  return o;
}

std::unique_ptr<CsvParser> Csv(CsvOptions o) {
  auto p = CsvParser::Create(std::move(o));
  CHECK(p.ok()) << p.status();
  return *std::move(p);
}

int64_t Fp(absl::string_view s) {
  return static_cast<int64_t>(Fingerprint64(s));
}

TEST(CsvParserTest, ExactParseQuotesMultiValueMissing) {
  auto p = Csv(CsvSchema());
  EXPECT_THAT(p->schema().dense_names, ElementsAre("price", "age"));
  ASSERT_EQ(p->schema().sparse.size(), 2u);
  EXPECT_EQ(p->schema().sparse[1].name, "tags");
  std::vector<std::string> lines = {
      "1,2.5,alice,whatever,1|2|3,30",
      " 0 , , \"bob, jr\" ,\"x,y\",  , 41\r",
      "1,3,\"say \"\"hi\"\"\",,7||8|,0",
      "0,1e2,,, 4 | 5 ,-2",
  };
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->Validate(p->schema()).ok());
  EXPECT_THAT(Vec<float>(batch->labels), ElementsAre(1, 0, 1, 0));
  EXPECT_THAT(Vec<float>(batch->dense),
              ElementsAre(2.5f, 30, -1, 41, 3, 0, 100, -2));
  EXPECT_THAT(Vec<int64_t>(batch->sparse[0].ids),
              ElementsAre(Fp("alice"), Fp("bob, jr"), Fp("say \"hi\"")));
  EXPECT_THAT(Vec<int64_t>(batch->sparse[0].row_splits),
              ElementsAre(0, 1, 2, 3, 3));
  EXPECT_THAT(Vec<int64_t>(batch->sparse[1].ids),
              ElementsAre(1, 2, 3, 7, 8, 4, 5));
  EXPECT_THAT(Vec<int64_t>(batch->sparse[1].row_splits),
              ElementsAre(0, 3, 3, 5, 7));
}

TEST(CsvParserTest, HeaderByOriginOrByNames) {
  CsvOptions o = CsvSchema();
  o.has_header = true;
  o.delimiter = '\t';
  auto p = Csv(o);
  std::vector<std::string> lines = {"click\tprice\tuser\tnote\ttags\tage",
                                    "1\t2\tu\tn\t1\t3"};
  auto batch = p->Parse(Views(lines));  // no origins: matched by names
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->batch_size, 1);
  std::vector<std::string> other = {"h\th\th\th\th\th", "1\t2\tu\tn\t1\t3",
                                    "0\t2\tu\tn\t1\t3"};
  std::vector<std::string> origins = {"a.tsv:1", "a.tsv:2", "b.tsv:1"};
  batch = p->Parse(Views(other), Views(origins));  // line 1 of each file
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->batch_size, 1);
  EXPECT_THAT(Vec<float>(batch->labels), ElementsAre(1));
}

TEST(CsvParserTest, NoLabelColumnGivesZeros) {
  CsvOptions o;
  o.columns = {{.name = "a", .kind = CsvColumn::Kind::kDense},
               {.name = "b", .kind = CsvColumn::Kind::kSparse}};
  o.quoting = false;
  o.trim_whitespace = false;
  auto p = Csv(o);
  std::vector<std::string> lines = {"1,\"x\"", "2, y"};
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_THAT(Vec<float>(batch->labels), ElementsAre(0, 0));
  EXPECT_THAT(Vec<int64_t>(batch->sparse[0].ids),
              ElementsAre(Fp("\"x\""), Fp(" y")));
}

TEST(CsvParserTest, BadSchemas) {
  CsvOptions o;
  EXPECT_FALSE(CsvParser::Create(o).ok());  // no columns
  o.columns = {{.name = "a"}, {.name = "a"}};
  EXPECT_THAT(std::string(CsvParser::Create(o).status().message()),
              HasSubstr("twice"));
  o.columns = {{.name = "a", .kind = CsvColumn::Kind::kLabel},
               {.name = "b", .kind = CsvColumn::Kind::kLabel}};
  EXPECT_THAT(std::string(CsvParser::Create(o).status().message()),
              HasSubstr("second label"));
  o.columns = {{.name = "a",
                .kind = CsvColumn::Kind::kSparse,
                .multi_value_separator = ','}};
  EXPECT_FALSE(CsvParser::Create(o).ok());
  o.columns = {{.name = ""}};
  EXPECT_FALSE(CsvParser::Create(o).ok());
  o.columns = {{.name = "a"}};
  o.delimiter = '"';
  EXPECT_FALSE(CsvParser::Create(o).ok());
}

TEST(CsvParserTest, BadRecordsBothModes) {
  const std::vector<BadCase> cases = {
      {"", "empty_line", ""},
      {"1,2,u,n,1", "wrong_field_count", "5 fields"},
      {"1,2,u,n,1,3,4,5", "wrong_field_count", "8 fields"},
      {",2,u,n,1,3", "bad_label", "field 0 (click)"},
      {"yes,2,u,n,1,3", "bad_label", "field 0 (click)"},
      {"1,2x,u,n,1,3", "not_a_number", "field 1 (price)"},
      {"1,2,u,n,1,nan", "not_a_number", "field 5 (age)"},
      {"1,2,u,n,1|x|3,3", "bad_id", "field 4 (tags)"},
      {"1,2,\"u,n,1,3", "bad_quote", "field 2 (user)"},
      {"1,2,\"u\"v,n,1,3", "bad_quote", "field 2 (user)"},
      {"1,2,u,n,1," + std::string(100, '3'), "line_too_long", ""},
  };
  CsvOptions o = CsvSchema();
  o.bad_records.max_line_bytes = 64;
  o.bad_records.stats = std::make_shared<DataStats>();
  auto p = Csv(o);
  std::vector<std::string> lines;
  std::map<std::string, int64_t> want;
  for (const BadCase& c : cases) {
    lines.push_back("1,2,u,n,1|2,3");
    lines.push_back(c.line);
    ++want[c.reason];
  }
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->Validate(p->schema()).ok());
  EXPECT_EQ(batch->batch_size, static_cast<int64_t>(cases.size()));
  EXPECT_EQ(batch->sparse[1].ids.NumElements(),
            2 * static_cast<int64_t>(cases.size()));
  EXPECT_EQ(o.bad_records.stats->skipped_by_reason(), want);

  o.bad_records.policy.mode = ErrorMode::kFail;
  auto strict = Csv(o);
  for (const BadCase& c : cases) {
    std::vector<std::string> l = {"0,1,a,b,1,2", c.line};
    std::vector<std::string> origins = {"t.csv:7", "t.csv:8"};
    auto r = strict->Parse(Views(l), Views(origins));
    ASSERT_FALSE(r.ok()) << c.line;
    const std::string msg(r.status().message());
    EXPECT_THAT(msg, HasSubstr("csv line t.csv:8")) << msg;
    EXPECT_THAT(msg, HasSubstr(c.reason)) << msg;
    EXPECT_THAT(msg, HasSubstr(c.field)) << msg;
  }
}

TEST(CsvParserTest, RandomRoundTripAndFuzz) {
  std::mt19937_64 rng(11);
  auto p = Csv(CsvSchema());
  std::vector<std::string> lines;
  std::vector<float> labels, dense;
  std::vector<int64_t> users, user_splits = {0}, tags, tag_splits = {0};
  for (int r = 0; r < 400; ++r) {
    std::vector<std::string> f(6);
    labels.push_back(rng() % 2);
    f[0] = labels.back() ? "1" : "0";
    const float price = static_cast<float>(rng() % 100000) / 8.0f;
    if (rng() % 5 == 0) {
      dense.push_back(-1);
    } else {
      f[1] = absl::StrFormat("%.9g", price);
      dense.push_back(price);
    }
    if (rng() % 4) {
      std::string u = absl::StrCat("user", rng() % 1000);
      if (rng() % 3 == 0) u += ", \"the\" one";
      users.push_back(Fp(u));
      std::string quoted = "\"";
      for (char c : u) {
        quoted += c;
        if (c == '"') quoted += '"';
      }
      f[2] = u.find_first_of(",\"") != std::string::npos || rng() % 2
                 ? quoted + "\""
                 : u;
    }
    user_splits.push_back(static_cast<int64_t>(users.size()));
    f[3] = "ignored";
    const int nt = static_cast<int>(rng() % 5);
    std::vector<std::string> items;
    for (int i = 0; i < nt; ++i) {
      const int64_t t = static_cast<int64_t>(rng()) >> (rng() % 63);
      tags.push_back(t);
      items.push_back(absl::StrCat(t));
    }
    f[4] = absl::StrJoin(items, "|");
    tag_splits.push_back(static_cast<int64_t>(tags.size()));
    const int age = static_cast<int>(rng() % 90);
    f[5] = absl::StrCat(age);
    dense.push_back(age);
    lines.push_back(absl::StrJoin(f, ","));
  }
  auto batch = p->Parse(Views(lines));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(Vec<float>(batch->labels), labels);
  EXPECT_EQ(Vec<float>(batch->dense), dense);
  EXPECT_EQ(Vec<int64_t>(batch->sparse[0].ids), users);
  EXPECT_EQ(Vec<int64_t>(batch->sparse[0].row_splits), user_splits);
  EXPECT_EQ(Vec<int64_t>(batch->sparse[1].ids), tags);
  EXPECT_EQ(Vec<int64_t>(batch->sparse[1].row_splits), tag_splits);
  FuzzParser(*p, std::vector<std::string>(lines.begin(), lines.begin() + 20));
}

// --- In a pipeline
// ---------------------------------------------------------------------

TEST(TextParserTest, TextLineMapPipelineCountsAndFailsWithFileAndLine) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/text_parsers_test.tsv");
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 10; ++i) {
      std::string line =
          i == 6 ? "1\tbad" : CriteoLine(CriteoFields(i % 2 ? "1" : "0"));
      std::fprintf(f, "%s\n", line.c_str());
    }
    std::fclose(f);
  }
  for (ErrorMode mode : {ErrorMode::kSkip, ErrorMode::kFail}) {
    auto stats = std::make_shared<DataStats>();
    CriteoOptions o;
    o.bad_records.policy.mode = mode;
    o.bad_records.stats = stats;
    std::shared_ptr<const TextParser> parser = Criteo(o);
    Dataset ds = Dataset::TextLine(
                     {path}, {}, {.lines_per_element = 4, .emit_origin = true})
                     .Map(ParseFn(parser), 2, parser->output_dtypes(),
                          parser->output_shapes())
                     .Prefetch(2);
    IteratorContext ctx;
    ctx.stats = stats;
    ctx.error_policy.mode = mode;
    auto it = ds.MakeIterator(ctx);
    ASSERT_TRUE(it.ok()) << it.status();
    int64_t rows = 0;
    absl::Status status;
    for (;;) {
      Element e;
      bool end = false;
      status = it->GetNext(&e, &end);
      if (!status.ok() || end) break;
      auto b = Batch::FromElement(parser->schema(), e);
      ASSERT_TRUE(b.ok()) << b.status();
      rows += b->batch_size;
    }
    if (mode == ErrorMode::kSkip) {
      EXPECT_TRUE(status.ok()) << status;
      EXPECT_EQ(rows, 9);
      // "bad" is read as I1 before the missing fields are noticed.
      EXPECT_EQ(stats->skipped_by_reason()["not_a_number"], 1);
      EXPECT_EQ(stats->records_skipped(), 1);
    } else {
      ASSERT_FALSE(status.ok());
      EXPECT_THAT(std::string(status.message()),
                  HasSubstr(absl::StrCat(path, ":7")));
    }
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace recflow::data
