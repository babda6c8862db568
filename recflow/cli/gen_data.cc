// recflow gen-data: writes the built-in synthetic click-log dataset
// (recflow/data/synthetic.h, docs/data.md) to a directory.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "recflow/cli/commands.h"
#include "recflow/core/env.h"
#include "recflow/core/threadpool.h"
#include "recflow/data/synthetic_writer.h"

namespace recflow::cli {
namespace {

constexpr char kUsage[] =
    "usage: recflow gen-data --rows N --seed S --out DIR [--format "
    "criteo|tfrecord]\n"
    "                        [--test_rows M] [--num_files K] [--threads T]\n"
    "                        [--history N [--history_field C1] "
    "[--history_categories 8]\n"
    "                         [--history_scale 0.5]]\n\n"
    "Writes a deterministic Criteo-like click log drawn from a hidden "
    "ground-truth model:\n"
    "DIR/train-0000i-of-0000K.{tsv,tfrecord}, DIR/test-*.{tsv,tfrecord} and "
    "DIR/dataset.json\n"
    "(settings, schema, cardinalities, CTRs, and the ground truth's AUC and "
    "logloss on the\n"
    "test split). The same seed gives byte-identical files on any number of "
    "threads.\n"
    "--history N adds a behaviour sequence column H1 (up to N items of "
    "--history_field,\n"
    "','-separated) after C26 and a history term to the ground truth "
    "(criteo format only).\n"
    "See docs/data.md.\n\n";

int Fail(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 2;
}

// Progress on stderr: an updating line on a terminal (at most 4 updates a
// second), plain lines otherwise (at most one every 2 seconds).
class Progress {
 public:
  Progress()
      : tty_(isatty(STDERR_FILENO) == 1), start_(Clock::now()), last_(start_) {}
  void Update(int64_t done, int64_t total) {
    const auto now = Clock::now();
    const double since_last = Seconds(last_, now);
    if (done < total && since_last < (tty_ ? 0.25 : 2.0)) return;
    if (done == total && !printed_) return;  // Short runs: only the summary.
    last_ = now;
    printed_ = true;
    const double elapsed = Seconds(start_, now);
    const std::string line = absl::StrFormat(
        "gen-data: %lld / %lld rows (%.0f%%), %.0f rows/s",
        static_cast<long long>(done), static_cast<long long>(total),
        100.0 * static_cast<double>(done) / static_cast<double>(total),
        static_cast<double>(done) / std::max(elapsed, 1e-9));
    if (tty_) {
      std::fprintf(stderr, "\r%s\033[K%s", line.c_str(),
                   done == total ? "\n" : "");
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }
  double Elapsed() const { return Seconds(start_, Clock::now()); }

 private:
  using Clock = std::chrono::steady_clock;
  static double Seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }
  bool tty_;
  bool printed_ = false;
  Clock::time_point start_, last_;
};

}  // namespace

int GenDataCommand(const Args& args) {
  std::string rows_s, seed_s = "1", out, format_s = "criteo", test_rows_s,
                      num_files_s = "1", threads_s = "0", ctr_s = "0.25",
                      history_s = "0", history_field_s = "C1",
                      history_categories_s = "8", history_scale_s = "0.5";
  Args positional;
  if (!ParseFlags(
          args,
          {{"rows", &rows_s, nullptr, "train rows to write (required, >= 1)"},
           {"seed", &seed_s, nullptr,
            "generator seed, an unsigned 64-bit integer (default 1)"},
           {"out", &out, nullptr,
            "output directory (required; created if missing)"},
           {"format", &format_s, nullptr,
            "criteo (TSV, default) or tfrecord (tf.train.Example)"},
           {"test_rows", &test_rows_s, nullptr,
            "test rows (default rows/10, at least 1; 0: none)"},
           {"num_files", &num_files_s, nullptr,
            "train files (default 1); test uses min(K, M)"},
           {"threads", &threads_s, nullptr,
            "generator threads (default: CPUs)"},
           {"target_ctr", &ctr_s, nullptr,
            "mean click probability, in (0, 1) (default 0.25)"},
           {"history", &history_s, nullptr,
            "max items of a row's behaviour sequence H1, in [0, 32] "
            "(default 0: no histories)"},
           {"history_field", &history_field_s, nullptr,
            "the categorical field the history's items belong to "
            "(default C1)"},
           {"history_categories", &history_categories_s, nullptr,
            "hidden item categories of the history term (default 8)"},
           {"history_scale", &history_scale_s, nullptr,
            "logit added per history item in the candidate's category "
            "(default 0.5)"}},
          &positional, kUsage)) {
    return 2;
  }
  if (!positional.empty())
    return Fail("gen-data takes no positional arguments, got '" +
                positional[0] + "'");
  data::SyntheticWriteOptions options;
  if (rows_s.empty())
    return Fail("--rows is required (the number of train rows)");
  if (!absl::SimpleAtoi(rows_s, &options.train_rows) ||
      options.train_rows <= 0) {
    return Fail("--rows must be a positive integer, got '" + rows_s + "'");
  }
  if (!absl::SimpleAtoi(seed_s, &options.config.seed)) {
    return Fail("--seed must be an unsigned 64-bit integer, got '" + seed_s +
                "'");
  }
  if (out.empty()) return Fail("--out is required (the output directory)");
  auto format = data::ParseSyntheticFormat(format_s);
  if (!format.ok())
    return Fail("--format: " + std::string(format.status().message()));
  options.format = *format;
  if (!data::SyntheticFormatAvailable(options.format)) {
    return Fail("--format " + format_s +
                ": not available in this build (the TFRecord writer or the "
                "tf.train.Example "
                "protos are missing)");
  }
  if (test_rows_s.empty()) {
    options.test_rows = std::max<int64_t>(1, options.train_rows / 10);
  } else if (!absl::SimpleAtoi(test_rows_s, &options.test_rows) ||
             options.test_rows < 0) {
    return Fail("--test_rows must be an integer >= 0, got '" + test_rows_s +
                "'");
  }
  if (!absl::SimpleAtoi(num_files_s, &options.num_files) ||
      options.num_files < 1 || options.num_files > 99999) {
    return Fail("--num_files must be an integer in [1, 99999], got '" +
                num_files_s + "'");
  }
  if (options.num_files > options.train_rows) {
    return Fail(absl::StrFormat(
        "--num_files (%d) must not exceed --rows (%lld)", options.num_files,
        static_cast<long long>(options.train_rows)));
  }
  if (!absl::SimpleAtoi(threads_s, &options.num_threads) ||
      options.num_threads < 0) {
    return Fail("--threads must be an integer >= 0, got '" + threads_s + "'");
  }
  if (absl::Status s = ValidateThreadCount("--threads", options.num_threads,
                                           /*min_threads=*/0);
      !s.ok()) {
    return Fail(std::string(s.message()) + "; 0 means one per CPU");
  }
  if (!absl::SimpleAtod(ctr_s, &options.config.target_ctr) ||
      !(options.config.target_ctr > 0) || !(options.config.target_ctr < 1)) {
    return Fail("--target_ctr must be a number in (0, 1), got '" + ctr_s + "'");
  }
  data::SyntheticHistorySpec& history = options.config.history;
  if (!absl::SimpleAtoi(history_s, &history.max_length) ||
      history.max_length < 0 || history.max_length > data::kSyntheticMaxHistory) {
    return Fail(absl::StrFormat("--history must be an integer in [0, %d], got '%s'",
                                data::kSyntheticMaxHistory, history_s));
  }
  {
    int field = 0;
    if (history_field_s.size() < 2 || history_field_s[0] != 'C' ||
        !absl::SimpleAtoi(history_field_s.substr(1), &field) || field < 1 ||
        field > data::kSyntheticNumCategorical) {
      return Fail(absl::StrFormat(
          "--history_field must be a categorical field C1..C%d, got '%s'",
          data::kSyntheticNumCategorical, history_field_s));
    }
    history.item_field = field - 1;
  }
  if (!absl::SimpleAtoi(history_categories_s, &history.num_categories) ||
      history.num_categories < 1) {
    return Fail("--history_categories must be an integer >= 1, got '" +
                history_categories_s + "'");
  }
  if (!absl::SimpleAtod(history_scale_s, &history.scale) ||
      !std::isfinite(history.scale)) {
    return Fail("--history_scale must be a finite number, got '" +
                history_scale_s + "'");
  }
  if (history.max_length > 0 &&
      options.format != data::SyntheticFormat::kCriteoTsv) {
    return Fail("--history: histories are written only in the criteo format "
                "(TSV), not " + format_s);
  }
  // The directory: create it and make sure a file can be written there, so
  // that a bad --out fails before any work.
  Env* env = Env::Default();
  if (absl::Status s = env->RecursivelyCreateDir(out); !s.ok()) {
    std::cerr << "error: --out " << out
              << ": cannot create the directory: " << s.message() << "\n";
    return 1;
  }
  {
    const std::string probe = JoinPath(out, ".gen-data-probe");
    auto file = env->NewWritableFile(probe);
    if (!file.ok()) {
      std::cerr << "error: --out " << out
                << " is not writable: " << file.status().message() << "\n";
      return 1;
    }
    (*file)->Close().IgnoreError();
    env->DeleteFile(probe).IgnoreError();
  }
  options.out_dir = out;
  options.env = env;
  Progress progress;
  options.progress = [&progress](int64_t done, int64_t total) {
    progress.Update(done, total);
  };
  auto summary = data::WriteSyntheticDataset(options);
  if (!summary.ok()) {
    std::cerr << "error: gen-data into " << out << ": "
              << summary.status().message() << "\n";
    return 1;
  }
  const double seconds = progress.Elapsed();
  const int64_t rows = options.train_rows + options.test_rows;
  const int64_t bytes = summary->train.bytes + summary->test.bytes;
  const int threads =
      options.num_threads > 0 ? options.num_threads : NumSchedulableCPUs();
  std::cout << absl::StrFormat(
      "wrote %lld train rows (%d files) and %lld test rows to %s in %.2f s "
      "(%.0f rows/s, %.1f MB/s, %d threads)\n",
      static_cast<long long>(options.train_rows), options.num_files,
      static_cast<long long>(options.test_rows), out, seconds,
      static_cast<double>(rows) / std::max(seconds, 1e-9),
      static_cast<double>(bytes) / 1e6 / std::max(seconds, 1e-9), threads);
  std::cout << absl::StrFormat("train CTR %.4f", summary->train.ctr);
  if (options.test_rows > 0) {
    std::cout << absl::StrFormat(
        ", test CTR %.4f; ground truth on test: AUC %.4f, logloss %.4f "
        "(first-order part alone: AUC %.4f; constant CTR: logloss %.4f)",
        summary->test.ctr, summary->oracle_auc, summary->oracle_logloss,
        summary->first_order_auc, summary->constant_logloss);
  }
  if (history.max_length > 0) {
    std::cout << absl::StrFormat(
        "\nhistories: up to %d items of C%d per row in column H1 (train with "
        "a sparse feature {name: H1, sequence_of: C%d})",
        history.max_length, history.item_field + 1, history.item_field + 1);
  }
  std::cout << "\n"
            << "dataset description: " << JoinPath(out, "dataset.json") << "\n";
  return 0;
}

}  // namespace recflow::cli
