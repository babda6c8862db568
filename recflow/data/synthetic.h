// Synthetic click logs: a deterministic Criteo-like dataset drawn from a
// hidden ground-truth model, so that models trained on it can be compared
// with the best possible predictor (the "oracle": the true probabilities).
// docs/data.md describes the generator, its ground truth and the files that
// `recflow gen-data` writes.
//
// Schema (Criteo's): a binary label, 13 dense integer features I1..I13
// (heavy-tailed counts) and 26 categorical fields C1..C26 whose values are
// written as 8 hex digits. Any feature may be missing.
//
// Every row is a pure function of (config, split, row index): row r of a
// split draws its random numbers from its own Philox-4x32-10 stream (key
// from the seed and the split, counter words 2..3 = r), and the ground-truth
// parameters (per-id effects, interaction factors, the dense MLP) are pure
// functions of (seed, field, id). So any range of rows can be generated
// directly, in any order, on any number of threads, with identical results:
// generating rows [a, b) equals the slice [a, b) of generating [0, n).
//
// Ground truth, for a row with categorical id ranks r_f (1 = the most
// frequent id of field f, 0 = missing) and dense counts d_j:
//   logit = bias
//         + sum_f w_f(r_f)                          first-order effects
//         + sum_{(a,b)} <v_a(r_a), v_b(r_b)>          low-rank pairwise terms
//         + dense_scale * MLP(x),  x_j = (log1p(d_j) - mu_j) / sigma_j
//   label ~ Bernoulli(sigmoid(logit))
// with w_f(r) ~ N(0, (effect_scale_f * g(r))^2), g growing from 0.7 for the
// top id to 1.3 for the rarest (rare ids have larger effects); w_f(0) is the
// field's "missing" effect; interaction terms are 0 when either side is
// missing; x_j = 0 when d_j is missing. The bias is calibrated by bisection
// on a sample so that the mean probability is config.target_ctr. The label
// depends only on the observed features, so the true probability is the
// Bayes-optimal prediction.
//
// Thread-safety: a SyntheticGenerator is immutable after Create(); all its
// const methods may be called from any number of threads.

#ifndef RECFLOW_DATA_SYNTHETIC_H_
#define RECFLOW_DATA_SYNTHETIC_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/core/philox.h"
#include "recflow/data/batch.h"

namespace recflow::data {

inline constexpr int kSyntheticNumDense = 13;
inline constexpr int kSyntheticNumCategorical = 26;
// Interaction factors have at most this rank.
inline constexpr int kSyntheticMaxInteractionRank = 8;

// Dense feature j: d = max(0, floor(exp(log_mean + log_stddev * z)) - 1)
// with z = activity_weight * a + sqrt(1 - activity_weight^2) * e, where a is
// a per-row latent "activity" shared by all dense features (so they are
// correlated) and e is independent noise; both standard normal.
struct SyntheticDenseSpec {
  double log_mean = 1.0;
  double log_stddev = 1.0;
  double activity_weight = 0.5;  // in [0, 1]
  double missing_rate = 0.0;     // in [0, 1)
};

// Categorical field: ids of rank 1..cardinality drawn with probability
// proportional to rank^-zipf_exponent.
struct SyntheticCategoricalSpec {
  int64_t cardinality = 1000;  // in [1, 2^31)
  double zipf_exponent = 1.1;  // > 0
  double missing_rate = 0.0;   // in [0, 1)
  double effect_scale = 0.2;   // stddev of the first-order effects, >= 0
};

// A pairwise term <v_a(r_a), v_b(r_b)> between two categorical fields
// (0-based indices), with factor vectors of `rank` entries each drawn from
// N(0, s^2) where s = (scale^2 / rank)^(1/4), so the term has stddev
// `scale` (when neither side is missing).
struct SyntheticInteraction {
  int field_a = 0;
  int field_b = 1;
  int rank = 4;  // in [1, kSyntheticMaxInteractionRank]
  double scale = 0.3;
};

// Optional behaviour sequences (off by default: max_length 0 leaves every
// row, file and batch exactly as without it). Each row gets a history of
// L ~ uniform{0..max_length} items of categorical field `item_field` (the
// "candidate item", C1 by default), drawn from that field's Zipf law on a
// stream of their own (so the other features are unchanged); every rank r
// of the field has a hidden category Permute(r) % num_categories, and
//   logit += scale * #(history items in the category of the row's item)
// (0 when the item is missing). Attention over the history (DIN) can weigh
// each history item by its match with the candidate; sum pooling cannot.
// The TSV writer (AppendCriteoTsvLine with with_history, `recflow gen-data
// --history N`) writes them as a trailing column H1; RowsToBatchWithHistory
// gives the same batch in memory. The TFRecord writer does not write them.
inline constexpr int kSyntheticMaxHistory = 32;
struct SyntheticHistorySpec {
  int max_length = 0;      // in [0, kSyntheticMaxHistory]; 0: no histories
  int item_field = 0;      // 0-based categorical field of the items
  int num_categories = 8;  // >= 1
  double scale = 0.5;      // finite
};

struct SyntheticConfig {
  uint64_t seed = 1;
  double target_ctr = 0.25;  // in (0, 1)
  // Criteo-like defaults (the values are listed in docs/data.md).
  std::array<SyntheticDenseSpec, kSyntheticNumDense> dense = DefaultDense();
  std::array<SyntheticCategoricalSpec, kSyntheticNumCategorical> categorical =
      DefaultCategorical();
  std::vector<SyntheticInteraction> interactions =
      DefaultInteractions();   // at most 64
  int dense_hidden_units = 8;  // of the ground truth's dense MLP, in [1, 64]
  double dense_effect_scale = 1.5;   // output scale of the dense MLP, >= 0
  int64_t calibration_rows = 50000;  // sample size for the bias bisection
  SyntheticHistorySpec history;      // off by default

  // InvalidArgument naming the first bad setting.
  absl::Status Validate() const;

  static std::array<SyntheticDenseSpec, kSyntheticNumDense> DefaultDense();
  static std::array<SyntheticCategoricalSpec, kSyntheticNumCategorical>
  DefaultCategorical();
  static std::vector<SyntheticInteraction> DefaultInteractions();
};

enum class SyntheticSplit { kTrain = 0, kTest = 1 };
const char* SyntheticSplitName(SyntheticSplit split);  // "train", "test"

// One generated row with its ground truth.
struct SyntheticRow {
  float label = 0;                         // 0 or 1
  uint32_t dense_present = 0;              // bit j set when dense[j] is present
  uint32_t categorical_present = 0;        // bit f set when field f is present
  int64_t dense[kSyntheticNumDense] = {};  // 0 when missing
  // 1-based frequency rank of the id (1 = most frequent); 0 when missing.
  uint32_t rank[kSyntheticNumCategorical] = {};
  // The value written to files (8 hex digits): a keyed bijection of the
  // rank, different per field and seed; 0 when missing.
  uint32_t hashed[kSyntheticNumCategorical] = {};

  // The history (config.history.max_length > 0): ranks and written values
  // of items of field config.history.item_field, oldest first.
  uint32_t history_length = 0;
  uint32_t history_rank[kSyntheticMaxHistory] = {};
  uint32_t history_hashed[kSyntheticMaxHistory] = {};

  // Ground truth: probability = sigmoid(bias + first_order + pairwise +
  // dense_part + sequence_part).
  double probability = 0;
  float first_order = 0;
  float pairwise = 0;
  float dense_part = 0;
  float sequence_part = 0;

  bool has_dense(int j) const { return (dense_present >> j) & 1u; }
  bool has_categorical(int f) const { return (categorical_present >> f) & 1u; }
};

class SyntheticGenerator {
 public:
  // Validates the config, draws the ground-truth parameters and calibrates
  // the bias (cost: config.calibration_rows rows, ~50 ms by default).
  static absl::StatusOr<std::unique_ptr<SyntheticGenerator>> Create(
      const SyntheticConfig& config);
  ~SyntheticGenerator();

  const SyntheticConfig& config() const { return config_; }
  // The calibrated intercept of the ground truth.
  double bias() const { return bias_; }

  // Writes rows [begin_row, begin_row + n) of `split` to out[0..n).
  // REQUIRES: begin_row >= 0, n >= 0, begin_row + n does not overflow.
  void Generate(SyntheticSplit split, int64_t begin_row, int64_t n,
                SyntheticRow* out) const;
  std::vector<SyntheticRow> GenerateRows(SyntheticSplit split,
                                         int64_t begin_row, int64_t n) const;

  // The ground truth's first-order effect of id `rank` of field f (rank 0:
  // the missing effect). For tests and docs.
  double FirstOrderEffect(int field, uint32_t rank) const;
  // The hidden category of rank r of config.history.item_field.
  int HistoryCategory(uint32_t rank) const;

  // The 8-hex-digit text of a value: "0001abcd" (lower case), as Criteo.
  static void AppendHex(uint32_t value, std::string* out);

  // Implementation details follow.
  struct Impl;

 private:
  SyntheticGenerator(const SyntheticConfig& config, std::unique_ptr<Impl> impl);
  // Draws the features of row `row_index` of the stream keyed `key`, then
  // its ground truth and label.
  void GenerateOne(const random::PhiloxRandom::Key& key, uint64_t row_index,
                   SyntheticRow* row) const;
  // Fills row->first_order, pairwise, dense_part; returns their sum.
  double LogitWithoutBias(SyntheticRow* row) const;
  SyntheticConfig config_;
  std::unique_ptr<Impl> impl_;
  double bias_ = 0;
};

// Convenience for tests and benchmarks: Create + GenerateRows.
absl::StatusOr<std::vector<SyntheticRow>> GenerateRows(
    const SyntheticConfig& config, SyntheticSplit split, int64_t begin_row,
    int64_t n);

// The rows as one batch in the layout of recflow/data/batch.h, exactly as
// CriteoParser (text_parsers.h) with default options parses their TSV lines:
// labels, dense [B, 13] = log1p(max(count, 0)) (0 when missing), and sparse
// features C1..C26 with one id per present value, CriteoHexId(field, the
// 32-bit number the hex text denotes), none when missing.
BatchSchema SyntheticBatchSchema();
Batch RowsToBatch(const SyntheticRow* rows, int64_t n);
// The same plus a 27th sparse feature "H1": each row's history, ids
// CriteoHexId(item_field, history_hashed[i]) (the id space of the item
// field's own ids), oldest first; an empty history is an empty row.
BatchSchema SyntheticBatchSchemaWithHistory();
Batch RowsToBatchWithHistory(const SyntheticRow* rows, int64_t n,
                             int item_field);

// Appends the row as one Criteo TSV line: label, I1..I13, C1..C26 separated
// by tabs, empty fields for missing values, '\n' at the end. With
// with_history, one more column H1 after C26: the history's written values
// (8 hex digits each) separated by ',', oldest first, empty for an empty
// history; CriteoParser with sequence_fields = {item_field} parses it into
// exactly RowsToBatchWithHistory's batch.
void AppendCriteoTsvLine(const SyntheticRow& row, std::string* out,
                         bool with_history = false);

// Exact ROC AUC of `scores` for binary `labels` (ties count one half: the
// Mann-Whitney statistic with average ranks), and mean log loss (with
// probabilities clipped to [1e-15, 1 - 1e-15]). AUC is 0.5 when one class
// is absent.
double ExactAuc(const std::vector<float>& labels,
                const std::vector<double>& scores);
double MeanLogLoss(const std::vector<float>& labels,
                   const std::vector<double>& probabilities);

}  // namespace recflow::data

#endif  // RECFLOW_DATA_SYNTHETIC_H_
