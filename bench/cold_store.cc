// bench_cold_store: the store behind a tiered table's cold rows (issue #27
// asks to measure RocksDB against a log-structured file of recflow's own
// before choosing): recflow's RowLog (embedding/row_log.h) against RocksDB
// (Debian's librocksdb-dev) on the same work, in one process, alternating.
//
//   bench_cold_store --dir=D --rows=4000000 --dim=16 --rounds=3 --threads=2
//
// Work (each store, each round, from an empty directory):
//   load   put `rows` rows (dim weights + dim Adagrad slot floats, a
//          version and a frequency: 152 bytes at dim 16) in batches of 4096
//          ids in random order;
//   get    batches of 4096 ids drawn from a Zipf(1.05) distribution over the
//          rows (the access pattern of CTR features), read back, after the
//          store's files were dropped from the page cache
//          (posix_fadvise(DONTNEED)): cold reads, as a tier beyond DRAM
//          sees them; then the same batches again (warm);
//   put    write-back: batches of 4096 Zipf ids with new rows.
// Rates are rows/s over the timed batches; `bytes` is the store's files
// after the puts (before any compaction).
//
// RocksDB settings (its best for this, all documented choices): no WAL (the
// store is scratch: checkpoints never point into it), an 8 MiB block cache
// (the DRAM tier is the table's own; a big cache would measure memory, not
// the store), a 10-bit bloom filter per file, MultiGet for a batch, one WriteBatch per batch, keys as
// 8-byte big-endian ids (ordered), values the record bytes, compression
// off (floats do not compress) and on (snappy: RocksDB's default) as two
// peers. RowLog: Get over a pool of `threads`, Put as one append.
//
// Output: "store=NAME load_rows_per_s=.. cold_get_rows_per_s=..
//          warm_get_rows_per_s=.. put_rows_per_s=.. bytes=.." per round.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/embedding/row_log.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"

namespace recflow {
namespace {

using bench::FlagParser;

struct Flags {
  std::string dir;
  int64_t rows = 4000000;
  int64_t dim = 16;
  int rounds = 3;
  int threads = 2;
};

constexpr int64_t kBatch = 4096;

using bench::SecondsSince;

void DropCache(const std::string& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t b = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) b += e.file_size();
  }
  return b;
}

// Zipf(s) over [0, n) by inverse transform on a precomputed CDF.
class Zipf {
 public:
  Zipf(int64_t n, double s) : cdf_(n) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) cdf_[i] = (sum += 1.0 / std::pow(i + 1, s));
    for (double& c : cdf_) c /= sum;
  }
  int64_t operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
  }

 private:
  std::vector<double> cdf_;
};

// One store under test: batched put and get of rows of `floats` floats.
class Store {
 public:
  virtual ~Store() = default;
  virtual absl::Status Put(const std::vector<int64_t>& ids, const std::vector<float>& rows,
                           const std::vector<int64_t>& meta) = 0;
  // Returns how many of ids were found.
  virtual absl::StatusOr<int64_t> Get(const std::vector<int64_t>& ids, std::vector<float>* rows,
                                      std::vector<int64_t>* meta) = 0;
};

class RowLogStore : public Store {
 public:
  RowLogStore(std::unique_ptr<embedding::RowLog> log, ThreadPool* pool)
      : log_(std::move(log)), pool_(pool) {}
  absl::Status Put(const std::vector<int64_t>& ids, const std::vector<float>& rows,
                   const std::vector<int64_t>& meta) override {
    return log_->Put(ids, rows, meta, meta);
  }
  absl::StatusOr<int64_t> Get(const std::vector<int64_t>& ids, std::vector<float>* rows,
                              std::vector<int64_t>* meta) override {
    std::vector<int64_t> versions(ids.size());
    RETURN_IF_ERROR(log_->Get(ids, absl::MakeSpan(*rows), absl::MakeSpan(*meta),
                              absl::MakeSpan(versions), &found_, pool_));
    return std::count(found_.begin(), found_.end(), 1);
  }

 private:
  std::unique_ptr<embedding::RowLog> log_;
  ThreadPool* pool_;
  std::vector<char> found_;
};

class RocksStore : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<RocksStore>> Open(const std::string& dir, int64_t floats,
                                                          bool compress) {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.compression = compress ? rocksdb::kSnappyCompression : rocksdb::kNoCompression;
    o.IncreaseParallelism(2);
    rocksdb::BlockBasedTableOptions t;
    t.block_cache = rocksdb::NewLRUCache(8 << 20);
    // Point lookups: a bloom filter per table file skips the files that
    // lack the key (RocksDB's advice for Get-heavy work).
    t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, dir, &db);
    if (!s.ok()) return errors::Internal("rocksdb open ", dir, ": ", s.ToString());
    return std::unique_ptr<RocksStore>(new RocksStore(db, floats));
  }
  absl::Status Put(const std::vector<int64_t>& ids, const std::vector<float>& rows,
                   const std::vector<int64_t>& meta) override {
    rocksdb::WriteBatch batch;
    std::string value;
    for (size_t i = 0; i < ids.size(); ++i) {
      value.assign(reinterpret_cast<const char*>(&meta[i]), 8);
      value.append(reinterpret_cast<const char*>(&meta[i]), 8);
      value.append(reinterpret_cast<const char*>(rows.data() + i * floats_), floats_ * 4);
      const std::string key = Key(ids[i]);
      batch.Put(key, value);
    }
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    rocksdb::Status s = db_->Write(wo, &batch);
    return s.ok() ? absl::OkStatus() : errors::Internal("rocksdb write: ", s.ToString());
  }
  absl::StatusOr<int64_t> Get(const std::vector<int64_t>& ids, std::vector<float>* rows,
                              std::vector<int64_t>* meta) override {
    std::vector<std::string> keys(ids.size());
    std::vector<rocksdb::Slice> slices(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      keys[i] = Key(ids[i]);
      slices[i] = keys[i];
    }
    std::vector<std::string> values;
    std::vector<rocksdb::Status> st = db_->MultiGet(rocksdb::ReadOptions(), slices, &values);
    int64_t found = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (st[i].IsNotFound()) continue;
      if (!st[i].ok()) return errors::Internal("rocksdb get: ", st[i].ToString());
      std::memcpy(&(*meta)[i], values[i].data() + 8, 8);
      std::memcpy(rows->data() + i * floats_, values[i].data() + 16, floats_ * 4);
      ++found;
    }
    return found;
  }

 private:
  RocksStore(rocksdb::DB* db, int64_t floats) : db_(db), floats_(floats) {}
  static std::string Key(int64_t id) {
    std::string k(8, '\0');
    const uint64_t u = static_cast<uint64_t>(id);
    for (int b = 0; b < 8; ++b) k[b] = static_cast<char>(u >> (56 - 8 * b));
    return k;
  }
  std::unique_ptr<rocksdb::DB> db_;
  int64_t floats_;
};

absl::Status RunOne(const Flags& f, const std::string& name, const Zipf& zipf, int round,
                    ThreadPool* pool) {
  const std::string dir = absl::StrCat(f.dir, "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const int64_t floats = 2 * f.dim;
  std::unique_ptr<Store> store;
  if (name == "rowlog") {
    ASSIGN_OR_RETURN(auto log, embedding::RowLog::Create(Env::Default(), dir + "/rows",
                                                         {.row_floats = floats}));
    store = std::make_unique<RowLogStore>(std::move(log), pool);
  } else {
    ASSIGN_OR_RETURN(store, RocksStore::Open(dir, floats, name == "rocksdb_snappy"));
  }
  std::mt19937_64 rng(100 + round);
  std::vector<int64_t> order(f.rows);
  for (int64_t i = 0; i < f.rows; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int64_t> ids(kBatch), meta(kBatch);
  std::vector<float> rows(kBatch * floats);
  auto fill = [&](int64_t salt) {
    for (int64_t i = 0; i < kBatch; ++i) {
      meta[i] = salt;
      for (int64_t k = 0; k < floats; ++k) rows[i * floats + k] = 0.001f * (ids[i] % 1000) + k;
    }
  };
  // load
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t b = 0; b + kBatch <= f.rows; b += kBatch) {
    std::copy(order.begin() + b, order.begin() + b + kBatch, ids.begin());
    fill(1);
    RETURN_IF_ERROR(store->Put(ids, rows, meta));
  }
  const double load = (f.rows / kBatch * kBatch) / SecondsSince(t0);
  // get: cold, then warm (the same batches)
  constexpr int kGetBatches = 200;
  std::vector<std::vector<int64_t>> batches(kGetBatches, std::vector<int64_t>(kBatch));
  for (auto& batch : batches) {
    for (int64_t& id : batch) id = order[zipf(rng) % (f.rows / kBatch * kBatch)];
  }
  DropCache(dir);
  double get[2];
  for (int pass = 0; pass < 2; ++pass) {
    t0 = std::chrono::steady_clock::now();
    for (const auto& batch : batches) {
      ASSIGN_OR_RETURN(const int64_t found, store->Get(batch, &rows, &meta));
      if (found != kBatch) return errors::Internal(name, ": found ", found, " of ", kBatch);
    }
    get[pass] = kGetBatches * kBatch / SecondsSince(t0);
  }
  // put: write-back of Zipf batches
  t0 = std::chrono::steady_clock::now();
  for (const auto& batch : batches) {
    ids = batch;
    fill(2);
    RETURN_IF_ERROR(store->Put(ids, rows, meta));
  }
  const double put = kGetBatches * kBatch / SecondsSince(t0);
  const uint64_t bytes = DirBytes(dir);
  std::printf("store=%s round=%d load_rows_per_s=%.0f cold_get_rows_per_s=%.0f "
              "warm_get_rows_per_s=%.0f put_rows_per_s=%.0f bytes=%llu\n",
              name.c_str(), round + 1, load, get[0], get[1], put,
              static_cast<unsigned long long>(bytes));
  std::fflush(stdout);
  store.reset();
  std::filesystem::remove_all(dir);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Flags f;
  const auto positive = FlagParser::Positive();
  FlagParser flags;
  flags.String("dir", &f.dir)
      .Number("rows", &f.rows, positive)
      .Number("dim", &f.dim, positive)
      .Number("rounds", &f.rounds, positive)
      .Number("threads", &f.threads, positive);
  if (absl::Status s = flags.Parse(argc, argv); !s.ok() || f.dir.empty()) {
    std::fprintf(stderr, "bench_cold_store: %s\n",
                 s.ok() ? "--dir is required" : std::string(s.message()).c_str());
    return 2;
  }
  if (f.rows < kBatch) {
    std::fprintf(stderr, "bench_cold_store: --rows must be >= %lld\n",
                 static_cast<long long>(kBatch));
    return 2;
  }
  ThreadPool pool("cold_store", f.threads);
  const Zipf zipf(f.rows, 1.05);
  const std::vector<std::string> stores = {"rowlog", "rocksdb", "rocksdb_snappy"};
  for (int round = 0; round < f.rounds; ++round) {
    for (size_t k = 0; k < stores.size(); ++k) {
      const std::string& name = stores[(k + round) % stores.size()];
      if (absl::Status s = RunOne(f, name, zipf, round, &pool); !s.ok()) {
        std::fprintf(stderr, "bench_cold_store: %s\n", s.ToString().c_str());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace recflow

int main(int argc, char** argv) { return recflow::Main(argc, argv); }
