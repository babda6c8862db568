// bench_quantized: the recflow side of `bench/run quantized`: an export of a
// model with hash embedding tables served with its rows stored as float32,
// float16 or int8 (LoadOptions::embedding_row_format, `recflow serve
// --embedding_row_format`).
//
//   bench_quantized --export=DIR --config=RUN.yaml --data=GLOB --format=F
//       [--lookup_batches=100] [--samples=5] [--batch=4096] [--seed=1]
//       [--synthetic_rows=4000000]
//
// Loads DIR with its tables' rows in format F and prints one line:
//
//   quantized format=F auc=A logloss=L examples=N rows=R bytes_per_row=B
//       table_mib=M lookup_table_rows=K lookup_rows_per_s=S synthetic_rows=Y
//       synthetic_mib=Z synthetic_lookup_rows_per_s=W load_s=T
//
// auc / logloss: the serving_default signature's probabilities on every
//   example of GLOB (parsed as the run config parses its data), through the
//   same SavedModel load and signature run a server does.
// bytes_per_row / table_mib: the tables' own accounting (row stride with
//   its metadata, and slab memory), summed over the tables.
// lookup_rows_per_s: HashEmbeddingTable::Lookup in serving mode on the
//   export's largest table (K rows), --lookup_batches batches of --batch ids
//   drawn uniformly from its keys (a fixed seed: the same ids for every
//   format), on one thread: the gather with its decoding, nothing else; the
//   median of --samples samples after one warm-up sample.
// synthetic_*: the same on a table of --synthetic_rows random rows of dim
//   16 in format F (a table far beyond the caches, whose lookups wait on
//   memory, as production tables' do), and its memory.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "recflow/core/status.h"
#include "recflow/data/batch.h"
#include "recflow/embedding/graph_tables.h"
#include "recflow/embedding/hash_embedding_table.h"
#include "recflow/embedding/row_codec.h"
#include "recflow/models/config.h"
#include "recflow/models/input_pipeline.h"
#include "recflow/serving/saved_model_bundle.h"
#include "recflow/train/metrics.h"

namespace recflow {
namespace {

struct Flags {
  std::string export_dir, config, data, format = "float32";
  int64_t lookup_batches = 100;
  int64_t samples = 5;
  int64_t batch = 4096;
  int64_t seed = 1;
  int64_t synthetic_rows = 4000000;
};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Serving-mode lookups of `table`: --samples samples of --lookup_batches
// batches of --batch ids drawn uniformly from its keys (fixed seed: the
// same ids for every format); the median sample's rows/s.
absl::StatusOr<double> LookupRate(embedding::HashEmbeddingTable* table, const Flags& f) {
  std::vector<int64_t> keys;
  embedding::ExportOptions eo;
  RETURN_IF_ERROR(table
                      ->Export(eo,
                               [&](const embedding::TableChunk& c) {
                                 const auto k = c.keys.flat<int64_t>();
                                 keys.insert(keys.end(), k.begin(), k.end());
                                 return absl::OkStatus();
                               })
                      .status());
  if (keys.empty()) return errors::InvalidArgument("table '", table->name(), "' is empty");
  std::mt19937_64 rng(static_cast<uint64_t>(f.seed));
  std::vector<int64_t> ids(static_cast<size_t>(f.batch));
  std::vector<float> out(static_cast<size_t>(f.batch * table->dim()));
  std::vector<double> rates;
  for (int64_t sample = 0; sample <= f.samples; ++sample) {  // sample 0: warm-up
    double timed = 0;
    for (int64_t b = 0; b < f.lookup_batches; ++b) {
      for (int64_t& id : ids) id = keys[rng() % keys.size()];
      const auto start = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(table->Lookup(ids, absl::MakeSpan(out), embedding::LookupMode::kReadOnly));
      timed += Seconds(start);
    }
    if (sample > 0) rates.push_back(static_cast<double>(f.lookup_batches * f.batch) / timed);
  }
  return bench::Median(rates);
}

absl::Status Main(int argc, char** argv) {
  Flags f;
  bench::FlagParser flags;
  flags.String("export", &f.export_dir)
      .String("config", &f.config)
      .String("data", &f.data)
      .String("format", &f.format)
      .Number("lookup_batches", &f.lookup_batches, bench::FlagParser::Positive())
      .Number("samples", &f.samples, bench::FlagParser::Positive())
      .Number("synthetic_rows", &f.synthetic_rows, bench::FlagParser::NonNegative())
      .Number("batch", &f.batch, bench::FlagParser::Positive())
      .Number("seed", &f.seed);
  RETURN_IF_ERROR(flags.Parse(argc, argv));
  if (f.export_dir.empty() || f.config.empty() || f.data.empty()) {
    return errors::InvalidArgument("--export, --config and --data are required");
  }
  ASSIGN_OR_RETURN(embedding::RowFormat format, embedding::ParseRowFormat(f.format));
  ASSIGN_OR_RETURN(models::RunConfig config, models::LoadRunConfig(Env::Default(), f.config));

  const auto load_start = std::chrono::steady_clock::now();
  serving::LoadOptions load;
  load.embedding_row_format = format;
  ASSIGN_OR_RETURN(serving::SavedModelBundle bundle,
                   serving::LoadSavedModel(load, f.export_dir, {"serve"}));
  const double load_s = Seconds(load_start);

  // The tables, as loaded.
  Session* session = bundle.session.get();
  ASSIGN_OR_RETURN(std::vector<embedding::GraphTable> tables,
                   embedding::CreateGraphTables(*session->graph(),
                                                session->device()->resource_manager(), format));
  int64_t rows = 0, stride_sum = 0, table_bytes = 0;
  embedding::HashEmbeddingTable* largest = nullptr;
  for (const embedding::GraphTable& t : tables) {
    embedding::HashEmbeddingTable* table = t.resource->table();
    if (table->row_format() != format) {
      return errors::Internal("table '", t.where.node, "' holds ",
                              embedding::RowFormatName(table->row_format()), " rows, not ",
                              f.format);
    }
    const embedding::TableStats s = table->GetStats();
    rows += s.rows;
    stride_sum += s.bytes_per_row * s.rows;
    table_bytes += s.total_bytes;
    if (largest == nullptr || table->size() > largest->size()) largest = table;
  }
  if (largest == nullptr) return errors::InvalidArgument(f.export_dir, " has no hash table");

  // AUC through the serving signature.
  ASSIGN_OR_RETURN(models::InputPipeline p, models::MakeInputPipeline(config));
  ASSIGN_OR_RETURN(data::Dataset ds, models::MakeRunDataset(config, p, f.data, 1));
  ASSIGN_OR_RETURN(data::Iterator it, ds.MakeIterator());
  train::BinaryMetrics metrics;
  for (;;) {
    data::Element e;
    bool end = false;
    RETURN_IF_ERROR(it.GetNext(&e, &end));
    if (end) break;
    ASSIGN_OR_RETURN(data::Batch batch, data::Batch::FromElement(p.schema, e));
    std::map<std::string, Tensor> inputs;
    inputs["dense"] = batch.dense;
    for (size_t k = 0; k < p.schema.sparse.size(); ++k) {
      inputs[p.schema.sparse[k].name + "/ids"] = batch.sparse[k].ids;
      inputs[p.schema.sparse[k].name + "/row_splits"] = batch.sparse[k].row_splits;
    }
    ASSIGN_OR_RETURN(auto out, serving::RunSignature(bundle, "serving_default", inputs,
                                                     {"probabilities"}));
    const Tensor& prob = out.at("probabilities");
    RETURN_IF_ERROR(metrics.Add(
        absl::MakeConstSpan(prob.data<float>(), static_cast<size_t>(prob.NumElements())),
        absl::MakeConstSpan(batch.labels.data<float>(),
                            static_cast<size_t>(batch.labels.NumElements()))));
  }
  const train::BinaryMetricsResult r = metrics.Result();

  ASSIGN_OR_RETURN(const double rows_per_s, LookupRate(largest, f));

  // A big table of its own (memory-bound lookups, as production tables
  // are): --synthetic_rows random rows of dim 16 in this format.
  double synthetic_rows_per_s = 0, synthetic_mib = 0;
  if (f.synthetic_rows > 0) {
    embedding::EmbeddingTableOptions o;
    o.name = "synthetic";
    o.dim = 16;
    o.row_format = format;
    ASSIGN_OR_RETURN(auto table, embedding::HashEmbeddingTable::Create(o));
    table->Reserve(f.synthetic_rows);
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    constexpr int64_t kChunk = 1 << 16;
    for (int64_t begin = 0; begin < f.synthetic_rows; begin += kChunk) {
      const int64_t n = std::min(kChunk, f.synthetic_rows - begin);
      embedding::TableChunk c;
      c.keys = Tensor(DT_INT64, TensorShape({n}));
      c.values = Tensor(DT_FLOAT, TensorShape({n, o.dim}));
      for (int64_t i = 0; i < n; ++i) {
        c.keys.flat<int64_t>()[i] = static_cast<int64_t>(rng() >> 1);
      }
      for (float& x : c.values.flat<float>()) x = normal(rng);
      RETURN_IF_ERROR(table->Import(c));
    }
    ASSIGN_OR_RETURN(synthetic_rows_per_s, LookupRate(table.get(), f));
    synthetic_mib = static_cast<double>(table->GetStats().total_bytes) / (1 << 20);
  }

  std::printf(
      "quantized format=%s auc=%.6f logloss=%.6f examples=%lld rows=%lld bytes_per_row=%.1f "
      "table_mib=%.2f lookup_table_rows=%lld lookup_rows_per_s=%.0f synthetic_rows=%lld "
      "synthetic_mib=%.1f synthetic_lookup_rows_per_s=%.0f load_s=%.3f\n",
      f.format.c_str(), r.auc, r.logloss, static_cast<long long>(r.count),
      static_cast<long long>(rows), rows > 0 ? static_cast<double>(stride_sum) / rows : 0.0,
      static_cast<double>(table_bytes) / (1 << 20), static_cast<long long>(largest->size()),
      rows_per_s, static_cast<long long>(f.synthetic_rows), synthetic_mib, synthetic_rows_per_s,
      load_s);
  return absl::OkStatus();
}

}  // namespace
}  // namespace recflow

int main(int argc, char** argv) {
  const absl::Status s = recflow::Main(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "bench_quantized: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
