// bench_data_pipeline: recflow's side of `bench/run data_pipeline`.
//
//   bench_data_pipeline --case=gen --path=F --rows=N [--seed=S]
//   bench_data_pipeline --case=run --path=F [--threads=2] [--batch=4096]
//                       [--samples=3] [--modes=parse,textline,pipeline,feed]
//
// gen: writes a deterministic Criteo TSV of N rows (the fallback when
//      `recflow gen-data` is not available): Zipf-like ids per field
//      (log-uniform ranks, so a few ids are very frequent), heavy-tailed
//      dense counts, 0-40 % missing per field, 8 hex digits per id.
// run: turns the file into batches of --batch rows in the batch layout
//      (labels, dense [B,13], 26 x ids + row_splits) with
//        parse          the Criteo parser alone, one thread, over lines
//                       already in memory (the parse itself, per core)
//        textline       the TextLine source alone (no parse; breakdown)
//        pipeline_tT    Dataset::TextLine(lines_per_element=batch) ->
//                       Map(ParseFn(criteo), num_parallel_calls=T) ->
//                       Prefetch(2), for T = 1 and --threads
//        feed_memory / feed_pipeline
//                       a consumer that spins for the pipeline_t1 CPU time
//                       per batch (busy loop calibrated against the thread
//                       CPU clock), fed from batches
//                       already in memory, or by the T=1 pipeline (one
//                       background thread: prefetch), to see how much of
//                       the in-memory throughput the pipeline keeps.
//      Every mode first makes one untimed pass that prints a `check` line
//      (checksums over all batches, see bench/README.md) so bench/run can
//      check that every mode and the peers produce the same arrays.
//
// Output: `info ...`, `rows=N bytes=M batches=K`, `check mode=M ...`,
// `mode=M median_us=... min_us=... samples_us=... cpu_us=...` (wall and
// process CPU microseconds per full pass, feed modes too), and
// `spin_us_per_batch=...`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "bench/bench_util.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/data/batch.h"
#include "recflow/data/dataset.h"
#include "recflow/data/text_parsers.h"

namespace recflow {
namespace {

using bench::FlagParser;
using bench::Fmt;
using bench::Median;
using data::Batch;
using data::Element;

struct Flags {
  std::string bench_case = "run";
  std::string path;
  int64_t rows = 1000000;
  uint64_t seed = 1;
  int threads = 2;
  int64_t batch = 4096;
  int samples = 3;
  std::string modes = "parse,textline,pipeline,feed";
};

double Seconds(std::chrono::steady_clock::time_point a,
               std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU time of the whole process (all threads), in microseconds.
double ProcessCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

// --- gen
// ---------------------------------------------------------------------------

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
// Uniform in [0, 1) from (row, field, draw).
double U(uint64_t seed, uint64_t row, uint64_t field, uint64_t draw) {
  return static_cast<double>(
             Mix(Mix(seed ^ (row << 8) ^ (field << 1)) + draw) >> 11) *
         0x1.0p-53;
}

absl::Status Generate(const Flags& flags) {
  FILE* f = std::fopen(flags.path.c_str(), "w");
  if (f == nullptr) return errors::Internal("cannot write '", flags.path, "'");
  static const double kDenseMissing[13] = {.40, 0,   .20, .20, .03, .22, .04,
                                           0,   .04, .40, .04, .40, .20};
  static const double kDenseLogMean[13] = {0.8, 2.0, 1.8, 1.5, 7.5, 3.5, 1.5,
                                           2.2, 3.5, 0.3, 1.0, 0.2, 2.0};
  std::string line;
  for (int64_t r = 0; r < flags.rows; ++r) {
    line.clear();
    line += U(flags.seed, r, 63, 0) < 0.25 ? '1' : '0';
    for (int j = 0; j < 13; ++j) {
      line += '\t';
      if (U(flags.seed, r, j, 0) < kDenseMissing[j]) continue;
      // Box-Muller normal -> log-normal count.
      const double z = std::sqrt(-2 * std::log(1 - U(flags.seed, r, j, 1))) *
                       std::cos(6.283185307179586 * U(flags.seed, r, j, 2));
      absl::StrAppend(&line, static_cast<int64_t>(std::floor(
                                 std::exp(kDenseLogMean[j] + 1.3 * z))) -
                                 1);
    }
    for (int k = 0; k < 26; ++k) {
      line += '\t';
      const double missing =
          k >= 18 && k % 2 == 0 ? 0.40 : (k % 5 == 2 ? 0.03 : 0.0);
      if (U(flags.seed, r, 16 + k, 0) < missing) continue;
      const double card = std::pow(10.0, 1 + (k * 7) % 6);  // 10 .. 1e6
      // Log-uniform rank: P(rank) ~ 1/rank, Zipf-like.
      const uint64_t rank = static_cast<uint64_t>(
          std::exp(U(flags.seed, r, 16 + k, 1) * std::log(card)));
      const uint32_t hex =
          static_cast<uint32_t>(Mix(rank * 64 + k + (flags.seed << 40)));
      char buf[16];
      std::snprintf(buf, sizeof(buf), "%08x", hex);
      line += buf;
    }
    line += '\n';
    if (std::fwrite(line.data(), 1, line.size(), f) != line.size()) {
      std::fclose(f);
      return errors::Internal("short write to '", flags.path, "'");
    }
  }
  if (std::fclose(f) != 0)
    return errors::Internal("cannot close '", flags.path, "'");
  return absl::OkStatus();
}

// --- run
// ----------------------------------------------------------------------------

// Checksums over all batches, computed identically by the peer:
//   rows, label_sum, dense_sum (float64 sum of the float32 values), nnz,
//   id_sum = sum of ids mod 2^64, id_wsum = sum over each batch and feature
//   of ids[i] * (i + 1) mod 2^64, splits_sum = sum of every row_splits
//   entry mod 2^64.
struct Checksum {
  int64_t batches = 0;
  int64_t rows = 0;
  double label_sum = 0;
  double dense_sum = 0;
  int64_t nnz = 0;
  uint64_t id_sum = 0;
  uint64_t id_wsum = 0;
  uint64_t splits_sum = 0;

  void Add(const Element& e) {
    ++batches;
    const Tensor& labels = e[0];
    rows += labels.NumElements();
    for (float v : labels.flat<float>()) label_sum += v;
    for (float v : e[1].flat<float>()) dense_sum += v;
    for (size_t c = 2; c + 1 < e.size(); c += 2) {
      const auto ids = e[c].flat<int64_t>();
      nnz += static_cast<int64_t>(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        id_sum += static_cast<uint64_t>(ids[i]);
        id_wsum += static_cast<uint64_t>(ids[i]) * (i + 1);
      }
      for (int64_t s : e[c + 1].flat<int64_t>())
        splits_sum += static_cast<uint64_t>(s);
    }
  }
  void Print(absl::string_view mode) const {
    std::printf(
        "check mode=%s batches=%lld rows=%lld label_sum=%.17g dense_sum=%.17g "
        "nnz=%lld "
        "id_sum=%llu id_wsum=%llu splits_sum=%llu\n",
        std::string(mode).c_str(), static_cast<long long>(batches),
        static_cast<long long>(rows), label_sum, dense_sum,
        static_cast<long long>(nnz), static_cast<unsigned long long>(id_sum),
        static_cast<unsigned long long>(id_wsum),
        static_cast<unsigned long long>(splits_sum));
    std::fflush(stdout);
  }
};

void PrintMode(absl::string_view mode, const std::vector<double>& us,
               const std::vector<double>& cpu_us) {
  std::vector<std::string> parts, cpu_parts;
  for (double v : us) parts.push_back(Fmt("%.1f", v));
  for (double v : cpu_us) cpu_parts.push_back(Fmt("%.1f", v));
  std::printf("mode=%s median_us=%.1f min_us=%.1f samples_us=%s cpu_us=%s\n",
              std::string(mode).c_str(), Median(us),
              *std::min_element(us.begin(), us.end()),
              absl::StrJoin(parts, ",").c_str(),
              absl::StrJoin(cpu_parts, ",").c_str());
  std::fflush(stdout);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return errors::NotFound("cannot open '", path, "'");
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

double ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

// A busy loop of about `ns` nanoseconds of CPU time. Calibrated against the
// thread's CPU clock (best of 5), so that a busy machine, which stretches
// wall time, does not change how much work a spin is.
class Spinner {
 public:
  Spinner() {
    const int64_t n = 4000000;
    for (int i = 0; i < 5; ++i) {
      const double c0 = ThreadCpuNs();
      Spin(n);
      iters_per_ns_ = std::max(iters_per_ns_,
                               static_cast<double>(n) / (ThreadCpuNs() - c0));
    }
  }
  void SpinNs(double ns) { Spin(static_cast<int64_t>(ns * iters_per_ns_)); }
  double iters_per_ns() const { return iters_per_ns_; }

 private:
  void Spin(int64_t n) {
    uint64_t x = state_;
    for (int64_t i = 0; i < n; ++i)
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    state_ = x;
    sink_.store(x, std::memory_order_relaxed);
  }
  uint64_t state_ = 1;
  std::atomic<uint64_t> sink_{0};
  double iters_per_ns_ = 0;
};

using Visit = std::function<void(const Element&)>;

absl::Status RunPipeline(const Flags& flags,
                         std::shared_ptr<const data::TextParser> parser,
                         int threads, const Visit& visit) {
  data::Dataset ds = data::Dataset::TextLine({flags.path}, {},
                                             {.lines_per_element = flags.batch})
                         .Map(data::ParseFn(parser), threads,
                              parser->output_dtypes(), parser->output_shapes())
                         .Prefetch(2);
  ASSIGN_OR_RETURN(data::Iterator it, ds.MakeIterator());
  for (;;) {
    Element e;
    bool end = false;
    RETURN_IF_ERROR(it.GetNext(&e, &end));
    if (end) break;
    visit(e);
  }
  return absl::OkStatus();
}

absl::Status Run(const Flags& flags) {
  ASSIGN_OR_RETURN(std::shared_ptr<const data::TextParser> parser,
                   data::CriteoParser::Create({}));
  ASSIGN_OR_RETURN(std::string text, ReadFile(flags.path));
  std::vector<absl::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    lines.push_back(absl::string_view(text).substr(pos, e - pos));
    pos = e + 1;
  }
  const int64_t num_lines = static_cast<int64_t>(lines.size());
  const int64_t num_batches = (num_lines + flags.batch - 1) / flags.batch;
  std::printf(
      "info side=recflow threads=%d batch=%lld parser=criteo(hex ids, log1p "
      "dense)\n",
      flags.threads, static_cast<long long>(flags.batch));
  std::printf("rows=%lld bytes=%zu batches=%lld\n",
              static_cast<long long>(num_lines), text.size(),
              static_cast<long long>(num_batches));
  std::fflush(stdout);
  const std::vector<std::string> modes = absl::StrSplit(flags.modes, ',');
  auto want = [&](absl::string_view m) {
    return std::find(modes.begin(), modes.end(), m) != modes.end();
  };

  auto parse_all = [&](const Visit& visit) -> absl::Status {
    for (int64_t b = 0; b < num_lines; b += flags.batch) {
      const int64_t n = std::min(flags.batch, num_lines - b);
      ASSIGN_OR_RETURN(Batch batch,
                       parser->Parse(absl::MakeConstSpan(lines).subspan(b, n)));
      visit(batch.ToElement());
    }
    return absl::OkStatus();
  };
  auto time_passes = [&](absl::string_view mode,
                         const std::function<absl::Status(const Visit&)>& pass)
      -> absl::Status {
    Checksum check;
    RETURN_IF_ERROR(pass([&](const Element& e) { check.Add(e); }));
    check.Print(mode);
    std::vector<double> us, cpu_us;
    for (int s = 0; s < flags.samples; ++s) {
      int64_t rows = 0;
      const double c0 = ProcessCpuUs();
      const auto t0 = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(
          pass([&](const Element& e) { rows += e[0].NumElements(); }));
      us.push_back(Seconds(t0, std::chrono::steady_clock::now()) * 1e6);
      cpu_us.push_back(ProcessCpuUs() - c0);
      if (rows != check.rows)
        return errors::Internal(mode, ": ", rows, " rows, then ", check.rows);
    }
    PrintMode(mode, us, cpu_us);
    return absl::OkStatus();
  };

  if (want("parse")) RETURN_IF_ERROR(time_passes("parse", parse_all));
  if (want("textline")) {
    // The source alone (lines into string tensors), for the breakdown.
    std::vector<double> us, cpu_us;
    for (int s = 0; s < flags.samples; ++s) {
      const double c0 = ProcessCpuUs();
      const auto t0 = std::chrono::steady_clock::now();
      ASSIGN_OR_RETURN(data::Iterator it,
                       data::Dataset::TextLine(
                           {flags.path}, {}, {.lines_per_element = flags.batch})
                           .MakeIterator());
      for (;;) {
        Element e;
        bool end = false;
        RETURN_IF_ERROR(it.GetNext(&e, &end));
        if (end) break;
      }
      us.push_back(Seconds(t0, std::chrono::steady_clock::now()) * 1e6);
      cpu_us.push_back(ProcessCpuUs() - c0);
    }
    PrintMode("textline", us, cpu_us);
  }
  if (want("pipeline") || want("feed")) {
    std::vector<int> ts = {1};
    if (flags.threads > 1) ts.push_back(flags.threads);
    for (int t : ts) {
      const std::string mode = absl::StrCat("pipeline_t", t);
      RETURN_IF_ERROR(time_passes(mode, [&](const Visit& v) {
        return RunPipeline(flags, parser, t, v);
      }));
    }
  }
  if (want("feed")) {
    // The consumer costs what the 1-thread pipeline needs per batch (read +
    // parse): its CPU time per batch, measured just now as one more pass.
    // CPU time rather than wall time, so that a busy machine changes neither
    // side's amount of work.
    double pass_cpu_us;
    {
      const double c0 = ProcessCpuUs();
      RETURN_IF_ERROR(RunPipeline(flags, parser, 1, [](const Element&) {}));
      pass_cpu_us = ProcessCpuUs() - c0;
    }
    const double spin_ns = pass_cpu_us * 1e3 / static_cast<double>(num_batches);
    Spinner spinner;
    std::printf("spin_us_per_batch=%.1f spin_iters_per_ns=%.3f\n",
                spin_ns / 1e3, spinner.iters_per_ns());
    std::vector<Element> in_memory;
    RETURN_IF_ERROR(
        parse_all([&](const Element& e) { in_memory.push_back(e); }));
    std::vector<double> mem_us, pipe_us, mem_cpu, pipe_cpu;
    for (int s = 0; s < flags.samples; ++s) {
      double c0 = ProcessCpuUs();
      auto t0 = std::chrono::steady_clock::now();
      for (const Element& e : in_memory) {
        spinner.SpinNs(spin_ns);
        (void)e;
      }
      mem_us.push_back(Seconds(t0, std::chrono::steady_clock::now()) * 1e6);
      mem_cpu.push_back(ProcessCpuUs() - c0);
      c0 = ProcessCpuUs();
      t0 = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(RunPipeline(
          flags, parser, 1, [&](const Element&) { spinner.SpinNs(spin_ns); }));
      pipe_us.push_back(Seconds(t0, std::chrono::steady_clock::now()) * 1e6);
      pipe_cpu.push_back(ProcessCpuUs() - c0);
    }
    PrintMode("feed_memory", mem_us, mem_cpu);
    PrintMode("feed_pipeline", pipe_us, pipe_cpu);
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Flags flags;
  const auto positive = FlagParser::Positive();
  FlagParser parser;
  parser.String("case", &flags.bench_case)
      .String("path", &flags.path)
      .Number("rows", &flags.rows, positive)
      .Number("seed", &flags.seed)
      .Number("threads", &flags.threads, positive)
      .Number("batch", &flags.batch, positive)
      .Number("samples", &flags.samples, positive)
      .String("modes", &flags.modes);
  if (absl::Status s = parser.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "bench_data_pipeline: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  if (flags.path.empty()) {
    std::fprintf(stderr, "bench_data_pipeline: --path is required\n");
    return 2;
  }
  absl::Status s;
  if (flags.bench_case == "gen") {
    s = Generate(flags);
  } else if (flags.bench_case == "run") {
    s = Run(flags);
  } else {
    s = errors::InvalidArgument("unknown --case '", flags.bench_case,
                                "' (gen or run)");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "bench_data_pipeline: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace recflow

int main(int argc, char** argv) { return recflow::Main(argc, argv); }
