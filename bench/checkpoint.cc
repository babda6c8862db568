// bench_checkpoint: saving and restoring a large model with recflow's Saver,
// against the disk's own sequential rate (bench/run checkpoint pairs it with
// bench/peers/checkpoint_torch.py; see bench/README.md).
//
//   bench_checkpoint --case=recflow --dir=D --size_gb=2 --threads=2 [--direct_io=1]
//                    [--io_mb=8]
//       Builds the model (time not counted), saves it with Saver (fsync on),
//       drops the checkpoint's pages from the page cache, restores it
//       (restore_cold), restores it again (restore_cached), and checks the
//       restored values against the saved ones. --direct_io=0 turns the
//       Saver's direct I/O off (writer and reader), for comparison.
//       --io_mb: the Saver's write buffer (BundleWriterOptions::buffer_bytes).
//   bench_checkpoint --case=disk --dir=D --bytes=N [--io_mb=8]
//       Writes N bytes to one file in io_mb MiB writes + fsync (file and
//       directory), drops its pages, reads it (read_cold), reads it again
//       (read_cached); then the same write and cold read with O_DIRECT
//       (where the file system allows it), from 4 KiB pages (direct_4k)
//       and from a buffer offered huge pages (direct). write and read_cold
//       are the fastest of the ways: the disk's best sequential rate.
//   bench_checkpoint --case=open --dir=D --size_gb=2 --threads=2 [--rounds=3]
//       Open in place (embedding/mapped_rows.h) against today's restore:
//       saves the model with the table's hash index (Saver, fsync on), then
//       each round, with the checkpoint's pages dropped before each way:
//         import    RestoreTable (reading and inserting every row), then the
//                   first lookup; then the lookup rate of the table in DRAM
//                   (the "full speed"; batches of 4096 random keys, kReadOnly,
//                   one thread);
//         open      RestoreTable with open_in_place, then the first lookup;
//                   then the same lookups in 100 ms windows until one runs at
//                   >= 90% of full speed (time to full speed), and the end of
//                   the background read-and-checksum pass;
//         read      a plain sequential read of the data file (8 MiB reads);
//         train     open in place + one training step (kTrain lookup and
//                   ApplyAdagrad of 4096 keys), against import + the same
//                   step.
//       Serving restores skip the slots (restore_slots = false) as the
//       server does; train restores map them.
//   bench_checkpoint --quick
//       Both cases on a ~12 MB model in a temporary directory (the ctest
//       smoke test).
//
// The model (sizes scale with --size_gb, 1 GB = 1e9 bytes of tensor data):
//   - a HashEmbeddingTable, dim 16, Adagrad (one slot), with
//     rows = 0.8 * size / 152 rows (1.05e7 at 2 GB); saved by
//     train::TableSaveable as emb/keys int64 [n], emb/values float [n,16],
//     emb/slots float [n,1,16], emb/frequencies int64 [n], emb/versions int64 [n]
//     (152 bytes per row), streamed through BundleWriter::AddChunks from
//     Export and restored with ReadChunks + Import;
//   - dense float variables holding the other 20%: 4 large [*, 1024] ones
//     (4% of the size each) and 200 small [*, 100] ones (0.02% each), each
//     one a TensorSaveable.
// Row i of the table: key 3i+1, values Gen(1, 16i+j), slots Gen(2, 16i+j),
// frequency i % 100, version 1 + i % 10; dense variable t: Gen(10+t, k).
// bench/peers/checkpoint_torch.py builds the same bytes.
//
// Checksums: the sum, mod 2^64, of every tensor's bytes read as little-endian
// uint32 words (order independent, so the table's export order does not
// matter), over the model before saving and after each restore.
//
// Output lines:
//   info ...
//   mode=NAME samples_us=T bytes=B
//   checksum saved=S restored_cold=S1 restored_cached=S2
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/direct_file.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/embedding/hash_embedding_table.h"
#include "recflow/embedding/table_bundle.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/serving/server_core.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/saved_model_export.h"
#include "recflow/train/variables.h"
#include "recflow/train/table_saveable.h"

namespace recflow {
namespace {

using bench::FlagParser;
using bench::Gen;

constexpr int64_t kDim = 16;
constexpr int64_t kBytesPerRow = 8 + 4 * kDim + 4 * kDim + 8 + 8;  // 152

struct Flags {
  std::string bench_case;
  std::string dir;
  double size_gb = 2;
  int64_t bytes = 0;  // disk case
  int threads = 2;
  bool direct_io = true;
  int64_t io_mb = 8;  // the Saver's write buffer and the disk case's block
  bool quick = false;
  int rounds = 3;
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Sum of the bytes as uint32 words, mod 2^64.
uint64_t WordSum(const char* data, size_t bytes) {
  uint64_t s = 0;
  const size_t n = bytes / 4;
  for (size_t i = 0; i < n; ++i) {
    uint32_t w;
    std::memcpy(&w, data + 4 * i, 4);
    s += w;
  }
  return s;
}
uint64_t WordSum(const Tensor& t) { return WordSum(t.raw_data(), t.TotalBytes()); }

// Evicts the file's pages from the page cache (they are clean after the
// fsync), so the next read comes from the disk. No root needed.
absl::Status DropFileCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return errors::Internal("open ", path, ": ", std::strerror(errno));
  ::fdatasync(fd);
  const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  if (rc != 0) return errors::Internal("posix_fadvise ", path, ": ", std::strerror(rc));
  return absl::OkStatus();
}

absl::Status DropDirCache(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file()) RETURN_IF_ERROR(DropFileCache(e.path().string()));
  }
  return absl::OkStatus();
}

// --- the model ---------------------------------------------------------------

struct Model {
  std::vector<std::string> names;
  std::vector<Tensor> dense;
  std::shared_ptr<embedding::EmbeddingTableResource> table;
  int64_t rows = 0;
  uint64_t bytes = 0;  // tensor data bytes in a checkpoint
};

void FillFloats(ThreadPool* pool, uint64_t seed, float* p, int64_t n) {
  pool->ParallelFor(n, 10, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = Gen(seed, static_cast<uint64_t>(i));
  });
}

absl::StatusOr<Model> BuildModel(double size_gb, ThreadPool* pool) {
  Model m;
  const double size = size_gb * 1e9;
  m.rows = std::max<int64_t>(1, static_cast<int64_t>(0.8 * size / kBytesPerRow));
  // 4 large [r, 1024] (4% each) and 200 small [r, 100] (0.02% each).
  for (int t = 0; t < 204; ++t) {
    const bool large = t < 4;
    const int64_t cols = large ? 1024 : 100;
    const int64_t rows = std::max<int64_t>(
        1, static_cast<int64_t>((large ? 0.04 : 0.0002) * size / 4 / cols));
    Tensor v(DT_FLOAT, {rows, cols});
    FillFloats(pool, 10 + t, v.data<float>(), v.NumElements());
    m.names.push_back(large ? absl::StrCat("dense/large_", t) : absl::StrCat("dense/small_", t));
    m.bytes += v.TotalBytes();
    m.dense.push_back(std::move(v));
  }
  embedding::EmbeddingTableOptions o;
  o.name = "emb";
  o.dim = kDim;
  o.optimizer = embedding::OptimizerKind::kAdagrad;
  o.num_shards = 64;
  ASSIGN_OR_RETURN(m.table, embedding::EmbeddingTableResource::Create(o));
  const int64_t chunk = 1 << 18;
  for (int64_t start = 0; start < m.rows; start += chunk) {
    const int64_t n = std::min(chunk, m.rows - start);
    embedding::TableChunk c;
    c.keys = Tensor(DT_INT64, {n});
    c.values = Tensor(DT_FLOAT, {n, kDim});
    c.slots = Tensor(DT_FLOAT, {n, 1, kDim});
    c.frequencies = Tensor(DT_INT64, {n});
    c.versions = Tensor(DT_INT64, {n});
    pool->ParallelFor(n, 200, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t i = start + r;
        c.keys.data<int64_t>()[r] = 3 * i + 1;
        c.frequencies.data<int64_t>()[r] = i % 100;
        c.versions.data<int64_t>()[r] = 1 + i % 10;
        for (int64_t j = 0; j < kDim; ++j) {
          c.values.data<float>()[r * kDim + j] = Gen(1, static_cast<uint64_t>(i * kDim + j));
          c.slots.data<float>()[r * kDim + j] = Gen(2, static_cast<uint64_t>(i * kDim + j));
        }
      }
    });
    RETURN_IF_ERROR(m.table->table()->Import(c, pool));
  }
  m.bytes += static_cast<uint64_t>(m.rows) * kBytesPerRow;
  return m;
}

absl::StatusOr<uint64_t> Checksum(const Model& m, ThreadPool* pool) {
  uint64_t s = 0;
  for (const Tensor& t : m.dense) s += WordSum(t);
  embedding::ExportOptions eo;
  eo.order = embedding::ExportOptions::Order::kStorage;  // as TableSaveable
  eo.max_rows_per_chunk = 1 << 18;
  int64_t rows = 0;
  ASSIGN_OR_RETURN(embedding::ExportResult r,
                   m.table->table()->Export(
                       eo,
                       [&](const embedding::TableChunk& c) {
                         s += WordSum(c.keys) + WordSum(c.values) + WordSum(c.slots) +
                              WordSum(c.frequencies) + WordSum(c.versions);
                         rows += c.keys.NumElements();
                         return absl::OkStatus();
                       },
                       pool));
  if (rows != m.rows) {
    return errors::Internal("the table holds ", rows, " rows, expected ", m.rows);
  }
  return s;
}

// Process CPU time (user + system, all threads) so far, in seconds.
double CpuSeconds() {
  struct rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// With cpu_seconds >= 0, the line also carries the CPU time the mode took.
void PrintMode(const char* mode, double seconds, uint64_t bytes, double cpu_seconds = -1) {
  std::printf("mode=%s samples_us=%.0f bytes=%llu", mode, seconds * 1e6,
              static_cast<unsigned long long>(bytes));
  if (cpu_seconds >= 0) std::printf(" cpu_us=%.0f", cpu_seconds * 1e6);
  std::printf("\n");
  std::fflush(stdout);
}

absl::Status RunRecflow(const Flags& f) {
  ThreadPool pool("bench", f.threads);
  const auto tb = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(Model m, BuildModel(f.size_gb, &pool));
  const double build_s = SecondsSince(tb);
  // One full Export pass (plus the word sums): what each of the table
  // saveable's passes over the rows costs before any byte is written.
  const auto tc = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const uint64_t saved, Checksum(m, &pool));
  std::printf("info rows=%lld dense_tensors=%zu bytes=%llu build_s=%.1f export_pass_s=%.2f "
              "sync=1 cache_drop=posix_fadvise(DONTNEED)\n",
              static_cast<long long>(m.rows), m.dense.size(),
              static_cast<unsigned long long>(m.bytes), build_s, SecondsSince(tc));
  std::fflush(stdout);  // shows when the timed part starts (stdout may be a pipe)

  std::vector<checkpoint::Saveable> saveables;
  for (size_t i = 0; i < m.dense.size(); ++i) {
    saveables.push_back(checkpoint::TensorSaveable(
        m.names[i], [&m, i]() -> absl::StatusOr<Tensor> { return m.dense[i]; },
        [&m, i](const Tensor& t) {
          m.dense[i] = t;
          return absl::OkStatus();
        }));
  }
  train::TableSaveableOptions to;
  to.pool = &pool;
  to.rows_per_chunk = 1 << 16;
  saveables.push_back(train::TableSaveable(m.table, "emb", to));
  checkpoint::SaverOptions so;
  so.directory = f.dir;
  so.max_to_keep = 1;
  so.restore_threads = f.threads;
  so.writer.sync = true;
  so.writer.direct_io = f.direct_io;
  so.writer.buffer_bytes = static_cast<size_t>(f.io_mb) << 20;
  so.reader.direct_io = f.direct_io;
  ASSIGN_OR_RETURN(auto saver, checkpoint::Saver::Create(so, std::move(saveables)));

  double c0 = CpuSeconds();
  auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::string prefix, saver->Save(1));
  PrintMode("save", SecondsSince(t0), m.bytes, CpuSeconds() - c0);

  RETURN_IF_ERROR(DropDirCache(f.dir));
  // Forget the values first, so a restore that did nothing cannot pass.
  for (Tensor& t : m.dense) t = Tensor();
  m.table->table()->Clear();
  c0 = CpuSeconds();
  t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(saver->Restore(prefix));
  PrintMode("restore_cold", SecondsSince(t0), m.bytes, CpuSeconds() - c0);
  ASSIGN_OR_RETURN(const uint64_t cold, Checksum(m, &pool));

  for (Tensor& t : m.dense) t = Tensor();
  m.table->table()->Clear();
  c0 = CpuSeconds();
  t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(saver->Restore(prefix));
  PrintMode("restore_cached", SecondsSince(t0), m.bytes, CpuSeconds() - c0);
  ASSIGN_OR_RETURN(const uint64_t cached, Checksum(m, &pool));

  std::printf("checksum saved=%llu restored_cold=%llu restored_cached=%llu\n",
              static_cast<unsigned long long>(saved), static_cast<unsigned long long>(cold),
              static_cast<unsigned long long>(cached));
  if (cold != saved || cached != saved) {
    return errors::DataLoss("restored values differ from the saved ones (checksums ", saved,
                            " saved, ", cold, " and ", cached, " restored)");
  }
  return absl::OkStatus();
}

// --- open in place ----------------------------------------------------------------

// kReadOnly lookups of 4096 random keys per batch until `until` says stop;
// rows looked up per second over the batches run.
struct LookupProbe {
  const Model* m;
  std::mt19937_64 rng{7};
  std::vector<int64_t> ids = std::vector<int64_t>(4096);
  std::vector<float> out = std::vector<float>(4096 * kDim);

  absl::Status Batch(embedding::LookupMode mode = embedding::LookupMode::kReadOnly) {
    for (int64_t& id : ids) id = 3 * static_cast<int64_t>(rng() % m->rows) + 1;
    return m->table->table()->Lookup(ids, absl::MakeSpan(out), mode);
  }
  // Rows/s over `seconds` of batches.
  absl::StatusOr<double> Rate(double seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    int64_t rows = 0;
    while (SecondsSince(t0) < seconds) {
      RETURN_IF_ERROR(Batch());
      rows += static_cast<int64_t>(ids.size());
    }
    return rows / SecondsSince(t0);
  }
};

absl::StatusOr<double> PlainRead(const std::string& path) {
  RETURN_IF_ERROR(DropFileCache(path));
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return errors::Internal("open ", path, ": ", std::strerror(errno));
  std::vector<char> buf(8 << 20);
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t sum = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0) {
      ::close(fd);
      return errors::Internal("read ", path, ": ", std::strerror(errno));
    }
    if (got == 0) break;
    sum += static_cast<uint8_t>(buf[got - 1]);  // touch the bytes
  }
  ::close(fd);
  const double s = SecondsSince(t0);
  if (sum == 1) std::printf(" ");
  return s;
}

// A SavedModel serving the model's table through a HashEmbeddingBag
// signature (ids, row_splits -> pooled), exported by recflow (so it carries
// the table's index); the rows come from the checkpoint at `prefix`.
absl::Status ExportServingModel(const std::string& prefix, const std::string& export_dir,
                                int64_t num_shards, ThreadPool* pool) {
  Scope root = Scope::NewRootScope();
  ops::HashEmbeddingTableAttrs attrs;
  attrs.dim = kDim;
  attrs.optimizer = "adagrad";
  attrs.num_shards = num_shards;
  Output table = train::HashEmbeddingTable(root, "emb", attrs);
  Output ids = ops::Placeholder(root.WithOpName("ids"), DT_INT64);
  Output splits = ops::Placeholder(root.WithOpName("row_splits"), DT_INT64);
  ops::HashEmbeddingBagAttrs bag;
  bag.mode = "serve";
  Output pooled =
      ops::HashEmbeddingBag(root.WithOpName("pooled"), table, ids, splits, Output(), bag);
  ASSIGN_OR_RETURN(const tensorflow::GraphDef def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create({}, def));
  RETURN_IF_ERROR(train::CreateHashTables(session.get()));
  ResourceMgr* rm = session->device()->resource_manager();
  ASSIGN_OR_RETURN(auto res,
                   embedding::EmbeddingTableResource::Lookup(*rm, rm->default_container(), "emb"));
  ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(Env::Default(), prefix));
  embedding::TableBundleOptions ro;
  ro.pool = pool;
  RETURN_IF_ERROR(embedding::RestoreTable(res->table(), *reader, "emb", false, ro));
  return train::ExportSavedModel(
      session.get(),
      {{"serving_default",
        {.inputs = {{"ids", ids}, {"row_splits", splits}}, .outputs = {{"pooled", pooled}}}}},
      export_dir);
}

// Seconds from ServerCore::Create to the first answered Predict (one id),
// with the export's pages dropped first.
absl::StatusOr<double> FirstPredict(const std::string& base, int64_t rows, bool in_place) {
  RETURN_IF_ERROR(DropDirCache(base + "/1/variables"));
  serving::ServerCoreOptions options;
  options.model_server_config = serving::SingleModelConfig("m", base);
  options.file_system_poll_wait_seconds = 0.01;
  options.open_tables_in_place = in_place;
  std::mt19937_64 rng(in_place ? 1 : 2);
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(auto core, serving::ServerCore::Create(options));
  serving::PredictRequest request;
  request.model_spec.name = "m";
  request.inputs["ids"] =
      Tensor::FromVector<int64_t>({3 * static_cast<int64_t>(rng() % rows) + 1}, {1});
  request.inputs["row_splits"] = Tensor::FromVector<int64_t>({0, 1}, {2});
  for (;;) {
    serving::PredictResponse response;
    if (core->Predict(request, &response).ok()) break;
    if (SecondsSince(t0) > 300) return errors::DeadlineExceeded("no answer from the server");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return SecondsSince(t0);
}

absl::Status RunOpen(const Flags& f) {
  ThreadPool pool("bench", f.threads);
  ASSIGN_OR_RETURN(Model m, BuildModel(f.size_gb, &pool));
  std::vector<checkpoint::Saveable> saveables;
  for (size_t i = 0; i < m.dense.size(); ++i) {
    saveables.push_back(checkpoint::TensorSaveable(
        m.names[i], [&m, i]() -> absl::StatusOr<Tensor> { return m.dense[i]; },
        [](const Tensor&) { return absl::OkStatus(); }));
  }
  train::TableSaveableOptions to;
  to.pool = &pool;
  to.rows_per_chunk = 1 << 16;
  to.save_index = true;
  saveables.push_back(train::TableSaveable(m.table, "emb", to));
  checkpoint::SaverOptions so;
  so.directory = f.dir;
  so.max_to_keep = 1;
  so.writer.sync = true;
  ASSIGN_OR_RETURN(auto saver, checkpoint::Saver::Create(so, std::move(saveables)));
  auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const std::string prefix, saver->Save(1));
  const double save_s = SecondsSince(t0);
  m.dense.clear();  // only the table is restored below
  ASSIGN_OR_RETURN(auto probe_reader, checkpoint::BundleReader::Open(Env::Default(), prefix));
  const std::string data = checkpoint::DataFilename(prefix, 0, probe_reader->num_shards());
  ASSIGN_OR_RETURN(const checkpoint::TensorInfo index_info, probe_reader->GetInfo("emb/index"));
  std::printf("info rows=%lld save_with_index_s=%.2f index_bytes=%llu data_file_bytes=%llu\n",
              static_cast<long long>(m.rows), save_s,
              static_cast<unsigned long long>(index_info.size),
              static_cast<unsigned long long>(std::filesystem::file_size(data)));
  std::fflush(stdout);
  embedding::HashEmbeddingTable* table = m.table->table();
  LookupProbe probe{&m};

  auto restore = [&](bool in_place, bool slots) -> absl::Status {
    table->Clear();
    RETURN_IF_ERROR(DropDirCache(f.dir));
    ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(Env::Default(), prefix));
    embedding::TableBundleOptions ro;
    ro.pool = &pool;
    ro.rows_per_chunk = 1 << 16;
    ro.open_in_place = in_place;
    ro.restore_slots = slots;
    return embedding::RestoreTable(table, *reader, "emb", /*delta=*/false, ro);
  };
  auto train_step = [&]() -> absl::Status {
    RETURN_IF_ERROR(probe.Batch(embedding::LookupMode::kTrain));
    std::vector<int64_t> ids = probe.ids;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::vector<float> grads(ids.size() * kDim, 0.01f);
    return table->ApplyAdagrad(ids, grads, {.learning_rate = 0.05f}, 2).ok()
               ? absl::OkStatus()
               : errors::Internal("ApplyAdagrad failed");
  };
  // Serving: the same rows exported and served.
  const std::string serve_base = f.dir + "/serve";
  t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(ExportServingModel(prefix, serve_base + "/1", 64, &pool));
  std::printf("info export_s=%.2f\n", SecondsSince(t0));
  std::fflush(stdout);

  for (int round = 0; round < f.rounds; ++round) {
    {
      ASSIGN_OR_RETURN(const double import_s, FirstPredict(serve_base, m.rows, false));
      ASSIGN_OR_RETURN(const double open_s, FirstPredict(serve_base, m.rows, true));
      std::printf("serve round=%d import_first_predict_s=%.3f open_first_predict_s=%.3f\n",
                  round + 1, import_s, open_s);
      std::fflush(stdout);
    }
    // import: restore, first lookup, full speed.
    t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(restore(false, false));
    RETURN_IF_ERROR(probe.Batch());
    const double import_first = SecondsSince(t0);
    if (table->has_base()) return errors::Internal("the import restore mapped the table");
    ASSIGN_OR_RETURN(const double full_rate, probe.Rate(2.0));

    // open: restore in place, first lookup, time to full speed.
    t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(restore(true, false));
    const double open_s = SecondsSince(t0);
    if (!table->has_base()) return errors::Internal("the table was not opened in place");
    {
      // One request's worth: a single id first, then a full batch.
      std::vector<float> row(kDim);
      const int64_t id = 3 * static_cast<int64_t>(probe.rng() % m.rows) + 1;
      RETURN_IF_ERROR(table->Lookup({&id, 1}, absl::MakeSpan(row),
                                    embedding::LookupMode::kReadOnly));
    }
    const double open_first_id = SecondsSince(t0);
    RETURN_IF_ERROR(probe.Batch());
    const double open_first = SecondsSince(t0);
    double full_at = -1;
    double first_window_rate = -1;
    // The smoke test only checks that the path runs: a machine where the
    // opened table never reaches 90% of the imported rate must not stall it.
    const double full_speed_cap_s = f.quick ? 5 : 120;
    while (SecondsSince(t0) < full_speed_cap_s) {
      ASSIGN_OR_RETURN(const double rate, probe.Rate(0.1));
      if (first_window_rate < 0) first_window_rate = rate;
      if (rate >= 0.9 * full_rate) {
        full_at = SecondsSince(t0);
        break;
      }
    }
    // The background pass: opened tables export only after it, so an
    // empty delta export waits for it.
    embedding::ExportOptions eo;
    eo.since_step = 1 << 30;
    eo.order = embedding::ExportOptions::Order::kStorage;
    RETURN_IF_ERROR(table->Export(eo, [](const embedding::TableChunk&) {
      return absl::OkStatus();
    }).status());
    const double verified_at = SecondsSince(t0);
    ASSIGN_OR_RETURN(const double open_rate, probe.Rate(1.0));

    // A plain read of the data file.
    ASSIGN_OR_RETURN(const double read_s, PlainRead(data));

    // Training: restore (slots too) + one step.
    t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(restore(false, true));
    RETURN_IF_ERROR(train_step());
    const double import_step = SecondsSince(t0);
    t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(restore(true, true));
    RETURN_IF_ERROR(train_step());
    const double open_step = SecondsSince(t0);

    std::printf("open round=%d import_first_lookup_s=%.3f full_rate=%.0f open_s=%.4f "
                "open_first_id_s=%.4f open_first_lookup_s=%.4f first_window_rate=%.0f full_speed_s=%.2f "
                "verified_s=%.2f open_rate_after=%.0f plain_read_s=%.2f "
                "import_train_step_s=%.3f open_train_step_s=%.3f\n",
                round + 1, import_first, full_rate, open_s, open_first_id, open_first,
                first_window_rate,
                full_at, verified_at, open_rate, read_s, import_step, open_step);
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

// --- the disk's own rate --------------------------------------------------------

// Reads the whole file in buf-sized reads; the word sum of its bytes. With
// `direct`, through O_DIRECT (buf must be aligned).
absl::Status ReadAll(const std::string& path, bool direct, char* buf, size_t block,
                     uint64_t* sum) {
  const int fd = ::open(path.c_str(), O_RDONLY | (direct ? O_DIRECT : 0));
  if (fd < 0) return errors::Internal("open ", path, ": ", std::strerror(errno));
  ssize_t n;
  uint64_t s = 0;
  while ((n = ::read(fd, buf, block)) > 0) s += WordSum(buf, n);
  ::close(fd);
  if (n < 0) return errors::Internal("read ", path, ": ", std::strerror(errno));
  *sum = s;
  return absl::OkStatus();
}

// Writes f.bytes to `path` in writes of `block` bytes, then fsync (file and
// directory); with `direct`, through O_DIRECT (the size is rounded up to
// 4 KiB). Returns the seconds taken; *sum is the word sum written.
absl::StatusOr<double> WriteAll(const Flags& f, const std::string& path, bool direct, char* buf,
                                size_t block, uint64_t* sum) {
  float* fp = reinterpret_cast<float*>(buf);
  *sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0), 0644);
  if (fd < 0) return errors::Internal("open ", path, ": ", std::strerror(errno));
  for (int64_t left = f.bytes; left > 0;) {
    size_t n = static_cast<size_t>(std::min<int64_t>(left, block));
    if (direct) n = (n + 4095) / 4096 * 4096;
    // Vary the bytes per block, as a model's would.
    fp[0] = static_cast<float>(left);
    *sum += WordSum(buf, n);
    if (::write(fd, buf, n) != static_cast<ssize_t>(n)) {
      ::close(fd);
      return errors::Internal("write ", path, ": ", std::strerror(errno));
    }
    left -= static_cast<int64_t>(n);
  }
  if (::fsync(fd) != 0) return errors::Internal("fsync ", path, ": ", std::strerror(errno));
  ::close(fd);
  const int dfd = ::open(f.dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return SecondsSince(t0);
}

// The disk's own sequential rate, measured three ways: through the page
// cache (buffered), and around it (O_DIRECT; skipped where the file system
// refuses it) from a buffer of 4 KiB pages and from one the kernel may back
// with 2 MiB huge pages (as the Saver's are: on a virtio disk the 4 KiB
// pages' direct transfers were several times slower). Prints every
// measurement (write_buffered, write_direct_4k, write_direct,
// read_cold_buffered, read_cold_direct_4k, read_cold_direct) and, as
// write / read_cold, the fastest: the disk's best rate is the reference.
absl::Status RunDisk(const Flags& f) {
  const std::string path = f.dir + "/disk_rate.bin";
  const size_t block = static_cast<size_t>(f.io_mb) << 20;
  AlignedBuffer aligned(block);  // huge pages where the system offers them
  // The same size in 4 KiB pages only.
  std::unique_ptr<char, decltype(&std::free)> small_pages(
      static_cast<char*>(std::aligned_alloc(kDirectIoAlignment, aligned.capacity())), &std::free);
  if (small_pages == nullptr) return errors::ResourceExhausted("no memory for the disk bench");
  ::madvise(small_pages.get(), aligned.capacity(), MADV_NOHUGEPAGE);
  for (char* buf : {aligned.data(), small_pages.get()}) {
    float* fp = reinterpret_cast<float*>(buf);
    for (size_t i = 0; i < block / 4; ++i) fp[i] = Gen(3, i);
  }
  bool direct_ok = false;
  {
    const std::string p = f.dir + "/disk_rate.probe";
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    if (fd >= 0) {
      direct_ok = true;
      ::close(fd);
      std::remove(p.c_str());
    }
  }
  double best_write = 0, best_read = 0;
  uint64_t written_sum = 0, cold = 0, cached = 0;
  struct Way {
    const char* name;
    bool direct;
    char* buf;
  };
  for (const Way& way : {Way{"buffered", false, aligned.data()},
                         Way{"direct_4k", true, small_pages.get()},
                         Way{"direct", true, aligned.data()}}) {
    if (way.direct && !direct_ok) continue;
    const bool direct = way.direct;
    const char* how = way.name;
    char* buf = way.buf;
    uint64_t sum = 0;
    ASSIGN_OR_RETURN(const double w, WriteAll(f, path, direct, buf, block, &sum));
    PrintMode(absl::StrCat("write_", how).c_str(), w, f.bytes);
    RETURN_IF_ERROR(DropFileCache(path));
    auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(ReadAll(path, direct, buf, block, &cold));
    const double r = SecondsSince(t0);
    PrintMode(absl::StrCat("read_cold_", how).c_str(), r, f.bytes);
    if (cold != sum) return errors::DataLoss("read back different bytes from ", path, " (", how, ")");
    if (best_write == 0 || w < best_write) best_write = w;
    if (best_read == 0 || r < best_read) best_read = r;
    if (!direct) {
      // Cached: the same buffered read again, from the page cache.
      t0 = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(ReadAll(path, false, buf, block, &cached));
      PrintMode("read_cached", SecondsSince(t0), f.bytes);
      written_sum = sum;
    }
    std::remove(path.c_str());
  }
  PrintMode("write", best_write, f.bytes);
  PrintMode("read_cold", best_read, f.bytes);
  std::printf("checksum saved=%llu restored_cold=%llu restored_cached=%llu\n",
              static_cast<unsigned long long>(written_sum),
              static_cast<unsigned long long>(written_sum),
              static_cast<unsigned long long>(cached));
  if (cached != written_sum) return errors::DataLoss("read back different bytes from ", path);
  return absl::OkStatus();
}

absl::Status CheckFreeSpace(const std::string& dir, uint64_t need) {
  std::error_code ec;
  const auto space = std::filesystem::space(dir, ec);
  if (ec) return errors::Internal("cannot stat the file system of ", dir, ": ", ec.message());
  if (space.available < need) {
    return errors::ResourceExhausted(dir, " has ", space.available / 1e9, " GB free; the bench needs ",
                                     need / 1e9, " GB (3x the model size)");
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Flags f;
  const auto positive = FlagParser::Positive();
  FlagParser flags;
  flags.String("case", &f.bench_case)
      .String("dir", &f.dir)
      .Number("size_gb", &f.size_gb, [](double v) { return v > 0 && v < 1000; })
      .Number("bytes", &f.bytes, positive)
      .Number("threads", &f.threads, positive)
      .Number("io_mb", &f.io_mb, [](int v) { return v > 0 && v <= 1024; })
      .Number("rounds", &f.rounds, positive)
      .Custom("direct_io",
              [&](absl::string_view v) {
                f.direct_io = v == "1";
                return v == "0" || v == "1";
              })
      .Switch("quick", &f.quick);
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "bench_checkpoint: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  std::string tmp;
  if (f.quick) {
    std::string pattern = (std::filesystem::temp_directory_path() / "bench_checkpoint.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::fprintf(stderr, "bench_checkpoint: mkdtemp failed\n");
      return 1;
    }
    tmp = pattern;
    f.dir = tmp;
    f.size_gb = 0.012;
  }
  if (f.dir.empty()) {
    std::fprintf(stderr, "bench_checkpoint: --dir is required\n");
    return 2;
  }
  absl::Status s;
  if (f.quick) {
    f.bytes = static_cast<int64_t>(f.size_gb * 1e9);
    s = CheckFreeSpace(f.dir, 3 * f.bytes);
    if (s.ok()) s = RunRecflow(f);
    if (s.ok()) s = RunDisk(f);
    if (s.ok()) {
      f.rounds = 1;
      std::filesystem::remove_all(f.dir + "/checkpoint");
      s = RunOpen(f);
    }
    std::filesystem::remove_all(tmp);
  } else if (f.bench_case == "recflow") {
    s = CheckFreeSpace(f.dir, static_cast<uint64_t>(3 * f.size_gb * 1e9));
    if (s.ok()) s = RunRecflow(f);
  } else if (f.bench_case == "open") {
    s = CheckFreeSpace(f.dir, static_cast<uint64_t>(3 * f.size_gb * 1e9));
    if (s.ok()) s = RunOpen(f);
  } else if (f.bench_case == "disk") {
    if (f.bytes <= 0) {
      std::fprintf(stderr, "bench_checkpoint: --case=disk needs --bytes\n");
      return 2;
    }
    s = CheckFreeSpace(f.dir, f.bytes);
    if (s.ok()) s = RunDisk(f);
  } else {
    s = errors::InvalidArgument("unknown --case '", f.bench_case, "' (recflow, open or disk)");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "bench_checkpoint: %s\n", s.ToString().c_str());
    return 1;
  }
  if (f.quick) std::printf("quick run ok\n");
  return 0;
}

}  // namespace
}  // namespace recflow

int main(int argc, char** argv) { return recflow::Main(argc, argv); }
