// Writes a synthetic dataset (recflow/data/synthetic.h) to a directory, as
// `recflow gen-data` does:
//
//   DIR/train-00000-of-0000K.tsv ... train-0000(K-1)-of-0000K.tsv
//   DIR/test-00000-of-0000T.tsv ...  (T = min(K, test_rows); none if 0)
//   DIR/dataset.json                 settings, schema, cardinalities, CTRs,
//                                    the oracle's AUC and logloss on test
//
// (.tfrecord instead of .tsv for SyntheticFormat::kTfRecord.) With
// config.history.max_length > 0 every TSV line ends with the history column
// H1 (AppendCriteoTsvLine's with_history) and dataset.json records the
// history settings; the TFRecord format cannot carry histories
// (Unimplemented). File i of a
// split of n rows holds rows [i*n/K, (i+1)*n/K). docs/data.md gives the line
// and record layouts and the JSON fields.
//
// Output is byte-identical for the same options whatever num_threads is.
// Every file is written under a temporary name and renamed into place when
// complete; dataset.json is written last (atomically), so its presence
// means the dataset is complete.
//
// WriteSyntheticDataset is thread-compatible: do not run two into the same
// directory at once.

#ifndef RECFLOW_DATA_SYNTHETIC_WRITER_H_
#define RECFLOW_DATA_SYNTHETIC_WRITER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/data/synthetic.h"

namespace recflow::data {

enum class SyntheticFormat { kCriteoTsv, kTfRecord };

// "criteo" / "tfrecord" and back (InvalidArgument listing the choices).
const char* SyntheticFormatName(SyntheticFormat format);
absl::StatusOr<SyntheticFormat> ParseSyntheticFormat(absl::string_view name);
// False when the format's writer is not built in (TFRecord needs
// recflow/core/record_io and the tf.train.Example protos).
bool SyntheticFormatAvailable(SyntheticFormat format);

// "train-00003-of-00008.tsv".
std::string SyntheticFileName(SyntheticSplit split, int index, int num_files,
                              SyntheticFormat format);

struct SyntheticWriteOptions {
  SyntheticConfig config;
  int64_t train_rows = 0;  // >= 1
  int64_t test_rows = 0;   // >= 0
  int num_files = 1;       // train files, in [1, min(train_rows, 99999)]
  SyntheticFormat format = SyntheticFormat::kCriteoTsv;
  std::string out_dir;  // created (with parents) if missing
  int num_threads = 0;  // 0: NumSchedulableCPUs()
  Env* env = nullptr;   // nullptr: Env::Default()
  // Called on the calling thread after each chunk of rows (~65K) with the
  // rows written so far over both splits and their total.
  std::function<void(int64_t rows_done, int64_t rows_total)> progress;
};

struct SyntheticSplitSummary {
  int64_t rows = 0;
  int64_t positives = 0;
  double ctr = 0;                  // positives / rows
  double mean_probability = 0;     // mean ground-truth probability
  int64_t bytes = 0;               // over all files of the split
  std::vector<std::string> files;  // names within out_dir
  // Distinct ids seen per categorical field, and observed missing rates.
  std::array<int64_t, kSyntheticNumCategorical> distinct_ids{};
  std::array<double, kSyntheticNumCategorical> categorical_missing{};
  std::array<double, kSyntheticNumDense> dense_missing{};
};

struct SyntheticDatasetSummary {
  SyntheticSplitSummary train, test;
  double bias = 0;
  // On the test split (0 when test_rows == 0): the true probabilities'
  // AUC and mean logloss, the AUC of the ground truth's first-order part
  // alone (bias + first-order effects), and the logloss of a constant
  // prediction (the test CTR).
  double oracle_auc = 0;
  double oracle_logloss = 0;
  double first_order_auc = 0;
  double constant_logloss = 0;
  std::string json;  // the contents of dataset.json
};

absl::StatusOr<SyntheticDatasetSummary> WriteSyntheticDataset(
    const SyntheticWriteOptions& options);

}  // namespace recflow::data

#endif  // RECFLOW_DATA_SYNTHETIC_WRITER_H_
