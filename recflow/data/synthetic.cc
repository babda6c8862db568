#include "recflow/data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "recflow/core/philox.h"
#include "recflow/core/status.h"
#include "recflow/data/text_parsers.h"

namespace recflow::data {

using random::PhiloxRandom;

namespace {

// SplitMix64's finalizer: a bijective 64-bit mix, used to derive the
// Philox keys of the different streams from the seed.
uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t DeriveKey(uint64_t seed, uint64_t purpose) {
  return Mix64(Mix64(seed) ^ Mix64(purpose * 0x2545F4914F6CDD1Dull + 7));
}

// Stream purposes (part of the data format: changing one changes the data).
constexpr uint64_t kRowsPurpose = 0x100;  // + split
constexpr uint64_t kCalibrationPurpose = 0x1ff;
constexpr uint64_t kParamsPurpose = 0x200;
constexpr uint64_t kHashPurpose = 0x300;  // + field
constexpr uint64_t kHistoryPurpose = 0x400;  // mixed into a row stream's key
constexpr uint64_t kCategoryPurpose = 0x401;

// Tags in counter word 2 of the parameter stream.
constexpr uint32_t kEffectTag = 0;
constexpr uint32_t kFactorTag = 1;  // + interaction index
constexpr uint32_t kMlpTag = 0xD0000000u;

// Limit on config.interactions.size().
constexpr size_t kMaxInteractions = 64;

// Fields up to this cardinality get their parameters precomputed.
constexpr int64_t kMaxTabulated = 1 << 18;
// Fields up to this cardinality are sampled with an alias table (which
// stays in cache); larger ones by rejection-inversion.
constexpr int64_t kMaxAliased = 1 << 11;

PhiloxRandom::Key KeyOf(uint64_t k) {
  return {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
}

// A keyed bijection of uint32 (xor, odd multiplies, xorshifts): distinct
// ranks give distinct hex values that look random.
uint32_t Permute(uint32_t x, uint64_t key) {
  const uint32_t k0 = static_cast<uint32_t>(key);
  const uint32_t k1 = static_cast<uint32_t>(key >> 32) | 1u;
  x ^= k0;
  x *= 0x9E3779B1u;
  x ^= x >> 16;
  x *= k1;
  x ^= x >> 13;
  x *= 0x85EBCA6Bu;
  x ^= x >> 16;
  x += k1 >> 1;
  return x;
}

// Rejection-inversion sampling of a Zipf distribution on 1..n with
// P(k) ~ k^-s (Hörmann & Derflinger, "Rejection-inversion to generate
// variates from monotone discrete distributions", 1996), as in Apache
// Commons RNG. O(1) per sample for any n; expected < 1.1 attempts.
class ZipfSampler {
 public:
  ZipfSampler() = default;
  ZipfSampler(int64_t n, double s) : n_(n), s_(s) {
    h_integral_x1_ = HIntegral(1.5) - 1.0;
    h_integral_n_ = HIntegral(static_cast<double>(n) + 0.5);
    threshold_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
  }

  // `uniform` returns doubles in [0, 1).
  template <typename Uniform>
  int64_t Sample(Uniform&& uniform) const {
    if (n_ == 1) return 1;
    while (true) {
      const double u =
          h_integral_n_ + uniform() * (h_integral_x1_ - h_integral_n_);
      const double x = HIntegralInverse(u);
      int64_t k = static_cast<int64_t>(x + 0.5);
      if (k < 1) {
        k = 1;
      } else if (k > n_) {
        k = n_;
      }
      const double kd = static_cast<double>(k);
      if (kd - x <= threshold_ || u >= HIntegral(kd + 0.5) - H(kd)) return k;
    }
  }

 private:
  double H(double x) const { return std::exp(-s_ * std::log(x)); }
  double HIntegral(double x) const {
    const double log_x = std::log(x);
    return Helper2((1.0 - s_) * log_x) * log_x;
  }
  double HIntegralInverse(double x) const {
    double t = x * (1.0 - s_);
    if (t < -1.0) t = -1.0;  // Rounding near the lower end.
    return std::exp(Helper1(t) * x);
  }
  // log1p(x) / x and expm1(x) / x, accurate near 0.
  static double Helper1(double x) {
    if (std::abs(x) > 1e-8) return std::log1p(x) / x;
    return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double Helper2(double x) {
    if (std::abs(x) > 1e-8) return std::expm1(x) / x;
    return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
  }

  int64_t n_ = 1;
  double s_ = 1.1;
  double h_integral_x1_ = 0, h_integral_n_ = 0, threshold_ = 0;
};

// Walker's alias method (Vose's construction) for a Zipf law on 1..n:
// one uniform, one table lookup per sample. For small fields, where it is
// several times faster than rejection-inversion.
class ZipfAliasTable {
 public:
  ZipfAliasTable() = default;
  ZipfAliasTable(int64_t n, double s) : prob_(n), alias_(n) {
    std::vector<double> p(n);
    double total = 0;
    for (int64_t k = n; k >= 1; --k)
      total += std::pow(static_cast<double>(k), -s);
    for (int64_t k = 0; k < n; ++k) {
      p[k] = std::pow(static_cast<double>(k + 1), -s) / total *
             static_cast<double>(n);
    }
    std::vector<uint32_t> small, large;
    for (int64_t k = n - 1; k >= 0; --k)
      (p[k] < 1.0 ? small : large).push_back(static_cast<uint32_t>(k));
    while (!small.empty() && !large.empty()) {
      const uint32_t lo = small.back(), hi = large.back();
      small.pop_back();
      prob_[lo] = p[lo];
      alias_[lo] = hi;
      p[hi] = (p[hi] + p[lo]) - 1.0;
      if (p[hi] < 1.0) {
        large.pop_back();
        small.push_back(hi);
      }
    }
    // What is left has probability 1 (up to rounding).
    for (const std::vector<uint32_t>* rest : {&large, &small}) {
      for (uint32_t k : *rest) {
        prob_[k] = 1.0;
        alias_[k] = k;
      }
    }
  }
  bool empty() const { return prob_.empty(); }
  // `u` uniform in [0, 1); returns a rank in 1..n.
  int64_t Sample(double u) const {
    const double x = u * static_cast<double>(prob_.size());
    int64_t i = static_cast<int64_t>(x);
    if (i >= static_cast<int64_t>(prob_.size()))
      i = static_cast<int64_t>(prob_.size()) - 1;
    return 1 + (x - static_cast<double>(i) < prob_[i] ? i : alias_[i]);
  }

 private:
  std::vector<double> prob_;
  std::vector<uint32_t> alias_;
};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The random words of one row: Philox stream (key, counter {i, 0, row}).
class RowStream {
 public:
  RowStream(const PhiloxRandom::Key& key, uint64_t row)
      : gen_({0u, 0u, static_cast<uint32_t>(row),
              static_cast<uint32_t>(row >> 32)},
             key),
        words_(&gen_) {}
  uint32_t Word() { return words_(); }
  float UniformFloat() { return random::Uint32ToFloat(words_()); }
  double UniformDouble() {
    const uint32_t a = words_();
    return random::Uint64ToDouble(a, words_());
  }
  float Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    float n0;
    const uint32_t a = words_();
    random::BoxMullerFloat(a, words_(), &n0, &spare_);
    has_spare_ = true;
    return n0;
  }

 private:
  PhiloxRandom gen_;
  random::SingleSampleAdapter<PhiloxRandom> words_;
  float spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace

// ---------------------------------------------------------------------------
// Config.

std::array<SyntheticDenseSpec, kSyntheticNumDense>
SyntheticConfig::DefaultDense() {
  // {log_mean, log_stddev, activity_weight, missing_rate}
  return {{{0.8, 1.2, 0.6, 0.40},
           {2.0, 2.0, 0.3, 0.00},
           {1.8, 1.5, 0.5, 0.20},
           {1.5, 1.0, 0.5, 0.20},
           {7.5, 2.0, 0.4, 0.03},
           {3.5, 1.8, 0.6, 0.22},
           {1.5, 1.6, 0.7, 0.04},
           {2.2, 1.0, 0.3, 0.00},
           {3.5, 1.4, 0.6, 0.04},
           {0.3, 0.7, 0.4, 0.40},
           {1.0, 1.1, 0.7, 0.04},
           {0.2, 0.9, 0.5, 0.40},
           {2.0, 1.2, 0.5, 0.20}}};
}

std::array<SyntheticCategoricalSpec, kSyntheticNumCategorical>
SyntheticConfig::DefaultCategorical() {
  // {cardinality, zipf_exponent, missing_rate, effect_scale}
  return {{{1460, 1.10, 0.00, 0.25},    {583, 1.15, 0.00, 0.25},
           {1500000, 1.05, 0.03, 0.30}, {600000, 1.08, 0.03, 0.25},
           {305, 1.20, 0.00, 0.20},     {24, 1.10, 0.12, 0.25},
           {12517, 1.10, 0.00, 0.20},   {633, 1.15, 0.00, 0.10},
           {10, 1.20, 0.00, 0.15},      {93145, 1.08, 0.00, 0.20},
           {5683, 1.10, 0.00, 0.20},    {1200000, 1.05, 0.03, 0.25},
           {3194, 1.10, 0.00, 0.15},    {27, 1.15, 0.00, 0.30},
           {14992, 1.10, 0.00, 0.15},   {1000000, 1.06, 0.03, 0.20},
           {10, 1.20, 0.00, 0.20},      {5652, 1.10, 0.00, 0.15},
           {2173, 1.12, 0.40, 0.10},    {12, 1.20, 0.40, 0.15},
           {800000, 1.06, 0.40, 0.20},  {18, 1.20, 0.40, 0.10},
           {15, 1.20, 0.00, 0.30},      {286181, 1.08, 0.04, 0.20},
           {105, 1.15, 0.40, 0.10},     {142572, 1.08, 0.40, 0.15}}};
}

std::vector<SyntheticInteraction> SyntheticConfig::DefaultInteractions() {
  // {field_a, field_b, rank, scale}, 0-based (C1 is 0).
  return {{0, 1, 4, 0.30},  {5, 13, 4, 0.30},  {4, 7, 4, 0.30},
          {6, 10, 4, 0.25}, {16, 22, 2, 0.30}, {8, 9, 4, 0.25}};
}

absl::Status SyntheticConfig::Validate() const {
  if (!(target_ctr > 0 && target_ctr < 1)) {
    return errors::InvalidArgument(
        "synthetic config: target_ctr must be in (0, 1), got ", target_ctr);
  }
  for (int j = 0; j < kSyntheticNumDense; ++j) {
    const SyntheticDenseSpec& d = dense[j];
    if (!(d.missing_rate >= 0 && d.missing_rate < 1) || !(d.log_stddev >= 0) ||
        !(d.activity_weight >= 0 && d.activity_weight <= 1) ||
        !std::isfinite(d.log_mean)) {
      return errors::InvalidArgument(
          "synthetic config: dense feature I", j + 1,
          " needs missing_rate in [0, 1), log_stddev >= 0, activity_weight in "
          "[0, 1] "
          "and a finite log_mean; got missing_rate ",
          d.missing_rate, ", log_stddev ", d.log_stddev, ", activity_weight ",
          d.activity_weight, ", log_mean ", d.log_mean);
    }
  }
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    const SyntheticCategoricalSpec& c = categorical[f];
    if (c.cardinality < 1 || c.cardinality >= (int64_t{1} << 31)) {
      return errors::InvalidArgument("synthetic config: field C", f + 1,
                                     " cardinality must be in [1, 2^31), got ",
                                     c.cardinality);
    }
    if (!(c.zipf_exponent > 0 && c.zipf_exponent < 10) ||
        !(c.missing_rate >= 0 && c.missing_rate < 1) ||
        !(c.effect_scale >= 0 && c.effect_scale < 100)) {
      return errors::InvalidArgument(
          "synthetic config: field C", f + 1,
          " needs zipf_exponent in (0, 10), missing_rate in [0, 1) and "
          "effect_scale in "
          "[0, 100); got ",
          c.zipf_exponent, ", ", c.missing_rate, ", ", c.effect_scale);
    }
  }
  if (interactions.size() > kMaxInteractions) {
    return errors::InvalidArgument("synthetic config: at most ",
                                   kMaxInteractions, " interactions, got ",
                                   interactions.size());
  }
  for (size_t i = 0; i < interactions.size(); ++i) {
    const SyntheticInteraction& p = interactions[i];
    if (p.field_a < 0 || p.field_a >= kSyntheticNumCategorical ||
        p.field_b < 0 || p.field_b >= kSyntheticNumCategorical ||
        p.field_a == p.field_b || p.rank < 1 ||
        p.rank > kSyntheticMaxInteractionRank ||
        !(p.scale >= 0 && p.scale < 100)) {
      return errors::InvalidArgument(
          "synthetic config: interaction ", i,
          " needs two distinct fields in [0, ", kSyntheticNumCategorical,
          "), rank in [1, ", kSyntheticMaxInteractionRank,
          "] and scale in [0, 100); got fields ", p.field_a, ", ", p.field_b,
          ", rank ", p.rank, ", scale ", p.scale);
    }
  }
  if (dense_hidden_units < 1 || dense_hidden_units > 64) {
    return errors::InvalidArgument(
        "synthetic config: dense_hidden_units must be in [1, 64], got ",
        dense_hidden_units);
  }
  if (!(dense_effect_scale >= 0 && dense_effect_scale < 100)) {
    return errors::InvalidArgument(
        "synthetic config: dense_effect_scale must be in [0, 100), got ",
        dense_effect_scale);
  }
  if (calibration_rows < 100) {
    return errors::InvalidArgument(
        "synthetic config: calibration_rows must be >= 100, got ",
        calibration_rows);
  }
  if (history.max_length < 0 || history.max_length > kSyntheticMaxHistory) {
    return errors::InvalidArgument(
        "synthetic config: history.max_length must be in [0, ",
        kSyntheticMaxHistory, "], got ", history.max_length);
  }
  if (history.item_field < 0 || history.item_field >= kSyntheticNumCategorical) {
    return errors::InvalidArgument(
        "synthetic config: history.item_field must be in [0, ",
        kSyntheticNumCategorical, "), got ", history.item_field);
  }
  if (history.num_categories < 1 || !std::isfinite(history.scale)) {
    return errors::InvalidArgument(
        "synthetic config: history.num_categories must be >= 1 and "
        "history.scale finite, got ",
        history.num_categories, " and ", history.scale);
  }
  return absl::OkStatus();
}

const char* SyntheticSplitName(SyntheticSplit split) {
  return split == SyntheticSplit::kTrain ? "train" : "test";
}

// ---------------------------------------------------------------------------
// Generator.

struct SyntheticGenerator::Impl {
  PhiloxRandom::Key row_key[2];
  PhiloxRandom::Key calibration_key;
  PhiloxRandom::Key params_key;
  uint64_t hash_key[kSyntheticNumCategorical];
  uint64_t category_key = 0;
  ZipfSampler zipf[kSyntheticNumCategorical];
  ZipfAliasTable zipf_alias[kSyntheticNumCategorical];  // small fields only
  double inv_log_card[kSyntheticNumCategorical];
  // First-order effects by rank (index 0: missing), for small fields.
  std::vector<float> effect_table[kSyntheticNumCategorical];
  // Interaction factors: per interaction, per side, rank * (card + 1)
  // floats (row-major by id) for small fields, else empty.
  std::vector<float> factor_table[kMaxInteractions][2];
  std::vector<double> factor_stddev;
  // Dense MLP: hidden x 13 weights, hidden biases, hidden output weights.
  std::vector<float> mlp_w, mlp_b, mlp_u;
  int hidden = 0;

  // The first-order effect, computed from the parameter stream.
  float ComputeEffect(const SyntheticConfig& config, int f,
                      uint32_t rank) const {
    const auto c = PhiloxRandom::Compute(
        {rank, static_cast<uint32_t>(f), kEffectTag, 0}, params_key);
    float n0, n1;
    random::BoxMullerFloat(c[0], c[1], &n0, &n1);
    const double g =
        rank == 0
            ? 1.0
            : 0.7 + 0.6 * std::log(static_cast<double>(rank)) * inv_log_card[f];
    return static_cast<float>(config.categorical[f].effect_scale * g * n0);
  }
  float Effect(const SyntheticConfig& config, int f, uint32_t rank) const {
    if (!effect_table[f].empty()) return effect_table[f][rank];
    return ComputeEffect(config, f, rank);
  }
  // Writes the `rank_k` factor entries of id `rank` of one side of
  // interaction i.
  void ComputeFactor(int i, int f, uint32_t rank, int rank_k,
                     float* out) const {
    for (int chunk = 0; chunk * 4 < rank_k; ++chunk) {
      const auto c = PhiloxRandom::Compute(
          {rank, static_cast<uint32_t>(f),
           kFactorTag + static_cast<uint32_t>(i), static_cast<uint32_t>(chunk)},
          params_key);
      float n[4];
      random::BoxMullerFloat(c[0], c[1], &n[0], &n[1]);
      random::BoxMullerFloat(c[2], c[3], &n[2], &n[3]);
      for (int k = 0; k < 4 && chunk * 4 + k < rank_k; ++k) {
        out[chunk * 4 + k] = static_cast<float>(n[k] * factor_stddev[i]);
      }
    }
  }
};

SyntheticGenerator::SyntheticGenerator(const SyntheticConfig& config,
                                       std::unique_ptr<Impl> impl)
    : config_(config), impl_(std::move(impl)) {}

SyntheticGenerator::~SyntheticGenerator() = default;

absl::StatusOr<std::unique_ptr<SyntheticGenerator>> SyntheticGenerator::Create(
    const SyntheticConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  auto impl = std::make_unique<Impl>();
  const uint64_t seed = config.seed;
  impl->row_key[0] = KeyOf(DeriveKey(seed, kRowsPurpose + 0));
  impl->row_key[1] = KeyOf(DeriveKey(seed, kRowsPurpose + 1));
  impl->calibration_key = KeyOf(DeriveKey(seed, kCalibrationPurpose));
  impl->params_key = KeyOf(DeriveKey(seed, kParamsPurpose));
  impl->category_key = DeriveKey(seed, kCategoryPurpose);
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    const SyntheticCategoricalSpec& c = config.categorical[f];
    impl->hash_key[f] = DeriveKey(seed, kHashPurpose + f);
    impl->zipf[f] = ZipfSampler(c.cardinality, c.zipf_exponent);
    if (c.cardinality <= kMaxAliased) {
      impl->zipf_alias[f] = ZipfAliasTable(c.cardinality, c.zipf_exponent);
    }
    impl->inv_log_card[f] =
        1.0 / std::log(std::max<double>(2.0, c.cardinality));
  }
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    const int64_t card = config.categorical[f].cardinality;
    if (card > kMaxTabulated) continue;
    std::vector<float> table(card + 1);
    for (int64_t r = 0; r <= card; ++r) {
      table[r] = impl->ComputeEffect(config, f, static_cast<uint32_t>(r));
    }
    impl->effect_table[f] = std::move(table);
  }
  for (size_t i = 0; i < config.interactions.size(); ++i) {
    const SyntheticInteraction& p = config.interactions[i];
    impl->factor_stddev.push_back(std::pow(p.scale * p.scale / p.rank, 0.25));
    const int fields[2] = {p.field_a, p.field_b};
    for (int side = 0; side < 2; ++side) {
      const int64_t card = config.categorical[fields[side]].cardinality;
      if (card > kMaxTabulated) continue;
      std::vector<float> table((card + 1) * p.rank);
      for (int64_t r = 0; r <= card; ++r) {
        impl->ComputeFactor(static_cast<int>(i), fields[side],
                            static_cast<uint32_t>(r), p.rank,
                            &table[r * p.rank]);
      }
      impl->factor_table[i][side] = std::move(table);
    }
  }
  // The dense MLP's weights: W ~ N(0, 1.5^2 / 13), b ~ N(0, 0.5^2), u ~ N(0,
  // 1).
  const int hidden = config.dense_hidden_units;
  impl->hidden = hidden;
  std::vector<float> normals;
  for (uint32_t i = 0;
       normals.size() < static_cast<size_t>(hidden * (kSyntheticNumDense + 2));
       ++i) {
    const auto c = PhiloxRandom::Compute({i, 0, kMlpTag, 0}, impl->params_key);
    float n[4];
    random::BoxMullerFloat(c[0], c[1], &n[0], &n[1]);
    random::BoxMullerFloat(c[2], c[3], &n[2], &n[3]);
    normals.insert(normals.end(), n, n + 4);
  }
  size_t next = 0;
  const float w_scale =
      1.5f / std::sqrt(static_cast<float>(kSyntheticNumDense));
  for (int k = 0; k < hidden * kSyntheticNumDense; ++k)
    impl->mlp_w.push_back(normals[next++] * w_scale);
  for (int k = 0; k < hidden; ++k)
    impl->mlp_b.push_back(normals[next++] * 0.5f);
  for (int k = 0; k < hidden; ++k) impl->mlp_u.push_back(normals[next++]);

  std::unique_ptr<SyntheticGenerator> gen(
      new SyntheticGenerator(config, std::move(impl)));

  // Calibrate the bias on a sample from its own stream: bisection on the
  // mean probability, which is increasing in the bias.
  std::vector<double> logits;
  logits.reserve(config.calibration_rows);
  {
    std::vector<SyntheticRow> rows(4096);
    for (int64_t begin = 0; begin < config.calibration_rows; begin += 4096) {
      const int64_t n =
          std::min<int64_t>(4096, config.calibration_rows - begin);
      for (int64_t r = 0; r < n; ++r) {
        // Features only; the bias is not known yet.
        gen->bias_ = 0;
        gen->GenerateOne(gen->impl_->calibration_key,
                         static_cast<uint64_t>(begin + r), &rows[r]);
        logits.push_back(gen->LogitWithoutBias(&rows[r]));
      }
    }
  }
  double lo = -30, hi = 30;
  for (int iter = 0; iter < 100; ++iter) {
    const double mid = 0.5 * (lo + hi);
    double sum = 0;
    for (double l : logits) sum += Sigmoid(mid + l);
    if (sum / static_cast<double>(logits.size()) < config.target_ctr) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  gen->bias_ = 0.5 * (lo + hi);
  return gen;
}

double SyntheticGenerator::LogitWithoutBias(SyntheticRow* row) const {
  const Impl& m = *impl_;
  double first = 0;
  for (int f = 0; f < kSyntheticNumCategorical; ++f)
    first += m.Effect(config_, f, row->rank[f]);
  double pair = 0;
  float va[kSyntheticMaxInteractionRank], vb[kSyntheticMaxInteractionRank];
  for (size_t i = 0; i < config_.interactions.size(); ++i) {
    const SyntheticInteraction& p = config_.interactions[i];
    const uint32_t ra = row->rank[p.field_a], rb = row->rank[p.field_b];
    if (ra == 0 || rb == 0) continue;
    const float* a = va;
    const float* b = vb;
    if (!m.factor_table[i][0].empty()) {
      a = &m.factor_table[i][0][static_cast<size_t>(ra) * p.rank];
    } else {
      m.ComputeFactor(static_cast<int>(i), p.field_a, ra, p.rank, va);
    }
    if (!m.factor_table[i][1].empty()) {
      b = &m.factor_table[i][1][static_cast<size_t>(rb) * p.rank];
    } else {
      m.ComputeFactor(static_cast<int>(i), p.field_b, rb, p.rank, vb);
    }
    double dot = 0;
    for (int k = 0; k < p.rank; ++k) dot += static_cast<double>(a[k]) * b[k];
    pair += dot;
  }
  float x[kSyntheticNumDense];
  for (int j = 0; j < kSyntheticNumDense; ++j) {
    if (!row->has_dense(j)) {
      x[j] = 0;
      continue;
    }
    const SyntheticDenseSpec& d = config_.dense[j];
    const double sd = d.log_stddev > 0 ? d.log_stddev : 1.0;
    const double v =
        (std::log1p(static_cast<double>(row->dense[j])) - d.log_mean) / sd;
    x[j] = static_cast<float>(std::clamp(v, -4.0, 4.0));
  }
  double mlp = 0;
  for (int k = 0; k < m.hidden; ++k) {
    float h = m.mlp_b[k];
    const float* w = &m.mlp_w[k * kSyntheticNumDense];
    for (int j = 0; j < kSyntheticNumDense; ++j) h += w[j] * x[j];
    mlp += m.mlp_u[k] * std::tanh(h);
  }
  mlp *= config_.dense_effect_scale / std::sqrt(static_cast<double>(m.hidden));
  row->first_order = static_cast<float>(first);
  row->pairwise = static_cast<float>(pair);
  row->dense_part = static_cast<float>(mlp);
  double sequence = 0;
  const uint32_t item = row->rank[config_.history.item_field];
  if (row->history_length > 0 && item != 0) {
    const int target = HistoryCategory(item);
    int matches = 0;
    for (uint32_t i = 0; i < row->history_length; ++i) {
      matches += HistoryCategory(row->history_rank[i]) == target ? 1 : 0;
    }
    sequence = config_.history.scale * matches;
  }
  row->sequence_part = static_cast<float>(sequence);
  return first + pair + mlp + sequence;
}

int SyntheticGenerator::HistoryCategory(uint32_t rank) const {
  return static_cast<int>(Permute(rank, impl_->category_key) %
                          static_cast<uint32_t>(config_.history.num_categories));
}

void SyntheticGenerator::GenerateOne(const random::PhiloxRandom::Key& key,
                                     uint64_t row_index,
                                     SyntheticRow* row) const {
  const Impl& m = *impl_;
  RowStream rng(key, row_index);
  *row = SyntheticRow();
  const float activity = rng.Normal();
  for (int j = 0; j < kSyntheticNumDense; ++j) {
    const SyntheticDenseSpec& d = config_.dense[j];
    const float u = rng.UniformFloat();
    const float e = rng.Normal();
    if (u < d.missing_rate) continue;
    const double w = d.activity_weight;
    const double z = w * activity + std::sqrt(1.0 - w * w) * e;
    const double y = std::clamp(d.log_mean + d.log_stddev * z, -40.0, 40.0);
    row->dense[j] =
        std::max<int64_t>(0, static_cast<int64_t>(std::floor(std::exp(y))) - 1);
    row->dense_present |= 1u << j;
  }
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    const float u = rng.UniformFloat();
    if (u < config_.categorical[f].missing_rate) continue;
    const int64_t rank =
        m.zipf_alias[f].empty()
            ? m.zipf[f].Sample([&rng] { return rng.UniformDouble(); })
            : m.zipf_alias[f].Sample(rng.UniformDouble());
    row->rank[f] = static_cast<uint32_t>(rank);
    row->hashed[f] = Permute(static_cast<uint32_t>(rank), m.hash_key[f]);
    row->categorical_present |= 1u << f;
  }
  if (config_.history.max_length > 0) {
    // A stream of its own, so the row's other draws stay as they are.
    const uint64_t hk = DeriveKey(
        (static_cast<uint64_t>(key[1]) << 32) | key[0], kHistoryPurpose);
    RowStream hrng(KeyOf(hk), row_index);
    const int f = config_.history.item_field;
    row->history_length = hrng.Word() % static_cast<uint32_t>(
                                            config_.history.max_length + 1);
    for (uint32_t i = 0; i < row->history_length; ++i) {
      const int64_t rank =
          m.zipf_alias[f].empty()
              ? m.zipf[f].Sample([&hrng] { return hrng.UniformDouble(); })
              : m.zipf_alias[f].Sample(hrng.UniformDouble());
      row->history_rank[i] = static_cast<uint32_t>(rank);
      row->history_hashed[i] = Permute(static_cast<uint32_t>(rank), m.hash_key[f]);
    }
  }
  const double logit = bias_ + LogitWithoutBias(row);
  row->probability = Sigmoid(logit);
  row->label = rng.UniformDouble() < row->probability ? 1.0f : 0.0f;
}

void SyntheticGenerator::Generate(SyntheticSplit split, int64_t begin_row,
                                  int64_t n, SyntheticRow* out) const {
  const PhiloxRandom::Key& key =
      impl_->row_key[split == SyntheticSplit::kTrain ? 0 : 1];
  for (int64_t i = 0; i < n; ++i) {
    GenerateOne(key, static_cast<uint64_t>(begin_row + i), &out[i]);
  }
}

std::vector<SyntheticRow> SyntheticGenerator::GenerateRows(SyntheticSplit split,
                                                           int64_t begin_row,
                                                           int64_t n) const {
  std::vector<SyntheticRow> rows(static_cast<size_t>(std::max<int64_t>(0, n)));
  Generate(split, begin_row, static_cast<int64_t>(rows.size()), rows.data());
  return rows;
}

double SyntheticGenerator::FirstOrderEffect(int field, uint32_t rank) const {
  return impl_->Effect(config_, field, rank);
}

void SyntheticGenerator::AppendHex(uint32_t value, std::string* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char buf[8];
  for (int i = 7; i >= 0; --i) {
    buf[i] = kDigits[value & 0xf];
    value >>= 4;
  }
  out->append(buf, 8);
}

absl::StatusOr<std::vector<SyntheticRow>> GenerateRows(
    const SyntheticConfig& config, SyntheticSplit split, int64_t begin_row,
    int64_t n) {
  if (begin_row < 0 || n < 0) {
    return errors::InvalidArgument(
        "GenerateRows: begin_row and n must be >= 0, got ", begin_row, " and ",
        n);
  }
  ASSIGN_OR_RETURN(auto gen, SyntheticGenerator::Create(config));
  return gen->GenerateRows(split, begin_row, n);
}

// ---------------------------------------------------------------------------
// Output helpers.

void AppendCriteoTsvLine(const SyntheticRow& row, std::string* out,
                         bool with_history) {
  out->push_back(row.label != 0 ? '1' : '0');
  char buf[24];
  for (int j = 0; j < kSyntheticNumDense; ++j) {
    out->push_back('\t');
    if (!row.has_dense(j)) continue;
    // Non-negative: write the digits backwards.
    uint64_t v = static_cast<uint64_t>(row.dense[j]);
    char* p = buf + sizeof(buf);
    do {
      *--p = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    out->append(p, buf + sizeof(buf) - p);
  }
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    out->push_back('\t');
    if (row.has_categorical(f))
      SyntheticGenerator::AppendHex(row.hashed[f], out);
  }
  if (with_history) {
    out->push_back('\t');
    for (uint32_t i = 0; i < row.history_length; ++i) {
      if (i > 0) out->push_back(',');
      SyntheticGenerator::AppendHex(row.history_hashed[i], out);
    }
  }
  out->push_back('\n');
}

BatchSchema SyntheticBatchSchema() {
  BatchSchema schema;
  for (int j = 0; j < kSyntheticNumDense; ++j)
    schema.dense_names.push_back(absl::StrCat("I", j + 1));
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    schema.sparse.push_back({absl::StrCat("C", f + 1), false});
  }
  return schema;
}

Batch RowsToBatch(const SyntheticRow* rows, int64_t n) {
  Batch batch;
  batch.batch_size = n;
  batch.labels = Tensor(DT_FLOAT, TensorShape({n}));
  batch.dense = Tensor(DT_FLOAT, TensorShape({n, kSyntheticNumDense}));
  float* labels = batch.labels.data<float>();
  float* dense = batch.dense.data<float>();
  for (int64_t r = 0; r < n; ++r) {
    labels[r] = rows[r].label;
    for (int j = 0; j < kSyntheticNumDense; ++j) {
      dense[r * kSyntheticNumDense + j] =
          rows[r].has_dense(j)
              // As CriteoParser: double log1p rounded to float.
              ? static_cast<float>(std::log1p(static_cast<double>(
                    std::max<int64_t>(rows[r].dense[j], 0))))
              : 0.0f;
    }
  }
  batch.sparse.reserve(kSyntheticNumCategorical);
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    int64_t nnz = 0;
    for (int64_t r = 0; r < n; ++r) nnz += rows[r].has_categorical(f) ? 1 : 0;
    SparseBatch& sparse = batch.sparse.emplace_back();
    sparse.ids = Tensor(DT_INT64, TensorShape({nnz}));
    sparse.row_splits = Tensor(DT_INT64, TensorShape({n + 1}));
    int64_t* ids = sparse.ids.data<int64_t>();
    int64_t* splits = sparse.row_splits.data<int64_t>();
    int64_t k = 0;
    splits[0] = 0;
    for (int64_t r = 0; r < n; ++r) {
      if (rows[r].has_categorical(f))
        ids[k++] = CriteoHexId(f, rows[r].hashed[f]);
      splits[r + 1] = k;
    }
  }
  return batch;
}

BatchSchema SyntheticBatchSchemaWithHistory() {
  BatchSchema schema = SyntheticBatchSchema();
  schema.sparse.push_back({"H1", false});
  return schema;
}

Batch RowsToBatchWithHistory(const SyntheticRow* rows, int64_t n,
                             int item_field) {
  Batch batch = RowsToBatch(rows, n);
  int64_t nnz = 0;
  for (int64_t r = 0; r < n; ++r) nnz += rows[r].history_length;
  SparseBatch& sparse = batch.sparse.emplace_back();
  sparse.ids = Tensor(DT_INT64, TensorShape({nnz}));
  sparse.row_splits = Tensor(DT_INT64, TensorShape({n + 1}));
  int64_t* ids = sparse.ids.data<int64_t>();
  int64_t* splits = sparse.row_splits.data<int64_t>();
  int64_t k = 0;
  splits[0] = 0;
  for (int64_t r = 0; r < n; ++r) {
    for (uint32_t i = 0; i < rows[r].history_length; ++i) {
      ids[k++] = CriteoHexId(item_field, rows[r].history_hashed[i]);
    }
    splits[r + 1] = k;
  }
  return batch;
}

double ExactAuc(const std::vector<float>& labels,
                const std::vector<double>& scores) {
  const size_t n = std::min(labels.size(), scores.size());
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  double positives = 0, rank_sum = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    double group_pos = 0;
    while (j < n && scores[order[j]] == scores[order[i]]) {
      group_pos += labels[order[j]] != 0 ? 1 : 0;
      ++j;
    }
    // Ranks i+1 .. j share their average.
    const double avg_rank =
        0.5 * (static_cast<double>(i + 1) + static_cast<double>(j));
    rank_sum += group_pos * avg_rank;
    positives += group_pos;
    i = j;
  }
  const double negatives = static_cast<double>(n) - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

double MeanLogLoss(const std::vector<float>& labels,
                   const std::vector<double>& probabilities) {
  const size_t n = std::min(labels.size(), probabilities.size());
  if (n == 0) return 0;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double p = std::clamp(probabilities[i], 1e-15, 1 - 1e-15);
    sum -= labels[i] != 0 ? std::log(p) : std::log1p(-p);
  }
  return sum / static_cast<double>(n);
}

}  // namespace recflow::data
