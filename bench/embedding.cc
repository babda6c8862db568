// bench_embedding: recflow's side of `bench/run embedding`.
//
//   bench_embedding --case=gen --out=F [--steps=S] [--fields=26] [--batch=4096]
//                   [--rows=1000000] [--zipf=1.05] [--seed=1]
//   bench_embedding --case=train --ids=F --mode=dense|hash|hash_graph
//                   [--threads=2] [--intra_threads=T] [--warmup=3] [--samples=5]
//                   [--iters=10] [--dump=PATH]
//   bench_embedding --case=lookup --ids=F [--threads=1] [--samples=5]
//
// gen: writes S batches of int64 ids, [S, fields, batch] (raw little-endian
//      int64, no header), one id per field per example (Criteo's one-hot
//      layout), Zipf(s) over [0, rows): rank r has probability ~ 1/r^s and is
//      mapped to id (r * 769231) mod rows, so popular ids are spread over
//      the table rather than packed at its start. The peer reads the same
//      file.
// train: one training step = for every field, an embedding bag (sum) of the
//      batch's ids -> [batch, 16]; loss = sum over fields of
//      sum(bag_f * G_f) with a fixed upstream gradient G_f[b, j] =
//      0.01 * Gen(100 + f, b * 16 + j); backward; Adagrad (lr 0.05,
//      initial accumulator 0.1) on the touched rows only. Tables start at
//      0.01 everywhere (as the peer's).
//        dense  26 resource variables [rows, 16] in a Session graph:
//               ResourceEmbeddingBag -> Mul -> Sum -> AddN, trained with
//               train::AdagradOptimizer::Minimize: the gradient stays
//               sparse (EmbeddingBagGrad: unique ids + summed rows) and
//               ResourceSparseApplyAdagrad updates only those rows.
//      (--intra_threads: the graph session's intra-op pool; default --threads.)
//        hash_graph  the same tables through the graph ops
//               (HashEmbeddingTableOp, HashEmbeddingBag, Minimize(Adagrad) ->
//               HashTableApplyAdagrad).
//        hash   26 HashEmbeddingTables (recflow/embedding, no vocabulary;
//               rows created on first sight), driven through the table's
//               API: Unique -> Lookup(kTrain) of the distinct ids -> bag
//               sums -> per-id gradient rows (SumRowsByIndex) ->
//               ApplyAdagrad; fields run in parallel on a pool of --threads.
//      Steps cycle over the S batches; the process always runs
//      warmup + samples * iters steps, so its final state is deterministic
//      and --dump writes the final rows of a probe set (the distinct ids of
//      batch 0, fields 0 and fields-1, first 256 each) for bench/run to
//      compare with the peer's.
// lookup: lookups/s of a HashEmbeddingTable (kReadOnly, 1M rows of dim 16
//      with Adagrad slots) against a plain random-row gather from a float
//      array [rows, 16] with the same ids (the memory's limit), one thread
//      each by default; prints bytes per row of that table.
//
// Output: `info ...`, `mode=M median_us=... samples_us=...` (per step for
// train, per batch of lookups for lookup), `stats k=v ...`.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "bench/bench_util.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/core/threadpool.h"
#include "recflow/embedding/hash_embedding_table.h"
#include "recflow/embedding/unique_ids.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/embedding_ops.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/global_step.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

namespace recflow {
namespace {

constexpr int64_t kDim = 16;
constexpr float kInit = 0.01f;
constexpr float kLearningRate = 0.05f;
constexpr float kInitialAccumulator = 0.1f;
constexpr int kProbe = 256;

struct Flags {
  std::string bench_case = "train";
  std::string out, ids, mode = "dense", dump;
  int64_t steps = 20, fields = 26, batch = 4096, rows = 1000000, seed = 1;
  double zipf = 1.05;
  int threads = 2, intra_threads = -1, warmup = 3, samples = 5, iters = 10;
};

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

absl::Status Gen(const Flags& f) {
  if (std::gcd(int64_t{769231}, f.rows) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rows=", f.rows, " shares a factor with 769231: rank -> id is not 1:1"));
  }
  // CDF of Zipf(s) over ranks 1..rows.
  std::vector<double> cdf(f.rows);
  double acc = 0;
  for (int64_t r = 0; r < f.rows; ++r) {
    acc += 1.0 / std::pow(static_cast<double>(r + 1), f.zipf);
    cdf[r] = acc;
  }
  std::FILE* out = std::fopen(f.out.c_str(), "wb");
  if (out == nullptr) return absl::NotFoundError(absl::StrCat("cannot write ", f.out));
  uint64_t state = static_cast<uint64_t>(f.seed);
  std::vector<int64_t> buf(f.batch);
  for (int64_t s = 0; s < f.steps * f.fields; ++s) {
    for (int64_t b = 0; b < f.batch; ++b) {
      const double u = static_cast<double>(SplitMix(&state) >> 11) * 0x1.0p-53 * acc;
      const int64_t rank = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
      const int64_t r = std::min(rank, f.rows - 1);
      buf[b] = static_cast<int64_t>((static_cast<unsigned __int128>(r) * 769231u) %
                                    static_cast<uint64_t>(f.rows));
    }
    if (std::fwrite(buf.data(), sizeof(int64_t), buf.size(), out) != buf.size()) {
      std::fclose(out);
      return absl::DataLossError(absl::StrCat("short write to ", f.out));
    }
  }
  if (std::fclose(out) != 0) return absl::DataLossError(absl::StrCat("close ", f.out));
  return absl::OkStatus();
}

// ids[s][f] = the batch's ids of field f at step s.
absl::StatusOr<std::vector<std::vector<std::vector<int64_t>>>> ReadIds(const Flags& f) {
  std::FILE* in = std::fopen(f.ids.c_str(), "rb");
  if (in == nullptr) return absl::NotFoundError(absl::StrCat("cannot read ", f.ids));
  std::fseek(in, 0, SEEK_END);
  const int64_t bytes = std::ftell(in);
  std::fseek(in, 0, SEEK_SET);
  const int64_t per_step = f.fields * f.batch * 8;
  if (bytes <= 0 || bytes % per_step != 0) {
    std::fclose(in);
    return absl::InvalidArgumentError(absl::StrCat(f.ids, ": ", bytes, " bytes is not a multiple of ",
                                                   per_step, " (fields * batch * 8)"));
  }
  std::vector<std::vector<std::vector<int64_t>>> ids(bytes / per_step);
  for (auto& step : ids) {
    step.resize(f.fields);
    for (auto& v : step) {
      v.resize(f.batch);
      if (std::fread(v.data(), 8, v.size(), in) != v.size()) {
        std::fclose(in);
        return absl::DataLossError(absl::StrCat("short read from ", f.ids));
      }
      for (int64_t id : v) {
        if (id < 0 || id >= f.rows) {
          std::fclose(in);
          return absl::InvalidArgumentError(absl::StrCat(f.ids, ": id ", id, " outside [0, ",
                                                         f.rows, ")"));
        }
      }
    }
  }
  std::fclose(in);
  return ids;
}

// The fixed upstream gradient of field f, [batch, dim].
Tensor UpstreamGrad(const Flags& f, int64_t field) {
  return bench::GenTensor(100 + field, TensorShape({f.batch, kDim}), 0.01f);
}

// The probe ids of a field: the distinct ids of batch 0, first kProbe.
std::vector<int64_t> ProbeIds(const std::vector<int64_t>& batch0) {
  std::vector<int64_t> out;
  for (int64_t id : batch0) {
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
    if (static_cast<int>(out.size()) == kProbe) break;
  }
  return out;
}

// Runs warmup + samples * iters steps of `step`; prints the mode line.
absl::Status TimeSteps(const Flags& f, const std::string& mode,
                       const std::function<absl::Status(int64_t)>& step) {
  int64_t s = 0;
  for (int w = 0; w < f.warmup; ++w) RETURN_IF_ERROR(step(s++));
  std::vector<double> samples;
  for (int k = 0; k < f.samples; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < f.iters; ++i) RETURN_IF_ERROR(step(s++));
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    samples.push_back(us / f.iters);
  }
  std::vector<std::string> parts;
  for (double v : samples) parts.push_back(bench::Fmt("%.1f", v));
  std::printf("mode=%s median_us=%.1f min_us=%.1f samples_us=%s\n", mode.c_str(),
              bench::Median(samples), *std::min_element(samples.begin(), samples.end()),
              absl::StrJoin(parts, ",").c_str());
  return absl::OkStatus();
}

absl::Status WriteDump(const Flags& f, const std::vector<std::vector<float>>& rows) {
  if (f.dump.empty()) return absl::OkStatus();
  std::FILE* out = std::fopen(f.dump.c_str(), "wb");
  if (out == nullptr) return absl::NotFoundError(absl::StrCat("cannot write ", f.dump));
  for (const auto& r : rows) std::fwrite(r.data(), sizeof(float), r.size(), out);
  std::fclose(out);
  return absl::OkStatus();
}

// --- the graph paths (dense and hash_graph) -----------------------------------

using Ids = std::vector<std::vector<std::vector<int64_t>>>;

// One field's table and ops: `bag` of the fed ids / splits, and `probe`
// reading the final rows of `probe_ids` (without changing the table).
struct FieldOps {
  Output bag, probe;
};
using MakeField = std::function<FieldOps(const Scope& root, int64_t field, Output ids,
                                         Output splits, Output probe_ids)>;

// Builds the 26-field graph with `make_field`, trains it with
// Minimize(Adagrad), times it as `mode` and dumps the probe rows.
absl::Status TrainGraph(const Flags& f, const Ids& ids, const std::string& mode,
                        const MakeField& make_field) {
  Scope root = Scope::NewRootScope();
  Output gs = train::CreateGlobalStep(root);
  std::vector<Output> losses;
  std::vector<std::string> probe_fetches;
  for (int64_t field = 0; field < f.fields; ++field) {
    Output ids_in = ops::Placeholder(root.WithOpName(absl::StrCat("ids", field)), DT_INT64);
    Output splits_in = ops::Placeholder(root.WithOpName(absl::StrCat("splits", field)), DT_INT64);
    const bool probed = field == 0 || field == f.fields - 1;
    Output probe_ids;
    if (probed) {
      const std::vector<int64_t> probe = ProbeIds(ids[0][field]);
      probe_ids = ops::Const(root, Tensor::FromVector<int64_t>(absl::MakeConstSpan(probe)));
    }
    const FieldOps fo = make_field(root, field, ids_in, splits_in, probe_ids);
    Output g = ops::Const(root, UpstreamGrad(f, field));
    losses.push_back(ops::Sum(root, ops::Mul(root, fo.bag, g),
                              ops::Const(root, Tensor::FromVector<int32_t>({0, 1}))));
    if (probed) probe_fetches.push_back(fo.probe.node()->name() + ":0");
  }
  Output loss = ops::AddN(root.WithOpName("loss"), losses);
  train::AdagradOptimizer opt(
      {.learning_rate = kLearningRate, .initial_accumulator_value = kInitialAccumulator});
  ASSIGN_OR_RETURN(Output train_op, opt.Minimize(root, loss, {}, gs));
  train::GlobalVariablesInitializer(root);
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(tensorflow::GraphDef gd, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session,
                   Session::Create({.inter_op_threads = f.threads,
                                    .intra_op_threads = f.intra_threads > 0 ? f.intra_threads
                                                                            : f.threads},
                                   gd));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({}, {}, {"init"}, &out));

  Tensor splits(DT_INT64, TensorShape({f.batch + 1}));
  for (int64_t b = 0; b <= f.batch; ++b) splits.data<int64_t>()[b] = b;
  // Feeds per stored step, built before timing (as the peer's tensors are).
  std::vector<std::vector<std::pair<std::string, Tensor>>> feeds(ids.size());
  for (size_t s = 0; s < ids.size(); ++s) {
    for (int64_t field = 0; field < f.fields; ++field) {
      feeds[s].emplace_back(absl::StrCat("ids", field),
                            Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids[s][field])));
      feeds[s].emplace_back(absl::StrCat("splits", field), splits);
    }
  }
  const std::string train_name = train_op.node()->name();
  RETURN_IF_ERROR(TimeSteps(f, mode, [&](int64_t s) {
    return session->Run(feeds[s % feeds.size()], {}, {train_name}, &out);
  }));

  RETURN_IF_ERROR(session->Run({}, probe_fetches, {}, &out));
  std::vector<std::vector<float>> dump;
  for (const Tensor& t : out) {
    dump.emplace_back(t.data<float>(), t.data<float>() + t.NumElements());
  }
  return WriteDump(f, dump);
}

// dense: a resource variable [rows, 16] per field, ResourceEmbeddingBag.
absl::Status TrainDense(const Flags& f, const Ids& ids) {
  return TrainGraph(f, ids, "dense", [&](const Scope& root, int64_t field, Output ids_in,
                                          Output splits_in, Output probe_ids) {
    const std::string name = absl::StrCat("emb", field);
    Output init = ops::Fill(root.WithOpName(name + "_init"),
                            ops::Const(root, Tensor::FromVector<int64_t>({f.rows, kDim})),
                            ops::Const(root, kInit));
    Output table = train::Variable(root, name, PartialShape({f.rows, kDim}), DT_FLOAT, init,
                                   {.use_resource = true});
    FieldOps fo;
    fo.bag = ops::ResourceEmbeddingBag(root, table, ids_in, splits_in, DT_FLOAT, Output(),
                                       {.combiner = "sum"});
    if (probe_ids.valid()) {
      fo.probe = ops::ResourceGather(root.WithOpName(absl::StrCat("probe", field)), table,
                                     probe_ids, DT_FLOAT);
    }
    return fo;
  });
}

// hash_graph: a hash table per field through the graph ops.
absl::Status TrainHashGraph(const Flags& f, const Ids& ids) {
  return TrainGraph(f, ids, "hash_graph", [&](const Scope& root, int64_t field, Output ids_in,
                                               Output splits_in, Output probe_ids) {
    ops::HashEmbeddingTableAttrs attrs;
    attrs.dim = kDim;
    attrs.optimizer = "adagrad";
    attrs.initializer = "constant";
    attrs.init_value = kInit;
    attrs.initial_accumulator_value = kInitialAccumulator;
    Output table = train::HashEmbeddingTable(root, absl::StrCat("emb", field), attrs);
    FieldOps fo;
    fo.bag = ops::HashEmbeddingBag(root, table, ids_in, splits_in, Output(), {.combiner = "sum"});
    if (probe_ids.valid()) {
      fo.probe = ops::HashEmbeddingLookup(root.WithOpName(absl::StrCat("probe", field)), table,
                                          probe_ids, {.mode = "serve"});
    }
    return fo;
  });
}

// --- hash: HashEmbeddingTable through its API --------------------------------

embedding::EmbeddingTableOptions HashOptions(const std::string& name) {
  embedding::EmbeddingTableOptions o;
  o.name = name;
  o.dim = kDim;
  o.optimizer = embedding::OptimizerKind::kAdagrad;
  o.initial_accumulator_value = kInitialAccumulator;
  o.initializer.kind = embedding::InitializerOptions::Kind::kConstant;
  o.initializer.value = kInit;
  return o;
}

absl::Status TrainHash(const Flags& f, const std::vector<std::vector<std::vector<int64_t>>>& ids) {
  std::vector<std::unique_ptr<embedding::HashEmbeddingTable>> tables;
  for (int64_t field = 0; field < f.fields; ++field) {
    ASSIGN_OR_RETURN(auto t,
                     embedding::HashEmbeddingTable::Create(HashOptions(absl::StrCat("emb", field))));
    tables.push_back(std::move(t));
  }
  std::vector<Tensor> grads;
  for (int64_t field = 0; field < f.fields; ++field) grads.push_back(UpstreamGrad(f, field));
  ThreadPool pool("bench", f.threads);
  // Per-field scratch, reused across steps.
  struct Scratch {
    std::vector<float> rows, bags, grad_rows;
  };
  std::vector<Scratch> scratch(f.fields);
  std::vector<absl::Status> status(f.fields);
  const embedding::AdagradParams params{.learning_rate = kLearningRate};

  auto field_step = [&](int64_t s, int64_t field) -> absl::Status {
    const std::vector<int64_t>& batch_ids = ids[s % ids.size()][field];
    embedding::HashEmbeddingTable& table = *tables[field];
    Scratch& sc = scratch[field];
    // Forward: the distinct ids' rows, then the bags (one id per example;
    // row_splits = 0, 1, ..., batch).
    embedding::UniqueIds u = embedding::Unique(batch_ids);
    const int64_t n = static_cast<int64_t>(u.ids.size());
    sc.rows.resize(n * kDim);
    RETURN_IF_ERROR(table.Lookup(u.ids, absl::MakeSpan(sc.rows),
                                 embedding::LookupMode::kTrain));
    sc.bags.assign(f.batch * kDim, 0.0f);
    for (int64_t b = 0; b < f.batch; ++b) {
      const float* row = &sc.rows[u.inverse[b] * kDim];
      float* bag = &sc.bags[b * kDim];
      for (int64_t j = 0; j < kDim; ++j) bag[j] += row[j];
    }
    // Backward of sum(bag * G): d bag = G; each occurrence gets its
    // example's row of G, summed per distinct id.
    sc.grad_rows.resize(n * kDim);
    embedding::SumRowsByIndex(u.inverse, grads[field].data<float>(), kDim, n,
                              sc.grad_rows.data());
    return table.ApplyAdagrad(u.ids, sc.grad_rows, params, s + 1);
  };
  RETURN_IF_ERROR(TimeSteps(f, "hash", [&](int64_t s) {
    pool.ParallelFor(f.fields, 1000000, [&](int64_t begin, int64_t end) {
      for (int64_t field = begin; field < end; ++field) status[field] = field_step(s, field);
    });
    for (const absl::Status& st : status) RETURN_IF_ERROR(st);
    return absl::OkStatus();
  }));

  std::vector<std::vector<float>> dump;
  int64_t total_rows = 0, total_bytes = 0;
  for (const auto& t : tables) {
    total_rows += t->size();
    total_bytes += t->GetStats().total_bytes;
  }
  for (int64_t field : {int64_t{0}, f.fields - 1}) {
    const std::vector<int64_t> probe = ProbeIds(ids[0][field]);
    std::vector<float> rows(probe.size() * kDim);
    RETURN_IF_ERROR(tables[field]->Lookup(probe, absl::MakeSpan(rows),
                                          embedding::LookupMode::kReadOnly));
    dump.push_back(std::move(rows));
  }
  std::printf("stats hash_rows=%lld hash_total_bytes=%lld\n", static_cast<long long>(total_rows),
              static_cast<long long>(total_bytes));
  return WriteDump(f, dump);
}

// --- lookup: hash table vs plain gather ---------------------------------------

absl::Status Lookups(const Flags& f, const std::vector<std::vector<std::vector<int64_t>>>& ids) {
  // One table holding every id of [0, rows) (as a dense array does), with
  // Adagrad slots: the memory a trained table has.
  auto options = HashOptions("lookup");
  options.initializer.kind = embedding::InitializerOptions::Kind::kUniform;
  ASSIGN_OR_RETURN(auto table, embedding::HashEmbeddingTable::Create(options));
  {
    std::vector<int64_t> all(f.rows);
    for (int64_t i = 0; i < f.rows; ++i) all[i] = i;
    std::vector<float> sink(f.rows * kDim);
    RETURN_IF_ERROR(table->Lookup(all, absl::MakeSpan(sink), embedding::LookupMode::kTrain));
  }
  // The dense array: rows of dim floats plus an Adagrad accumulator of the
  // same size elsewhere (not read) — only the weights are gathered.
  std::vector<float> array(f.rows * kDim);
  for (int64_t i = 0; i < f.rows * kDim; ++i) array[i] = bench::Gen(7, i);
  // All fields' ids of all steps as one stream, in batches of `batch`.
  std::vector<const std::vector<int64_t>*> batches;
  for (const auto& step : ids) {
    for (const auto& v : step) batches.push_back(&v);
  }
  std::vector<float> out(f.batch * kDim);
  double checksum_hash = 0, checksum_gather = 0;
  const int64_t per_sample = static_cast<int64_t>(batches.size());
  std::vector<double> hash_us, gather_us;
  for (int k = 0; k < f.samples + 1; ++k) {  // sample 0 warms up
    auto t0 = std::chrono::steady_clock::now();
    for (const auto* b : batches) {
      RETURN_IF_ERROR(table->Lookup(*b, absl::MakeSpan(out), embedding::LookupMode::kReadOnly));
      checksum_hash += out[0];
    }
    auto t1 = std::chrono::steady_clock::now();
    for (const auto* b : batches) {
      const int64_t* p = b->data();
      for (int64_t i = 0; i < f.batch; ++i) {
        std::memcpy(&out[i * kDim], &array[p[i] * kDim], kDim * sizeof(float));
      }
      checksum_gather += out[0];
    }
    auto t2 = std::chrono::steady_clock::now();
    if (k == 0) continue;
    hash_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / per_sample);
    gather_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count() / per_sample);
  }
  for (auto [mode, v] : {std::pair<const char*, std::vector<double>*>{"hash_lookup", &hash_us},
                         {"array_gather", &gather_us}}) {
    std::vector<std::string> parts;
    for (double x : *v) parts.push_back(bench::Fmt("%.1f", x));
    std::printf("mode=%s median_us=%.1f min_us=%.1f samples_us=%s\n", mode, bench::Median(*v),
                *std::min_element(v->begin(), v->end()), absl::StrJoin(parts, ",").c_str());
  }
  const embedding::TableStats st = table->GetStats();
  std::printf(
      "stats rows=%lld bytes_per_row=%lld slab_bytes=%lld index_bytes=%lld sketch_bytes=%lld "
      "total_bytes=%lld raw_bytes_per_row=%lld ids_per_batch=%lld checksums=%g,%g\n",
      static_cast<long long>(st.rows), static_cast<long long>(st.bytes_per_row),
      static_cast<long long>(st.slab_bytes), static_cast<long long>(st.index_bytes),
      static_cast<long long>(st.sketch_bytes), static_cast<long long>(st.total_bytes),
      static_cast<long long>(kDim * 4 * 2 + 8), static_cast<long long>(f.batch), checksum_hash,
      checksum_gather);
  return absl::OkStatus();
}

absl::Status Main(int argc, char** argv) {
  Flags f;
  bench::FlagParser flags;
  flags.String("case", &f.bench_case)
      .String("out", &f.out)
      .String("ids", &f.ids)
      .String("mode", &f.mode)
      .String("dump", &f.dump)
      .Number("steps", &f.steps)
      .Number("fields", &f.fields)
      .Number("batch", &f.batch)
      .Number("rows", &f.rows)
      .Number("seed", &f.seed)
      .Number("zipf", &f.zipf)
      .Number("threads", &f.threads)
      .Number("intra_threads", &f.intra_threads)
      .Number("warmup", &f.warmup)
      .Number("samples", &f.samples)
      .Number("iters", &f.iters);
  RETURN_IF_ERROR(flags.Parse(argc, argv));
  if (f.threads < 1 || f.samples < 1 || f.iters < 1 || f.batch < 1 || f.fields < 2 ||
      f.rows < 1) {
    return absl::InvalidArgumentError("--threads, --samples, --iters, --batch, --rows must be "
                                      ">= 1 and --fields >= 2");
  }
  if (f.bench_case == "gen") {
    if (f.out.empty()) return absl::InvalidArgumentError("--case=gen needs --out");
    return Gen(f);
  }
  if (f.ids.empty()) return absl::InvalidArgumentError("--ids is required");
  ASSIGN_OR_RETURN(auto ids, ReadIds(f));
  std::printf("info threads=%d fields=%lld batch=%lld rows=%lld dim=%lld stored_steps=%zu\n",
              f.threads, static_cast<long long>(f.fields), static_cast<long long>(f.batch),
              static_cast<long long>(f.rows), static_cast<long long>(kDim), ids.size());
  if (f.bench_case == "lookup") return Lookups(f, ids);
  if (f.bench_case != "train") {
    return absl::InvalidArgumentError(absl::StrCat("unknown --case=", f.bench_case));
  }
  if (f.mode == "dense") return TrainDense(f, ids);
  if (f.mode == "hash") return TrainHash(f, ids);
  if (f.mode == "hash_graph") return TrainHashGraph(f, ids);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --mode=", f.mode, " (dense|hash|hash_graph)"));
}

}  // namespace
}  // namespace recflow

int main(int argc, char** argv) {
  const absl::Status s = recflow::Main(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "bench_embedding: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
