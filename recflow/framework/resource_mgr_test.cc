#include "recflow/framework/resource_mgr.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "recflow/proto/node_def.pb.h"

namespace recflow {
namespace {

class Counter : public ResourceBase {
 public:
  explicit Counter(int v) : value(v) {}
  std::string DebugString() const override { return "Counter(" + std::to_string(value) + ")"; }
  int value;
};

class Other : public ResourceBase {
 public:
  std::string DebugString() const override { return "Other"; }
};

tensorflow::NodeDef Node(const std::string& name, const char* container, const char* shared_name) {
  tensorflow::NodeDef def;
  def.set_name(name);
  def.set_op("VarHandleOp");
  if (container != nullptr) (*def.mutable_attr())["container"].set_s(container);
  if (shared_name != nullptr) (*def.mutable_attr())["shared_name"].set_s(shared_name);
  return def;
}

TEST(NodeResourceLocationTest, AttrsWinOverDefaults) {
  ResourceLocation where = NodeResourceLocation(Node("scope/w", "ps", "w_shared"), "localhost");
  EXPECT_EQ(where.container, "ps");
  EXPECT_EQ(where.name, "w_shared");
}

TEST(NodeResourceLocationTest, EmptyOrAbsentAttrsFallBackToDefaultContainerAndNodeName) {
  for (const auto& def : {Node("scope/w", "", ""), Node("scope/w", nullptr, nullptr)}) {
    ResourceLocation where = NodeResourceLocation(def, "localhost");
    EXPECT_EQ(where.container, "localhost");
    EXPECT_EQ(where.name, "scope/w");
  }
  // An empty default keeps the container empty (ps placement resolves it
  // later against each ps's own manager).
  EXPECT_EQ(NodeResourceLocation(Node("w", nullptr, "s"), "").container, "");
}

TEST(ResourceMgrTest, CreateLookupDeleteByContainerTypeAndName) {
  ResourceMgr rm;
  EXPECT_EQ(rm.default_container(), "localhost");
  ASSERT_TRUE(rm.Create("c", "x", std::make_shared<Counter>(1)).ok());
  absl::Status dup = rm.Create("c", "x", std::make_shared<Counter>(2));
  EXPECT_TRUE(absl::IsAlreadyExists(dup)) << dup;
  EXPECT_NE(dup.message().find("c/x"), std::string::npos) << dup;
  // Another type under the same name is a different resource.
  EXPECT_TRUE(rm.Create("c", "x", std::make_shared<Other>()).ok());
  auto got = rm.Lookup<Counter>("c", "x");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)->value, 1);
  auto missing = rm.Lookup<Counter>("d", "x");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("d/x"), std::string::npos) << missing.status();
  EXPECT_TRUE(rm.Delete<Counter>("c", "x").ok());
  EXPECT_TRUE(absl::IsNotFound(rm.Delete<Counter>("c", "x")));
  EXPECT_TRUE(rm.Lookup<Other>("c", "x").ok());
}

TEST(ResourceMgrTest, LookupOrCreateCallsTheCreatorOnceAndPassesItsError) {
  ResourceMgr rm;
  int calls = 0;
  auto creator = [&]() -> absl::StatusOr<std::shared_ptr<Counter>> {
    ++calls;
    return std::make_shared<Counter>(7);
  };
  auto a = rm.LookupOrCreate<Counter>("c", "n", creator);
  auto b = rm.LookupOrCreate<Counter>("c", "n", creator);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(calls, 1);
  auto failed = rm.LookupOrCreate<Counter>(
      "c", "bad", []() -> absl::StatusOr<std::shared_ptr<Counter>> {
        return absl::InvalidArgumentError("no");
      });
  EXPECT_TRUE(absl::IsInvalidArgument(failed.status()));
  EXPECT_TRUE(absl::IsNotFound(rm.Lookup<Counter>("c", "bad").status()));
}

TEST(ResourceMgrTest, CleanupDropsOneContainerOnly) {
  ResourceMgr rm;
  ASSERT_TRUE(rm.Create("a", "x", std::make_shared<Counter>(1)).ok());
  ASSERT_TRUE(rm.Create("b", "x", std::make_shared<Counter>(2)).ok());
  rm.Cleanup("a");
  EXPECT_TRUE(absl::IsNotFound(rm.Lookup<Counter>("a", "x").status()));
  EXPECT_TRUE(rm.Lookup<Counter>("b", "x").ok());
  std::vector<std::string> lines = rm.DebugStrings();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("Counter(2)"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace recflow
