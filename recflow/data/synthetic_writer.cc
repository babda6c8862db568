#include "recflow/data/synthetic_writer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recflow/core/json_writer.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/data/synthetic_tfrecord.h"

namespace recflow::data {
namespace {

// Rows per unit of parallel work, and units per chunk (what is generated
// in memory before it is written).
constexpr int64_t kBlockRows = 2048;
constexpr int64_t kChunkBlocks = 32;
constexpr int kMaxFiles = 99999;

// A bitmap that threads set bits in concurrently (relaxed atomics: only
// the final count is read, after the threads have joined).
class AtomicBitmap {
 public:
  explicit AtomicBitmap(int64_t bits)
      : size_((bits + 63) / 64), words_(new std::atomic<uint64_t>[size_]) {
    for (int64_t i = 0; i < size_; ++i)
      words_[i].store(0, std::memory_order_relaxed);
  }
  void Set(uint64_t i) {
    words_[i >> 6].fetch_or(uint64_t{1} << (i & 63), std::memory_order_relaxed);
  }
  int64_t Count() const {
    int64_t n = 0;
    for (int64_t i = 0; i < size_; ++i) {
      n += __builtin_popcountll(words_[i].load(std::memory_order_relaxed));
    }
    return n;
  }

 private:
  int64_t size_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
};

// What one block of rows produces.
struct BlockResult {
  std::string bytes;                 // TSV text
  std::vector<std::string> records;  // serialized tf.train.Example
  int64_t positives = 0;
  double probability_sum = 0;
  int64_t categorical_missing[kSyntheticNumCategorical] = {};
  int64_t dense_missing[kSyntheticNumDense] = {};
};

// Ground truth collected on the test split.
struct TestTruth {
  std::vector<float> labels;
  std::vector<double> probability;
  std::vector<double> first_order_score;
};

class SplitWriter {
 public:
  SplitWriter(const SyntheticGenerator& gen,
              const SyntheticWriteOptions& options, Env* env, ThreadPool* pool,
              int64_t* rows_done, int64_t rows_total)
      : gen_(gen),
        options_(options),
        env_(env),
        pool_(pool),
        rows_done_(rows_done),
        rows_total_(rows_total) {}

  absl::Status Write(SyntheticSplit split, int64_t rows, int num_files,
                     SyntheticSplitSummary* summary, TestTruth* truth) {
    std::vector<std::unique_ptr<AtomicBitmap>> seen;
    for (int f = 0; f < kSyntheticNumCategorical; ++f) {
      seen.push_back(std::make_unique<AtomicBitmap>(
          gen_.config().categorical[f].cardinality + 1));
    }
    if (truth != nullptr) {
      truth->labels.resize(rows);
      truth->probability.resize(rows);
      truth->first_order_score.resize(rows);
    }
    int64_t categorical_missing[kSyntheticNumCategorical] = {};
    int64_t dense_missing[kSyntheticNumDense] = {};
    double probability_sum = 0;
    summary->rows = rows;
    for (int i = 0; i < num_files; ++i) {
      const int64_t lo =
          rows / num_files * i + rows % num_files * i / num_files;
      const int64_t hi =
          rows / num_files * (i + 1) + rows % num_files * (i + 1) / num_files;
      const std::string name =
          SyntheticFileName(split, i, num_files, options_.format);
      const std::string path = JoinPath(options_.out_dir, name);
      const std::string tmp =
          JoinPath(options_.out_dir, absl::StrCat(".", name, ".tmp"));
      absl::Status s =
          WriteFile(split, lo, hi, tmp, seen, truth, summary,
                    categorical_missing, dense_missing, &probability_sum);
      if (s.ok()) s = env_->RenameFile(tmp, path);
      if (!s.ok()) {
        env_->DeleteFile(tmp).IgnoreError();
        return s;
      }
      summary->files.push_back(name);
    }
    const double n = static_cast<double>(std::max<int64_t>(rows, 1));
    summary->ctr = static_cast<double>(summary->positives) / n;
    summary->mean_probability = probability_sum / n;
    for (int f = 0; f < kSyntheticNumCategorical; ++f) {
      // Bit 0 (rank 0) is never set: ranks start at 1.
      summary->distinct_ids[f] = seen[f]->Count();
      summary->categorical_missing[f] =
          static_cast<double>(categorical_missing[f]) / n;
    }
    for (int j = 0; j < kSyntheticNumDense; ++j) {
      summary->dense_missing[j] = static_cast<double>(dense_missing[j]) / n;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status WriteFile(SyntheticSplit split, int64_t lo, int64_t hi,
                         const std::string& tmp,
                         std::vector<std::unique_ptr<AtomicBitmap>>& seen,
                         TestTruth* truth, SyntheticSplitSummary* summary,
                         int64_t* categorical_missing, int64_t* dense_missing,
                         double* probability_sum) {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                     env_->NewWritableFile(tmp));
    std::unique_ptr<SyntheticRecordSink> records;
    if (options_.format == SyntheticFormat::kTfRecord) {
      ASSIGN_OR_RETURN(records, NewTfRecordSink(file.get()));
    }
    const int64_t chunk_rows = kBlockRows * kChunkBlocks;
    for (int64_t chunk = lo; chunk < hi; chunk += chunk_rows) {
      const int64_t chunk_end = std::min(hi, chunk + chunk_rows);
      const int64_t num_blocks =
          (chunk_end - chunk + kBlockRows - 1) / kBlockRows;
      std::vector<BlockResult> results(num_blocks);
      const bool with_history = gen_.config().history.max_length > 0;
      auto work = [&](int64_t b0, int64_t b1) {
        std::vector<SyntheticRow> rows(kBlockRows);
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t begin = chunk + b * kBlockRows;
          const int64_t n = std::min(kBlockRows, chunk_end - begin);
          gen_.Generate(split, begin, n, rows.data());
          BlockResult& out = results[b];
          if (options_.format == SyntheticFormat::kCriteoTsv) {
            out.bytes.reserve(n * 300);
          } else {
            out.records.reserve(n);
          }
          for (int64_t r = 0; r < n; ++r) {
            const SyntheticRow& row = rows[r];
            if (options_.format == SyntheticFormat::kCriteoTsv) {
              AppendCriteoTsvLine(row, &out.bytes, with_history);
            } else {
              out.records.push_back(SerializeSyntheticExample(row));
            }
            out.positives += row.label != 0 ? 1 : 0;
            out.probability_sum += row.probability;
            for (int f = 0; f < kSyntheticNumCategorical; ++f) {
              if (row.has_categorical(f)) {
                seen[f]->Set(row.rank[f]);
              } else {
                ++out.categorical_missing[f];
              }
            }
            for (int j = 0; j < kSyntheticNumDense; ++j) {
              if (!row.has_dense(j)) ++out.dense_missing[j];
            }
            if (truth != nullptr) {
              const int64_t at = begin + r;
              truth->labels[at] = row.label;
              truth->probability[at] = row.probability;
              truth->first_order_score[at] = gen_.bias() + row.first_order;
            }
          }
        }
      };
      if (pool_ != nullptr) {
        pool_->ParallelFor(num_blocks, kBlockRows * 3000, work);
      } else {
        work(0, num_blocks);
      }
      for (BlockResult& block : results) {
        if (options_.format == SyntheticFormat::kCriteoTsv) {
          RETURN_IF_ERROR(file->Append(block.bytes));
          summary->bytes += static_cast<int64_t>(block.bytes.size());
        } else {
          for (const std::string& record : block.records) {
            RETURN_IF_ERROR(records->Write(record));
          }
        }
        summary->positives += block.positives;
        *probability_sum += block.probability_sum;
        for (int f = 0; f < kSyntheticNumCategorical; ++f) {
          categorical_missing[f] += block.categorical_missing[f];
        }
        for (int j = 0; j < kSyntheticNumDense; ++j)
          dense_missing[j] += block.dense_missing[j];
      }
      *rows_done_ += chunk_end - chunk;
      if (options_.progress) options_.progress(*rows_done_, rows_total_);
    }
    if (records != nullptr) {
      RETURN_IF_ERROR(records->Flush());
      summary->bytes += records->bytes_written();
    }
    RETURN_IF_ERROR(file->Close());
    return absl::OkStatus();
  }

  const SyntheticGenerator& gen_;
  const SyntheticWriteOptions& options_;
  Env* env_;
  ThreadPool* pool_;  // Not owned; may be null.
  int64_t* rows_done_;
  int64_t rows_total_;
};

// dataset.json: a summary for people and tools. Numbers with 10
// significant digits (enough for the precision that matters here); a
// non-finite one, or a test metric without test rows, is null.
std::string BuildJson(const SyntheticWriteOptions& o,
                      const SyntheticGenerator& gen,
                      const SyntheticDatasetSummary& s) {
  using L = JsonWriter::Layout;
  const SyntheticConfig& c = o.config;
  const bool tsv = o.format == SyntheticFormat::kCriteoTsv;
  const bool has_test = s.test.rows > 0;
  std::string j;
  JsonWriter w(&j);
  auto num = [&](double v) {
    if (std::isfinite(v)) {
      w.Double(v, 10);
    } else {
      w.Null();
    }
  };
  auto metric = [&](double v) {
    if (has_test) {
      num(v);
    } else {
      w.Null();
    }
  };
  auto field = [](const char* prefix, int zero_based) {
    return absl::StrCat(prefix, zero_based + 1);
  };
  w.BeginObject(L::kMultiline);
  w.Key("name").String("recflow-synthetic-criteo");
  w.Key("format").String(SyntheticFormatName(o.format));

  w.Key("generator").BeginObject(L::kMultiline);
  w.Key("version").Int(1);
  w.Key("seed").Uint(c.seed);
  w.Key("target_ctr");
  num(c.target_ctr);
  w.Key("calibration_rows").Int(c.calibration_rows);
  w.Key("dense_hidden_units").Int(c.dense_hidden_units);
  w.Key("dense_effect_scale");
  num(c.dense_effect_scale);
  w.Key("interactions").BeginArray(L::kMultiline);
  for (const SyntheticInteraction& p : c.interactions) {
    w.BeginObject().Key("fields").BeginArray();
    w.String(field("C", p.field_a)).String(field("C", p.field_b)).EndArray();
    w.Key("rank").Int(p.rank).Key("scale");
    num(p.scale);
    w.EndObject();
  }
  w.EndArray();
  const SyntheticHistorySpec& h = c.history;
  if (h.max_length > 0) {
    w.Key("history").BeginObject();
    w.Key("max_length").Int(h.max_length);
    w.Key("item_field").String(field("C", h.item_field));
    w.Key("num_categories").Int(h.num_categories);
    w.Key("scale");
    num(h.scale);
    w.EndObject();
  }
  w.EndObject();

  w.Key("schema").BeginObject(L::kMultiline);
  w.Key("label").BeginObject().Key("name").String("label");
  w.Key("type").String(tsv ? "int" : "float").EndObject();
  w.Key("dense").BeginArray(L::kMultiline);
  for (int d = 0; d < kSyntheticNumDense; ++d) {
    const SyntheticDenseSpec& spec = c.dense[d];
    w.BeginObject().Key("name").String(field("I", d)).Key("type").String("int64");
    w.Key("missing_rate");
    num(spec.missing_rate);
    w.Key("log_mean");
    num(spec.log_mean);
    w.Key("log_stddev");
    num(spec.log_stddev);
    w.Key("activity_weight");
    num(spec.activity_weight);
    w.Key("train_missing");
    num(s.train.dense_missing[d]);
    w.EndObject();
  }
  w.EndArray();
  w.Key("categorical").BeginArray(L::kMultiline);
  for (int f = 0; f < kSyntheticNumCategorical; ++f) {
    const SyntheticCategoricalSpec& spec = c.categorical[f];
    w.BeginObject().Key("name").String(field("C", f));
    w.Key("type").String(tsv ? "hex8" : "bytes");
    w.Key("cardinality").Int(spec.cardinality);
    w.Key("zipf_exponent");
    num(spec.zipf_exponent);
    w.Key("missing_rate");
    num(spec.missing_rate);
    w.Key("effect_scale");
    num(spec.effect_scale);
    w.Key("train_distinct").Int(s.train.distinct_ids[f]);
    w.Key("test_distinct").Int(s.test.distinct_ids[f]);
    w.Key("train_missing");
    num(s.train.categorical_missing[f]);
    w.EndObject();
  }
  w.EndArray();
  if (h.max_length > 0) {
    w.Key("sequences").BeginArray(L::kMultiline).BeginObject();
    w.Key("name").String("H1").Key("items_of").String(field("C", h.item_field));
    w.Key("separator").String(",").Key("max_length").Int(h.max_length);
    w.EndObject().EndArray();
  }
  w.EndObject();

  w.Key("splits").BeginObject(L::kMultiline);
  auto split = [&](const char* name, const SyntheticSplitSummary& sp) {
    w.Key(name).BeginObject();
    w.Key("rows").Int(sp.rows).Key("positives").Int(sp.positives).Key("ctr");
    num(sp.ctr);
    w.Key("mean_probability");
    num(sp.mean_probability);
    w.Key("bytes").Int(sp.bytes).Key("files").BeginArray();
    for (const std::string& file : sp.files) w.String(file);
    w.EndArray().EndObject();
  };
  split("train", s.train);
  split("test", s.test);
  w.EndObject();

  w.Key("ground_truth").BeginObject(L::kMultiline);
  w.Key("bias");
  num(gen.bias());
  w.Key("evaluated_on").String("test");
  w.Key("oracle").BeginObject().Key("auc");
  metric(s.oracle_auc);
  w.Key("logloss");
  metric(s.oracle_logloss);
  w.EndObject();
  w.Key("first_order_only").BeginObject().Key("auc");
  metric(s.first_order_auc);
  w.EndObject();
  w.Key("constant_ctr").BeginObject().Key("auc");
  metric(0.5);
  w.Key("logloss");
  metric(s.constant_logloss);
  w.EndObject();
  w.EndObject();
  w.EndObject();
  j += "\n";
  return j;
}

}  // namespace

const char* SyntheticFormatName(SyntheticFormat format) {
  return format == SyntheticFormat::kCriteoTsv ? "criteo" : "tfrecord";
}

absl::StatusOr<SyntheticFormat> ParseSyntheticFormat(absl::string_view name) {
  if (name == "criteo" || name == "tsv") return SyntheticFormat::kCriteoTsv;
  if (name == "tfrecord") return SyntheticFormat::kTfRecord;
  return errors::InvalidArgument("unknown format '", name,
                                 "'; choose criteo or tfrecord");
}

bool SyntheticFormatAvailable(SyntheticFormat format) {
  return format == SyntheticFormat::kCriteoTsv || TfRecordSinkAvailable();
}

std::string SyntheticFileName(SyntheticSplit split, int index, int num_files,
                              SyntheticFormat format) {
  return absl::StrFormat(
      "%s-%05d-of-%05d.%s", SyntheticSplitName(split), index, num_files,
      format == SyntheticFormat::kCriteoTsv ? "tsv" : "tfrecord");
}

absl::StatusOr<SyntheticDatasetSummary> WriteSyntheticDataset(
    const SyntheticWriteOptions& options) {
  if (options.train_rows < 1) {
    return errors::InvalidArgument(
        "synthetic dataset: train_rows must be >= 1, got ", options.train_rows);
  }
  if (options.test_rows < 0) {
    return errors::InvalidArgument(
        "synthetic dataset: test_rows must be >= 0, got ", options.test_rows);
  }
  if (options.num_files < 1 || options.num_files > kMaxFiles ||
      options.num_files > options.train_rows) {
    return errors::InvalidArgument(
        "synthetic dataset: num_files must be in [1, min(train_rows, ",
        kMaxFiles, ")], got ", options.num_files, " for ", options.train_rows,
        " train rows");
  }
  if (options.out_dir.empty()) {
    return errors::InvalidArgument("synthetic dataset: no output directory");
  }
  if (!SyntheticFormatAvailable(options.format)) {
    return errors::Unimplemented("synthetic dataset: the ",
                                 SyntheticFormatName(options.format),
                                 " format is not available in this build");
  }
  if (options.config.history.max_length > 0 &&
      options.format != SyntheticFormat::kCriteoTsv) {
    return errors::Unimplemented(
        "synthetic dataset: histories (history.max_length ",
        options.config.history.max_length,
        ") are written only in the criteo format, not ",
        SyntheticFormatName(options.format));
  }
  Env* env = options.env != nullptr ? options.env : Env::Default();
  RETURN_IF_ERROR(env->RecursivelyCreateDir(options.out_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<SyntheticGenerator> gen,
                   SyntheticGenerator::Create(options.config));

  RETURN_IF_ERROR(ValidateThreadCount("gen-data --threads", options.num_threads,
                                      /*min_threads=*/0));
  const int threads =
      options.num_threads > 0 ? options.num_threads : NumSchedulableCPUs();
  std::unique_ptr<ThreadPool> pool;
  if (threads > 1) {
    ASSIGN_OR_RETURN(pool, ThreadPool::Create("gen_data", threads));
  }

  SyntheticDatasetSummary summary;
  summary.bias = gen->bias();
  int64_t rows_done = 0;
  SplitWriter writer(*gen, options, env, pool.get(), &rows_done,
                     options.train_rows + options.test_rows);
  RETURN_IF_ERROR(writer.Write(SyntheticSplit::kTrain, options.train_rows,
                               options.num_files, &summary.train, nullptr));
  TestTruth truth;
  if (options.test_rows > 0) {
    const int test_files = static_cast<int>(
        std::min<int64_t>(options.num_files, options.test_rows));
    RETURN_IF_ERROR(writer.Write(SyntheticSplit::kTest, options.test_rows,
                                 test_files, &summary.test, &truth));
    summary.oracle_auc = ExactAuc(truth.labels, truth.probability);
    summary.oracle_logloss = MeanLogLoss(truth.labels, truth.probability);
    summary.first_order_auc = ExactAuc(truth.labels, truth.first_order_score);
    summary.constant_logloss =
        MeanLogLoss(truth.labels,
                    std::vector<double>(truth.labels.size(), summary.test.ctr));
  }
  summary.json = BuildJson(options, *gen, summary);
  RETURN_IF_ERROR(WriteStringToFileAtomically(
      env, JoinPath(options.out_dir, "dataset.json"), summary.json));
  return summary;
}

}  // namespace recflow::data
