// Tests of the variable update kernels AssignAdd / AssignSub and their
// resource forms (state_kernels.cc).
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/state_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

template <typename T>
Tensor RandomTensor(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  for (T& v : t.flat<T>()) {
    if constexpr (std::is_floating_point_v<T>) {
      v = std::uniform_real_distribution<T>(-3, 3)(*rng);
    } else {
      v = static_cast<T>(std::uniform_int_distribution<int>(-1000, 1000)(*rng));
    }
  }
  return t;
}

// Builds var = init; then runs `steps` updates alternating add and sub of
// fed values, and compares with a plain loop.
template <typename T>
void CheckAssignUpdates(bool resource, const TensorShape& shape, int threads) {
  SCOPED_TRACE(std::string(resource ? "resource " : "ref ") +
               DataTypeString(DataTypeToEnum<T>::value) + " " +
               shape.DebugString());
  const DataType dt = DataTypeToEnum<T>::value;
  Scope root = Scope::NewRootScope();
  Output init = ops::Placeholder(root.WithOpName("init"), dt);
  Output value = ops::Placeholder(root.WithOpName("value"), dt);
  if (resource) {
    Output h = ops::VarHandleOp(root.WithOpName("v"), dt, PartialShape());
    ops::AssignVariableOp(root.WithOpName("assign"), h, init);
    ops::AssignAddVariableOp(root.WithOpName("add"), h, value);
    ops::AssignSubVariableOp(root.WithOpName("sub"), h, value);
    ops::ReadVariableOp(root.WithOpName("read"), h, dt);
  } else {
    Output v = ops::Variable(root.WithOpName("v"), PartialShape(), dt);
    ops::Assign(root.WithOpName("assign"), v, init, {false});
    ops::AssignAdd(root.WithOpName("add"), v, value);
    ops::AssignSub(root.WithOpName("sub"), v, value);
    ops::Identity(root.WithOpName("read"), v);
  }
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok()) << def.status();
  auto session = Session::Create(SessionOptions{threads, threads}, *def);
  ASSERT_TRUE(session.ok()) << session.status();
  std::mt19937 rng(7);
  Tensor want = RandomTensor<T>(shape, &rng);
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({{"init", want}}, {}, {"assign"}, &out).ok());
  want = want.DeepCopy();
  for (int step = 0; step < 4; ++step) {
    const Tensor delta = RandomTensor<T>(shape, &rng);
    const bool add = step % 2 == 0;
    absl::Status s =
        (*session)->Run({{"value", delta}}, {}, {add ? "add" : "sub"}, &out);
    ASSERT_TRUE(s.ok()) << s;
    for (int64_t i = 0; i < want.NumElements(); ++i) {
      if (add) {
        want.flat<T>()[i] += delta.flat<T>()[i];
      } else {
        want.flat<T>()[i] -= delta.flat<T>()[i];
      }
    }
    ASSERT_TRUE((*session)->Run({}, {"read"}, {}, &out).ok());
    EXPECT_TRUE(TensorsEqual(out[0], want)) << "step " << step;
  }
}

TEST(StateKernelsTest, AssignAddAndSubMatchAPlainLoop) {
  for (bool resource : {false, true}) {
    for (int threads : {1, 2}) {
      for (const TensorShape& shape :
           {TensorShape({}), TensorShape({3, 5}), TensorShape({400, 300})}) {
        CheckAssignUpdates<float>(resource, shape, threads);
        CheckAssignUpdates<double>(resource, shape, threads);
        CheckAssignUpdates<int32_t>(resource, shape, threads);
        CheckAssignUpdates<int64_t>(resource, shape, threads);
      }
    }
  }
}

TEST(StateKernelsTest, AssignAddShapeMismatchIsAClearError) {
  for (bool resource : {false, true}) {
    Scope root = Scope::NewRootScope();
    Output value = ops::Placeholder(root.WithOpName("value"), DT_FLOAT);
    Output init = ops::Const<float>(root, {1.f, 2.f}, TensorShape({2}));
    if (resource) {
      Output h =
          ops::VarHandleOp(root.WithOpName("v"), DT_FLOAT, PartialShape({2}));
      ops::AssignVariableOp(root.WithOpName("assign"), h, init);
      ops::AssignAddVariableOp(root.WithOpName("add"), h, value);
    } else {
      Output v =
          ops::Variable(root.WithOpName("v"), PartialShape({2}), DT_FLOAT);
      ops::Assign(root.WithOpName("assign"), v, init);
      ops::AssignAdd(root.WithOpName("add"), v, value);
    }
    auto session =
        Session::Create(SessionOptions{1, 1}, root.ToGraphDef().value());
    ASSERT_TRUE(session.ok());
    std::vector<Tensor> out;
    ASSERT_TRUE((*session)->Run({}, {}, {"assign"}, &out).ok());
    absl::Status s = (*session)->Run(
        {{"value", Tensor::FromVector<float>({1, 2, 3}, TensorShape({3}))}}, {},
        {"add"}, &out);
    EXPECT_THAT(
        s.message(),
        HasSubstr(
            "cannot add a value of shape [3] to variable 'v' of shape [2]"));
  }
}

TEST(StateKernelsTest, AssignAddToUninitializedVariableFails) {
  Scope root = Scope::NewRootScope();
  Output v = ops::Variable(root.WithOpName("v"), PartialShape({}), DT_INT64);
  ops::AssignAdd(root.WithOpName("add"), v, ops::Const<int64_t>(root, 1));
  auto session =
      Session::Create(SessionOptions{1, 1}, root.ToGraphDef().value());
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  absl::Status s = (*session)->Run({}, {}, {"add"}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("uninitialized variable 'v'"));
}

// Note [Assign takes a buffer of its own] (state_kernels.cc): a value whose
// buffer something else holds (the caller's fed tensor, a Const shared by two
// variables) is copied, so no variable aliases it; values are unchanged.
TEST(StateKernelsTest, AssignOfASharedValueTakesAPrivateCopy) {
  for (bool resource : {false, true}) {
    SCOPED_TRACE(resource ? "resource" : "ref");
    Scope root = Scope::NewRootScope();
    Output fed = ops::Placeholder(root.WithOpName("fed"), DT_FLOAT);
    Output shared = ops::Const<float>(root.WithOpName("shared"), {1.5f, -2.f, 4.f},
                                      TensorShape({3}));
    for (const char* name : {"a", "b", "c"}) {
      const Output value = std::string(name) == "c" ? fed : shared;
      if (resource) {
        Output h = ops::VarHandleOp(root.WithOpName(name), DT_FLOAT, PartialShape({3}));
        ops::AssignVariableOp(root.WithOpName(std::string("assign_") + name), h, value);
        ops::ReadVariableOp(root.WithOpName(std::string("read_") + name), h, DT_FLOAT);
      } else {
        Output v = ops::Variable(root.WithOpName(name), PartialShape({3}), DT_FLOAT);
        ops::Assign(root.WithOpName(std::string("assign_") + name), v, value);
        ops::Identity(root.WithOpName(std::string("read_") + name), v);
      }
    }
    auto session = Session::Create(SessionOptions{2, 2}, root.ToGraphDef().value());
    ASSERT_TRUE(session.ok()) << session.status();
    const Tensor init = Tensor::FromVector<float>({7.f, 8.f, -9.f}, TensorShape({3}));
    std::vector<Tensor> out;
    absl::Status s = (*session)->Run({{"fed", init}}, {},
                                     {"assign_a", "assign_b", "assign_c"}, &out);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE((*session)->Run({}, {"read_a", "read_b", "read_c"}, {}, &out).ok());
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(TensorsEqual(out[0], Tensor::FromVector<float>({1.5f, -2.f, 4.f},
                                                               TensorShape({3}))));
    EXPECT_TRUE(TensorsEqual(out[1], out[0]));
    EXPECT_TRUE(TensorsEqual(out[2], init));
    EXPECT_FALSE(out[0].SharesBufferWith(out[1]));
    EXPECT_FALSE(out[2].SharesBufferWith(init));
  }
}

}  // namespace
}  // namespace recflow
