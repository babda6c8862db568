// HashEmbeddingTable: lookup/insert/read-only semantics, deterministic
// initialization, admission, eviction, stats, bad inputs, the resource.
#include "recflow/embedding/hash_embedding_table.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/embedding/row_codec.h"
#include "recflow/embedding/unique_ids.h"

namespace recflow::embedding {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

EmbeddingTableOptions BaseOptions(int64_t dim = 8) {
  EmbeddingTableOptions o;
  o.name = "t";
  o.dim = dim;
  o.num_shards = 4;
  o.seed = 42;
  return o;
}

std::unique_ptr<HashEmbeddingTable> MakeTable(const EmbeddingTableOptions& o) {
  auto t = HashEmbeddingTable::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

std::vector<float> LookupVec(HashEmbeddingTable* t,
                             const std::vector<int64_t>& ids,
                             LookupMode mode = LookupMode::kTrain,
                             ThreadPool* pool = nullptr,
                             LookupResult* result = nullptr) {
  std::vector<float> out(ids.size() * t->dim(), -777.0f);
  const absl::Status s =
      t->Lookup(ids, absl::MakeSpan(out), mode, pool, result);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<float> Row(const std::vector<float>& v, int64_t i, int64_t dim) {
  return std::vector<float>(v.begin() + i * dim, v.begin() + (i + 1) * dim);
}

TEST(HashEmbeddingTableTest, TrainLookupInsertsAndReadsBack) {
  auto t = MakeTable(BaseOptions());
  const std::vector<int64_t> ids = {5, -3, 5, int64_t{1} << 62, 0};
  LookupResult r;
  const std::vector<float> a =
      LookupVec(t.get(), ids, LookupMode::kTrain, nullptr, &r);
  EXPECT_EQ(r.found, 5);
  EXPECT_EQ(r.inserted, 4);
  EXPECT_EQ(r.defaulted, 0);
  EXPECT_EQ(t->size(), 4);
  EXPECT_EQ(Row(a, 0, 8), Row(a, 2, 8));  // same id, same row
  EXPECT_NE(Row(a, 0, 8), Row(a, 1, 8));
  for (float v : a) {
    EXPECT_GE(v, -0.05f);
    EXPECT_LT(v, 0.05f);
  }
  // Negative and huge ids are ordinary keys.
  EXPECT_TRUE(t->Contains(-3));
  EXPECT_TRUE(t->Contains(int64_t{1} << 62));
  const std::vector<float> b = LookupVec(t.get(), ids);
  EXPECT_EQ(a, b);
  EXPECT_EQ(t->GetRow(5)->frequency, 4);  // two lookups x two occurrences
  EXPECT_EQ(t->GetRow(-3)->frequency, 2);
  EXPECT_EQ(t->GetRow(5)->version, 1);  // clock 0 + 1
  EXPECT_EQ(t->GetStats().inserts, 4);
  EXPECT_EQ(t->GetStats().admitted, 4);
}

TEST(HashEmbeddingTableTest, ReadOnlyNeverInsertsOrCounts) {
  EmbeddingTableOptions o = BaseOptions(4);
  o.default_value = {0.5f};
  auto t = MakeTable(o);
  LookupResult r;
  std::vector<float> a =
      LookupVec(t.get(), {1, 2}, LookupMode::kReadOnly, nullptr, &r);
  EXPECT_EQ(t->size(), 0);
  EXPECT_EQ(r.defaulted, 2);
  EXPECT_THAT(a, ElementsAre(0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f));
  LookupVec(t.get(), {1});  // train: inserts 1
  a = LookupVec(t.get(), {1, 2}, LookupMode::kReadOnly, nullptr, &r);
  EXPECT_EQ(r.found, 1);
  EXPECT_EQ(r.defaulted, 1);
  EXPECT_EQ(Row(a, 0, 4), t->GetRow(1)->weights);
  EXPECT_THAT(Row(a, 1, 4), ElementsAre(0.5f, 0.5f, 0.5f, 0.5f));
  EXPECT_EQ(t->GetRow(1)->frequency, 1);  // read-only lookups do not count
  EXPECT_EQ(t->size(), 1);
  EXPECT_EQ(t->GetStats().missing_lookups, 3);
}

TEST(HashEmbeddingTableTest, DefaultRowOfDimValues) {
  EmbeddingTableOptions o = BaseOptions(3);
  o.default_value = {1, 2, 3};
  auto t = MakeTable(o);
  EXPECT_THAT(LookupVec(t.get(), {9}, LookupMode::kReadOnly),
              ElementsAre(1, 2, 3));
}

TEST(HashEmbeddingTableTest, InitializationDependsOnlyOnSeedAndId) {
  std::vector<int64_t> ids(3000);
  std::mt19937_64 rng(7);
  for (auto& id : ids) id = static_cast<int64_t>(rng());
  // Table A: sequential, in order, 4 shards.
  EmbeddingTableOptions oa = BaseOptions(13);
  auto a = MakeTable(oa);
  LookupVec(a.get(), ids);
  // Table B: reversed order, in small batches from 4 threads over a pool,
  // different shard count and slab size, with evictions in between.
  EmbeddingTableOptions ob = oa;
  ob.num_shards = 32;
  ob.rows_per_slab = 16;
  auto b = MakeTable(ob);
  std::vector<int64_t> rev(ids.rbegin(), ids.rend());
  LookupVec(b.get(), {rev.begin(), rev.begin() + 100});
  b->Remove(absl::MakeConstSpan(rev.data(), 50));  // freed slots get reused
  ThreadPool pool("init", 2);
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (size_t i = th * 64; i < rev.size(); i += 4 * 64) {
        std::vector<int64_t> batch(rev.begin() + i,
                                   rev.begin() + std::min(i + 64, rev.size()));
        LookupVec(b.get(), batch, LookupMode::kTrain, &pool);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(a->size(), b->size());
  for (int64_t id : ids) {
    ASSERT_EQ(a->GetRow(id)->weights, b->GetRow(id)->weights) << id;
  }
  // Another seed gives other values.
  EmbeddingTableOptions oc = oa;
  oc.seed = 43;
  auto c = MakeTable(oc);
  EXPECT_NE(LookupVec(c.get(), {ids[0]}), a->GetRow(ids[0])->weights);
}

TEST(HashEmbeddingTableTest, InitializerKinds) {
  using Kind = InitializerOptions::Kind;
  EmbeddingTableOptions o = BaseOptions(4000);
  o.initializer.kind = Kind::kZeros;
  EXPECT_EQ(LookupVec(MakeTable(o).get(), {1}), std::vector<float>(4000, 0));
  o.initializer.kind = Kind::kConstant;
  o.initializer.value = 0.25f;
  EXPECT_EQ(LookupVec(MakeTable(o).get(), {1}),
            std::vector<float>(4000, 0.25f));

  auto moments = [](const std::vector<float>& v, double* mean, double* sd,
                    float* max_abs) {
    double s = 0, s2 = 0;
    *max_abs = 0;
    for (float x : v) {
      s += x;
      s2 += double{x} * x;
      *max_abs = std::max(*max_abs, std::fabs(x));
    }
    *mean = s / v.size();
    *sd = std::sqrt(s2 / v.size() - *mean * *mean);
  };
  double mean, sd;
  float max_abs;
  o.initializer.kind = Kind::kUniform;
  o.initializer.minval = 1.0f;
  o.initializer.maxval = 3.0f;
  moments(LookupVec(MakeTable(o).get(), {2}), &mean, &sd, &max_abs);
  EXPECT_NEAR(mean, 2.0, 0.05);
  EXPECT_NEAR(sd, 2.0 / std::sqrt(12.0), 0.03);
  EXPECT_LE(max_abs, 3.0f);

  o.initializer.kind = Kind::kNormal;
  o.initializer.mean = 0.0f;
  o.initializer.stddev = 0.5f;
  moments(LookupVec(MakeTable(o).get(), {3}), &mean, &sd, &max_abs);
  EXPECT_NEAR(mean, 0.0, 0.04);
  EXPECT_NEAR(sd, 0.5, 0.03);
  EXPECT_GT(max_abs, 1.0f);  // normal tails beyond 2 sd exist in 4000 draws

  o.initializer.kind = Kind::kTruncatedNormal;
  moments(LookupVec(MakeTable(o).get(), {3}), &mean, &sd, &max_abs);
  EXPECT_NEAR(mean, 0.0, 0.04);
  EXPECT_NEAR(sd, 0.5 * 0.8796, 0.03);  // sd of N(0,1) truncated at +-2
  EXPECT_LE(max_abs, 1.0f);
}

TEST(HashEmbeddingTableTest, AdmissionByCount) {
  EmbeddingTableOptions o = BaseOptions(4);
  o.admission.kind = AdmissionOptions::Kind::kCount;
  o.admission.min_count = 3;
  o.admission.sketch_width = 4096;
  o.default_value = {-1.0f};
  auto t = MakeTable(o);
  LookupResult r;
  std::vector<float> a =
      LookupVec(t.get(), {7, 8}, LookupMode::kTrain, nullptr, &r);
  EXPECT_EQ(r.defaulted, 2);
  EXPECT_EQ(t->size(), 0);
  EXPECT_EQ(t->AdmissionCount(7), 1);
  // Gradients for not-admitted ids are dropped and counted.
  ApplyResult ar;
  ASSERT_TRUE(
      t->ApplySgd({7, 8}, std::vector<float>(8, 1.0f), {0.1f}, 1, nullptr, &ar)
          .ok());
  EXPECT_EQ(ar.dropped, 2);
  EXPECT_EQ(t->GetStats().dropped_updates, 2);
  // Second sighting of 7: still default. Third (twice in one batch: the
  // whole batch reads the new row).
  LookupVec(t.get(), {7});
  a = LookupVec(t.get(), {7, 8, 7}, LookupMode::kTrain, nullptr, &r);
  EXPECT_EQ(r.inserted, 1);
  EXPECT_TRUE(t->Contains(7));
  EXPECT_FALSE(t->Contains(8));
  EXPECT_EQ(Row(a, 0, 4), t->GetRow(7)->weights);
  EXPECT_EQ(Row(a, 2, 4), t->GetRow(7)->weights);
  EXPECT_THAT(Row(a, 1, 4), ElementsAre(-1, -1, -1, -1));
  EXPECT_EQ(t->GetRow(7)->frequency, 2);
  const TableStats s = t->GetStats();
  EXPECT_EQ(s.admitted, 1);
  EXPECT_EQ(s.rejected_lookups, 4);  // 7, 8, 7, 8
  EXPECT_GT(s.sketch_bytes, 0);
  // Read-only lookups neither count nor admit.
  LookupVec(t.get(), {8, 8, 8}, LookupMode::kReadOnly);
  EXPECT_FALSE(t->Contains(8));
  EXPECT_EQ(t->AdmissionCount(8), 2);
}

TEST(HashEmbeddingTableTest, AdmissionByProbabilityIsReproducible) {
  EmbeddingTableOptions o = BaseOptions(2);
  o.admission.kind = AdmissionOptions::Kind::kProbability;
  o.admission.probability = 0.25;
  o.admission.sketch_width = 1 << 16;
  std::vector<std::vector<int64_t>> batches;
  std::mt19937_64 rng(3);
  for (int b = 0; b < 20; ++b) {
    std::vector<int64_t> batch(200);
    for (auto& id : batch) id = static_cast<int64_t>(rng() % 2000);
    batches.push_back(batch);
  }
  auto run = [&](uint64_t seed) {
    EmbeddingTableOptions oo = o;
    oo.seed = seed;
    auto t = MakeTable(oo);
    std::vector<int64_t> admitted_after_first;
    for (size_t b = 0; b < batches.size(); ++b) {
      LookupVec(t.get(), batches[b]);
      if (b == 0) admitted_after_first.push_back(t->size());
    }
    std::vector<int64_t> present;
    for (int64_t id = 0; id < 2000; ++id) {
      if (t->Contains(id)) present.push_back(id);
    }
    return present;
  };
  const std::vector<int64_t> a = run(1), b = run(1), c = run(2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // 4000 occurrences over 2000 ids (about 2 each): P(admitted) is about
  // 1 - 0.75^2 = 0.44 per id, far from 0 and 1.
  EXPECT_GT(a.size(), 600u);
  EXPECT_LT(a.size(), 1200u);
}

TEST(HashEmbeddingTableTest, AdmissionProbabilityBounds) {
  EmbeddingTableOptions o = BaseOptions(2);
  o.admission.kind = AdmissionOptions::Kind::kProbability;
  o.admission.probability = 0.0;
  auto never = MakeTable(o);
  LookupVec(never.get(), {1, 1, 1, 2, 3});
  EXPECT_EQ(never->size(), 0);
  o.admission.probability = 1.0;
  auto always = MakeTable(o);
  LookupVec(always.get(), {1, 2, 3});
  EXPECT_EQ(always->size(), 3);
}

TEST(HashEmbeddingTableTest, EvictionByAgeAndFrequency) {
  EmbeddingTableOptions o = BaseOptions(2);
  o.eviction.max_age_steps = 10;
  auto t = MakeTable(o);
  LookupVec(t.get(), {1, 2, 3, 4});  // version 1
  const std::vector<float> g(4, 0.1f);
  ASSERT_TRUE(t->ApplySgd({1, 2}, g, {0.1f}, 5).ok());
  ASSERT_TRUE(t->ApplySgd({1}, std::vector<float>(2, 0.1f), {0.1f}, 12).ok());
  // At step 12: 3, 4 (version 1) are 11 old; 2 (5) is 7; 1 is 0.
  EvictionResult r = t->Evict(12);
  EXPECT_EQ(r.by_age, 2);
  EXPECT_EQ(r.rows_left, 2);
  EXPECT_TRUE(t->Contains(1));
  EXPECT_TRUE(t->Contains(2));
  EXPECT_FALSE(t->Contains(3));
  r = t->Evict(16);  // 2 is 11 old now
  EXPECT_EQ(r.by_age, 1);
  EXPECT_EQ(t->size(), 1);
  // Updates for evicted ids are dropped; the live row among them is updated.
  ApplyResult ar;
  const std::vector<int64_t> many = {2, 3, 4, 5, 6, 1, 8, 9, 10, 11, 12, 13};
  const std::vector<float> before = t->GetRow(1)->weights;
  ASSERT_TRUE(t->ApplySgd(many, std::vector<float>(2 * many.size(), 1.0f),
                          {0.5f}, 16, nullptr, &ar)
                  .ok());
  EXPECT_EQ(ar.updated, 1);
  EXPECT_EQ(ar.dropped, 11);
  EXPECT_FLOAT_EQ(t->GetRow(1)->weights[0], before[0] - 0.5f);

  // By frequency, with explicit criteria: rows looked up fewer than 3 times.
  LookupVec(t.get(), {1, 1, 7, 8, 8, 8});  // 1: 1+2, 7: 1, 8: 3
  EvictionOptions by_freq;
  by_freq.min_frequency = 3;
  r = t->Evict(16, by_freq);
  EXPECT_EQ(r.by_frequency, 1);
  EXPECT_EQ(r.by_age, 0);
  EXPECT_FALSE(t->Contains(7));
  EXPECT_TRUE(t->Contains(8));
  EXPECT_TRUE(t->Contains(1));
  const TableStats s = t->GetStats();
  EXPECT_EQ(s.evicted, 4);
  EXPECT_GE(s.free_slots, 4);
  // Evicted slots are reused (per shard: the same ids land in the same
  // shards): no new slab.
  const int64_t slab_bytes = s.slab_bytes;
  LookupVec(t.get(), {2, 3, 4, 7});
  EXPECT_EQ(t->GetStats().slab_bytes, slab_bytes);
  EXPECT_EQ(t->GetStats().free_slots, s.free_slots - 4);
  // A re-admitted id starts from its deterministic initial value again.
  auto fresh = MakeTable(o);
  EXPECT_EQ(t->GetRow(3)->weights, LookupVec(fresh.get(), {3}));
}

TEST(HashEmbeddingTableTest, MemoryAccounting) {
  EmbeddingTableOptions o = BaseOptions(16);
  o.optimizer = OptimizerKind::kAdagrad;
  o.admission.kind = AdmissionOptions::Kind::kCount;
  o.admission.sketch_width = 1 << 12;
  o.admission.sketch_depth = 2;
  auto t = MakeTable(o);
  std::vector<int64_t> ids(10000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i * 7919;
  LookupVec(t.get(), ids);
  const TableStats s = t->GetStats();
  EXPECT_EQ(s.rows, 10000);
  EXPECT_EQ(s.bytes_per_row, 16 * 2 * 4 + 24);
  EXPECT_GE(s.slab_bytes, 10000 * s.bytes_per_row);
  EXPECT_LT(s.slab_bytes, 2 * 10000 * s.bytes_per_row);
  EXPECT_GE(s.index_bytes, 10000 * 16);
  EXPECT_EQ(s.sketch_bytes, (1 << 12) * 2 * 4);
  EXPECT_GT(s.total_bytes, s.slab_bytes + s.index_bytes + s.sketch_bytes - 1);
  EXPECT_THAT(t->DebugString(), HasSubstr("rows=10000"));
}

TEST(HashEmbeddingTableTest, BadOptions) {
  EmbeddingTableOptions o = BaseOptions();
  o.dim = 0;
  EXPECT_THAT(HashEmbeddingTable::Create(o).status().message(),
              HasSubstr("dim must be > 0"));
  o = BaseOptions();
  o.num_shards = 6;
  EXPECT_THAT(HashEmbeddingTable::Create(o).status().message(),
              HasSubstr("power of two"));
  o = BaseOptions();
  o.default_value = {1, 2};
  EXPECT_THAT(HashEmbeddingTable::Create(o).status().message(),
              HasSubstr("default_value"));
  o = BaseOptions();
  o.admission.kind = AdmissionOptions::Kind::kProbability;
  o.admission.probability = 1.5;
  EXPECT_THAT(HashEmbeddingTable::Create(o).status().message(),
              HasSubstr("probability"));
  o = BaseOptions();
  o.initializer.minval = 1;
  o.initializer.maxval = 0;
  EXPECT_FALSE(HashEmbeddingTable::Create(o).ok());
}

TEST(HashEmbeddingTableTest, BadLookupAndApplyArguments) {
  auto t = MakeTable(BaseOptions(4));
  std::vector<float> out(7);
  absl::Status s = t->Lookup({1, 2}, absl::MakeSpan(out), LookupMode::kTrain);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output has 7 floats"));
  s = t->ApplySgd({1, 2}, std::vector<float>(4), {0.1f}, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("grads has 4 floats"));
  // An SGD table has no Adagrad slots.
  s = t->ApplyAdagrad({1}, std::vector<float>(4), {0.1f}, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("created for optimizer sgd"));
  s = t->ApplySgd({1}, std::vector<float>(4), {NAN}, 1);
  EXPECT_THAT(s.message(), HasSubstr("learning_rate must be finite"));
  // Empty batches are fine.
  EXPECT_TRUE(t->Lookup({}, {}, LookupMode::kTrain).ok());
  EXPECT_TRUE(t->ApplySgd({}, {}, {0.1f}, 1).ok());
}

TEST(HashEmbeddingTableTest, NonFiniteGradientPolicies) {
  const std::vector<float> grads = {1, 1, NAN, 1, 1, 1};
  for (NonFinitePolicy policy :
       {NonFinitePolicy::kSkipRow, NonFinitePolicy::kApply,
        NonFinitePolicy::kError}) {
    EmbeddingTableOptions o = BaseOptions(2);
    o.nonfinite_gradients = policy;
    o.initializer.kind = InitializerOptions::Kind::kZeros;
    auto t = MakeTable(o);
    LookupVec(t.get(), {1, 2, 3});
    ApplyResult r;
    const absl::Status s =
        t->ApplySgd({1, 2, 3}, grads, {1.0f}, 1, nullptr, &r);
    switch (policy) {
      case NonFinitePolicy::kSkipRow:
        ASSERT_TRUE(s.ok());
        EXPECT_EQ(r.updated, 2);
        EXPECT_EQ(r.nonfinite, 1);
        EXPECT_THAT(t->GetRow(2)->weights, ElementsAre(0, 0));
        EXPECT_THAT(t->GetRow(3)->weights, ElementsAre(-1, -1));
        EXPECT_EQ(t->GetStats().nonfinite_updates, 1);
        break;
      case NonFinitePolicy::kApply:
        ASSERT_TRUE(s.ok());
        EXPECT_TRUE(std::isnan(t->GetRow(2)->weights[0]));
        break;
      case NonFinitePolicy::kError:
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(s.message(), HasSubstr("id 2"));
        EXPECT_THAT(t->GetRow(1)->weights, ElementsAre(0, 0));  // untouched
        break;
    }
  }
}

TEST(HashEmbeddingTableTest, ParallelLookupMatchesSequential) {
  EmbeddingTableOptions o = BaseOptions(16);
  o.num_shards = 16;
  auto seq = MakeTable(o);
  auto par = MakeTable(o);
  ThreadPool pool("lookup", 2);
  std::mt19937_64 rng(11);
  for (int step = 0; step < 5; ++step) {
    std::vector<int64_t> ids(20000);
    for (auto& id : ids) id = static_cast<int64_t>(rng() % 50000) - 25000;
    LookupResult rs, rp;
    EXPECT_EQ(LookupVec(seq.get(), ids, LookupMode::kTrain, nullptr, &rs),
              LookupVec(par.get(), ids, LookupMode::kTrain, &pool, &rp));
    EXPECT_EQ(rs.inserted, rp.inserted);
  }
  EXPECT_EQ(seq->size(), par->size());
}

// Quantized rows (serving): weights only, written encoded, read decoded
// (Lookup, Export, GetRow) within the format's error; no optimizer step.
TEST(HashEmbeddingTableTest, QuantizedRowsReadBackWithinTheirError) {
  const int64_t dim = 16, n = 200;
  Tensor keys(DT_INT64, TensorShape({n}));
  Tensor values(DT_FLOAT, TensorShape({n, dim}));
  Tensor slots(DT_FLOAT, TensorShape({n, 1, dim}));  // an Adagrad accumulator: dropped
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (int64_t i = 0; i < n; ++i) keys.flat<int64_t>()[i] = i * 7919 - 500;
  for (float& x : values.flat<float>()) x = normal(rng);
  for (float& x : slots.flat<float>()) x = 0.5f;
  const int64_t full_stride = MakeTable([&] {
    EmbeddingTableOptions o = BaseOptions(dim);
    o.optimizer = OptimizerKind::kAdagrad;
    return o;
  }())->GetStats().bytes_per_row;
  for (RowFormat format : {RowFormat::kFloat16, RowFormat::kInt8}) {
    SCOPED_TRACE(RowFormatName(format));
    EmbeddingTableOptions o = BaseOptions(dim);
    o.optimizer = OptimizerKind::kAdagrad;
    o.row_format = format;
    auto t = MakeTable(o);
    EXPECT_EQ(t->num_slots(), 0);
    EXPECT_THAT(t->DebugString(), HasSubstr(RowFormatName(format)));
    TableChunk chunk;
    chunk.keys = keys;
    chunk.values = values;
    chunk.slots = slots;
    ASSERT_TRUE(t->Import(chunk).ok());
    EXPECT_EQ(t->size(), n);
    // Rows of 24 bytes of metadata and the encoded weights, against 24 + 2 *
    // 64 for float32 weights with an accumulator.
    const int64_t stride = t->GetStats().bytes_per_row;
    EXPECT_EQ(stride, format == RowFormat::kInt8 ? 24 + 8 + 16 : 24 + 32);
    EXPECT_LT(stride * 3, full_stride * (format == RowFormat::kInt8 ? 1 : 2));

    std::vector<int64_t> ids(keys.flat<int64_t>().begin(), keys.flat<int64_t>().end());
    ids.push_back(123456789);  // absent: the default row
    const std::vector<float> got = LookupVec(t.get(), ids, LookupMode::kReadOnly);
    float worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < dim; ++k) {
        worst = std::max(worst, std::abs(got[i * dim + k] - values.flat<float>()[i * dim + k]));
      }
    }
    // float16: relative 2^-11 of weights ~0.3 at most; int8: half of a
    // (max - min) / 255 step, max - min ~ 0.7.
    EXPECT_LT(worst, format == RowFormat::kInt8 ? 0.002f : 0.0003f);
    EXPECT_EQ(Row(got, n, dim), std::vector<float>(dim, 0.0f));
    // Export and GetRow decode the same way.
    std::vector<float> exported(static_cast<size_t>(n * dim));
    ExportOptions eo;
    auto done = t->Export(eo, [&](const TableChunk& c) {
      EXPECT_FALSE(c.slots.IsInitialized() && c.slots.dim_size(1) > 0);
      for (int64_t r = 0; r < c.keys.dim_size(0); ++r) {
        const int64_t i = (c.keys.flat<int64_t>()[r] + 500) / 7919;
        std::copy_n(c.values.flat<float>().begin() + r * dim, dim, exported.begin() + i * dim);
      }
      return absl::OkStatus();
    });
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(exported, std::vector<float>(got.begin(), got.begin() + n * dim));
    EXPECT_EQ(t->GetRow(ids[3])->weights, Row(got, 3, dim));
    // No optimizer step on quantized rows.
    std::vector<float> grads(dim, 1.0f);
    absl::Status s = t->ApplyAdagrad({ids[0]}, grads, AdagradParams{}, 1);
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("stored as"));
    // A training lookup still makes new rows (initialized, then encoded).
    LookupResult r;
    LookupVec(t.get(), {-1}, LookupMode::kTrain, nullptr, &r);
    EXPECT_EQ(r.inserted, 1);
    EXPECT_TRUE(t->Contains(-1));
  }
}

TEST(UniqueIdsTest, UniqueAndSum) {
  const std::vector<int64_t> ids = {4, -1, 4, 9, -1, 4};
  const UniqueIds u = Unique(ids);
  EXPECT_THAT(u.ids, ElementsAre(4, -1, 9));
  EXPECT_THAT(u.inverse, ElementsAre(0, 1, 0, 2, 1, 0));
  EXPECT_THAT(u.counts, ElementsAre(3, 2, 1));
  const std::vector<float> g = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<float> sum(6, -1);
  SumRowsByIndex(u.inverse, g.data(), 2, 3, sum.data());
  EXPECT_THAT(sum, ElementsAre(1 + 5 + 11, 2 + 6 + 12, 3 + 9, 4 + 10, 7, 8));
}

TEST(EmbeddingTableResourceTest, LookupOrCreateByName) {
  ResourceMgr rm;
  EmbeddingTableOptions o = BaseOptions(4);
  auto a = EmbeddingTableResource::LookupOrCreate(&rm, "c", "user", o);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = EmbeddingTableResource::LookupOrCreate(&rm, "c", "user", o);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->get(), b->get());
  auto found = EmbeddingTableResource::Lookup(rm, "c", "user");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->get(), a->get());
  EXPECT_EQ(EmbeddingTableResource::Lookup(rm, "c", "item").status().code(),
            absl::StatusCode::kNotFound);
  o.dim = 8;
  auto bad = EmbeddingTableResource::LookupOrCreate(&rm, "c", "user", o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("exists with dim 4"));
  LookupVec((*a)->table(), {1, 2});
  EXPECT_THAT((*a)->DebugString(), HasSubstr("HashEmbeddingTable(t, dim=4"));
  EXPECT_GT((*a)->MemoryUsed(), 0);
  EXPECT_THAT(rm.DebugStrings(), ::testing::Contains(HasSubstr("rows=2")));
}

}  // namespace
}  // namespace recflow::embedding
