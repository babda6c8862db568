// Tests of finding and creating the hash embedding tables of a graph: the
// attrs parse into the options the op's kernel uses, the tables created are
// the ones the graph's nodes then use, and bad attrs or conflicting tables
// are errors naming the node.
#include "recflow/embedding/graph_tables.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/graph.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/runtime/session.h"

namespace recflow::embedding {
namespace {

using ::testing::HasSubstr;

ops::HashEmbeddingTableAttrs Attrs(int64_t dim) {
  ops::HashEmbeddingTableAttrs a;
  a.dim = dim;
  return a;
}

std::unique_ptr<Session> Start(const Scope& root) {
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  auto session = Session::Create({}, *def);
  EXPECT_TRUE(session.ok()) << session.status();
  return *std::move(session);
}

TEST(GraphTablesTest, CreatesTheTablesTheNodesUse) {
  Scope root = Scope::NewRootScope();
  ops::HashEmbeddingTableAttrs a = Attrs(3);
  a.optimizer = "adam";
  a.initializer = "normal";
  a.init_mean = 0.5f;
  a.init_stddev = 0.25f;
  a.seed = 9;
  a.num_shards = 8;
  a.default_value = {1.5f};
  a.admission = "count";
  a.admission_min_count = 3;
  a.sketch_depth = 2;
  a.max_age_steps = 10;
  a.min_frequency = 2;
  a.nonfinite_gradients = "error";
  ops::HashEmbeddingTableOp(root.WithOpName("users"), a);
  ops::HashEmbeddingTableAttrs b = Attrs(2);
  b.container = "box";
  b.shared_name = "items_shared";
  ops::HashEmbeddingTableOp(root.WithOpName("items"), b);
  ops::Const(root.WithOpName("other"), 1.0f);
  auto session = Start(root);
  ResourceMgr* rm = session->device()->resource_manager();

  auto tables = CreateGraphTables(*session->graph(), rm);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 2u);
  const GraphTable& users = (*tables)[0];
  EXPECT_EQ(users.where.node, "users");
  EXPECT_EQ(users.where.container, rm->default_container());
  EXPECT_EQ(users.where.name, "users");
  const EmbeddingTableOptions& o = users.resource->table()->options();
  EXPECT_EQ(o.name, "users");
  EXPECT_EQ(o.dim, 3);
  EXPECT_EQ(o.optimizer, OptimizerKind::kAdam);
  EXPECT_EQ(o.initializer.kind, InitializerOptions::Kind::kNormal);
  EXPECT_EQ(o.initializer.mean, 0.5f);
  EXPECT_EQ(o.initializer.stddev, 0.25f);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.num_shards, 8);
  EXPECT_EQ(o.default_value, std::vector<float>{1.5f});
  EXPECT_EQ(o.admission.kind, AdmissionOptions::Kind::kCount);
  EXPECT_EQ(o.admission.min_count, 3);
  EXPECT_EQ(o.admission.sketch_depth, 2);
  EXPECT_EQ(o.eviction.max_age_steps, 10);
  EXPECT_EQ(o.eviction.min_frequency, 2);
  EXPECT_EQ(o.nonfinite_gradients, NonFinitePolicy::kError);
  const GraphTable& items = (*tables)[1];
  EXPECT_EQ(items.where.node, "items");
  EXPECT_EQ(items.where.container, "box");
  EXPECT_EQ(items.where.name, "items_shared");
  EXPECT_EQ(items.resource->table()->name(), "items_shared");
  EXPECT_EQ(items.resource->table()->options().optimizer, OptimizerKind::kSgd);

  // Running the nodes hands out the very same tables.
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"users", "items"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<ResourceHandle>().resource(), users.resource);
  EXPECT_EQ(out[1].scalar<ResourceHandle>().resource(), items.resource);
  // And creating again finds them.
  auto again = CreateGraphTables(*session->graph(), rm);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].resource, users.resource);
  EXPECT_EQ((*again)[1].resource, items.resource);
  auto found = FindGraphTables(*session->graph(), *rm);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->size(), 2u);
}

TEST(GraphTablesTest, AGraphWithoutTablesHasNone) {
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithOpName("c"), 1.0f);
  auto session = Start(root);
  auto tables = CreateGraphTables(*session->graph(), session->device()->resource_manager());
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_TRUE(tables->empty());
}

// What creating the tables of `root`'s graph returns.
absl::Status CreateError(const Scope& root) {
  auto session = Start(root);
  return CreateGraphTables(*session->graph(), session->device()->resource_manager()).status();
}

TEST(GraphTablesTest, BadAttrsAndConflictsNameTheNode) {
  Scope odd = Scope::NewRootScope();
  ops::HashEmbeddingTableAttrs a = Attrs(4);
  a.num_shards = 3;
  ops::HashEmbeddingTableOp(odd.WithOpName("odd_shards"), a);
  absl::Status s = CreateError(odd);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("HashEmbeddingTableOp 'odd_shards'"));
  EXPECT_THAT(s.message(), HasSubstr("num_shards"));
  // The same parser as the kernel's: running the node fails alike.
  s = Start(odd)->Run({}, {}, {"odd_shards"}, nullptr);
  EXPECT_THAT(s.message(), HasSubstr("HashEmbeddingTableOp 'odd_shards'"));
  EXPECT_THAT(s.message(), HasSubstr("num_shards"));

  // Two nodes asking for one shared table with different dims.
  Scope two = Scope::NewRootScope();
  ops::HashEmbeddingTableAttrs b = Attrs(8);
  a = Attrs(4);
  a.shared_name = b.shared_name = "same";
  ops::HashEmbeddingTableOp(two.WithOpName("first"), a);
  ops::HashEmbeddingTableOp(two.WithOpName("second"), b);
  s = CreateError(two);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("HashEmbeddingTableOp 'second'"));
  EXPECT_THAT(s.message(), HasSubstr("dim 4"));
}

TEST(GraphTablesTest, ParseTableNodeDefaultsContainerAndName) {
  tensorflow::NodeDef node;
  node.set_name("n");
  node.set_op(kHashTableOp);
  auto missing = ParseTableNode(node, "dflt");
  EXPECT_TRUE(absl::IsInvalidArgument(missing.status()) || absl::IsNotFound(missing.status()))
      << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("HashEmbeddingTableOp 'n'"));
  Scope root = Scope::NewRootScope();
  ops::HashEmbeddingTableOp(root.WithOpName("n"), Attrs(5));
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  Graph graph;
  ASSERT_TRUE(ConvertGraphDefToGraph({}, *def, &graph).ok());
  auto t = ParseTableNode(graph.FindNode("n")->def(), "dflt");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->container, "dflt");
  EXPECT_EQ(t->name, "n");
  EXPECT_EQ(t->options.dim, 5);
  // A value the op's definition would have refused: the choices are listed.
  tensorflow::NodeDef bad = graph.FindNode("n")->def();
  (*bad.mutable_attr())["optimizer"].set_s("rmsprop");
  t = ParseTableNode(bad, "dflt");
  EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << t.status();
  EXPECT_EQ(t.status().message(),
            "HashEmbeddingTableOp 'n': optimizer must be 'sgd', 'adagrad', 'adam' or 'ftrl', "
            "not 'rmsprop'");
  (*bad.mutable_attr())["optimizer"].set_s("sgd");
  (*bad.mutable_attr())["nonfinite_gradients"].set_s("ignore");
  EXPECT_EQ(ParseTableNode(bad, "dflt").status().message(),
            "HashEmbeddingTableOp 'n': nonfinite_gradients must be 'skip_row', 'apply' or "
            "'error', not 'ignore'");
  // Tiers: the attrs reach the options; a budget without a directory is
  // refused naming the option; a graph written before the attrs has none.
  (*bad.mutable_attr())["nonfinite_gradients"].set_s("skip_row");
  (*bad.mutable_attr())["dram_budget_bytes"].set_i(1 << 20);
  (*bad.mutable_attr())["cold_dir"].set_s("/ssd/emb");
  (*bad.mutable_attr())["frequency_half_life_steps"].set_i(50);
  t = ParseTableNode(bad, "dflt");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->options.tier.dram_budget_bytes, 1 << 20);
  EXPECT_EQ(t->options.tier.cold_dir, "/ssd/emb");
  EXPECT_EQ(t->options.tier.frequency_half_life_steps, 50);
  (*bad.mutable_attr())["cold_dir"].set_s("");
  EXPECT_THAT(ParseTableNode(bad, "dflt").status().message(), HasSubstr("tier.cold_dir"));
  for (const char* attr : {"dram_budget_bytes", "cold_dir", "frequency_half_life_steps"}) {
    bad.mutable_attr()->erase(attr);
  }
  t = ParseTableNode(bad, "dflt");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->options.tier.dram_budget_bytes, 0);
}

}  // namespace
}  // namespace recflow::embedding
