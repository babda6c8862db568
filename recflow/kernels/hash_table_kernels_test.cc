// Kernels of the hash embedding table ops against plain references:
// HashEmbeddingBag for every combiner (duplicate ids, empty bags, weights,
// dim 1 and 64, batches big enough for the intra-op pool), serve mode never
// writing, HashEmbeddingLookup, each HashTableApply* against the same
// HashEmbeddingTable::Apply* call made directly, bad inputs, and a graph
// that runs the same after a GraphDef round trip.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using embedding::EmbeddingTableResource;
using embedding::HashEmbeddingTable;
using ::testing::HasSubstr;

Tensor I64(const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>(absl::MakeConstSpan(v));
}

ops::HashEmbeddingTableAttrs Attrs(const std::string& name, int64_t dim,
                                   const std::string& optimizer = "sgd") {
  ops::HashEmbeddingTableAttrs a;
  a.shared_name = name;
  a.dim = dim;
  a.optimizer = optimizer;
  a.init_minval = -1.0f;
  a.init_maxval = 1.0f;
  a.seed = 1234;
  a.num_shards = 8;
  return a;
}

// The options the kernel builds from Attrs() (for reference tables).
embedding::EmbeddingTableOptions Options(const std::string& name, int64_t dim,
                                         embedding::OptimizerKind opt) {
  embedding::EmbeddingTableOptions o;
  o.name = name;
  o.dim = dim;
  o.optimizer = opt;
  o.initializer.minval = -1.0f;
  o.initializer.maxval = 1.0f;
  o.seed = 1234;
  o.num_shards = 8;
  return o;
}

struct TestGraph {
  Scope root = Scope::NewRootScope();
  std::unique_ptr<Session> session;

  absl::Status Start(int threads = 2) {
    RETURN_IF_ERROR(root.status());
    ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
    ASSIGN_OR_RETURN(session,
                     Session::Create(SessionOptions{threads, threads}, def));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Tensor>> Run(
      const std::vector<std::pair<std::string, Tensor>>& feeds,
      const std::vector<Output>& fetches,
      const std::vector<Output>& targets = {}) {
    std::vector<std::string> f, t;
    for (const Output& o : fetches) f.push_back(o.name());
    for (const Output& o : targets) t.push_back(o.node()->name());
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session->Run(feeds, f, t, &out));
    return out;
  }
  HashEmbeddingTable* Table(const std::string& name) {
    ResourceMgr* rm = session->device()->resource_manager();
    auto res =
        EmbeddingTableResource::Lookup(*rm, rm->default_container(), name);
    return res.ok() ? (*res)->table() : nullptr;
  }
};

// output[b] = combine(rows) in double, reading rows with a read-only lookup.
std::vector<double> ReferenceBag(HashEmbeddingTable* table,
                                 const std::vector<int64_t>& ids,
                                 const std::vector<int64_t>& splits,
                                 const std::vector<float>& w,
                                 const std::string& combiner) {
  const int64_t dim = table->dim(), batch = splits.size() - 1;
  std::vector<float> rows(ids.size() * dim);
  EXPECT_TRUE(
      table->Lookup(ids, absl::MakeSpan(rows), embedding::LookupMode::kReadOnly)
          .ok());
  std::vector<double> out(batch * dim, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    double denom = 0;
    for (int64_t j = splits[b]; j < splits[b + 1]; ++j) {
      const double wj = w.empty() ? 1.0 : w[j];
      for (int64_t k = 0; k < dim; ++k)
        out[b * dim + k] += wj * rows[j * dim + k];
      denom += combiner == "sqrtn" ? wj * wj : wj;
    }
    if (combiner == "sum") continue;
    if (combiner == "sqrtn") denom = std::sqrt(denom);
    for (int64_t k = 0; k < dim; ++k) {
      out[b * dim + k] = denom == 0 ? 0.0 : out[b * dim + k] / denom;
    }
  }
  return out;
}

TEST(HashTableKernelsTest, BagMatchesReference) {
  std::mt19937 rng(81);
  for (int64_t dim : {1, 64}) {
    for (const char* combiner : {"sum", "mean", "sqrtn"}) {
      for (bool weighted : {false, true}) {
        SCOPED_TRACE(absl::StrCat("dim ", dim, " ", combiner,
                                  weighted ? " weighted" : ""));
        // A big batch (parallel combine) with empty bags and duplicates.
        const int64_t batch = 500 + rng() % 700;
        std::vector<int64_t> splits = {0}, ids;
        std::vector<float> w;
        std::uniform_real_distribution<float> wd(0.1f, 2.0f);
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t len = rng() % 6;  // 0..5; 1 in 6 empty
          for (int64_t j = 0; j < len; ++j) {
            // Ids from a pool of 300 raw values, negative ones included.
            ids.push_back(static_cast<int64_t>(rng() % 300) * 7919 - 1000000);
            if (weighted) w.push_back(wd(rng));
          }
          splits.push_back(static_cast<int64_t>(ids.size()));
        }
        TestGraph g;
        Output table = ops::HashEmbeddingTableOp(
            g.root, Attrs(absl::StrCat("bag", dim, combiner), dim));
        Output bag = ops::HashEmbeddingBag(
            g.root, table, ops::Const(g.root, I64(ids)),
            ops::Const(g.root, I64(splits)),
            weighted ? ops::Const(g.root, Tensor::FromVector<float>(
                                              absl::MakeConstSpan(w)))
                     : Output(),
            {.combiner = combiner});
        ASSERT_TRUE(g.Start().ok()) << g.root.status();
        auto out = g.Run({}, {bag});
        ASSERT_TRUE(out.ok()) << out.status();
        ASSERT_EQ((*out)[0].shape(), TensorShape({batch, dim}));
        HashEmbeddingTable* t = g.Table(absl::StrCat("bag", dim, combiner));
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->size(),
                  static_cast<int64_t>(
                      std::set<int64_t>(ids.begin(), ids.end()).size()));
        const std::vector<double> want =
            ReferenceBag(t, ids, splits, w, combiner);
        for (int64_t i = 0; i < batch * dim; ++i) {
          ASSERT_NEAR((*out)[0].flat<float>()[i], want[i],
                      1e-5 * (1 + std::abs(want[i])))
              << "at " << i;
        }
      }
    }
  }
}

TEST(HashTableKernelsTest, ServeModeNeverWritesAndReadsTheDefaultRow) {
  TestGraph g;
  ops::HashEmbeddingTableAttrs a = Attrs("serve", 3);
  a.default_value = {0.5f, -1.0f, 2.0f};
  Output table = ops::HashEmbeddingTableOp(g.root, a);
  Output ids = ops::Placeholder(g.root.WithOpName("ids"), DT_INT64);
  Output splits = ops::Placeholder(g.root.WithOpName("splits"), DT_INT64);
  Output serve = ops::HashEmbeddingBag(g.root, table, ids, splits, Output(),
                                       {.combiner = "sum", .mode = "serve"});
  Output train = ops::HashEmbeddingBag(g.root, table, ids, splits, Output(),
                                       {.combiner = "sum", .mode = "train"});
  ASSERT_TRUE(g.Start().ok()) << g.root.status();
  const std::vector<std::pair<std::string, Tensor>> feeds = {
      {"ids", I64({11, 12, 11})}, {"splits", I64({0, 2, 3})}};
  auto out = g.Run(feeds, {serve});
  ASSERT_TRUE(out.ok()) << out.status();
  HashEmbeddingTable* t = g.Table("serve");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->size(), 0);
  EXPECT_THAT(std::vector<float>((*out)[0].flat<float>().begin(),
                                 (*out)[0].flat<float>().end()),
              ::testing::ElementsAre(1.0f, -2.0f, 4.0f, 0.5f, -1.0f, 2.0f));
  EXPECT_EQ(t->GetStats().missing_lookups, 3);
  // A training lookup inserts; serving then reads the trained rows and
  // still never inserts new ids.
  ASSERT_TRUE(g.Run(feeds, {train}).ok());
  EXPECT_EQ(t->size(), 2);
  auto served =
      g.Run({{"ids", I64({11, 99})}, {"splits", I64({0, 1, 2})}}, {serve});
  ASSERT_TRUE(served.ok());
  EXPECT_EQ(t->size(), 2);
  auto row = t->GetRow(11);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->frequency, 2);  // the training lookup only
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ((*served)[0].flat<float>()[k], row->weights[k]);
  }
  EXPECT_EQ((*served)[0].flat<float>()[3], 0.5f);
}

TEST(HashTableKernelsTest, AdmissionByCount) {
  TestGraph g;
  ops::HashEmbeddingTableAttrs a = Attrs("admit", 2);
  a.admission = "count";
  a.admission_min_count = 2;
  Output table = ops::HashEmbeddingTableOp(g.root, a);
  Output y =
      ops::HashEmbeddingLookup(g.root, table, ops::Const(g.root, I64({5, 6})));
  ASSERT_TRUE(g.Start().ok());
  ASSERT_TRUE(g.Run({}, {y}).ok());
  EXPECT_EQ(g.Table("admit")->size(), 0);
  ASSERT_TRUE(g.Run({}, {y}).ok());
  EXPECT_EQ(g.Table("admit")->size(), 2);
}

TEST(HashTableKernelsTest, LookupMatchesTable) {
  std::mt19937 rng(82);
  TestGraph g;
  Output table = ops::HashEmbeddingTableOp(g.root, Attrs("lookup", 64));
  std::vector<int64_t> ids(3 * 700);
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % 5000) - 2500;
  Output y = ops::HashEmbeddingLookup(
      g.root, table,
      ops::Const(g.root, Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids),
                                                     TensorShape({3, 700}))));
  ASSERT_TRUE(g.Start().ok());
  auto out = g.Run({}, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), TensorShape({3, 700, 64}));
  HashEmbeddingTable* t = g.Table("lookup");
  for (size_t i = 0; i < ids.size(); i += 37) {
    auto row = t->GetRow(ids[i]);
    ASSERT_TRUE(row.has_value());
    for (int k = 0; k < 64; ++k) {
      ASSERT_EQ((*out)[0].flat<float>()[i * 64 + k], row->weights[k]);
    }
  }
}

TEST(HashTableKernelsTest, BadInputs) {
  TestGraph g;
  Output table = ops::HashEmbeddingTableOp(g.root, Attrs("bad", 4));
  Output ids = ops::Placeholder(g.root.WithOpName("ids"), DT_INT64);
  Output splits = ops::Placeholder(g.root.WithOpName("splits"), DT_INT64);
  Output w = ops::Placeholder(g.root.WithOpName("w"), DT_FLOAT);
  Output bag = ops::HashEmbeddingBag(g.root, table, ids, splits, w,
                                     {.dim = 4, .combiner = "mean"});
  Output wrong_dim = ops::HashEmbeddingBag(g.root, table, ids, splits, w,
                                           {.dim = 5, .combiner = "mean"});
  ASSERT_TRUE(g.Start().ok());
  const Tensor no_w(DT_FLOAT, TensorShape({0}));
  struct Case {
    Tensor ids, splits, w;
    std::string want;
  };
  const std::vector<Case> cases = {
      {I64({1, 2, 3}), I64({0, 2, 1, 3}), no_w,
       "row_splits must be non-decreasing, but row_splits[1] = 2 > "
       "row_splits[2] = 1"},
      {I64({1, 2, 3}), I64({0, 1, 2}), no_w,
       "row_splits[2] = 2 must equal the number of ids (3)"},
      {I64({1, 2, 3}), I64({1, 3}), no_w, "row_splits[0] = 1"},
      {I64({1, 2, 3}), I64({}), no_w, "row_splits must be a vector of B + 1"},
      {I64({1, 2, 3}), I64({0, 3}), Tensor::FromVector<float>({1.0f, 2.0f}),
       "per_id_weights [2] must be empty or match ids [3]"},
  };
  for (const Case& c : cases) {
    auto out = g.Run({{"ids", c.ids}, {"splits", c.splits}, {"w", c.w}}, {bag});
    ASSERT_FALSE(out.ok()) << c.want;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr(c.want));
  }
  auto out = g.Run({{"ids", I64({1})}, {"splits", I64({0, 1})}, {"w", no_w}},
                   {wrong_dim});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("embedding table 'bad' has dim 4 but the op's dim "
                        "attr is 5"));
  EXPECT_EQ(g.Table("bad")->size(), 0);  // nothing inserted by bad calls
}

TEST(HashTableKernelsTest, BadTableAttrsAndConflicts) {
  {
    TestGraph g;
    ops::HashEmbeddingTableAttrs a = Attrs("shards", 4);
    a.num_shards = 3;
    Output table = ops::HashEmbeddingTableOp(g.root, a);
    ASSERT_TRUE(g.Start().ok());
    auto out = g.Run({}, {table});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr("num_shards"));
  }
  {
    TestGraph g;
    Output t1 = ops::HashEmbeddingTableOp(g.root, Attrs("same", 4));
    Output t2 = ops::HashEmbeddingTableOp(g.root, Attrs("same", 8));
    ASSERT_TRUE(g.Start().ok());
    ASSERT_TRUE(g.Run({}, {t1}).ok());
    auto out = g.Run({}, {t2});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr("same"));
  }
  {
    // ids of the wrong dtype in a GraphDef: rejected, naming the input.
    TestGraph g;
    Output table = ops::HashEmbeddingTableOp(g.root, Attrs("dtype", 4));
    Output bag =
        ops::HashEmbeddingBag(g.root, table, ops::Const(g.root, I64({1})),
                              ops::Const(g.root, I64({0, 1})));
    auto def = g.root.ToGraphDef();
    ASSERT_TRUE(def.ok());
    std::string ids_input;
    for (const auto& node : def->node()) {
      if (node.name() == bag.node()->name()) ids_input = node.input(1);
    }
    ASSERT_FALSE(ids_input.empty());
    for (auto& node : *def->mutable_node()) {
      if (node.name() == ids_input) {
        (*node.mutable_attr())["dtype"].set_type(tensorflow::DT_INT32);
        auto* value = (*node.mutable_attr())["value"].mutable_tensor();
        value->set_dtype(tensorflow::DT_INT32);
        value->clear_int64_val();
        value->clear_tensor_content();
        value->add_int_val(1);
      }
    }
    auto session = Session::Create(SessionOptions{1, 1}, *def);
    absl::Status s = session.status();
    if (s.ok()) {
      std::vector<Tensor> out;
      s = (*session)->Run({}, {bag.name()}, {}, &out);
    }
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    // The framework names the input by index (see the report).
    EXPECT_THAT(s.message(), HasSubstr("input 1 of node 'HashEmbeddingBag'"));
    EXPECT_THAT(s.message(), HasSubstr("expects int64"));
  }
}

TEST(HashTableKernelsTest, BadCombinerAttrInGraphDef) {
  TestGraph g;
  Output table = ops::HashEmbeddingTableOp(g.root, Attrs("combiner", 4));
  Output bag =
      ops::HashEmbeddingBag(g.root, table, ops::Const(g.root, I64({1})),
                            ops::Const(g.root, I64({0, 1})));
  auto def = g.root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  for (auto& node : *def->mutable_node()) {
    if (node.name() == bag.node()->name()) {
      (*node.mutable_attr())["combiner"].set_s("max");
    }
  }
  auto session = Session::Create(SessionOptions{1, 1}, *def);
  absl::Status s = session.status();
  if (s.ok()) {
    std::vector<Tensor> out;
    s = (*session)->Run({}, {bag.name()}, {}, &out);
  }
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("combiner"));
  EXPECT_THAT(s.message(), HasSubstr("max"));
}

// Each apply op equals the HashEmbeddingTable call made directly on a twin
// table built from the same options.
TEST(HashTableKernelsTest, ApplyOpsMatchDirectCalls) {
  using embedding::OptimizerKind;
  std::mt19937 rng(83);
  const int64_t dim = 8;
  struct Case {
    const char* optimizer;
    OptimizerKind kind;
  };
  for (const Case& c : {Case{"sgd", OptimizerKind::kSgd},
                        Case{"adagrad", OptimizerKind::kAdagrad},
                        Case{"adam", OptimizerKind::kAdam},
                        Case{"ftrl", OptimizerKind::kFtrl}}) {
    SCOPED_TRACE(c.optimizer);
    const std::string name = std::string("apply_") + c.optimizer;
    TestGraph g;
    Output table =
        ops::HashEmbeddingTableOp(g.root, Attrs(name, dim, c.optimizer));
    Output ids = ops::Placeholder(g.root.WithOpName("ids"), DT_INT64);
    Output grad = ops::Placeholder(g.root.WithOpName("grad"), DT_FLOAT);
    Output step = ops::Placeholder(g.root.WithOpName("step"), DT_INT64);
    Output lookup = ops::HashEmbeddingLookup(g.root, table, ids);
    auto f = [&](float v) { return ops::Const(g.root, v); };
    Output apply;
    switch (c.kind) {
      case OptimizerKind::kSgd:
        apply = ops::HashTableApplyGradientDescent(g.root, table, ids, grad,
                                                   f(0.1f), step);
        break;
      case OptimizerKind::kAdagrad:
        apply = ops::HashTableApplyAdagrad(g.root, table, ids, grad, f(0.1f),
                                           f(0.0f), step);
        break;
      case OptimizerKind::kAdam:
        apply = ops::HashTableApplyAdam(g.root, table, ids, grad, f(0.01f),
                                        f(0.9f), f(0.999f), f(1e-8f), step);
        break;
      case OptimizerKind::kFtrl:
        apply = ops::HashTableApplyFtrl(g.root, table, ids, grad, f(0.1f),
                                        f(0.001f), f(0.01f), f(0.0f), f(-0.5f),
                                        step);
        break;
    }
    ASSERT_TRUE(g.Start().ok()) << g.root.status();
    auto twin = HashEmbeddingTable::Create(Options(name, dim, c.kind));
    ASSERT_TRUE(twin.ok());
    std::uniform_real_distribution<float> d(-1, 1);
    for (int64_t s = 1; s <= 3; ++s) {
      std::vector<int64_t> id_v;
      for (int i = 0; i < 20; ++i) id_v.push_back(i * 31 + s * 3);  // distinct
      std::vector<float> g_v(id_v.size() * dim);
      for (float& v : g_v) v = d(rng);
      const Tensor ids_t = I64(id_v);
      const Tensor grad_t = Tensor::FromVector<float>(
          absl::MakeConstSpan(g_v),
          TensorShape({static_cast<int64_t>(id_v.size()), dim}));
      ASSERT_TRUE(g.Run({{"ids", ids_t}}, {lookup}).ok());
      std::vector<float> rows(g_v.size());
      ASSERT_TRUE((*twin)
                      ->Lookup(id_v, absl::MakeSpan(rows),
                               embedding::LookupMode::kTrain)
                      .ok());
      // step 0 on the last round: the table's clock + 1.
      const int64_t fed_step = s == 3 ? 0 : s;
      auto out = g.Run({{"ids", ids_t},
                        {"grad", grad_t},
                        {"step", Tensor::Scalar<int64_t>(fed_step)}},
                       {}, {apply});
      ASSERT_TRUE(out.ok()) << out.status();
      absl::Status direct;
      switch (c.kind) {
        case OptimizerKind::kSgd:
          direct = (*twin)->ApplySgd(id_v, g_v, {.learning_rate = 0.1f}, s);
          break;
        case OptimizerKind::kAdagrad:
          direct = (*twin)->ApplyAdagrad(id_v, g_v, {.learning_rate = 0.1f}, s);
          break;
        case OptimizerKind::kAdam:
          direct = (*twin)->ApplyAdam(
              id_v, g_v,
              {.learning_rate = 0.01f,
               // beta^t in double from the float betas, as the kernel.
               .beta1_power = static_cast<float>(std::pow(double{0.9f}, s)),
               .beta2_power = static_cast<float>(std::pow(double{0.999f}, s))},
              s);
          break;
        case OptimizerKind::kFtrl:
          direct = (*twin)->ApplyFtrl(
              id_v, g_v, {.learning_rate = 0.1f, .l1 = 0.001f, .l2 = 0.01f}, s);
          break;
      }
      ASSERT_TRUE(direct.ok()) << direct;
      HashEmbeddingTable* t = g.Table(name);
      EXPECT_EQ(t->clock(), s);
      for (int64_t id : id_v) {
        auto got = t->GetRow(id), want = (*twin)->GetRow(id);
        ASSERT_TRUE(got.has_value() && want.has_value());
        EXPECT_EQ(got->weights, want->weights) << "id " << id;
        EXPECT_EQ(got->slots, want->slots) << "id " << id;
        EXPECT_EQ(got->version, s);
      }
    }
  }
}

TEST(HashTableKernelsTest, ApplyErrors) {
  TestGraph g;
  Output table = ops::HashEmbeddingTableOp(g.root, Attrs("sgd_table", 2));
  Output ids = ops::Placeholder(g.root.WithOpName("ids"), DT_INT64);
  Output grad = ops::Placeholder(g.root.WithOpName("grad"), DT_FLOAT);
  Output one = ops::Const(g.root, int64_t{1});
  Output adagrad = ops::HashTableApplyAdagrad(g.root, table, ids, grad,
                                              ops::Const(g.root, 0.1f),
                                              ops::Const(g.root, 0.0f), one);
  Output sgd = ops::HashTableApplyGradientDescent(
      g.root, table, ids, grad, ops::Const(g.root, 0.1f), one);
  ASSERT_TRUE(g.Start().ok());
  const Tensor good_ids = I64({1, 2});
  const Tensor good_grad =
      Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2}));
  auto out = g.Run({{"ids", good_ids}, {"grad", good_grad}}, {}, {adagrad});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("sgd_table"));
  EXPECT_THAT(out.status().message(), HasSubstr("sgd"));
  EXPECT_THAT(out.status().message(), HasSubstr("Adagrad"));
  out = g.Run(
      {{"ids", good_ids},
       {"grad", Tensor::FromVector<float>({1, 2, 3}, TensorShape({1, 3}))}},
      {}, {sgd});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("grad [1,3] must be [2, 2] (one row per id, the dim "
                        "of embedding table 'sgd_table')"));
  // Ids without rows are skipped, not inserted.
  out = g.Run({{"ids", good_ids}, {"grad", good_grad}}, {}, {sgd});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(g.Table("sgd_table")->size(), 0);
  EXPECT_EQ(g.Table("sgd_table")->GetStats().dropped_updates, 2);
}

// The same graph, serialized to bytes, parsed back and run in a fresh
// session, computes the same values.
TEST(HashTableKernelsTest, GraphDefRoundTrip) {
  TestGraph g;
  ops::HashEmbeddingTableAttrs a = Attrs("roundtrip", 6, "adagrad");
  a.initializer = "truncated_normal";
  a.init_stddev = 0.3f;
  a.default_value = {0.25f};
  Output table = ops::HashEmbeddingTableOp(g.root, a);
  Output ids = ops::Const(g.root, I64({3, -4, 3, 1LL << 40, 8}));
  Output splits = ops::Const(g.root, I64({0, 2, 2, 5}));
  Output bag = ops::HashEmbeddingBag(g.root, table, ids, splits, Output(),
                                     {.combiner = "sqrtn"});
  Output served = ops::HashEmbeddingBag(g.root, table, ids, splits, Output(),
                                        {.combiner = "sqrtn", .mode = "serve"});
  ASSERT_TRUE(g.Start().ok());
  auto before = g.Run({}, {bag});
  ASSERT_TRUE(before.ok()) << before.status();
  auto def = g.root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  tensorflow::GraphDef parsed;
  ASSERT_TRUE(parsed.ParseFromString(def->SerializeAsString()));
  auto session = Session::Create(SessionOptions{1, 1}, parsed);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> out;
  // Serve first: the fresh table is empty, so default rows (0.25 * sqrt(n)).
  ASSERT_TRUE((*session)->Run({}, {served.name()}, {}, &out).ok());
  EXPECT_NEAR(out[0].flat<float>()[0], 0.25f * std::sqrt(2.0f), 1e-6);
  ASSERT_TRUE((*session)->Run({}, {bag.name()}, {}, &out).ok());
  ASSERT_EQ(out[0].shape(), (*before)[0].shape());
  for (int64_t i = 0; i < out[0].NumElements(); ++i) {
    EXPECT_EQ(out[0].flat<float>()[i], (*before)[0].flat<float>()[i]);
  }
}

// A node of `op` with `inputs` (and dim when > 0), for the ops without a
// builder helper.
Output AddOp(const Scope& scope, const std::string& op,
             const std::vector<Output>& inputs, int64_t dim = 0) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (const Output& in : inputs) b.Input(in);
  if (dim > 0) b.Attr("dim", dim);
  return Output(scope.AddNode(b));
}

Output OutputOf(const Output& o, int index) { return Output(o.node(), index); }

// A tiered table (dram_budget_bytes + cold_dir attrs) holds most rows on
// disk; HashTablePrefetch moves the named ones into memory, and lookups then
// read the same values as before.
TEST(HashTableKernelsTest, PrefetchMovesColdRowsIntoMemory) {
  TestGraph g;
  ops::HashEmbeddingTableAttrs a = Attrs("tiered", 4, "adagrad");
  a.dram_budget_bytes = 8192;
  a.cold_dir = ::testing::TempDir() + "/prefetch_kernel_" + std::to_string(getpid());
  Output table = ops::HashEmbeddingTableOp(g.root, a);
  // Rows inserted 100 a step: each step moves earlier ones out.
  std::vector<int64_t> many(2000);
  for (int64_t i = 0; i < 2000; ++i) many[i] = i * 31 - 7000;
  std::vector<Output> inserts;
  for (int64_t b = 0; b < 2000; b += 100) {
    inserts.push_back(ops::HashEmbeddingLookup(
        g.root, table, ops::Const(g.root, I64({many.begin() + b, many.begin() + b + 100})),
        {.mode = "train"}));
  }
  const std::vector<int64_t> wanted = {many[3], many[500], many[1000], 123456789};
  Output ids = ops::Const(g.root, Tensor::FromVector<int64_t>(wanted, TensorShape({2, 2})));
  Output prefetch = AddOp(g.root, "HashTablePrefetch", {table, ids}, 0);
  Output read = ops::HashEmbeddingLookup(g.root, table, ids, {.mode = "serve"});
  ASSERT_TRUE(g.Start().ok());
  for (const Output& insert : inserts) ASSERT_TRUE(g.Run({}, {insert}).ok());
  auto before = g.Run({}, {read});
  ASSERT_TRUE(before.ok()) << before.status();
  HashEmbeddingTable* t = g.Table("tiered");
  ASSERT_TRUE(t->tiered());
  const int64_t promoted = t->GetStats().promoted;
  EXPECT_GT(t->GetStats().cold_rows, 1500);
  ASSERT_TRUE(g.Run({}, {}, {prefetch}).ok());
  // Rows of early steps are cold; the absent id stays absent.
  EXPECT_EQ(t->GetStats().promoted - promoted, 3);
  ASSERT_TRUE(g.Run({}, {}, {prefetch}).ok());
  EXPECT_EQ(t->GetStats().promoted - promoted, 3);  // in memory now
  auto after = g.Run({}, {read});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT((*after)[0].flat<float>(), ::testing::ElementsAreArray((*before)[0].flat<float>()));
}

// Export then import into another table gives back every row, its slots,
// frequency and version; the export is sorted by id.
TEST(HashTableKernelsTest, ExportImportRoundTrip) {
  TestGraph g;
  Output src = ops::HashEmbeddingTableOp(g.root, Attrs("src", 3, "adagrad"));
  Output dst = ops::HashEmbeddingTableOp(g.root, Attrs("dst", 3, "adagrad"));
  Output ids = ops::Const(g.root, I64({40, -7, 40, 1LL << 50, 3}));
  Output lookup = ops::HashEmbeddingLookup(g.root, src, ids);
  Output uniq = ops::Const(g.root, I64({-7, 3}));
  Output apply = ops::HashTableApplyAdagrad(
      g.root, src, uniq,
      ops::Const(g.root, Tensor::FromVector<float>({0.5f, -1, 2, 0.25f, 3, -4},
                                                   TensorShape({2, 3}))),
      ops::Const(g.root, 0.1f), ops::Const(g.root, 0.0f), ops::Const(g.root, int64_t{7}));
  Output exported = AddOp(g.root, "HashTableExport", {src}, 3);
  Output imported =
      AddOp(g.root, "HashTableImport",
            {dst, OutputOf(exported, 0), OutputOf(exported, 1), OutputOf(exported, 2),
             OutputOf(exported, 3), OutputOf(exported, 4)});
  Output size = AddOp(g.root, "HashTableSize", {dst});
  ASSERT_TRUE(g.Start().ok());
  ASSERT_TRUE(g.Run({}, {lookup}).ok());
  ASSERT_TRUE(g.Run({}, {}, {apply}).ok());
  auto out = g.Run({}, {OutputOf(exported, 0), OutputOf(exported, 2)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].flat<int64_t>(),
              ::testing::ElementsAre(-7, 3, 40, 1LL << 50));
  EXPECT_EQ((*out)[1].shape(), TensorShape({4, 1, 3}));
  ASSERT_TRUE(g.Run({}, {}, {imported}).ok());
  auto n = g.Run({}, {size});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ((*n)[0].scalar<int64_t>(), 4);
  HashEmbeddingTable* a = g.Table("src");
  HashEmbeddingTable* b = g.Table("dst");
  for (int64_t id : {int64_t{-7}, int64_t{3}, int64_t{40}, int64_t{1} << 50}) {
    auto ra = a->GetRow(id), rb = b->GetRow(id);
    ASSERT_TRUE(ra.has_value() && rb.has_value()) << id;
    EXPECT_EQ(ra->weights, rb->weights);
    EXPECT_EQ(ra->slots, rb->slots);
    EXPECT_EQ(ra->frequency, rb->frequency);
    EXPECT_EQ(ra->version, rb->version);
  }
  EXPECT_EQ(a->GetRow(3)->version, 7);
  EXPECT_EQ(b->clock(), 7);
}

TEST(HashTableKernelsTest, ImportRejectsWhatDoesNotFitAndClears) {
  TestGraph g;
  Output t = ops::HashEmbeddingTableOp(g.root, Attrs("imp", 2, "adagrad"));
  Output lookup = ops::HashEmbeddingLookup(g.root, t, ops::Const(g.root, I64({1, 2})));
  Output keys = ops::Placeholder(g.root.WithOpName("keys"), DT_INT64);
  Output values = ops::Placeholder(g.root.WithOpName("values"), DT_FLOAT);
  Output slots = ops::Placeholder(g.root.WithOpName("slots"), DT_FLOAT);
  Output freq = ops::Placeholder(g.root.WithOpName("freq"), DT_INT64);
  Output ver = ops::Placeholder(g.root.WithOpName("ver"), DT_INT64);
  Output imp = AddOp(g.root, "HashTableImport", {t, keys, values, slots, freq, ver});
  ASSERT_TRUE(g.Start().ok());
  ASSERT_TRUE(g.Run({}, {lookup}).ok());
  ASSERT_EQ(g.Table("imp")->size(), 2);
  // values of dim 3 for a table of dim 2.
  auto out = g.Run({{"keys", I64({5})},
                    {"values", Tensor::FromVector<float>({1, 2, 3}, TensorShape({1, 3}))},
                    {"slots", Tensor(DT_FLOAT, TensorShape({1, 0, 3}))},
                    {"freq", I64({1})},
                    {"ver", I64({1})}},
                   {}, {imp});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("imp"));
  EXPECT_THAT(out.status().message(), HasSubstr("values"));
  EXPECT_EQ(g.Table("imp")->size(), 0);
  // No slots: they start at their initial values.
  out = g.Run({{"keys", I64({5, 6})},
               {"values", Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2}))},
               {"slots", Tensor(DT_FLOAT, TensorShape({2, 0, 2}))},
               {"freq", I64({3, 4})},
               {"ver", I64({2, 9})}},
              {}, {imp});
  ASSERT_TRUE(out.ok()) << out.status();
  auto row = g.Table("imp")->GetRow(6);
  ASSERT_TRUE(row.has_value());
  EXPECT_THAT(row->weights, ::testing::ElementsAre(3.0f, 4.0f));
  EXPECT_EQ(row->frequency, 4);
  EXPECT_EQ(row->version, 9);
  EXPECT_FALSE(g.Table("imp")->Contains(1));
}

TEST(HashTableKernelsTest, EvictByAgeAndFrequency) {
  TestGraph g;
  ops::HashEmbeddingTableAttrs a = Attrs("old", 2);
  a.max_age_steps = 5;
  Output t = ops::HashEmbeddingTableOp(g.root, a);
  Output lookup = ops::HashEmbeddingLookup(g.root, t, ops::Const(g.root, I64({1, 2, 3})));
  Output step = ops::Placeholder(g.root.WithOpName("step"), DT_INT64);
  Output apply = ops::HashTableApplyGradientDescent(
      g.root, t, ops::Const(g.root, I64({2})),
      ops::Const(g.root, Tensor::FromVector<float>({1, 1}, TensorShape({1, 2}))),
      ops::Const(g.root, 0.1f), step);
  Output evict = AddOp(g.root, "HashTableEvict", {t, step});
  ops::HashEmbeddingTableAttrs r = Attrs("rare", 2);
  r.min_frequency = 2;
  Output rare = ops::HashEmbeddingTableOp(g.root, r);
  Output rare_lookup =
      ops::HashEmbeddingLookup(g.root, rare, ops::Const(g.root, I64({7, 8, 8})));
  Output rare_evict = AddOp(g.root, "HashTableEvict", {rare, ops::Const(g.root, int64_t{0})});
  ASSERT_TRUE(g.Start().ok());
  ASSERT_TRUE(g.Run({}, {lookup}).ok());  // rows 1, 2, 3 at version 1
  ASSERT_TRUE(g.Run({{"step", Tensor::Scalar<int64_t>(10)}}, {}, {apply}).ok());
  auto n = g.Run({{"step", Tensor::Scalar<int64_t>(10)}}, {evict});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ((*n)[0].scalar<int64_t>(), 2);  // 1 and 3: 10 - 1 > 5
  EXPECT_TRUE(g.Table("old")->Contains(2));
  EXPECT_FALSE(g.Table("old")->Contains(1));
  n = g.Run({{"step", Tensor::Scalar<int64_t>(2)}}, {evict});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ((*n)[0].scalar<int64_t>(), 0);
  ASSERT_TRUE(g.Run({}, {rare_lookup}).ok());
  n = g.Run({}, {rare_evict});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ((*n)[0].scalar<int64_t>(), 1);  // 7 was seen once
  EXPECT_TRUE(g.Table("rare")->Contains(8));
  auto bad = g.Run({{"step", Tensor::FromVector<int64_t>({1, 2})}}, {evict});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("step must be a scalar"));
}

}  // namespace
}  // namespace recflow

namespace recflow {
namespace {

// A timing, not a check (run with --gtest_also_run_disabled_tests): a batch
// of 4096 examples x 20 ids over 1M raw ids, after a warm-up that inserted
// them, in train and serve mode, with 1 and 2 intra-op threads.
TEST(HashTableKernelsTest, DISABLED_BagThroughput) {
  std::mt19937 rng(84);
  const int64_t batch = 4096, per = 20;
  std::vector<int64_t> ids(batch * per), splits(batch + 1);
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % 1000000) * 131;
  for (int64_t b = 0; b <= batch; ++b) splits[b] = b * per;
  for (int64_t dim : {16, 64}) {
    for (int threads : {1, 2}) {
      for (const char* mode : {"train", "serve"}) {
        TestGraph g;
        Output table = ops::HashEmbeddingTableOp(g.root, Attrs("bench", dim));
        Output bag =
            ops::HashEmbeddingBag(g.root, table, ops::Const(g.root, I64(ids)),
                                  ops::Const(g.root, I64(splits)), Output(),
                                  {.combiner = "sum", .mode = mode});
        Output warm = ops::HashEmbeddingLookup(g.root, table,
                                               ops::Const(g.root, I64(ids)));
        ASSERT_TRUE(g.Start(threads).ok());
        ASSERT_TRUE(g.Run({}, {warm}).ok());
        const int reps = 20;
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) ASSERT_TRUE(g.Run({}, {bag}).ok());
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count() /
            reps;
        std::printf("dim %ld threads %d %s: %.2f ms/batch, %.1f M ids/s\n",
                    static_cast<long>(dim), threads, mode, s * 1e3,
                    ids.size() / s / 1e6);
      }
    }
  }
}

}  // namespace
}  // namespace recflow
