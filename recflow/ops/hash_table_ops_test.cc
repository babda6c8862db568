// The hash embedding table ops: shape functions (INFER_OK / INFER_ERROR)
// for every op, and their gradients: a numeric check of HashEmbeddingBag
// with respect to its per-id weights, and its sparse table gradient against
// the dense gradient of EmbeddingBag over the rows the bag read.
#include "recflow/ops/hash_table_ops.h"

#include <map>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/embedding_ops.h"
#include "recflow/runtime/gradient_checker.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

TEST(HashTableOpsShapeTest, TableOp) {
  ShapeTestOp op("HashEmbeddingTableOp");
  op.Attr("dim", int64_t{8});
  INFER_OK(op, "", "[]");
}

TEST(HashTableOpsShapeTest, HashEmbeddingBag) {
  ShapeTestOp op("HashEmbeddingBag");
  op.Attr("dim", int64_t{16});
  INFER_OK(op, "[];[10];[5];[10]", "[4,16]");
  INFER_OK(op, "[];[10];[5];[0]", "[4,16]");
  INFER_OK(op, "?;?;?;?", "[?,16]");
  INFER_OK(op, "[];[?];[?];[?]", "[?,16]");
  INFER_OK(op, "[];[3];[1];[0]", "[0,16]");
  INFER_ERROR("table must be a scalar", op, "[2];[10];[5];[10]");
  INFER_ERROR("ids must be a vector", op, "[];[10,2];[5];[0]");
  INFER_ERROR("row_splits must be a vector", op, "[];[10];[5,1];[0]");
  INFER_ERROR("row_splits must have at least one element", op,
              "[];[10];[0];[0]");
  INFER_ERROR("per_id_weights [7] must be empty or match ids [10]", op,
              "[];[10];[5];[7]");
  INFER_ERROR("per_id_weights must be a vector", op, "[];[10];[5];[10,1]");
}

TEST(HashTableOpsShapeTest, HashEmbeddingLookup) {
  ShapeTestOp op("HashEmbeddingLookup");
  op.Attr("dim", int64_t{4});
  INFER_OK(op, "[];[3,5]", "[3,5,4]");
  INFER_OK(op, "[];[]", "[4]");
  INFER_OK(op, "[];[?]", "[?,4]");
  INFER_OK(op, "[];?", "?");
  INFER_ERROR("table must be a scalar", op, "[1];[3]");
}

TEST(HashTableOpsShapeTest, ApplyOps) {
  const std::map<std::string, std::string> scalars = {
      {"HashTableApplyGradientDescent", ";[];[]"},
      {"HashTableApplyAdagrad", ";[];[];[]"},
      {"HashTableApplyAdam", ";[];[];[];[];[]"},
      {"HashTableApplyFtrl", ";[];[];[];[];[];[]"}};
  for (const auto& [name, rest] : scalars) {
    SCOPED_TRACE(name);
    ShapeTestOp op(name);
    INFER_OK(op, "[];[5];[5,8]" + rest, "");
    INFER_OK(op, "?;?;?" + rest, "");
    INFER_ERROR("table must be a scalar", op, "[3];[5];[5,8]" + rest);
    INFER_ERROR("ids must be a vector", op, "[];[5,1];[5,8]" + rest);
    INFER_ERROR("grad must be a matrix", op, "[];[5];[5]" + rest);
    INFER_ERROR("must have one row per id", op, "[];[4];[5,8]" + rest);
    // The last input (step) must be a scalar.
    std::string bad = "[];[5];[5,8]" + rest;
    bad = bad.substr(0, bad.size() - 2) + "[2]";
    INFER_ERROR("step must be a scalar", op, bad);
  }
  ShapeTestOp adam("HashTableApplyAdam");
  INFER_ERROR("beta1 must be a scalar", adam, "[];[5];[5,8];[];[1];[];[];[]");
}

TEST(HashTableOpsShapeTest, ExportImportEvictSize) {
  ShapeTestOp exp("HashTableExport");
  exp.Attr("dim", int64_t{8});
  INFER_OK(exp, "[]", "[?];[?,8];[?,?,8];[?];[?]");
  INFER_OK(exp, "?", "[?];[?,8];[?,?,8];[?];[?]");
  INFER_ERROR("table must be a scalar", exp, "[2]");

  ShapeTestOp imp("HashTableImport");
  INFER_OK(imp, "[];[3];[3,8];[3,2,8];[3];[3]", "");
  INFER_OK(imp, "[];[?];[?,8];[?,0,8];[?];[?]", "");
  INFER_OK(imp, "?;?;?;?;?;?", "");
  INFER_ERROR("table must be a scalar", imp, "[1];[3];[3,8];[3,2,8];[3];[3]");
  INFER_ERROR("keys must have rank 1", imp, "[];[3,1];[3,8];[3,2,8];[3];[3]");
  INFER_ERROR("slots must have rank 3", imp, "[];[3];[3,8];[3,8];[3];[3]");
  INFER_ERROR("values [4,8] must have one row per key, as keys (3 rows)", imp,
              "[];[3];[4,8];[3,2,8];[3];[3]");
  INFER_ERROR("versions [2] must have one row per key", imp,
              "[];[3];[3,8];[3,2,8];[3];[2]");
  INFER_ERROR("slots [3,2,4] must have values' dim", imp,
              "[];[3];[3,8];[3,2,4];[3];[3]");

  ShapeTestOp evict("HashTableEvict");
  INFER_OK(evict, "[];[]", "[]");
  INFER_ERROR("step must be a scalar", evict, "[];[1]");
  INFER_ERROR("table must be a scalar", evict, "[2];[]");

  ShapeTestOp prefetch("HashTablePrefetch");
  INFER_OK(prefetch, "[];[4,2]", "");
  INFER_OK(prefetch, "[];?", "");
  INFER_ERROR("table must be a scalar", prefetch, "[2];[3]");

  ShapeTestOp size("HashTableSize");
  INFER_OK(size, "[]", "[]");
  INFER_ERROR("table must be a scalar", size, "[2]");
}

Tensor I64(std::vector<int64_t> v) {
  return Tensor::FromVector<int64_t>(absl::MakeConstSpan(v));
}

ops::HashEmbeddingTableAttrs TestTable(int64_t dim, const std::string& name) {
  ops::HashEmbeddingTableAttrs a;
  a.shared_name = name;
  a.dim = dim;
  a.initializer = "uniform";
  a.init_minval = -1.0f;
  a.init_maxval = 1.0f;
  a.seed = 99;
  a.num_shards = 4;
  return a;
}

TEST(HashTableGradTest, BagWeightsNumeric) {
  std::mt19937 rng(71);
  const Tensor ids = I64({40, -7, 40, 1234567890123, 5, -7, -7});
  const Tensor splits = I64({0, 3, 3, 5, 7});  // row 1 empty
  for (const char* combiner : {"sum", "mean", "sqrtn"}) {
    for (const char* mode : {"train", "serve"}) {
      Scope root = Scope::NewRootScope();
      Output table = ops::HashEmbeddingTableOp(
          root, TestTable(3, std::string("w_") + combiner + mode));
      Output w = ops::Placeholder(root, DT_FLOAT, PartialShape({7}));
      Output y = ops::HashEmbeddingBag(root, table, ops::Const(root, ids),
                                       ops::Const(root, splits), w,
                                       {.combiner = combiner, .mode = mode});
      ASSERT_TRUE(root.ok()) << root.status();
      Tensor w0(DT_FLOAT, TensorShape({7}));
      std::uniform_real_distribution<float> d(0.5f, 2.0f);
      for (float& v : w0.flat<float>()) v = d(rng);
      auto err = ComputeGradientError(root, {w}, {w0}, {y});
      ASSERT_TRUE(err.ok()) << err.status();
      // Float: central differences with delta 1e-3.
      EXPECT_LT(*err, 5e-3) << combiner << " " << mode;
    }
  }
}

// The sparse table gradient (unique raw ids + merged rows) equals the dense
// gradient of EmbeddingBag over a params matrix made of the rows the bag
// read (ids remapped to positions 0..U-1).
TEST(HashTableGradTest, SparseGradMatchesDenseReference) {
  std::mt19937 rng(72);
  const std::vector<int64_t> ids = {9, -3, 9, 77, 100000000000, -3, -3, 9};
  const std::vector<int64_t> splits = {0, 3, 3, 5, 8};
  const std::vector<int64_t> uniq = {9, -3, 77, 100000000000};
  const std::vector<int64_t> pos = {0, 1, 0, 2, 3, 1, 1, 0};
  Tensor weights(DT_FLOAT, TensorShape({8}));
  Tensor dy(DT_FLOAT, TensorShape({4, 5}));
  std::uniform_real_distribution<float> d(-2, 2);
  for (float& v : weights.flat<float>()) v = d(rng);
  for (float& v : dy.flat<float>()) v = d(rng);
  for (const char* combiner : {"sum", "mean", "sqrtn"}) {
    for (bool weighted : {false, true}) {
      SCOPED_TRACE(std::string(combiner) + (weighted ? " weighted" : ""));
      Scope root = Scope::NewRootScope();
      Output table =
          ops::HashEmbeddingTableOp(root, TestTable(5, "sparse_grad"));
      Output w = weighted ? ops::Const(root, weights) : Output();
      Output bag = ops::HashEmbeddingBag(
          root, table, ops::Const(root, I64(ids)),
          ops::Const(root, I64(splits)), w, {.combiner = combiner});
      Output dy_t = ops::Const(root, dy);
      std::vector<GradientValue> sparse;
      ASSERT_TRUE(
          AddSymbolicGradientsSparse(root, {bag}, {table}, {dy_t}, &sparse)
              .ok())
          << root.status();
      ASSERT_TRUE(sparse[0].is_sparse());
      // The reference: rows of the unique ids as a dense params matrix.
      Output params = ops::Placeholder(root.WithOpName("params"), DT_FLOAT,
                                       PartialShape({4, 5}));
      Output ref = ops::EmbeddingBag(root, params, ops::Const(root, I64(pos)),
                                     ops::Const(root, I64(splits)), w,
                                     {.combiner = combiner});
      std::vector<Output> dense;
      ASSERT_TRUE(
          AddSymbolicGradients(root, {ref}, {params}, {dy_t}, &dense).ok());
      Output rows = ops::HashEmbeddingLookup(
          root, table, ops::Const(root, I64(uniq)), {.mode = "serve"});
      auto def = root.ToGraphDef();
      ASSERT_TRUE(def.ok()) << def.status();
      auto session = Session::Create(SessionOptions{1, 1}, *def);
      ASSERT_TRUE(session.ok()) << session.status();
      std::vector<Tensor> out;
      ASSERT_TRUE((*session)
                      ->Run({},
                            {sparse[0].sparse.indices.name(),
                             sparse[0].sparse.values.name(),
                             sparse[0].sparse.dense_shape.name(), rows.name()},
                            {}, &out)
                      .ok());
      const Tensor indices = out[0], values = out[1], dense_shape = out[2];
      EXPECT_THAT(std::vector<int64_t>(indices.flat<int64_t>().begin(),
                                       indices.flat<int64_t>().end()),
                  ::testing::ElementsAreArray(uniq));
      EXPECT_THAT(std::vector<int64_t>(dense_shape.flat<int64_t>().begin(),
                                       dense_shape.flat<int64_t>().end()),
                  ::testing::ElementsAre(-1, 5));
      std::vector<Tensor> ref_out;
      ASSERT_TRUE(
          (*session)
              ->Run({{"params", out[3]}}, {dense[0].name()}, {}, &ref_out)
              .ok());
      ASSERT_EQ(values.shape(), ref_out[0].shape());
      for (int64_t i = 0; i < values.NumElements(); ++i) {
        EXPECT_NEAR(values.flat<float>()[i], ref_out[0].flat<float>()[i], 1e-5)
            << "at " << i;
      }
    }
  }
}

TEST(HashTableGradTest, DenseApiGivesTheTableNoGradient) {
  Scope root = Scope::NewRootScope();
  Output table = ops::HashEmbeddingTableOp(root, TestTable(2, "dense_api"));
  Output bag = ops::HashEmbeddingBag(root, table, ops::Const(root, I64({1, 2})),
                                     ops::Const(root, I64({0, 2})));
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {bag}, {table}, &grads).ok())
      << root.status();
  EXPECT_FALSE(grads[0].valid());
}

TEST(HashTableGradTest, LookupSparseGradIsOneRowPerId) {
  Scope root = Scope::NewRootScope();
  Output table = ops::HashEmbeddingTableOp(root, TestTable(3, "lookup_grad"));
  Output y = ops::HashEmbeddingLookup(
      root, table,
      ops::Const(root, Tensor::FromVector<int64_t>({4, 8, 4, 1},
                                                   TensorShape({2, 2}))));
  Tensor dy(DT_FLOAT, TensorShape({2, 2, 3}));
  for (int i = 0; i < 12; ++i) dy.flat<float>()[i] = 0.5f * i - 2.0f;
  std::vector<GradientValue> g;
  ASSERT_TRUE(
      AddSymbolicGradientsSparse(root, {y}, {table}, {ops::Const(root, dy)}, &g)
          .ok());
  ASSERT_TRUE(g[0].is_sparse());
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  auto session = Session::Create(SessionOptions{1, 1}, *def);
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)
                  ->Run({},
                        {g[0].sparse.indices.name(), g[0].sparse.values.name()},
                        {}, &out)
                  .ok());
  EXPECT_THAT(std::vector<int64_t>(out[0].flat<int64_t>().begin(),
                                   out[0].flat<int64_t>().end()),
              ::testing::ElementsAre(4, 8, 4, 1));
  ASSERT_EQ(out[1].shape(), TensorShape({4, 3}));
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(out[1].flat<float>()[i], dy.flat<float>()[i]);
  }
}

}  // namespace
}  // namespace recflow
