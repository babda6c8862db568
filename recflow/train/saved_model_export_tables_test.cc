// Hash embedding tables in a SavedModel: ExportSavedModel writes their rows
// into the variables bundle, LoadSavedModel imports them, and a serve-mode
// lookup through the loaded model reads exactly the exported rows, with the
// default row for unknown ids and no insertion.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "recflow/core/env.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/serving/saved_model_bundle.h"
#include "recflow/train/saved_model_export.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/saved_model_tables_test_" + name;
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  return dir;
}

struct TableModel {
  Scope root = Scope::NewRootScope();
  Output ids, splits, pooled;
  std::unique_ptr<Session> session;

  explicit TableModel(int64_t dim) {
    ops::HashEmbeddingTableAttrs attrs;
    attrs.dim = dim;
    attrs.optimizer = "adagrad";
    attrs.default_value = {0.5f};
    Output table = HashEmbeddingTable(root, "emb", attrs);
    ids = ops::Placeholder(root.WithOpName("ids"), DT_INT64);
    splits = ops::Placeholder(root.WithOpName("row_splits"), DT_INT64);
    ops::HashEmbeddingBagAttrs bag;
    bag.combiner = "sum";
    bag.mode = "serve";
    pooled = ops::HashEmbeddingBag(root.WithOpName("pooled"), table, ids, splits, Output(), bag);
    auto def = root.ToGraphDef();
    EXPECT_TRUE(def.ok()) << def.status();
    auto s = Session::Create({}, *def);
    EXPECT_TRUE(s.ok()) << s.status();
    session = std::move(*s);
  }

  std::shared_ptr<embedding::EmbeddingTableResource> Table(Session* s) {
    ResourceMgr* rm = s->device()->resource_manager();
    auto res = embedding::EmbeddingTableResource::Lookup(*rm, rm->default_container(), "emb");
    EXPECT_TRUE(res.ok()) << res.status();
    return res.ok() ? *res : nullptr;
  }

  std::map<std::string, ExportSignature> Signatures() const {
    return {{"serving_default",
             {.inputs = {{"ids", ids}, {"row_splits", splits}}, .outputs = {{"pooled", pooled}}}}};
  }
};

TEST(SavedModelTablesTest, ExportedRowsServeExactlyAndUnknownIdsReadTheDefault) {
  const int64_t dim = 3;
  TableModel m(dim);
  ASSERT_TRUE(m.session->Run({}, {}, {"emb"}, nullptr).ok());  // creates the table
  auto table = m.Table(m.session.get());
  ASSERT_NE(table, nullptr);
  // 3000 rows with known values: row of id k is (k, -k, 0.25 k).
  const int64_t n = 3000;
  std::vector<int64_t> keys(n);
  std::vector<float> values(n * dim);
  for (int64_t i = 0; i < n; ++i) {
    keys[i] = 7 * i - 5000;
    values[i * dim] = static_cast<float>(keys[i]);
    values[i * dim + 1] = -static_cast<float>(keys[i]);
    values[i * dim + 2] = 0.25f * static_cast<float>(keys[i]);
  }
  embedding::TableChunk chunk;
  chunk.keys = Tensor::FromVector<int64_t>(keys, {n});
  chunk.values = Tensor::FromVector<float>(values, {n, dim});
  ASSERT_TRUE(table->table()->Import(chunk).ok());

  const std::string dir = FreshDir("roundtrip") + "/1";
  ASSERT_TRUE(ExportSavedModel(m.session.get(), m.Signatures(), dir).ok());

  auto bundle = serving::LoadSavedModel({}, dir, {"serve"});
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  auto loaded = m.Table(bundle->session.get());
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(loaded->table()->size(), n);
  // Bags: {k0, k1}, {unknown}, {}, {k2999}.
  const int64_t unknown = 123456789;
  auto out = serving::RunSignature(
      *bundle, "serving_default",
      {{"ids", Tensor::FromVector<int64_t>({keys[0], keys[1], unknown, keys[n - 1]}, {4})},
       {"row_splits", Tensor::FromVector<int64_t>({0, 2, 3, 3, 4}, {5})}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& pooled = out->at("pooled");
  ASSERT_EQ(pooled.shape(), TensorShape({4, dim}));
  const float* p = pooled.data<float>();
  for (int j = 0; j < dim; ++j) {
    EXPECT_EQ(p[j], values[j] + values[dim + j]) << j;
    EXPECT_EQ(p[dim + j], 0.5f) << "unknown ids read the default row";
    EXPECT_EQ(p[2 * dim + j], 0.f) << "an empty bag is zeros";
    EXPECT_EQ(p[3 * dim + j], values[(n - 1) * dim + j]);
  }
  EXPECT_EQ(loaded->table()->size(), n) << "serving never inserts";
}

TEST(SavedModelTablesTest, MissingOrCorruptTableRowsFailTheLoadNamingTheTable) {
  TableModel m(2);
  ASSERT_TRUE(m.session->Run({}, {}, {"emb"}, nullptr).ok());
  embedding::TableChunk chunk;
  chunk.keys = Tensor::FromVector<int64_t>({1, 2, 3}, {3});
  chunk.values = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  ASSERT_TRUE(m.Table(m.session.get())->table()->Import(chunk).ok());
  const std::string dir = FreshDir("corrupt") + "/1";
  ASSERT_TRUE(ExportSavedModel(m.session.get(), m.Signatures(), dir).ok());

  // Flip a byte in the data file: the values' checksum fails.
  Env* env = Env::Default();
  const std::string data = checkpoint::VariablesPrefix(dir) + ".data-00000-of-00001";
  std::string bytes;
  ASSERT_TRUE(ReadFileToString(env, data, &bytes).ok());
  std::string corrupt = bytes;
  for (size_t i = 0; i < corrupt.size(); ++i) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
  ASSERT_TRUE(WriteStringToFile(env, data, corrupt).ok());
  auto bad = serving::LoadSavedModel({}, dir, {"serve"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("emb"));

  // No variables bundle at all.
  ASSERT_TRUE(env->DeleteFile(data).ok());
  ASSERT_TRUE(env->DeleteFile(checkpoint::VariablesPrefix(dir) + ".index").ok());
  auto missing = serving::LoadSavedModel({}, dir, {"serve"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("hash embedding table 'emb'"));
}

}  // namespace
}  // namespace recflow::train
