// Behaviour sequences in Criteo TSV: the synthetic writer's H1 column
// (AppendCriteoTsvLine with_history, WriteSyntheticDataset) and
// CriteoParser's sequence_fields.
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/fingerprint.h"
#include "recflow/core/mem_env.h"
#include "recflow/data/synthetic.h"
#include "recflow/data/synthetic_writer.h"
#include "recflow/data/text_parsers.h"

namespace recflow::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::vector<T> Vec(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.NumElements());
}

std::vector<absl::string_view> Views(const std::vector<std::string>& v) {
  return std::vector<absl::string_view>(v.begin(), v.end());
}

std::unique_ptr<CriteoParser> Criteo(CriteoOptions o) {
  auto p = CriteoParser::Create(std::move(o));
  CHECK(p.ok()) << p.status();
  return *std::move(p);
}

SyntheticConfig HistoryConfig(uint64_t seed, int item_field) {
  SyntheticConfig config;
  config.seed = seed;
  config.calibration_rows = 5000;
  config.history.max_length = 20;
  config.history.item_field = item_field;
  return config;
}

void ExpectSameBatch(const Batch& got, const Batch& want) {
  ASSERT_EQ(got.batch_size, want.batch_size);
  EXPECT_EQ(Vec<float>(got.labels), Vec<float>(want.labels));
  EXPECT_EQ(Vec<float>(got.dense), Vec<float>(want.dense));
  ASSERT_EQ(got.sparse.size(), want.sparse.size());
  for (size_t k = 0; k < want.sparse.size(); ++k) {
    EXPECT_EQ(Vec<int64_t>(got.sparse[k].ids), Vec<int64_t>(want.sparse[k].ids))
        << "feature " << k;
    EXPECT_EQ(Vec<int64_t>(got.sparse[k].row_splits),
              Vec<int64_t>(want.sparse[k].row_splits))
        << "feature " << k;
  }
}

// A line of 40 fields plus the given sequence columns.
std::string Line(const std::vector<std::string>& sequences,
                 const std::string& c1 = "0000abcd") {
  std::vector<std::string> f = {"1"};
  for (int j = 0; j < 13; ++j) f.push_back(absl::StrCat(j));
  for (int k = 0; k < 26; ++k)
    f.push_back(k == 0 ? c1 : absl::StrFormat("%08x", 0x100 * k + 1));
  for (const std::string& s : sequences) f.push_back(s);
  return absl::StrJoin(f, "\t");
}

TEST(CriteoSequencesTest, ParseEqualsRowsToBatchWithHistory) {
  for (int item_field : {0, 7}) {
    auto rows = GenerateRows(HistoryConfig(3 + item_field, item_field),
                             SyntheticSplit::kTrain, 100, 700);
    ASSERT_TRUE(rows.ok()) << rows.status();
    std::vector<std::string> lines;
    int empty = 0, longest = 0;
    for (const SyntheticRow& row : *rows) {
      std::string line;
      AppendCriteoTsvLine(row, &line, /*with_history=*/true);
      line.pop_back();  // '\n'
      lines.push_back(line);
      empty += row.history_length == 0;
      longest = std::max<int>(longest, row.history_length);
    }
    EXPECT_GT(empty, 0);
    EXPECT_EQ(longest, 20);
    CriteoOptions o;
    o.sequence_fields = {item_field};
    o.bad_records.policy.mode = ErrorMode::kFail;
    auto parser = Criteo(o);
    EXPECT_EQ(parser->schema().sparse.size(), 27u);
    EXPECT_EQ(parser->schema().sparse.back().name, "H1");
    auto batch = parser->Parse(Views(lines));
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(batch->Validate(parser->schema()).ok());
    ExpectSameBatch(
        *batch, RowsToBatchWithHistory(rows->data(), rows->size(), item_field));
    // Without history the lines are unchanged.
    std::string plain, with;
    AppendCriteoTsvLine((*rows)[0], &plain);
    AppendCriteoTsvLine((*rows)[0], &with, true);
    EXPECT_TRUE(absl::StartsWith(with, plain.substr(0, plain.size() - 1)));
    EXPECT_EQ(std::count(plain.begin(), plain.end(), '\t'), 39);
    EXPECT_EQ(std::count(with.begin(), with.end(), '\t'), 40);
  }
}

TEST(CriteoSequencesTest, IdsShareTheItemFieldsIdSpaceInBothModes) {
  // H1 holds C1's value 0000abcd (written short as "abcd" too) and H2 holds
  // C3's value.
  const std::string c3 = absl::StrFormat("%08x", 0x100 * 2 + 1);
  const std::vector<std::string> lines = {Line({"0000abcd,abcd,00000001", c3}),
                                          Line({"", ""}),
                                          Line({"ABCD", c3 + "," + c3})};
  for (auto mode :
       {CriteoOptions::IdMode::kHex, CriteoOptions::IdMode::kHash}) {
    CriteoOptions o;
    o.id_mode = mode;
    o.sequence_fields = {0, 2};
    o.bad_records.policy.mode = ErrorMode::kFail;
    auto p = Criteo(o);
    auto b = p->Parse(Views(lines));
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(b->sparse.size(), 28u);
    EXPECT_EQ(p->schema().sparse[27].name, "H2");
    const int64_t c1 = b->sparse[0].ids.data<int64_t>()[0];
    const int64_t c3_id = b->sparse[2].ids.data<int64_t>()[0];
    EXPECT_THAT(Vec<int64_t>(b->sparse[26].row_splits),
                ElementsAre(0, 3, 3, 4));
    EXPECT_THAT(Vec<int64_t>(b->sparse[27].row_splits),
                ElementsAre(0, 1, 1, 3));
    EXPECT_THAT(Vec<int64_t>(b->sparse[27].ids),
                ElementsAre(c3_id, c3_id, c3_id));
    const std::vector<int64_t> h1 = Vec<int64_t>(b->sparse[26].ids);
    EXPECT_EQ(h1[0], c1);
    if (mode == CriteoOptions::IdMode::kHex) {
      EXPECT_EQ(c1, CriteoHexId(0, 0xabcd));
      EXPECT_THAT(h1, ElementsAre(c1, c1, CriteoHexId(0, 1), c1));
    } else {
      EXPECT_EQ(c1, static_cast<int64_t>(Fingerprint64("0000abcd")));
      EXPECT_THAT(h1,
                  ElementsAre(c1, static_cast<int64_t>(Fingerprint64("abcd")),
                              static_cast<int64_t>(Fingerprint64("00000001")),
                              static_cast<int64_t>(Fingerprint64("ABCD"))));
    }
  }
}

struct BadSequence {
  std::string line;
  std::string reason;
  std::string detail;
};

TEST(CriteoSequencesTest, BadLinesSkippedCountedOrFailNamingTheColumn) {
  const std::vector<BadSequence> cases = {
      {Line({}), "wrong_field_count",
       "40 fields, expected 41 (label, 13 integer, 26 categorical, 1 sequence "
       "H1)"},
      {Line({"1,2", "3"}), "wrong_field_count", "42 fields"},
      {Line({"1,,2"}), "bad_sequence", "field 40 (H1)"},
      {Line({"1,2,"}), "bad_sequence", "trailing"},
      {Line({",1"}), "bad_sequence", "empty item"},
      {Line({"12,xyz"}), "bad_sequence", "'xyz'"},
      {Line({"123456789"}), "bad_sequence", "1 to 8 hex digits"},
      {Line({"1,2,3,4,5"}), "sequence_too_long", "max_sequence_length"},
  };
  CriteoOptions o;
  o.sequence_fields = {0};
  o.max_sequence_length = 4;
  o.bad_records.stats = std::make_shared<DataStats>();
  auto p = Criteo(o);
  // Good lines between the bad ones: a bad line's partial ids never leak.
  std::vector<std::string> lines;
  std::map<std::string, int64_t> want;
  for (size_t i = 0; i < cases.size(); ++i) {
    lines.push_back(Line({absl::StrFormat("%x,%x", i + 1, i + 100)}));
    lines.push_back(cases[i].line);
    ++want[cases[i].reason];
  }
  lines.push_back(Line({"1,2,3,4"}));  // exactly max_sequence_length
  auto b = p->Parse(Views(lines));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(b->Validate(p->schema()).ok());
  ASSERT_EQ(b->batch_size, static_cast<int64_t>(cases.size()) + 1);
  std::vector<int64_t> ids, splits = {0};
  for (size_t i = 0; i < cases.size(); ++i) {
    ids.push_back(CriteoHexId(0, i + 1));
    ids.push_back(CriteoHexId(0, i + 100));
    splits.push_back(ids.size());
  }
  for (int v = 1; v <= 4; ++v) ids.push_back(CriteoHexId(0, v));
  splits.push_back(ids.size());
  EXPECT_EQ(Vec<int64_t>(b->sparse[26].ids), ids);
  EXPECT_EQ(Vec<int64_t>(b->sparse[26].row_splits), splits);
  EXPECT_EQ(o.bad_records.stats->skipped_by_reason(), want);

  o.bad_records.stats = nullptr;
  o.bad_records.policy.mode = ErrorMode::kFail;
  p = Criteo(o);
  for (const BadSequence& c : cases) {
    const std::vector<std::string> one = {c.line};
    const std::vector<std::string> origin = {"hist.tsv:7"};
    auto r = p->Parse(Views(one), Views(origin));
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string msg(r.status().message());
    EXPECT_THAT(msg, HasSubstr("criteo line hist.tsv:7")) << msg;
    EXPECT_THAT(msg, HasSubstr(c.reason)) << msg;
    EXPECT_THAT(msg, HasSubstr(c.detail)) << msg;
  }
}

TEST(CriteoSequencesTest, DefaultOptionsUnchangedAndBadOptions) {
  auto p = Criteo({});
  EXPECT_EQ(p->schema().sparse.size(), 26u);
  const std::vector<std::string> lines = {Line({}), Line({"1,2"})};
  CriteoOptions o;
  o.bad_records.stats = std::make_shared<DataStats>();
  p = Criteo(o);
  auto b = p->Parse(Views(lines));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->batch_size, 1);
  EXPECT_THAT(o.bad_records.stats->first_skip_detail()["wrong_field_count"],
              HasSubstr("41 fields, expected 40 (label, 13 integer, 26 "
                        "categorical)"));

  o = {};
  o.sequence_fields = {26};
  auto bad = CriteoParser::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("sequence H1"));
  o.sequence_fields = {0, -1};
  bad = CriteoParser::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("sequence H2"));
  o.sequence_fields = {0};
  o.max_sequence_length = 0;
  bad = CriteoParser::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("max_sequence_length"));
}

TEST(CriteoSequencesTest, FuzzedSequenceColumnsNeverCrash) {
  CriteoOptions o;
  o.sequence_fields = {0};
  o.bad_records.stats = std::make_shared<DataStats>();
  auto p = Criteo(o);
  std::mt19937 rng(11);
  const std::string alphabet = "0123456789abcdefXYZ,,\t";
  std::vector<std::string> lines;
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    const int n = rng() % 40;
    for (int j = 0; j < n; ++j) s.push_back(alphabet[rng() % alphabet.size()]);
    lines.push_back(Line({s}));
  }
  auto b = p->Parse(Views(lines));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(b->Validate(p->schema()).ok());
  EXPECT_GT(b->batch_size, 0);
  EXPECT_GT(o.bad_records.stats->records_skipped(), 0);
  EXPECT_EQ(b->batch_size + o.bad_records.stats->records_skipped(), 2000);
}

TEST(CriteoSequencesTest, WriterWritesTheHistoryColumnAndJson) {
  MemEnv env;
  SyntheticWriteOptions o;
  o.config = HistoryConfig(5, 0);
  o.train_rows = 3000;
  o.test_rows = 2000;
  o.num_files = 2;
  o.num_threads = 2;
  o.out_dir = "/h";
  o.env = &env;
  auto summary = WriteSyntheticDataset(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  for (const char* key :
       {"\"history\": {\"max_length\": 20, \"item_field\": \"C1\", "
        "\"num_categories\": 8, \"scale\": 0.5}",
        "\"sequences\": [\n      {\"name\": \"H1\", \"items_of\": \"C1\", "
        "\"separator\": \",\", \"max_length\": 20}"}) {
    EXPECT_TRUE(absl::StrContains(summary->json, key)) << key << summary->json;
  }
  // The test files parse to the generator's rows, histories included.
  auto gen = SyntheticGenerator::Create(o.config);
  ASSERT_TRUE(gen.ok());
  const std::vector<SyntheticRow> rows =
      (*gen)->GenerateRows(SyntheticSplit::kTest, 0, 2000);
  std::string all;
  for (const std::string& name : summary->test.files) {
    std::string s;
    ASSERT_TRUE(ReadFileToString(&env, "/h/" + name, &s).ok());
    all += s;
  }
  std::vector<std::string> lines = absl::StrSplit(all, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2000u);
  CriteoOptions po;
  po.sequence_fields = {0};
  po.bad_records.policy.mode = ErrorMode::kFail;
  auto b = Criteo(po)->Parse(Views(lines));
  ASSERT_TRUE(b.ok()) << b.status();
  ExpectSameBatch(*b, RowsToBatchWithHistory(rows.data(), rows.size(), 0));
  // The oracle sees the history term: better than without it.
  SyntheticWriteOptions plain = o;
  plain.config.history.max_length = 0;
  plain.out_dir = "/p";
  auto without = WriteSyntheticDataset(plain);
  ASSERT_TRUE(without.ok());
  EXPECT_GT(summary->oracle_auc, without->oracle_auc);
  EXPECT_FALSE(absl::StrContains(without->json, "history"));

  o.format = SyntheticFormat::kTfRecord;
  o.out_dir = "/t";
  auto tf = WriteSyntheticDataset(o);
  ASSERT_FALSE(tf.ok());
  EXPECT_THAT(std::string(tf.status().message()), HasSubstr("criteo format"));
}

}  // namespace
}  // namespace recflow::data
