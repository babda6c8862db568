// Throughput of HashEmbeddingTable (not a pass/fail test: it prints numbers,
// asserting only that the calls succeed). In recflow_slow_tests:
//   recflow_slow_tests --gtest_filter='HashEmbeddingTableBench*'
// Table: 1M rows, dim 16, Adagrad; batches of 100k ids drawn Zipf(1.1) over
// the 1M ids, so hot ids repeat within a batch as in real traffic.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "recflow/embedding/hash_embedding_table.h"
#include "recflow/embedding/unique_ids.h"

namespace recflow::embedding {
namespace {

constexpr int64_t kRows = 1'000'000;
constexpr int64_t kDim = 16;
constexpr int64_t kBatch = 100'000;
constexpr int kBatches = 20;

// Zipf(s) over [0, n) by inverting the CDF table; ids scrambled so that hot
// ids are spread over the key space.
std::vector<std::vector<int64_t>> ZipfBatches(double s, uint64_t seed) {
  std::vector<double> cdf(kRows);
  double sum = 0;
  for (int64_t i = 0; i < kRows; ++i) {
    sum += 1.0 / std::pow(static_cast<double>(i + 1), s);
    cdf[i] = sum;
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, sum);
  std::vector<std::vector<int64_t>> batches(kBatches,
                                            std::vector<int64_t>(kBatch));
  for (auto& b : batches) {
    for (auto& id : b) {
      const int64_t rank =
          std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
      id = static_cast<int64_t>(Mix64(static_cast<uint64_t>(rank)) >> 1);
    }
  }
  return batches;
}

// Process CPU seconds (all threads): on a machine shared with other jobs,
// wall time overstates the cost; CPU time shows what the work itself took.
double CpuSeconds() {
  return static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

class HashEmbeddingTableBench : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EmbeddingTableOptions o;
    o.name = "bench";
    o.dim = kDim;
    o.num_shards = 16;
    o.optimizer = OptimizerKind::kAdagrad;
    table_ = HashEmbeddingTable::Create(o).value().release();
    std::vector<int64_t> all(kRows);
    for (int64_t i = 0; i < kRows; ++i) {
      all[i] = static_cast<int64_t>(Mix64(static_cast<uint64_t>(i)) >> 1);
    }
    std::vector<float> out(all.size() * kDim);
    const auto start = std::chrono::steady_clock::now();
    const double cpu0 = CpuSeconds();
    EXPECT_TRUE(
        table_->Lookup(all, absl::MakeSpan(out), LookupMode::kTrain).ok());
    std::printf(
        "insert 1M rows (one batch, 1 thread): %.2f s wall, %.2f s "
        "CPU; %s\n",
        Seconds(start), CpuSeconds() - cpu0, table_->DebugString().c_str());
    batches_ = new std::vector<std::vector<int64_t>>(ZipfBatches(1.1, 1));
  }
  static void TearDownTestSuite() {
    delete table_;
    delete batches_;
  }

  static void TimeLookups(const char* label, ThreadPool* pool,
                          LookupMode mode) {
    std::vector<float> out(kBatch * kDim);
    const auto start = std::chrono::steady_clock::now();
    const double cpu0 = CpuSeconds();
    for (const auto& b : *batches_) {
      ASSERT_TRUE(table_->Lookup(b, absl::MakeSpan(out), mode, pool).ok());
    }
    const double s = Seconds(start), cpu = CpuSeconds() - cpu0;
    std::printf(
        "%-40s %6.2f M lookups/s wall (%.2f ms per 100k batch), "
        "%6.2f M per CPU-second\n",
        label, kBatches * kBatch / s / 1e6, s / kBatches * 1e3,
        kBatches * kBatch / cpu / 1e6);
  }

  static HashEmbeddingTable* table_;
  static std::vector<std::vector<int64_t>>* batches_;
};

HashEmbeddingTable* HashEmbeddingTableBench::table_ = nullptr;
std::vector<std::vector<int64_t>>* HashEmbeddingTableBench::batches_ = nullptr;

TEST_F(HashEmbeddingTableBench, Lookup) {
  TimeLookups("lookup kTrain, 1 thread", nullptr, LookupMode::kTrain);
  TimeLookups("lookup kReadOnly, 1 thread", nullptr, LookupMode::kReadOnly);
  ThreadPool pool("bench", 2);
  TimeLookups("lookup kTrain, pool of 2 (+caller)", &pool, LookupMode::kTrain);
  TimeLookups("lookup kReadOnly, pool of 2 (+caller)", &pool,
              LookupMode::kReadOnly);
  // Two independent callers, no pool: reader locks shared between them.
  std::vector<float> out0(kBatch * kDim), out1(kBatch * kDim);
  const auto start = std::chrono::steady_clock::now();
  std::thread other([&] {
    for (const auto& b : *batches_) {
      ASSERT_TRUE(
          table_->Lookup(b, absl::MakeSpan(out1), LookupMode::kTrain).ok());
    }
  });
  for (const auto& b : *batches_) {
    ASSERT_TRUE(
        table_->Lookup(b, absl::MakeSpan(out0), LookupMode::kTrain).ok());
  }
  other.join();
  const double s = Seconds(start);
  std::printf("%-44s %6.2f M lookups/s total\n",
              "lookup kTrain, 2 concurrent callers",
              2 * kBatches * kBatch / s / 1e6);
}

TEST_F(HashEmbeddingTableBench, AdagradApply) {
  // Dedup as a kernel would, then apply one gradient row per distinct id.
  std::vector<UniqueIds> uniq;
  int64_t rows = 0;
  for (const auto& b : *batches_) {
    uniq.push_back(Unique(b));
    rows += static_cast<int64_t>(uniq.back().ids.size());
  }
  auto dedup_start = std::chrono::steady_clock::now();
  for (const auto& b : *batches_) (void)Unique(b);
  const double dedup_s = Seconds(dedup_start);
  std::printf("Unique over 100k Zipf ids: %.2f ms per batch (%.0f distinct)\n",
              dedup_s / kBatches * 1e3, static_cast<double>(rows) / kBatches);
  std::vector<float> g(kBatch * kDim, 0.01f);
  for (ThreadPool* pool :
       {static_cast<ThreadPool*>(nullptr), new ThreadPool("bench", 2)}) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu0 = CpuSeconds();
    int64_t step = 1;
    for (const auto& u : uniq) {
      ASSERT_TRUE(
          table_
              ->ApplyAdagrad(u.ids,
                             absl::MakeConstSpan(g.data(), u.ids.size() * kDim),
                             {0.01f}, step++, pool)
              .ok());
    }
    const double s = Seconds(start), cpu = CpuSeconds() - cpu0;
    std::printf(
        "%-40s %6.2f M rows/s wall, %6.2f M per CPU-second\n",
        pool ? "ApplyAdagrad, pool of 2 (+caller)" : "ApplyAdagrad, 1 thread",
        rows / s / 1e6, rows / cpu / 1e6);
    delete pool;
  }
}

}  // namespace
}  // namespace recflow::embedding
