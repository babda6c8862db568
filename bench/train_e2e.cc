// bench_train_e2e: recflow's side of `bench/run train_e2e`.
//
//   bench_train_e2e --case=prepare --tsv=FILE --out=FILE
//   bench_train_e2e --case=train --config=examples/configs/deepfm.yaml
//       --train=CACHE --test=CACHE [--threads=2] [--batch=4096]
//       [--pred_out=FILE] [--init_out=FILE] [--max_steps=N]
//   bench_train_e2e --case=profile --config=... --train=CACHE [--steps=5]
//       [--top=30]
//
// prepare: parses a Criteo-format TSV (recflow's CriteoParser, hex ids:
//          (field << 32) | value, dense log(1 + max(x, 0)), missing = empty
//          bag / 0) and writes the parsed rows to a binary cache that both
//          sides of the benchmark read (bench/peers/train_e2e_torch.py
//          reads it with NumPy), so both train on bit-identical inputs:
//            "RFE2E001"  int64 rows, int64 num_dense, int64 num_fields
//            float32 labels[rows]; float32 dense[rows * num_dense]
//            per field: int64 nnz; int64 row_splits[rows + 1]; int64 ids[nnz]
// train:   builds the config's zoo model (models::BuildModel on
//          Placeholders, the model's own optimizers) with batch_size
//          overridden by --batch, cuts the cached rows into batches of
//          --batch (the last one shorter) before the clock starts, then
//          trains one epoch: one Session::Run per batch feeding the batch
//          and running "train" (the loss is fetched every step). Then
//          predicts the test rows (probabilities, batches of --batch) and
//          writes them as float32 to --pred_out (bench/run computes the
//          AUC of both sides with the same code). --init_out writes the
//          initial weights (see DumpWeights) so the peer can start from
//          the same values. Prints:
//            info ...                 environment, BLAS core, threads
//            model ...                the config's hyperparameters (the
//                                     peer is run with the same)
//            losses values=l1,...     the loss of the first 5 steps
//            epoch steps=N examples=N seconds=S examples_per_sec=V
//                  first_loss=... last_loss=... mean_loss_last10=...
//                  cpu_seconds=C (process CPU time over the epoch, all
//                  threads) first_step_seconds=F
//            test rows=N seconds=S auc=A logloss=L
// profile: times --steps traced steps of the same model on the first
//          batches and prints the kernel time per op type and the --top
//          nodes (what dominates a step), the step's occupancy (idle, one
//          kernel, two or more) and the nodes that ran alone.
//
// Exit status is non-zero on any error. No timing is asserted here.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cblas.h>
#include <sys/resource.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "bench/bench_util.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/data/text_parsers.h"
#include "recflow/framework/scope.h"
#include "recflow/models/config.h"
#include "recflow/models/model.h"
#include "recflow/runtime/session.h"
#include "recflow/runtime/step_stats.h"
#include "recflow/train/metrics.h"
#include "recflow/train/variables.h"

namespace recflow {
namespace {

using bench::EnvOr;
using bench::FlagParser;
using bench::Fmt;
using Clock = std::chrono::steady_clock;

constexpr char kMagic[8] = {'R', 'F', 'E', '2', 'E', '0', '0', '1'};

struct Flags {
  std::string bench_case = "train";
  std::string tsv, out, config, train, test, pred_out;
  int threads = 2;
  int64_t batch = 4096;
  int64_t max_steps = 0;  // 0: the whole epoch
  int steps = 5;          // profile
  int top = 30;           // profile: how many nodes to list
  std::string init_out;   // train: the initial weights, for the peer
  std::string fetch;      // profile: tensors to summarize at the initial weights
};

// --- The cache ------------------------------------------------------------------

struct Rows {
  int64_t rows = 0, num_dense = 0;
  std::vector<float> labels, dense;
  std::vector<std::vector<int64_t>> splits, ids;  // per field
};

absl::Status Prepare(const Flags& flags) {
  std::ifstream in(flags.tsv, std::ios::binary);
  if (!in) return errors::NotFound("cannot open --tsv ", flags.tsv);
  ASSIGN_OR_RETURN(auto parser, data::CriteoParser::Create(data::CriteoOptions{}));
  Rows r;
  r.num_dense = static_cast<int64_t>(parser->schema().dense_names.size());
  const size_t fields = parser->schema().sparse.size();
  r.splits.assign(fields, {0});
  r.ids.resize(fields);
  std::vector<std::string> lines;
  std::string line;
  auto flush = [&]() -> absl::Status {
    if (lines.empty()) return absl::OkStatus();
    std::vector<absl::string_view> views(lines.begin(), lines.end());
    ASSIGN_OR_RETURN(data::Batch b, parser->Parse(views));
    const int64_t n = b.batch_size;
    r.labels.insert(r.labels.end(), b.labels.data<float>(), b.labels.data<float>() + n);
    r.dense.insert(r.dense.end(), b.dense.data<float>(),
                   b.dense.data<float>() + n * r.num_dense);
    for (size_t f = 0; f < fields; ++f) {
      const int64_t* s = b.sparse[f].row_splits.data<int64_t>();
      const int64_t* id = b.sparse[f].ids.data<int64_t>();
      const int64_t base = r.splits[f].back();
      for (int64_t i = 1; i <= n; ++i) r.splits[f].push_back(base + s[i]);
      r.ids[f].insert(r.ids[f].end(), id, id + s[n]);
    }
    r.rows += n;
    lines.clear();
    return absl::OkStatus();
  };
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() == 65536) RETURN_IF_ERROR(flush());
  }
  RETURN_IF_ERROR(flush());
  if (r.rows == 0) return errors::InvalidArgument("--tsv ", flags.tsv, " has no rows");
  const std::string tmp = flags.out + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return errors::Internal("cannot write ", tmp);
  bool ok = std::fwrite(kMagic, 1, 8, f) == 8;
  const int64_t header[3] = {r.rows, r.num_dense, static_cast<int64_t>(fields)};
  ok &= std::fwrite(header, 8, 3, f) == 3;
  ok &= std::fwrite(r.labels.data(), 4, r.labels.size(), f) == r.labels.size();
  ok &= std::fwrite(r.dense.data(), 4, r.dense.size(), f) == r.dense.size();
  for (size_t k = 0; k < fields; ++k) {
    const int64_t nnz = static_cast<int64_t>(r.ids[k].size());
    ok &= std::fwrite(&nnz, 8, 1, f) == 1;
    ok &= std::fwrite(r.splits[k].data(), 8, r.splits[k].size(), f) == r.splits[k].size();
    ok &= std::fwrite(r.ids[k].data(), 8, r.ids[k].size(), f) == r.ids[k].size();
  }
  ok &= std::fclose(f) == 0;
  if (!ok || std::rename(tmp.c_str(), flags.out.c_str()) != 0) {
    return errors::Internal("writing ", flags.out, " failed");
  }
  std::printf("prepared rows=%lld num_dense=%lld fields=%zu out=%s\n",
              static_cast<long long>(r.rows), static_cast<long long>(r.num_dense), fields,
              flags.out.c_str());
  return absl::OkStatus();
}

absl::StatusOr<Rows> ReadCache(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return errors::NotFound("cannot open cache ", path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  char magic[8];
  int64_t header[3];
  if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, kMagic, 8) != 0 ||
      std::fread(header, 8, 3, f) != 3 || header[0] <= 0 || header[1] < 0 || header[2] < 0) {
    return errors::InvalidArgument(path, " is not a train_e2e cache (bad magic or header)");
  }
  Rows r;
  r.rows = header[0];
  r.num_dense = header[1];
  r.labels.resize(r.rows);
  r.dense.resize(r.rows * r.num_dense);
  bool ok = std::fread(r.labels.data(), 4, r.labels.size(), f) == r.labels.size() &&
            std::fread(r.dense.data(), 4, r.dense.size(), f) == r.dense.size();
  r.splits.resize(header[2]);
  r.ids.resize(header[2]);
  for (int64_t k = 0; ok && k < header[2]; ++k) {
    int64_t nnz = 0;
    ok = std::fread(&nnz, 8, 1, f) == 1 && nnz >= 0;
    if (!ok) break;
    r.splits[k].resize(r.rows + 1);
    r.ids[k].resize(nnz);
    ok = std::fread(r.splits[k].data(), 8, r.rows + 1, f) == static_cast<size_t>(r.rows + 1) &&
         std::fread(r.ids[k].data(), 8, nnz, f) == static_cast<size_t>(nnz) &&
         r.splits[k][0] == 0 && r.splits[k][r.rows] == nnz;
  }
  if (!ok) return errors::InvalidArgument(path, " is truncated or corrupt");
  return r;
}

using Feeds = std::vector<std::pair<std::string, Tensor>>;

// CPU seconds (user + system, all threads) of this process so far.
int64_t MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The rows cut into feeds of `batch` rows (the last one shorter), with the
// feed names of models::Placeholders.
std::vector<Feeds> MakeBatches(const Rows& r, const std::vector<std::string>& field_names,
                               int64_t batch) {
  std::vector<Feeds> out;
  for (int64_t s = 0; s < r.rows; s += batch) {
    const int64_t n = std::min(batch, r.rows - s);
    Feeds f;
    Tensor labels(DT_FLOAT, TensorShape({n}));
    std::copy_n(r.labels.data() + s, n, labels.data<float>());
    Tensor dense(DT_FLOAT, TensorShape({n, r.num_dense}));
    std::copy_n(r.dense.data() + s * r.num_dense, n * r.num_dense, dense.data<float>());
    f.emplace_back("labels", std::move(labels));
    f.emplace_back("dense", std::move(dense));
    for (size_t k = 0; k < r.splits.size(); ++k) {
      const int64_t a = r.splits[k][s], b = r.splits[k][s + n];
      Tensor ids(DT_INT64, TensorShape({b - a}));
      std::copy_n(r.ids[k].data() + a, b - a, ids.data<int64_t>());
      Tensor splits(DT_INT64, TensorShape({n + 1}));
      for (int64_t i = 0; i <= n; ++i) splits.data<int64_t>()[i] = r.splits[k][s + i] - a;
      f.emplace_back(absl::StrCat(field_names[k], "/ids"), std::move(ids));
      f.emplace_back(absl::StrCat(field_names[k], "/row_splits"), std::move(splits));
    }
    out.push_back(std::move(f));
  }
  return out;
}

// --- The model ------------------------------------------------------------------

struct Built {
  models::RunConfig config;
  std::unique_ptr<Session> session;
  std::vector<std::string> field_names;
  int64_t num_parameters = 0;
  // (variable name, read tensor name) of every trainable variable.
  std::vector<std::pair<std::string, std::string>> reads;
};

absl::StatusOr<Built> BuildSession(const Flags& flags, const Rows& r) {
  Built b;
  ASSIGN_OR_RETURN(b.config, models::LoadRunConfig(Env::Default(), flags.config));
  const models::ModelConfig& mc = b.config.model;
  if (static_cast<int64_t>(mc.dense_features.size()) != r.num_dense ||
      mc.sparse_features.size() != r.splits.size()) {
    return errors::InvalidArgument(flags.config, " has ", mc.dense_features.size(), " dense and ",
                                   mc.sparse_features.size(), " sparse features but the data has ",
                                   r.num_dense, " and ", r.splits.size());
  }
  for (const auto& f : mc.sparse_features) b.field_names.push_back(f.name);
  Scope root = Scope::NewRootScope();
  ASSIGN_OR_RETURN(models::Model m,
                   models::BuildModel(root, mc, models::Placeholders(root, mc)));
  b.num_parameters = m.num_parameters;
  std::vector<Output> vars = m.embedding_variables;
  vars.insert(vars.end(), m.dense_variables.begin(), m.dense_variables.end());
  const Scope rs = root.NewSubScope("e2e_read");
  for (const Output& v : vars) {
    b.reads.emplace_back(train::VariableName(v), train::ReadValue(rs, v).name());
  }
  train::GlobalVariablesInitializer(root);
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  SessionOptions so;
  so.inter_op_threads = flags.threads;
  so.intra_op_threads = flags.threads;
  ASSIGN_OR_RETURN(b.session, Session::Create(so, def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(b.session->Run({}, {}, {"init"}, &out));
  return b;
}

// Writes every trainable variable's current value (the peer starts from
// the same weights): "RFE2EW01", int64 count, then per variable: int64
// name length, name, int64 rank, int64 dims[rank], float32 values.
absl::Status DumpWeights(Built& b, const std::string& path) {
  std::vector<std::string> fetches;
  for (const auto& r : b.reads) fetches.push_back(r.second);
  std::vector<Tensor> out;
  RETURN_IF_ERROR(b.session->Run({}, fetches, {}, &out));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return errors::Internal("cannot write ", path);
  bool ok = std::fwrite("RFE2EW01", 1, 8, f) == 8;
  const int64_t count = static_cast<int64_t>(out.size());
  ok &= std::fwrite(&count, 8, 1, f) == 1;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string& name = b.reads[i].first;
    const int64_t len = static_cast<int64_t>(name.size());
    ok &= std::fwrite(&len, 8, 1, f) == 1 && std::fwrite(name.data(), 1, len, f) == name.size();
    const int64_t rank = out[i].shape().dims();
    ok &= std::fwrite(&rank, 8, 1, f) == 1;
    for (int d = 0; d < rank; ++d) {
      const int64_t dim = out[i].shape().dim_size(d);
      ok &= std::fwrite(&dim, 8, 1, f) == 1;
    }
    const size_t n = static_cast<size_t>(out[i].NumElements());
    ok &= std::fwrite(out[i].data<float>(), 4, n, f) == n;
  }
  ok &= std::fclose(f) == 0;
  if (!ok) return errors::Internal("writing ", path, " failed");
  return absl::OkStatus();
}

std::string Units(const std::vector<int64_t>& u) { return absl::StrJoin(u, ","); }

void PrintModel(const Built& b) {
  const models::ModelConfig m = models::WithDefaults(b.config.model);
  const models::OptimizerConfig& e = m.embedding_optimizer;
  const models::OptimizerConfig& d = m.dense_optimizer;
  std::printf(
      "model type=%s embedding_dim=%lld vocabulary_size=%lld hidden_units=%s bottom_units=%s "
      "activation=%s emb_opt=%s emb_lr=%.9g emb_acc0=%.9g dense_opt=%s dense_lr=%.9g "
      "beta1=%.9g beta2=%.9g epsilon=%.9g l2=%.9g parameters=%lld\n",
      m.type.c_str(), static_cast<long long>(m.embedding_dim),
      static_cast<long long>(m.sparse_features.empty() ? 0
                                                       : m.sparse_features[0].vocabulary_size),
      Units(m.hidden_units).c_str(), Units(m.bottom_units).c_str(), m.activation.c_str(),
      e.type.c_str(), e.learning_rate, e.initial_accumulator_value, d.type.c_str(),
      d.learning_rate, d.beta1, d.beta2, d.epsilon < 0 ? 1e-8 : d.epsilon, m.l2_regularization,
      static_cast<long long>(b.num_parameters));
}

absl::Status CheckSupported(const models::RunConfig& c) {
  // What the peer reproduces.
  const models::ModelConfig& m = c.model;
  for (const auto& f : m.sparse_features) {
    if (f.hash_table || f.combiner != "sum" || (f.dim != 0 && f.dim != m.embedding_dim) ||
        f.vocabulary_size != m.sparse_features[0].vocabulary_size || f.missing != "empty") {
      return errors::InvalidArgument("sparse feature ", f.name,
                                     ": the peer supports only equal fixed vocabularies, "
                                     "combiner sum, embedding_dim columns and missing: empty");
    }
  }
  // fm_dense shapes only the models with an FM part.
  const bool has_fm = m.type == "fm" || m.type == "deepfm";
  if ((has_fm && m.fm_dense != "projection") || m.self_interaction) {
    return errors::InvalidArgument(
        "the peer supports fm_dense: projection and dlrm without self_interaction");
  }
  if (m.embedding_optimizer.epsilon > 0) {
    return errors::InvalidArgument("the peer's Adagrad has no epsilon (TensorFlow 1's rule)");
  }
  if (m.embedding_optimizer.schedule != "constant" || m.dense_optimizer.schedule != "constant" ||
      m.embedding_optimizer.type != "adagrad" || m.dense_optimizer.type != "adam" ||
      m.activation != "relu" || m.l2_regularization != 0) {
    return errors::InvalidArgument(
        "the peer supports adagrad tables, adam dense layers, constant learning rates, relu "
        "and no l2");
  }
  return absl::OkStatus();
}

absl::Status RunTrain(const Flags& flags) {
  const auto t_load = Clock::now();
  ASSIGN_OR_RETURN(Rows train_rows, ReadCache(flags.train));
  ASSIGN_OR_RETURN(Rows test_rows, ReadCache(flags.test));
  ASSIGN_OR_RETURN(Built b, BuildSession(flags, train_rows));
  RETURN_IF_ERROR(CheckSupported(b.config));
  PrintModel(b);
  if (!flags.init_out.empty()) RETURN_IF_ERROR(DumpWeights(b, flags.init_out));
  std::vector<Feeds> batches = MakeBatches(train_rows, b.field_names, flags.batch);
  std::vector<Feeds> test_batches = MakeBatches(test_rows, b.field_names, flags.batch);
  const int64_t n_train = train_rows.rows;
  train_rows = Rows();
  std::printf("loaded train_rows=%lld test_rows=%lld batches=%zu seconds=%.2f\n",
              static_cast<long long>(n_train), static_cast<long long>(test_rows.rows),
              batches.size(), std::chrono::duration<double>(Clock::now() - t_load).count());
  std::fflush(stdout);

  size_t steps = batches.size();
  if (flags.max_steps > 0) steps = std::min<size_t>(steps, flags.max_steps);
  std::vector<Tensor> out;
  std::vector<double> losses;
  int64_t examples = 0;
  double first_step = 0;
  const double cpu0 = CpuSeconds();
  int64_t faults0 = MinorFaults(), faults1 = 0;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < steps; ++i) {
    RETURN_IF_ERROR(b.session->Run(batches[i], {"loss:0"}, {"train"}, &out));
    if (i == 0) {
      first_step = std::chrono::duration<double>(Clock::now() - t0).count();
      faults1 = MinorFaults();
    }
    const float loss = out[0].scalar<float>();
    if (!std::isfinite(loss)) return errors::Internal("loss at step ", i + 1, " is ", loss);
    losses.push_back(loss);
    examples += batches[i][0].second.NumElements();
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = CpuSeconds() - cpu0;
  std::vector<std::string> first;
  for (size_t i = 0; i < losses.size() && i < 5; ++i) first.push_back(Fmt("%.7g", losses[i]));
  std::printf("losses values=%s\n", absl::StrJoin(first, ",").c_str());
  double tail = 0;
  const size_t nt = std::min<size_t>(10, losses.size());
  for (size_t i = losses.size() - nt; i < losses.size(); ++i) tail += losses[i];
  std::printf(
      "epoch steps=%zu examples=%lld seconds=%.3f examples_per_sec=%.1f first_loss=%.6f "
      "last_loss=%.6f mean_loss_last10=%.6f cpu_seconds=%.3f first_step_seconds=%.3f "
      "page_faults_first_step=%lld page_faults_per_later_step=%.0f\n",
      steps, static_cast<long long>(examples), secs, examples / secs, losses.front(),
      losses.back(), tail / nt, cpu, first_step, static_cast<long long>(faults1 - faults0),
      steps > 1 ? static_cast<double>(MinorFaults() - faults1) / (steps - 1) : 0.0);
  std::fflush(stdout);

  // Test predictions.
  const auto t1 = Clock::now();
  std::vector<float> preds;
  train::BinaryMetrics metrics;
  for (const Feeds& f : test_batches) {
    Feeds feeds(f.begin() + 1, f.end());  // no labels
    RETURN_IF_ERROR(b.session->Run(feeds, {"probabilities:0"}, {}, &out));
    const float* p = out[0].data<float>();
    preds.insert(preds.end(), p, p + out[0].NumElements());
    RETURN_IF_ERROR(metrics.Add(absl::MakeConstSpan(p, out[0].NumElements()),
                                absl::MakeConstSpan(f[0].second.data<float>(),
                                                    f[0].second.NumElements())));
  }
  const train::BinaryMetricsResult res = metrics.Result();
  std::printf("test rows=%zu seconds=%.3f auc=%.6f logloss=%.6f\n", preds.size(),
              std::chrono::duration<double>(Clock::now() - t1).count(), res.auc, res.logloss);
  if (!flags.pred_out.empty()) {
    std::FILE* f = std::fopen(flags.pred_out.c_str(), "wb");
    if (f == nullptr) return errors::Internal("cannot write ", flags.pred_out);
    const bool ok = std::fwrite(preds.data(), 4, preds.size(), f) == preds.size();
    if (std::fclose(f) != 0 || !ok) return errors::Internal("writing ", flags.pred_out, " failed");
  }
  return absl::OkStatus();
}

absl::Status RunProfile(const Flags& flags) {
  ASSIGN_OR_RETURN(Rows rows, ReadCache(flags.train));
  ASSIGN_OR_RETURN(Built b, BuildSession(flags, rows));
  PrintModel(b);
  std::vector<Feeds> batches = MakeBatches(rows, b.field_names, flags.batch);
  std::vector<Tensor> out;
  if (!flags.fetch.empty()) {
    // Mean and stddev of the named float tensors on the first batch, at the
    // initial weights.
    std::vector<std::string> names = absl::StrSplit(flags.fetch, ',');
    RETURN_IF_ERROR(b.session->Run(batches[0], names, {}, &out));
    for (size_t i = 0; i < names.size(); ++i) {
      const float* p = out[i].data<float>();
      double sum = 0, sq = 0;
      const int64_t n = out[i].NumElements();
      for (int64_t j = 0; j < n; ++j) {
        sum += p[j];
        sq += static_cast<double>(p[j]) * p[j];
      }
      const double mean = n ? sum / n : 0;
      std::printf("fetch %s shape=%s mean=%.6g std=%.6g\n", names[i].c_str(),
                  out[i].shape().DebugString().c_str(), mean,
                  std::sqrt(std::max(0.0, n ? sq / n - mean * mean : 0.0)));
    }
  }
  for (int i = 0; i < 3; ++i) {
    RETURN_IF_ERROR(b.session->Run(batches[i % batches.size()], {"loss:0"}, {"train"}, &out));
  }
  std::map<std::string, std::pair<double, int>> by_op, by_node, alone;
  double wall = 0, kernel = 0;
  // Occupancy over each step's span (first kernel start to last kernel
  // end): the time with no kernel running, with one, and with two or more;
  // and per node, the time it ran with no other kernel beside it (what a
  // second core could not help with).
  double idle_ms = 0, one_ms = 0, many_ms = 0;
  for (int s = 0; s < flags.steps; ++s) {
    RunOptions ro;
    ro.trace = true;
    RunMetadata meta;
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(b.session->Run(ro, batches[(3 + s) % batches.size()], {"loss:0"}, {"train"},
                                   &out, &meta));
    wall += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    {
      // Sweep the starts and ends in time order (an end before a start at
      // the same instant), keeping the set of running nodes; nodes that
      // took no time (to the microsecond) are left out.
      const std::vector<NodeExecStats>& nodes = meta.step_stats.nodes;
      struct Event {
        int64_t time;
        int delta;  // -1 end, +1 start
        size_t node;
        bool operator<(const Event& o) const {
          return std::tie(time, delta, node) < std::tie(o.time, o.delta, o.node);
        }
      };
      std::vector<Event> events;
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i].end_micros <= nodes[i].start_micros) continue;
        events.push_back({nodes[i].start_micros, 1, i});
        events.push_back({nodes[i].end_micros, -1, i});
      }
      std::sort(events.begin(), events.end());
      std::set<size_t> running;
      std::set<size_t> alone_this_step;
      for (size_t e = 0; e + 1 < events.size(); ++e) {
        if (events[e].delta > 0) {
          running.insert(events[e].node);
        } else {
          running.erase(events[e].node);
        }
        const double ms = (events[e + 1].time - events[e].time) / 1000.0;
        (running.empty() ? idle_ms : running.size() == 1 ? one_ms : many_ms) += ms;
        if (running.size() != 1 || ms <= 0) continue;
        const size_t n = *running.begin();
        alone[nodes[n].node_name].first += ms;
        if (alone_this_step.insert(n).second) alone[nodes[n].node_name].second += 1;
      }
    }
    for (const NodeExecStats& n : meta.step_stats.nodes) {
      const double ms = (n.end_micros - n.start_micros) / 1000.0;
      by_op[n.op].first += ms;
      by_op[n.op].second += 1;
      by_node[n.node_name].first += ms;
      by_node[n.node_name].second += 1;
      kernel += ms;
    }
  }
  const double k = flags.steps;
  std::printf("profile steps=%d wall_ms_per_step=%.2f kernel_ms_per_step=%.2f (sum over "
              "threads)\n",
              flags.steps, wall / k, kernel / k);
  auto print_top = [&](const char* what, const std::map<std::string, std::pair<double, int>>& m,
                       size_t n) {
    std::vector<std::pair<double, std::string>> top;
    for (const auto& [name, e] : m) {
      top.emplace_back(e.first / k, absl::StrCat(name, " x", e.second / flags.steps));
    }
    std::sort(top.rbegin(), top.rend());
    for (size_t i = 0; i < top.size() && i < n; ++i) {
      std::printf("  %s %8.2f ms %5.1f%%  %s\n", what, top[i].first,
                  100 * top[i].first / (kernel / k), top[i].second.c_str());
    }
  };
  print_top("op", by_op, 30);
  print_top("node", by_node, flags.top);
  std::printf("occupancy per step: idle %.2f ms, one kernel %.2f ms, two or more %.2f ms\n",
              idle_ms / k, one_ms / k, many_ms / k);
  print_top("alone", alone, 20);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Flags flags;
  const auto positive = FlagParser::Positive();
  FlagParser parser;
  parser.String("case", &flags.bench_case)
      .String("tsv", &flags.tsv)
      .String("out", &flags.out)
      .String("config", &flags.config)
      .String("train", &flags.train)
      .String("test", &flags.test)
      .String("pred_out", &flags.pred_out)
      .Number("threads", &flags.threads, positive)
      .Number("batch", &flags.batch, positive)
      .Number("max_steps", &flags.max_steps, FlagParser::NonNegative())
      .String("init_out", &flags.init_out)
      .String("fetch", &flags.fetch)
      .Number("steps", &flags.steps, positive)
      .Number("top", &flags.top, positive);
  if (absl::Status s = parser.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr,
                 "%s\nusage: %s --case=prepare --tsv=F --out=F | --case=train "
                 "--config=YAML --train=CACHE --test=CACHE [--threads=2] [--batch=4096] "
                 "[--pred_out=F] [--max_steps=N] | --case=profile --config=YAML --train=CACHE "
                 "[--steps=5] [--top=30]\n",
                 std::string(s.message()).c_str(), argv[0]);
    return 2;
  }
  std::printf(
      "info side=recflow case=%s threads=%d batch=%lld blas=OpenBLAS blas_core=%s "
      "OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s\n",
      flags.bench_case.c_str(), flags.threads, static_cast<long long>(flags.batch),
      openblas_get_corename(), EnvOr("OPENBLAS_CORETYPE", "<unset>"),
      EnvOr("OPENBLAS_L2_SIZE", "<unset>"));
  std::fflush(stdout);
  absl::Status s;
  if (flags.bench_case == "prepare") {
    s = flags.tsv.empty() || flags.out.empty()
            ? errors::InvalidArgument("--case=prepare needs --tsv and --out")
            : Prepare(flags);
  } else if (flags.bench_case == "train") {
    s = flags.config.empty() || flags.train.empty() || flags.test.empty()
            ? errors::InvalidArgument("--case=train needs --config, --train and --test")
            : RunTrain(flags);
  } else if (flags.bench_case == "profile") {
    s = flags.config.empty() || flags.train.empty()
            ? errors::InvalidArgument("--case=profile needs --config and --train")
            : RunProfile(flags);
  } else {
    s = errors::InvalidArgument("unknown --case '", flags.bench_case,
                                "' (prepare, train or profile)");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace recflow

int main(int argc, char** argv) { return recflow::Main(argc, argv); }
