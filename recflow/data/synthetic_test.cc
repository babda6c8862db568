#include "recflow/data/synthetic.h"
#include "recflow/data/text_parsers.h"

#include <cmath>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/record_io.h"
#include "recflow/data/synthetic_tfrecord.h"
#include "recflow/data/synthetic_writer.h"
#include "recflow/proto/example.pb.h"

namespace recflow::data {
namespace {

SyntheticConfig Config(uint64_t seed) {
  SyntheticConfig config;
  config.seed = seed;
  config.calibration_rows = 20000;
  return config;
}

std::unique_ptr<SyntheticGenerator> MakeGenerator(uint64_t seed) {
  auto gen = SyntheticGenerator::Create(Config(seed));
  EXPECT_TRUE(gen.ok()) << gen.status();
  return std::move(gen).value();
}

std::string Tsv(const std::vector<SyntheticRow>& rows) {
  std::string out;
  for (const SyntheticRow& row : rows) AppendCriteoTsvLine(row, &out);
  return out;
}

void ExpectSameRow(const SyntheticRow& a, const SyntheticRow& b, int64_t at) {
  std::string ta, tb;
  AppendCriteoTsvLine(a, &ta);
  AppendCriteoTsvLine(b, &tb);
  ASSERT_EQ(ta, tb) << "row " << at;
  ASSERT_EQ(a.probability, b.probability) << "row " << at;
  for (int f = 0; f < kSyntheticNumCategorical; ++f)
    ASSERT_EQ(a.rank[f], b.rank[f]);
}

// A large sample shared by the statistical tests (generated once).
class SyntheticStatsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gen_ = MakeGenerator(7).release();
    train_ = new std::vector<SyntheticRow>(
        gen_->GenerateRows(SyntheticSplit::kTrain, 0, 100000));
    test_ = new std::vector<SyntheticRow>(
        gen_->GenerateRows(SyntheticSplit::kTest, 0, 50000));
  }
  static void TearDownTestSuite() {
    delete gen_;
    delete train_;
    delete test_;
  }
  static SyntheticGenerator* gen_;
  static std::vector<SyntheticRow>* train_;
  static std::vector<SyntheticRow>* test_;
};
SyntheticGenerator* SyntheticStatsTest::gen_ = nullptr;
std::vector<SyntheticRow>* SyntheticStatsTest::train_ = nullptr;
std::vector<SyntheticRow>* SyntheticStatsTest::test_ = nullptr;

TEST(SyntheticTest, SameSeedSameBytesDifferentSeedDiffers) {
  auto a = MakeGenerator(42), b = MakeGenerator(42), c = MakeGenerator(43);
  EXPECT_EQ(a->bias(), b->bias());
  const std::string ta = Tsv(a->GenerateRows(SyntheticSplit::kTrain, 0, 3000));
  const std::string tb = Tsv(b->GenerateRows(SyntheticSplit::kTrain, 0, 3000));
  const std::string tc = Tsv(c->GenerateRows(SyntheticSplit::kTrain, 0, 3000));
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
  // The test split is a different stream from the train split.
  EXPECT_NE(ta, Tsv(a->GenerateRows(SyntheticSplit::kTest, 0, 3000)));
  // Through the convenience function too.
  auto rows = GenerateRows(Config(42), SyntheticSplit::kTrain, 0, 3000);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(Tsv(*rows), ta);
}

TEST(SyntheticTest, AnyRangeEqualsTheSliceOfTheWhole) {
  auto gen = MakeGenerator(5);
  for (SyntheticSplit split : {SyntheticSplit::kTrain, SyntheticSplit::kTest}) {
    const std::vector<SyntheticRow> all = gen->GenerateRows(split, 0, 10000);
    for (auto [a, b] : {std::pair<int64_t, int64_t>{0, 1},
                        {1234, 3456},
                        {4095, 4097},
                        {9000, 10000},
                        {7777, 7777}}) {
      const std::vector<SyntheticRow> part = gen->GenerateRows(split, a, b - a);
      ASSERT_EQ(part.size(), static_cast<size_t>(b - a));
      for (int64_t r = a; r < b; ++r) ExpectSameRow(part[r - a], all[r], r);
    }
  }
  // Far-away rows are reachable directly (counter-based: O(1) to seek).
  const auto far =
      gen->GenerateRows(SyntheticSplit::kTrain, int64_t{1} << 40, 2);
  EXPECT_EQ(Tsv(far), Tsv(gen->GenerateRows(SyntheticSplit::kTrain,
                                            int64_t{1} << 40, 2)));
}

TEST(SyntheticTest, CriteoTsvLineLayout) {
  auto gen = MakeGenerator(3);
  const std::vector<SyntheticRow> rows =
      gen->GenerateRows(SyntheticSplit::kTrain, 0, 2000);
  for (const SyntheticRow& row : rows) {
    std::string line;
    AppendCriteoTsvLine(row, &line);
    ASSERT_TRUE(absl::EndsWith(line, "\n"));
    line.pop_back();
    const std::vector<std::string> cols = absl::StrSplit(line, '\t');
    ASSERT_EQ(cols.size(), 1u + kSyntheticNumDense + kSyntheticNumCategorical);
    EXPECT_EQ(cols[0], row.label != 0 ? "1" : "0");
    for (int j = 0; j < kSyntheticNumDense; ++j) {
      const std::string& c = cols[1 + j];
      if (!row.has_dense(j)) {
        EXPECT_EQ(c, "");
        continue;
      }
      EXPECT_EQ(c, std::to_string(row.dense[j]));
      EXPECT_GE(row.dense[j], 0);
    }
    for (int f = 0; f < kSyntheticNumCategorical; ++f) {
      const std::string& c = cols[1 + kSyntheticNumDense + f];
      if (!row.has_categorical(f)) {
        EXPECT_EQ(c, "");
        EXPECT_EQ(row.rank[f], 0u);
        continue;
      }
      ASSERT_EQ(c.size(), 8u);
      EXPECT_EQ(std::stoul(c, nullptr, 16), row.hashed[f]);
      for (char ch : c)
        EXPECT_TRUE(std::isdigit(ch) || (ch >= 'a' && ch <= 'f')) << c;
    }
  }
  std::string hex;
  SyntheticGenerator::AppendHex(0x0001abcd, &hex);
  EXPECT_EQ(hex, "0001abcd");
}

TEST(SyntheticTest, RowsToBatchMatchesTheSchema) {
  auto gen = MakeGenerator(3);
  const std::vector<SyntheticRow> rows =
      gen->GenerateRows(SyntheticSplit::kTrain, 0, 300);
  const Batch batch =
      RowsToBatch(rows.data(), static_cast<int64_t>(rows.size()));
  const BatchSchema schema = SyntheticBatchSchema();
  ASSERT_TRUE(batch.Validate(schema).ok()) << batch.Validate(schema);
  EXPECT_EQ(schema.num_components(), 2 + 2 * kSyntheticNumCategorical);
  // Spot-check field C3 and dense I5.
  const int64_t* ids = batch.sparse[2].ids.data<int64_t>();
  const int64_t* splits = batch.sparse[2].row_splits.data<int64_t>();
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(batch.labels.data<float>()[r], rows[r].label);
    EXPECT_FLOAT_EQ(
        batch.dense.data<float>()[r * kSyntheticNumDense + 4],
        rows[r].has_dense(4)
            ? std::log1p(static_cast<float>(std::max<int64_t>(rows[r].dense[4], 0)))
            : 0.f);
    ASSERT_EQ(splits[r + 1] - splits[r], rows[r].has_categorical(2) ? 1 : 0);
    if (rows[r].has_categorical(2)) {
      EXPECT_EQ(ids[splits[r]], CriteoHexId(2, rows[r].hashed[2]));
    }
  }
}

// In-memory batches equal what the Criteo parser makes of the same rows'
// TSV lines, so training from memory and from files sees the same data.
TEST(SyntheticTest, RowsToBatchEqualsParsingTheTsvLines) {
  auto gen = MakeGenerator(5);
  const std::vector<SyntheticRow> rows =
      gen->GenerateRows(SyntheticSplit::kTrain, 0, 500);
  std::vector<std::string> lines(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    AppendCriteoTsvLine(rows[r], &lines[r]);
    if (!lines[r].empty() && lines[r].back() == '\n') lines[r].pop_back();
  }
  std::vector<absl::string_view> views(lines.begin(), lines.end());
  auto parser = CriteoParser::Create(CriteoOptions());
  ASSERT_TRUE(parser.ok()) << parser.status();
  auto parsed = (*parser)->Parse(views);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Batch direct = RowsToBatch(rows.data(), static_cast<int64_t>(rows.size()));
  const Element a = direct.ToElement(), b = parsed->ToElement();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape()) << "component " << i;
    ASSERT_EQ(a[i].dtype(), b[i].dtype()) << "component " << i;
    if (a[i].dtype() == DT_FLOAT) {
      for (int64_t k = 0; k < a[i].NumElements(); ++k) {
        ASSERT_FLOAT_EQ(a[i].flat<float>()[k], b[i].flat<float>()[k])
            << "component " << i << " element " << k;
      }
    } else {
      for (int64_t k = 0; k < a[i].NumElements(); ++k) {
        ASSERT_EQ(a[i].flat<int64_t>()[k], b[i].flat<int64_t>()[k])
            << "component " << i << " element " << k;
      }
    }
  }
}

TEST(SyntheticTest, BadConfigsAreRejected) {
  auto expect_bad = [](SyntheticConfig config, const char* needle) {
    auto gen = SyntheticGenerator::Create(config);
    ASSERT_FALSE(gen.ok()) << needle;
    EXPECT_EQ(gen.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(gen.status().message(), needle))
        << gen.status();
  };
  SyntheticConfig c = Config(1);
  c.target_ctr = 1.5;
  expect_bad(c, "target_ctr");
  c = Config(1);
  c.categorical[4].cardinality = 0;
  expect_bad(c, "field C5 cardinality");
  c = Config(1);
  c.categorical[0].missing_rate = 1.0;
  expect_bad(c, "field C1");
  c = Config(1);
  c.dense[12].missing_rate = -0.1;
  expect_bad(c, "dense feature I13");
  c = Config(1);
  c.interactions.push_back({3, 3, 2, 0.1});
  expect_bad(c, "two distinct fields");
  c = Config(1);
  c.interactions.push_back({1, 2, 9, 0.1});
  expect_bad(c, "rank in [1, 8]");
  auto rows = GenerateRows(Config(1), SyntheticSplit::kTrain, -1, 5);
  EXPECT_FALSE(rows.ok());
}

TEST(SyntheticTest, HexValuesAreABijectionOfTheRank) {
  auto gen = MakeGenerator(11);
  const std::vector<SyntheticRow> rows =
      gen->GenerateRows(SyntheticSplit::kTrain, 0, 20000);
  for (int f : {0, 2, 8, 20}) {
    std::map<uint32_t, uint32_t> hashed_to_rank, rank_to_hashed;
    for (const SyntheticRow& row : rows) {
      if (!row.has_categorical(f)) continue;
      auto [it, fresh] = hashed_to_rank.emplace(row.hashed[f], row.rank[f]);
      EXPECT_EQ(it->second, row.rank[f]) << "field " << f;
      auto [it2, fresh2] = rank_to_hashed.emplace(row.rank[f], row.hashed[f]);
      EXPECT_EQ(it2->second, row.hashed[f]) << "field " << f;
    }
  }
  // Different seeds map the same rank to different hex values.
  auto other = MakeGenerator(12);
  const auto a = gen->GenerateRows(SyntheticSplit::kTrain, 0, 200);
  const auto b = other->GenerateRows(SyntheticSplit::kTrain, 0, 200);
  int same = 0, compared = 0;
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r].rank[8] == 1 && b[r].rank[8] == 1) {
      ++compared;
      same += a[r].hashed[8] == b[r].hashed[8];
    }
  }
  EXPECT_GT(compared, 0);
  EXPECT_EQ(same, 0);
}

TEST_F(SyntheticStatsTest, CtrIsCalibrated) {
  double labels = 0, probs = 0;
  for (const SyntheticRow& row : *train_) {
    labels += row.label;
    probs += row.probability;
    ASSERT_GT(row.probability, 0);
    ASSERT_LT(row.probability, 1);
  }
  const double ctr = labels / train_->size();
  const double mean_p = probs / train_->size();
  std::printf("train CTR %.4f, mean probability %.4f, bias %.3f\n", ctr, mean_p,
              gen_->bias());
  EXPECT_GE(ctr, 0.20);
  EXPECT_LE(ctr, 0.30);
  EXPECT_NEAR(mean_p, 0.25, 0.01);
  EXPECT_NEAR(ctr, mean_p, 0.01);
}

// Expected share of rank 1 and expected number of distinct ids in n draws
// from Zipf(N, s), computed exactly.
double ZipfNorm(int64_t n, double s) {
  double h = 0;
  for (int64_t k = n; k >= 1; --k) h += std::pow(static_cast<double>(k), -s);
  return h;
}
double ExpectedDistinct(int64_t card, double s, int64_t draws) {
  const double h = ZipfNorm(card, s);
  double e = 0;
  for (int64_t k = 1; k <= card; ++k) {
    const double p = std::pow(static_cast<double>(k), -s) / h;
    e += -std::expm1(static_cast<double>(draws) * std::log1p(-p));
  }
  return e;
}

TEST_F(SyntheticStatsTest, CardinalityAndZipfShape) {
  const SyntheticConfig& config = gen_->config();
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    const SyntheticCategoricalSpec& spec = config.categorical[f];
    int64_t present = 0, top = 0;
    for (const SyntheticRow& row : *train_) {
      if (!row.has_categorical(f)) continue;
      ++present;
      ASSERT_GE(row.rank[f], 1u);
      ASSERT_LE(row.rank[f], static_cast<uint32_t>(spec.cardinality));
      top += row.rank[f] == 1;
    }
    const double p1 = 1.0 / ZipfNorm(spec.cardinality, spec.zipf_exponent);
    const double share = static_cast<double>(top) / present;
    const double sigma = std::sqrt(p1 * (1 - p1) / present);
    EXPECT_NEAR(share, p1, 5 * sigma + 1e-3) << "C" << f + 1 << " top-id share";
  }
  // Distinct ids grow like the Zipf law says: check a small, a medium and
  // the largest field at two sample sizes against the exact expectation.
  for (int f : {8, 6, 2}) {
    const SyntheticCategoricalSpec& spec = config.categorical[f];
    for (int64_t n : {int64_t{10000}, int64_t{100000}}) {
      std::set<uint32_t> seen;
      int64_t draws = 0;
      for (int64_t r = 0; r < n; ++r) {
        if (!(*train_)[r].has_categorical(f)) continue;
        ++draws;
        seen.insert((*train_)[r].rank[f]);
      }
      const double expected =
          ExpectedDistinct(spec.cardinality, spec.zipf_exponent, draws);
      std::printf(
          "C%d (cardinality %lld, s=%.2f): %lld distinct in %lld draws, "
          "expected %.0f\n",
          f + 1, static_cast<long long>(spec.cardinality), spec.zipf_exponent,
          static_cast<long long>(seen.size()), static_cast<long long>(draws),
          expected);
      EXPECT_NEAR(static_cast<double>(seen.size()), expected,
                  0.03 * expected + 3);
    }
  }
  // The largest fields span most of a million ids: far more than any small
  // field.
  std::set<uint32_t> big;
  for (const SyntheticRow& row : *train_) big.insert(row.rank[2]);
  EXPECT_GT(big.size(), 20000u);
  EXPECT_GE(config.categorical[2].cardinality, 1000000);
  EXPECT_LE(config.categorical[8].cardinality, 10);
}

TEST_F(SyntheticStatsTest, MissingRatesMatchTheConfig) {
  const SyntheticConfig& config = gen_->config();
  const double n = static_cast<double>(train_->size());
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    int64_t missing = 0;
    for (const SyntheticRow& row : *train_) missing += !row.has_categorical(f);
    const double p = config.categorical[f].missing_rate;
    EXPECT_NEAR(missing / n, p, 5 * std::sqrt(p * (1 - p) / n) + 1e-4)
        << "C" << f + 1;
    EXPECT_LE(p, 0.4);
  }
  for (int j = 0; j < kSyntheticNumDense; ++j) {
    int64_t missing = 0;
    for (const SyntheticRow& row : *train_) missing += !row.has_dense(j);
    const double p = config.dense[j].missing_rate;
    EXPECT_NEAR(missing / n, p, 5 * std::sqrt(p * (1 - p) / n) + 1e-4)
        << "I" << j + 1;
  }
}

TEST_F(SyntheticStatsTest, DenseFeaturesAreHeavyTailedAndCorrelated) {
  // I5: a large count with a heavy tail (max >> median).
  std::vector<int64_t> v;
  for (const SyntheticRow& row : *train_) {
    if (row.has_dense(4)) v.push_back(row.dense[4]);
  }
  std::sort(v.begin(), v.end());
  const int64_t median = v[v.size() / 2];
  EXPECT_GT(median, 100);
  EXPECT_GT(v.back(), 100 * median);
  // I7 and I11 share the latent activity: positive correlation of log1p.
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  int64_t n = 0;
  for (const SyntheticRow& row : *train_) {
    if (!row.has_dense(6) || !row.has_dense(10)) continue;
    const double x = std::log1p(row.dense[6]), y = std::log1p(row.dense[10]);
    sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y;
    ++n;
  }
  const double cov = sxy / n - sx / n * sy / n;
  const double corr = cov / std::sqrt((sxx / n - sx / n * sx / n) *
                                      (syy / n - sy / n * sy / n));
  EXPECT_GT(corr, 0.2);
}

TEST(SyntheticTest, ExactAucHandlesTies) {
  // Against the O(n^2) definition on small, tie-heavy inputs.
  std::vector<float> labels;
  std::vector<double> scores;
  uint32_t state = 12345;
  for (int i = 0; i < 300; ++i) {
    state = state * 1664525u + 1013904223u;
    labels.push_back((state >> 16) % 3 == 0 ? 1.f : 0.f);
    scores.push_back(static_cast<double>((state >> 8) % 17));
  }
  double num = 0, pairs = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    for (size_t j = 0; j < labels.size(); ++j) {
      if (labels[i] == 1 && labels[j] == 0) {
        pairs += 1;
        num += scores[i] > scores[j] ? 1 : scores[i] == scores[j] ? 0.5 : 0;
      }
    }
  }
  EXPECT_NEAR(ExactAuc(labels, scores), num / pairs, 1e-12);
  EXPECT_EQ(ExactAuc({1, 1}, {0.1, 0.2}), 0.5);
  EXPECT_NEAR(MeanLogLoss({1, 0}, {0.5, 0.5}), std::log(2.0), 1e-12);
}

TEST_F(SyntheticStatsTest, OracleIsLearnableButNotTrivial) {
  std::vector<float> labels;
  std::vector<double> oracle, first_order, no_dense, no_pairwise;
  for (const SyntheticRow& row : *test_) {
    labels.push_back(row.label);
    oracle.push_back(row.probability);
    const double b = gen_->bias();
    first_order.push_back(b + row.first_order);
    no_dense.push_back(b + row.first_order + row.pairwise);
    no_pairwise.push_back(b + row.first_order + row.dense_part);
  }
  const double auc = ExactAuc(labels, oracle);
  const double auc_first = ExactAuc(labels, first_order);
  const double auc_no_dense = ExactAuc(labels, no_dense);
  const double auc_no_pair = ExactAuc(labels, no_pairwise);
  std::printf(
      "oracle AUC %.4f logloss %.4f; ground truth without pairwise %.4f, "
      "without dense %.4f, "
      "first-order only %.4f\n",
      auc, MeanLogLoss(labels, oracle), auc_no_pair, auc_no_dense, auc_first);
  EXPECT_GT(auc, 0.72);
  EXPECT_LT(auc, 0.9);
  // Every part of the ground truth carries signal of its own.
  EXPECT_LT(auc_first, auc - 0.02);
  EXPECT_LT(auc_no_dense, auc - 0.01);
  EXPECT_LT(auc_no_pair, auc - 0.01);
  EXPECT_GT(auc_first, 0.6);
}

// A logistic regression on one-hot ids and log1p(dense), fitted by SGD on
// the train sample, is a first-order model: it must do clearly better than
// chance and clearly worse than the oracle.
TEST_F(SyntheticStatsTest, FittedFirstOrderModelIsBelowTheOracle) {
  // Hashed one-hot weights (collisions are rare at this table size).
  constexpr uint64_t kBuckets = uint64_t{1} << 22;
  std::vector<float> w(kBuckets, 0.f);
  auto slot = [&](int f, uint32_t rank) -> float& {
    uint64_t h = (uint64_t{static_cast<uint32_t>(f)} << 32 | rank) *
                 0x9E3779B97F4A7C15ull;
    return w[h >> 42];
  };
  float dense_w[kSyntheticNumDense] = {};
  float bias = 0;
  auto score = [&](const SyntheticRow& row) {
    double s = bias;
    for (int f = 0; f < kSyntheticNumCategorical; ++f)
      s += slot(f, row.rank[f]);
    for (int j = 0; j < kSyntheticNumDense; ++j) {
      if (row.has_dense(j)) s += dense_w[j] * std::log1p(row.dense[j]) * 0.2;
    }
    return s;
  };
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (const SyntheticRow& row : *train_) {
      const double p = 1 / (1 + std::exp(-score(row)));
      const float g = static_cast<float>(p - row.label);
      const float lr = 0.05f;
      bias -= lr * g;
      for (int f = 0; f < kSyntheticNumCategorical; ++f) {
        float& wf = slot(f, row.rank[f]);
        wf -= lr * (g + 0.001f * wf);
      }
      for (int j = 0; j < kSyntheticNumDense; ++j) {
        if (row.has_dense(j))
          dense_w[j] -= lr * g * std::log1p(row.dense[j]) * 0.2f;
      }
    }
  }
  std::vector<float> labels;
  std::vector<double> fitted, oracle;
  for (const SyntheticRow& row : *test_) {
    labels.push_back(row.label);
    fitted.push_back(score(row));
    oracle.push_back(row.probability);
  }
  const double auc_fit = ExactAuc(labels, fitted),
               auc_oracle = ExactAuc(labels, oracle);
  std::printf(
      "fitted first-order LR on 100K rows: test AUC %.4f (oracle %.4f)\n",
      auc_fit, auc_oracle);
  EXPECT_GT(auc_fit, 0.6);
  EXPECT_LT(auc_fit, auc_oracle - 0.02);
}

// ---------------------------------------------------------------------------
// The dataset writer.

SyntheticWriteOptions WriteOptions(Env* env, const std::string& dir) {
  SyntheticWriteOptions o;
  o.config = Config(9);
  o.train_rows = 5000;
  o.test_rows = 1200;
  o.num_files = 3;
  o.out_dir = dir;
  o.env = env;
  return o;
}

std::string ReadAll(Env* env, const std::string& path) {
  std::string s;
  EXPECT_TRUE(ReadFileToString(env, path, &s).ok()) << path;
  return s;
}

TEST(SyntheticWriterTest, WritesShardsAndJsonIndependentOfThreads) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDir("/a").ok());
  SyntheticWriteOptions o = WriteOptions(&env, "/a/data");
  o.num_threads = 1;
  int64_t last_done = 0, calls = 0;
  o.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 6200);
    EXPECT_GT(done, last_done);
    last_done = done;
    ++calls;
  };
  auto one = WriteSyntheticDataset(o);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(last_done, 6200);
  EXPECT_GE(calls, 2);
  auto children = env.GetChildren("/a/data");
  ASSERT_TRUE(children.ok());
  EXPECT_EQ(
      *children,
      (std::vector<std::string>{
          "dataset.json", "test-00000-of-00003.tsv", "test-00001-of-00003.tsv",
          "test-00002-of-00003.tsv", "train-00000-of-00003.tsv",
          "train-00001-of-00003.tsv", "train-00002-of-00003.tsv"}));
  // The files are the rows in order, split evenly.
  auto gen = MakeGenerator(9);
  std::string all;
  int64_t lines = 0;
  for (const std::string& name : one->train.files) {
    const std::string s = ReadAll(&env, "/a/data/" + name);
    const int64_t n = std::count(s.begin(), s.end(), '\n');
    EXPECT_TRUE(n == 1666 || n == 1667) << name << " " << n;
    lines += n;
    all += s;
  }
  EXPECT_EQ(lines, 5000);
  EXPECT_EQ(all, Tsv(gen->GenerateRows(SyntheticSplit::kTrain, 0, 5000)));
  EXPECT_EQ(one->train.bytes, static_cast<int64_t>(all.size()));
  EXPECT_GT(one->oracle_auc, 0.7);
  EXPECT_LT(one->oracle_logloss, one->constant_logloss);

  const std::string json = ReadAll(&env, "/a/data/dataset.json");
  EXPECT_EQ(json, one->json);
  for (const char* key :
       {"\"seed\": 9", "\"oracle\": {\"auc\": 0.", "\"cardinality\": 1500000",
        "\"train\": {\"rows\": 5000", "\"test\": {\"rows\": 1200",
        "\"zipf_exponent\"", "\"missing_rate\"", "\"ctr\": 0.",
        "\"first_order_only\"", "\"name\": \"C26\"", "\"name\": \"I13\""}) {
    EXPECT_TRUE(absl::StrContains(json, key)) << key << "\n" << json;
  }

  // Three threads: byte-identical files and JSON.
  o.out_dir = "/a/data3";
  o.num_threads = 3;
  o.progress = nullptr;
  auto three = WriteSyntheticDataset(o);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->json, one->json);
  for (const std::string& name : *children) {
    EXPECT_EQ(ReadAll(&env, "/a/data3/" + name),
              ReadAll(&env, "/a/data/" + name))
        << name;
  }
}

TEST(SyntheticWriterTest, BadOptionsAndWriteFailures) {
  MemEnv env;
  SyntheticWriteOptions o = WriteOptions(&env, "/out");
  o.train_rows = 0;
  EXPECT_TRUE(absl::StrContains(WriteSyntheticDataset(o).status().message(),
                                "train_rows"));
  o = WriteOptions(&env, "/out");
  o.num_files = 6000;
  EXPECT_TRUE(absl::StrContains(WriteSyntheticDataset(o).status().message(),
                                "num_files"));
  o = WriteOptions(&env, "");
  EXPECT_FALSE(WriteSyntheticDataset(o).ok());
  EXPECT_FALSE(ParseSyntheticFormat("csv").ok());
  EXPECT_EQ(*ParseSyntheticFormat("criteo"), SyntheticFormat::kCriteoTsv);
  EXPECT_EQ(SyntheticFileName(SyntheticSplit::kTest, 3, 8,
                              SyntheticFormat::kTfRecord),
            "test-00003-of-00008.tfrecord");

  // A full disk: the error comes back, no partial or temporary file stays.
  o = WriteOptions(&env, "/full");
  env.FailAfterBytes(100000);
  auto full = WriteSyntheticDataset(o);
  env.FailAfterBytes(-1);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted)
      << full.status();
  auto children = env.GetChildren("/full");
  ASSERT_TRUE(children.ok());
  EXPECT_TRUE(children->empty()) << children->front();
}

TEST(SyntheticWriterTest, TfRecordHoldsExamplesOfTheRows) {
  MemEnv env;
  SyntheticWriteOptions o = WriteOptions(&env, "/tf");
  o.format = SyntheticFormat::kTfRecord;
  o.train_rows = 700;
  o.test_rows = 100;
  o.num_files = 2;
  o.num_threads = 2;
  auto summary = WriteSyntheticDataset(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->train.files,
            (std::vector<std::string>{"train-00000-of-00002.tfrecord",
                                      "train-00001-of-00002.tfrecord"}));
  EXPECT_TRUE(absl::StrContains(summary->json, "\"format\": \"tfrecord\""));
  auto gen = MakeGenerator(9);
  const std::vector<SyntheticRow> rows =
      gen->GenerateRows(SyntheticSplit::kTrain, 0, 700);
  size_t next = 0;
  int64_t bytes = 0;
  for (const std::string& name : summary->train.files) {
    auto file = env.NewRandomAccessFile("/tf/" + name);
    ASSERT_TRUE(file.ok());
    bytes += static_cast<int64_t>(*env.GetFileSize("/tf/" + name));
    RecordReader reader(file->get(), name);
    std::string record;
    while (reader.ReadRecord(&record).ok()) {
      ASSERT_LT(next, rows.size());
      const SyntheticRow& row = rows[next++];
      tensorflow::Example example;
      ASSERT_TRUE(example.ParseFromString(record));
      const auto& f = example.features().feature();
      EXPECT_EQ(f.at("label").float_list().value(0), row.label);
      for (int j = 0; j < kSyntheticNumDense; ++j) {
        const std::string key = "I" + std::to_string(j + 1);
        ASSERT_EQ(f.count(key), row.has_dense(j) ? 1u : 0u) << key;
        if (row.has_dense(j)) {
          EXPECT_EQ(f.at(key).int64_list().value(0), row.dense[j]);
        }
      }
      for (int c = 0; c < kSyntheticNumCategorical; ++c) {
        const std::string key = "C" + std::to_string(c + 1);
        ASSERT_EQ(f.count(key), row.has_categorical(c) ? 1u : 0u) << key;
        if (!row.has_categorical(c)) continue;
        std::string hex;
        SyntheticGenerator::AppendHex(row.hashed[c], &hex);
        EXPECT_EQ(f.at(key).bytes_list().value(0), hex);
      }
      // Serialization is deterministic.
      EXPECT_EQ(record, SerializeSyntheticExample(row));
    }
  }
  EXPECT_EQ(next, rows.size());
  EXPECT_EQ(summary->train.bytes, bytes);
}

}  // namespace
}  // namespace recflow::data
