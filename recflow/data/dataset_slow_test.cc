// Throughput of the input pipeline's hot paths (recflow_slow_tests; prints
// rates, asserts only correctness).

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "recflow/core/env.h"
#include "recflow/data/dataset.h"

namespace recflow::data {
namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Writes ~`bytes` of Criteo-like TSV lines (label, 13 ints, 26 hex ids).
int64_t WriteTsv(const std::string& path, int64_t bytes) {
  auto file = Env::Default()->NewWritableFile(path);
  EXPECT_TRUE(file.ok()) << file.status();
  std::mt19937_64 rng(1);
  std::string chunk;
  int64_t written = 0, lines = 0;
  while (written < bytes) {
    chunk.clear();
    while (chunk.size() < (1 << 20)) {
      absl::StrAppend(&chunk, rng() % 2);
      for (int i = 0; i < 13; ++i) absl::StrAppend(&chunk, "\t", rng() % 1000);
      for (int i = 0; i < 26; ++i) {
        char hex[16];
        std::snprintf(hex, sizeof(hex), "\t%08x", static_cast<unsigned>(rng()));
        chunk += hex;
      }
      chunk += '\n';
      ++lines;
    }
    EXPECT_TRUE((*file)->Append(chunk).ok());
    written += static_cast<int64_t>(chunk.size());
  }
  EXPECT_TRUE((*file)->Close().ok());
  return lines;
}

TEST(DatasetThroughputTest, TextLine4096LinesPerElement) {
  const std::string path =
      JoinPath(::testing::TempDir(),
               absl::StrCat("recflow_textline_", getpid(), ".tsv"));
  const int64_t lines = WriteTsv(path, int64_t{200} << 20);
  const uint64_t size = *Env::Default()->GetFileSize(path);
  TextLineOptions opts;
  opts.lines_per_element = 4096;
  Dataset ds = Dataset::TextLine({path}, {}, opts);
  for (int pass = 0; pass < 3; ++pass) {
    auto it = ds.MakeIterator();
    ASSERT_TRUE(it.ok());
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ThreadCpuSeconds();
    int64_t n = 0, bytes = 0;
    while (true) {
      Element e;
      bool end = false;
      ASSERT_TRUE(it->GetNext(&e, &end).ok());
      if (end) break;
      n += e[0].NumElements();
      bytes += static_cast<int64_t>(e[0].flat<std::string>()[0].size());
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    const double cpu = ThreadCpuSeconds() - cpu_start;
    EXPECT_EQ(n, lines);
    std::printf(
        "TextLine(lines_per_element=4096): %.1f MB in %.3f s wall = %.0f MB/s; "
        "%.3f s CPU = %.0f MB/s per core (%lld lines, %.1f M lines/s)\n",
        size / 1e6, secs, size / 1e6 / secs, cpu, size / 1e6 / cpu,
        static_cast<long long>(n), n / 1e6 / secs);
  }
  ASSERT_TRUE(Env::Default()->DeleteFile(path).ok());
}

}  // namespace
}  // namespace recflow::data
