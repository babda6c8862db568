// bench_tiered: one side of `bench/run tiered` (bench/benchlib/tiered.py).
// A hash embedding table of --rows rows (dim --dim, Adagrad) trained on
// Zipf-distributed ids, either all in memory (--side=dram) or tiered under
// a memory budget with its cold rows on disk (--side=tiered, Note [Tiers]
// in embedding/hash_embedding_table.h). One process per side, so that each
// has its own peak RSS.
//
// Phases, each reported on one "row" line:
//   populate  Import every row (ids: a bijective mix of Zipf ranks 1..rows,
//             so hot ids are spread over shards and storage), timed.
//   warmup    --warmup training steps, untimed: the tiered table's memory
//             fills with the rows the stream uses.
//   train     --steps timed steps: a batch of --batch examples x --fields
//             ids, kTrain lookup, a gradient per occurrence, Unique + sum,
//             ApplyAdagrad; ids are drawn before the step's clock starts.
//             Tiered: first without, then with Prefetch of the next batch
//             on another thread while the step runs (the input pipeline's
//             announcement); the page cache of the cold files is dropped
//             before each window, so cold rows come from the disk. Then a
//             third window with prefetch after reading the cold files once
//             ("warm": the page cache holds them, as it would on a machine
//             with memory to spare).
//   serve     --requests kReadOnly lookups of 256 candidates x --fields ids
//             on one thread: p50 / p99 latency.
// Then VmHWM (peak RSS) and VmRSS of the process, and the table's stats.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/embedding/hash_embedding_table.h"
#include "recflow/embedding/unique_ids.h"

namespace recflow {
namespace {

using bench::FlagParser;
using embedding::HashEmbeddingTable;

struct Flags {
  std::string side;
  std::string dir;
  int64_t rows = 0;
  int64_t dim = 64;
  double budget_gb = 2;
  int64_t batch = 4096;
  int64_t fields = 26;
  double zipf = 1.05;
  int64_t warmup = 150;
  int64_t steps = 60;
  int64_t requests = 1000;
  int threads = 2;
  int64_t drop_cache = 1;
};

using bench::SecondsSince;

// Zipf(s) ranks in [1, n] by rejection-inversion (W. Hormann and G.
// Derflinger, "Rejection-inversion to generate variates from monotone
// discrete distributions", 1996): O(1) memory, so the sampler adds nothing
// to the process's RSS whatever n.
class ZipfSampler {
 public:
  ZipfSampler(int64_t n, double s) : n_(n), s_(s) {
    h_x1_ = H(1.5) - 1.0;
    h_n_ = H(static_cast<double>(n) + 0.5);
    cut_ = 2.0 - HInverse(H(2.5) - std::pow(2.0, -s));
  }
  int64_t operator()(std::mt19937_64& rng) const {
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    for (;;) {
      const double u = h_n_ + u01(rng) * (h_x1_ - h_n_);
      const double x = HInverse(u);
      const int64_t k = std::clamp<int64_t>(static_cast<int64_t>(x + 0.5), 1, n_);
      if (k - x <= cut_ || u >= H(k + 0.5) - std::pow(static_cast<double>(k), -s_)) return k;
    }
  }

 private:
  // The integral of t^-s from 1 to x, and its inverse; both stay exact
  // near s = 1 (expm1(y)/y and log1p(y)/y tend to 1).
  double H(double x) const {
    const double l = std::log(x);
    const double y = (1.0 - s_) * l;
    return (std::abs(y) > 1e-8 ? std::expm1(y) / y : 1.0 + y / 2) * l;
  }
  double HInverse(double x) const {
    const double y = x * (1.0 - s_);
    return std::exp((std::abs(y) > 1e-8 ? std::log1p(y) / y : 1.0 - y / 2) * x);
  }
  int64_t n_;
  double s_, h_x1_, h_n_, cut_;
};

// Rank r -> id: a bijection of the int64s, so distinct ranks give distinct
// ids spread over the shards.
int64_t IdOf(int64_t rank) { return static_cast<int64_t>(embedding::Mix64(rank)); }

std::vector<int64_t> Draw(const ZipfSampler& zipf, std::mt19937_64& rng, int64_t n) {
  std::vector<int64_t> ids(n);
  for (int64_t& id : ids) id = IdOf(zipf(rng));
  return ids;
}

void DropCache(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// Reads the cold files once, so the page cache holds them.
void WarmCache(const std::string& dir) {
  std::vector<char> buf(8 << 20);
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
    ::close(fd);
  }
}

// VmHWM / VmRSS of this process, in MB.
double StatusMb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::strlen(key))) / 1024.0;
  }
  return -1;
}

int Run(const Flags& f) {
  const bool tiered = f.side == "tiered";
  embedding::EmbeddingTableOptions o;
  o.name = "bench";
  o.dim = f.dim;
  o.num_shards = 16;
  o.seed = 7;
  o.optimizer = embedding::OptimizerKind::kAdagrad;
  o.initializer.kind = embedding::InitializerOptions::Kind::kUniform;
  const int64_t budget = static_cast<int64_t>(f.budget_gb * 1e9);
  if (tiered) {
    o.tier.dram_budget_bytes = budget;
    o.tier.cold_dir = f.dir;
  }
  auto created = HashEmbeddingTable::Create(o);
  if (!created.ok()) {
    std::fprintf(stderr, "bench_tiered: %s\n", std::string(created.status().message()).c_str());
    return 1;
  }
  HashEmbeddingTable& table = **created;
  ThreadPool pool("bench_tiered", f.threads);
  const int64_t dim = f.dim;

  // populate
  {
    const auto t0 = std::chrono::steady_clock::now();
    constexpr int64_t kChunk = 65536;
    embedding::TableChunk chunk;
    table.Reserve(f.rows);  // as RestoreTable does
    for (int64_t start = 0; start < f.rows; start += kChunk) {
      const int64_t n = std::min(kChunk, f.rows - start);
      chunk.keys = Tensor(DT_INT64, TensorShape({n}));
      chunk.values = Tensor(DT_FLOAT, TensorShape({n, dim}));
      for (int64_t i = 0; i < n; ++i) {
        chunk.keys.data<int64_t>()[i] = IdOf(start + i + 1);
        for (int64_t k = 0; k < dim; ++k) {
          chunk.values.data<float>()[i * dim + k] = bench::Gen(start + i, k) * 0.01f;
        }
      }
      if (absl::Status s = table.Import(chunk, &pool); !s.ok()) {
        std::fprintf(stderr, "bench_tiered: import: %s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
    const embedding::TableStats st = table.GetStats();
    std::printf("row side=%s phase=populate seconds=%.3f rows=%lld dram_rows=%lld cold_rows=%lld "
                "rss_mb=%.0f\n",
                f.side.c_str(), SecondsSince(t0), static_cast<long long>(st.rows),
                static_cast<long long>(st.dram_rows), static_cast<long long>(st.cold_rows),
                StatusMb("VmRSS:"));
    std::fflush(stdout);
  }

  const ZipfSampler zipf(f.rows, f.zipf);
  std::mt19937_64 rng(12345);
  const int64_t n = f.batch * f.fields;
  std::vector<float> out(n * dim), grads(n * dim), summed;
  int64_t step = 0;
  // One training step on `ids`; the time of the step's table work.
  auto train_step = [&](const std::vector<int64_t>& ids) -> absl::StatusOr<double> {
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(table.Lookup(ids, absl::MakeSpan(out), embedding::LookupMode::kTrain, &pool));
    for (int64_t i = 0; i < n * dim; ++i) grads[i] = 0.001f * out[i] - 0.0005f;
    const embedding::UniqueIds u = embedding::Unique(ids);
    summed.resize(u.ids.size() * dim);
    embedding::SumRowsByIndex(u.inverse, grads.data(), dim, u.ids.size(), summed.data());
    RETURN_IF_ERROR(table.ApplyAdagrad(u.ids, summed, {.learning_rate = 0.01f}, ++step, &pool));
    return SecondsSince(t0);
  };

  for (int64_t i = 0; i < f.warmup; ++i) {
    if (auto t = train_step(Draw(zipf, rng, n)); !t.ok()) {
      std::fprintf(stderr, "bench_tiered: warmup: %s\n", std::string(t.status().message()).c_str());
      return 1;
    }
  }

  // train: the all-in-memory table once; the tiered one without prefetch,
  // with prefetch (cold files out of the page cache before each), then with
  // prefetch and the cold files all in the page cache ("warm").
  struct Window {
    bool prefetch, warm;
  };
  const std::vector<Window> windows =
      tiered ? std::vector<Window>{{false, false}, {true, false}, {true, true}}
             : std::vector<Window>{{false, false}};
  for (const auto& [prefetch, warm] : windows) {
    if (tiered && warm) WarmCache(f.dir);
    if (tiered && !warm && f.drop_cache) DropCache(f.dir);
    const embedding::TableStats before = table.GetStats();
    double seconds = 0;
    std::vector<int64_t> next = Draw(zipf, rng, n);
    for (int64_t i = 0; i < f.steps; ++i) {
      const std::vector<int64_t> ids = std::move(next);
      next = Draw(zipf, rng, n);  // untimed
      const auto t0 = std::chrono::steady_clock::now();
      absl::Status announced;
      std::thread fetcher;
      if (prefetch) fetcher = std::thread([&] { announced = table.Prefetch(next); });
      absl::StatusOr<double> t = train_step(ids);
      if (fetcher.joinable()) fetcher.join();
      seconds += SecondsSince(t0);
      if (!t.ok() || !announced.ok()) {
        std::fprintf(stderr, "bench_tiered: train: %s\n",
                     std::string((!t.ok() ? t.status() : announced).message()).c_str());
        return 1;
      }
    }
    const embedding::TableStats after = table.GetStats();
    const double hits = static_cast<double>(after.dram_hits - before.dram_hits);
    const double misses = static_cast<double>(after.cold_hits - before.cold_hits);
    std::printf("row side=%s phase=train prefetch=%d warm=%d examples_per_s=%.1f step_ms=%.2f "
                "hit_rate=%.4f promoted=%lld demoted=%lld cold_writes=%lld\n",
                f.side.c_str(), prefetch ? 1 : 0, warm ? 1 : 0, f.batch * f.steps / seconds,
                1e3 * seconds / f.steps, hits + misses > 0 ? hits / (hits + misses) : 1.0,
                static_cast<long long>(after.promoted - before.promoted),
                static_cast<long long>(after.demoted - before.demoted),
                static_cast<long long>(after.cold_writes - before.cold_writes));
    std::fflush(stdout);
  }

  // serve
  {
    if (tiered && f.drop_cache) DropCache(f.dir);
    const int64_t m = 256 * f.fields;
    std::vector<float> scores(m * dim);
    std::vector<double> ms;
    for (int64_t r = 0; r < f.requests; ++r) {
      const std::vector<int64_t> ids = Draw(zipf, rng, m);
      const auto t0 = std::chrono::steady_clock::now();
      if (absl::Status s = table.Lookup(ids, absl::MakeSpan(scores),
                                        embedding::LookupMode::kReadOnly);
          !s.ok()) {
        std::fprintf(stderr, "bench_tiered: serve: %s\n", std::string(s.message()).c_str());
        return 1;
      }
      ms.push_back(1e3 * SecondsSince(t0));
    }
    std::sort(ms.begin(), ms.end());
    std::printf("row side=%s phase=serve p50_ms=%.3f p99_ms=%.3f\n", f.side.c_str(),
                ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 99 / 100)]);
  }
  const embedding::TableStats st = table.GetStats();
  std::printf("row side=%s phase=memory peak_rss_mb=%.0f rss_mb=%.0f budget_mb=%.0f "
              "table_mb=%.0f slab_mb=%.0f index_mb=%.0f cold_index_mb=%.0f cold_file_mb=%.0f "
              "dram_rows=%lld cold_rows=%lld compactions=%lld\n",
              f.side.c_str(), StatusMb("VmHWM:"), StatusMb("VmRSS:"), budget / 1e6,
              st.total_bytes / 1e6, st.slab_bytes / 1e6, st.index_bytes / 1e6,
              st.cold_index_bytes / 1e6, st.cold_file_bytes / 1e6,
              static_cast<long long>(st.dram_rows), static_cast<long long>(st.cold_rows),
              static_cast<long long>(st.cold_compactions));
  return 0;
}

}  // namespace
}  // namespace recflow

int main(int argc, char** argv) {
  recflow::Flags f;
  const auto positive = recflow::FlagParser::Positive();
  recflow::FlagParser flags;
  flags.String("side", &f.side)
      .String("dir", &f.dir)
      .Number("rows", &f.rows, positive)
      .Number("dim", &f.dim, positive)
      .Number("budget_gb", &f.budget_gb, positive)
      .Number("batch", &f.batch, positive)
      .Number("fields", &f.fields, positive)
      .Number("zipf", &f.zipf, positive)
      .Number("warmup", &f.warmup, recflow::FlagParser::NonNegative())
      .Number("steps", &f.steps, positive)
      .Number("requests", &f.requests, positive)
      .Number("threads", &f.threads, positive)
      .Number("drop_cache", &f.drop_cache, recflow::FlagParser::NonNegative());
  if (absl::Status s = flags.Parse(argc, argv); !s.ok() ||
      (f.side != "dram" && f.side != "tiered") || f.rows == 0 ||
      (f.side == "tiered" && f.dir.empty())) {
    std::fprintf(stderr,
                 "bench_tiered: %s\nusage: bench_tiered --side=dram|tiered --rows=N "
                 "[--dir=D (tiered)] [--dim=64] [--budget_gb=2] [--batch=4096] [--fields=26] "
                 "[--zipf=1.05] [--warmup=150] [--steps=60] [--requests=1000] [--threads=2]\n",
                 s.ok() ? "--side, --rows (and --dir for tiered) are required"
                        : std::string(s.message()).c_str());
    return 2;
  }
  return recflow::Run(f);
}
