// TensorList kernels (list_kernels.cc) in a Session: round trips, unset
// slots reading as zeros, bounds, dtype and shape checks, and the loop Keras
// RNN layers export (TensorListFromTensor over the time steps, a While
// whose body reads step i with TensorListGetItem and writes the state with
// TensorListSetItem into a TensorListReserve'd list, TensorListStack after).
#include <random>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/kernels/tensor_list.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using ::testing::HasSubstr;

Tensor I32(std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(absl::MakeConstSpan(v)); }

// Builds list-op nodes in a scope; Run feeds and fetches.
class ListGraph {
 public:
  Output Const(Tensor t) { return ops::Const(root_, std::move(t)); }
  Output Op(const std::string& op, std::vector<Output> inputs,
            std::vector<std::pair<std::string, tensorflow::AttrValue>> attrs = {}, int out = 0) {
    NodeBuilder b(root_.GetUniqueNameForOp(op), op);
    for (const Output& in : inputs) b.Input(in);
    for (auto& [name, value] : attrs) b.Attr(name, value);
    Node* n = root_.AddNode(b);
    return Output(n, out);
  }
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Output>& fetches) {
    RETURN_IF_ERROR(root_.status());
    ASSIGN_OR_RETURN(tensorflow::GraphDef def, root_.ToGraphDef());
    ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions(), def));
    std::vector<std::string> names;
    for (const Output& f : fetches) names.push_back(f.name());
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session->Run({}, names, {}, &out));
    return out;
  }
  Scope& root() { return root_; }

 private:
  Scope root_ = Scope::NewRootScope();
};

std::pair<std::string, tensorflow::AttrValue> A(const std::string& name, DataType t) {
  tensorflow::AttrValue v;
  SetAttrValue(t, &v);
  return {name, v};
}
std::pair<std::string, tensorflow::AttrValue> A(const std::string& name, int64_t i) {
  tensorflow::AttrValue v;
  v.set_i(i);
  return {name, v};
}
std::pair<std::string, tensorflow::AttrValue> A(const std::string& name, bool b) {
  tensorflow::AttrValue v;
  v.set_b(b);
  return {name, v};
}

Tensor RandomFloats(const TensorShape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  Tensor t(DT_FLOAT, shape);
  for (float& v : t.flat<float>()) v = dist(rng);
  return t;
}

TEST(ListKernelTest, FromTensorThenStackAndGetItemRoundTrip) {
  ListGraph g;
  const Tensor x = RandomFloats({5, 3}, 1);
  Output list = g.Op("TensorListFromTensor", {g.Const(x), g.Const(I32({3}))},
                     {A("element_dtype", DT_FLOAT), A("shape_type", DT_INT32)});
  Output stacked = g.Op("TensorListStack", {list, g.Const(I32({3}))},
                        {A("element_dtype", DT_FLOAT), A("num_elements", int64_t{5})});
  Output item = g.Op("TensorListGetItem",
                     {list, g.Const(Tensor::Scalar<int32_t>(2)), g.Const(I32({3}))},
                     {A("element_dtype", DT_FLOAT)});
  Output length = g.Op("TensorListLength", {list});
  Output shape = g.Op("TensorListElementShape", {list}, {A("shape_type", DT_INT64)});
  auto out = g.Run({stacked, item, length, shape});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), x.shape());
  for (int i = 0; i < 15; ++i) EXPECT_EQ((*out)[0].flat<float>()[i], x.flat<float>()[i]);
  ASSERT_EQ((*out)[1].shape(), TensorShape({3}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*out)[1].flat<float>()[i], x.flat<float>()[6 + i]);
  EXPECT_EQ((*out)[2].scalar<int32_t>(), 5);
  EXPECT_EQ((*out)[3].flat<int64_t>()[0], 3);
}

TEST(ListKernelTest, ReserveSetItemAndUnsetSlotsReadAsZeros) {
  ListGraph g;
  Output list = g.Op("TensorListReserve", {g.Const(I32({2})), g.Const(Tensor::Scalar<int32_t>(4))},
                     {A("element_dtype", DT_FLOAT), A("shape_type", DT_INT32)});
  const Tensor a = RandomFloats({2}, 2), b = RandomFloats({2}, 3);
  list = g.Op("TensorListSetItem", {list, g.Const(Tensor::Scalar<int32_t>(1)), g.Const(a)},
              {A("element_dtype", DT_FLOAT)});
  list = g.Op("TensorListSetItem", {list, g.Const(Tensor::Scalar<int32_t>(3)), g.Const(b)},
              {A("element_dtype", DT_FLOAT)});
  Output stacked = g.Op("TensorListStack", {list, g.Const(Tensor::Scalar<int32_t>(-1))},
                        {A("element_dtype", DT_FLOAT)});
  Output unset = g.Op("TensorListGetItem",
                      {list, g.Const(Tensor::Scalar<int32_t>(0)), g.Const(I32({-1}))},
                      {A("element_dtype", DT_FLOAT)});
  Output grown = g.Op("TensorListSetItem", {list, g.Const(Tensor::Scalar<int32_t>(6)), g.Const(a)},
                      {A("element_dtype", DT_FLOAT), A("resize_if_index_out_of_bounds", true)});
  auto out = g.Run({stacked, unset, g.Op("TensorListLength", {grown})});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> want = {0, 0, a.flat<float>()[0], a.flat<float>()[1],
                                   0, 0, b.flat<float>()[0], b.flat<float>()[1]};
  ASSERT_EQ((*out)[0].shape(), TensorShape({4, 2}));
  for (int i = 0; i < 8; ++i) EXPECT_EQ((*out)[0].flat<float>()[i], want[i]) << i;
  EXPECT_EQ((*out)[1].shape(), TensorShape({2}));
  EXPECT_EQ((*out)[1].flat<float>()[0], 0.f);
  EXPECT_EQ((*out)[2].scalar<int32_t>(), 7);
}

TEST(ListKernelTest, PushBackPopBackStringsAndBounds) {
  ListGraph g;
  Output list = g.Op("EmptyTensorList",
                     {g.Const(Tensor::Scalar<int32_t>(-1)), g.Const(Tensor::Scalar<int32_t>(2))},
                     {A("element_dtype", DT_STRING), A("shape_type", DT_INT32)});
  list = g.Op("TensorListPushBack", {list, g.Const(Tensor::FromVector<std::string>({"a", "b"}))},
              {A("element_dtype", DT_STRING)});
  list = g.Op("TensorListPushBack", {list, g.Const(Tensor::FromVector<std::string>({"c", ""}))},
              {A("element_dtype", DT_STRING)});
  Output stacked = g.Op("TensorListStack", {list, g.Const(I32({2}))},
                        {A("element_dtype", DT_STRING)});
  Output popped = g.Op("TensorListPopBack", {list, g.Const(I32({2}))},
                       {A("element_dtype", DT_STRING)}, 1);
  Output rest = g.Op("TensorListLength", {Output(popped.node(), 0)});
  Output unknown_rank = g.Op("TensorListElementShape", {list}, {A("shape_type", DT_INT32)});
  auto out = g.Run({stacked, popped, rest, unknown_rank});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({2, 2}));
  EXPECT_EQ((*out)[0].flat<std::string>()[2], "c");
  EXPECT_EQ((*out)[1].flat<std::string>()[0], "c");
  EXPECT_EQ((*out)[2].scalar<int32_t>(), 1);
  EXPECT_EQ((*out)[3].dims(), 0);
  EXPECT_EQ((*out)[3].scalar<int32_t>(), -1);
}

struct BadCase {
  std::string what;
  std::function<Output(ListGraph&)> build;
  std::string error;
};

TEST(ListKernelTest, BadInputsGiveTensorFlowsErrors) {
  auto reserve = [](ListGraph& g, std::vector<int32_t> shape, int32_t n) {
    return g.Op("TensorListReserve",
                {g.Const(I32(std::move(shape))), g.Const(Tensor::Scalar<int32_t>(n))},
                {A("element_dtype", DT_FLOAT), A("shape_type", DT_INT32)});
  };
  const std::vector<BadCase> cases = {
      {"negative reserve", [&](ListGraph& g) { return reserve(g, {2}, -1); },
       "The num_elements to reserve must be a non negative number, but got -1"},
      {"index out of range",
       [&](ListGraph& g) {
         return g.Op("TensorListGetItem",
                     {reserve(g, {2}, 3), g.Const(Tensor::Scalar<int32_t>(3)), g.Const(I32({2}))},
                     {A("element_dtype", DT_FLOAT)});
       },
       "Trying to access element 3 in a list with 3 elements."},
      {"wrong dtype",
       [&](ListGraph& g) {
         return g.Op("TensorListGetItem",
                     {reserve(g, {2}, 3), g.Const(Tensor::Scalar<int32_t>(0)), g.Const(I32({2}))},
                     {A("element_dtype", DT_INT32)});
       },
       "Invalid data types; op elements int32 but list elements float"},
      {"unset slot of unknown shape",
       [&](ListGraph& g) {
         return g.Op("TensorListGetItem",
                     {reserve(g, {-1}, 3), g.Const(Tensor::Scalar<int32_t>(0)),
                      g.Const(I32({-1}))},
                     {A("element_dtype", DT_FLOAT)});
       },
       "element_shape is not fully defined: [?]"},
      {"incompatible set",
       [&](ListGraph& g) {
         return g.Op("TensorListSetItem",
                     {reserve(g, {2}, 3), g.Const(Tensor::Scalar<int32_t>(0)),
                      g.Const(RandomFloats({3}, 4))},
                     {A("element_dtype", DT_FLOAT)});
       },
       "Tried to set a tensor with incompatible shape to a list. Op element shape: [3] list "
       "shape: [2]"},
      {"set out of range",
       [&](ListGraph& g) {
         return g.Op("TensorListSetItem",
                     {reserve(g, {2}, 3), g.Const(Tensor::Scalar<int32_t>(5)),
                      g.Const(RandomFloats({2}, 4))},
                     {A("element_dtype", DT_FLOAT)});
       },
       "Trying to modify element 5 in a list with 3 elements."},
      {"full list",
       [&](ListGraph& g) {
         Output l = g.Op("EmptyTensorList",
                         {g.Const(I32({1})), g.Const(Tensor::Scalar<int32_t>(1))},
                         {A("element_dtype", DT_FLOAT), A("shape_type", DT_INT32)});
         for (int i = 0; i < 2; ++i) {
           l = g.Op("TensorListPushBack", {l, g.Const(RandomFloats({1}, 5 + i))},
                    {A("element_dtype", DT_FLOAT)});
         }
         return l;
       },
       "Tried to push item into a full list list size: 1 max_num_elements: 1"},
      {"pop empty",
       [&](ListGraph& g) {
         return g.Op("TensorListPopBack", {reserve(g, {1}, 0), g.Const(I32({1}))},
                     {A("element_dtype", DT_FLOAT)}, 1);
       },
       "Trying to pop from an empty list."},
      {"stack ragged",
       [&](ListGraph& g) {
         Output l = reserve(g, {-1}, 2);
         l = g.Op("TensorListSetItem",
                  {l, g.Const(Tensor::Scalar<int32_t>(0)), g.Const(RandomFloats({2}, 6))},
                  {A("element_dtype", DT_FLOAT)});
         l = g.Op("TensorListSetItem",
                  {l, g.Const(Tensor::Scalar<int32_t>(1)), g.Const(RandomFloats({3}, 7))},
                  {A("element_dtype", DT_FLOAT)});
         return g.Op("TensorListStack", {l, g.Const(Tensor::Scalar<int32_t>(-1))},
                     {A("element_dtype", DT_FLOAT)});
       },
       "Tried to stack elements of different shapes: element 1 is [3]"},
      {"stack wrong length",
       [&](ListGraph& g) {
         return g.Op("TensorListStack", {reserve(g, {2}, 2), g.Const(I32({2}))},
                     {A("element_dtype", DT_FLOAT), A("num_elements", int64_t{3})});
       },
       "Operation expected a list with 3 elements but got a list with 2 elements."},
      {"from scalar",
       [&](ListGraph& g) {
         return g.Op("TensorListFromTensor",
                     {ops::Identity(g.root(), g.Const(Tensor::Scalar<float>(1.f))),
                      g.Const(Tensor::Scalar<int32_t>(-1))},
                     {A("element_dtype", DT_FLOAT), A("shape_type", DT_INT32)});
       },
       "rank"},
  };
  for (const BadCase& c : cases) {
    ListGraph g;
    Output fetch = c.build(g);
    if (!g.root().ok()) {  // a shape function refused it while building
      EXPECT_THAT(std::string(g.root().status().message()), HasSubstr(c.error)) << c.what;
      continue;
    }
    auto out = g.Run({fetch});
    ASSERT_FALSE(out.ok()) << c.what;
    EXPECT_THAT(std::string(out.status().message()), HasSubstr(c.error)) << c.what;
  }
}

TEST(ListKernelTest, GradientsAreAClearError) {
  ListGraph g;
  Output x = ops::Placeholder(g.root(), DT_FLOAT);
  Output list = g.Op("TensorListFromTensor", {x, g.Const(I32({2}))},
                     {A("element_dtype", DT_FLOAT), A("shape_type", DT_INT32)});
  Output y = g.Op("TensorListStack", {list, g.Const(I32({2}))}, {A("element_dtype", DT_FLOAT)});
  ASSERT_TRUE(g.root().ok());
  std::vector<Output> grads;
  absl::Status s = AddSymbolicGradients(g.root(), {y}, {x}, &grads);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("(TensorListStack): gradients of TensorListStack are not supported"));
}

// Keras RNN's exported loop: h_{t+1} = 0.5 * h_t + x_t, every h_{t+1} kept.
constexpr char kRnnLibrary[] = R"pb(
  function {
    signature {
      name: "RnnCond"
      input_arg { name: "i" type: DT_INT32 }
      input_arg { name: "n" type: DT_INT32 }
      input_arg { name: "inputs" type: DT_VARIANT }
      input_arg { name: "outputs" type: DT_VARIANT }
      input_arg { name: "h" type: DT_FLOAT }
      output_arg { name: "identity" type: DT_BOOL }
    }
    node_def { name: "Less" op: "Less" input: "i" input: "n" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "identity" value: "Less:z:0" }
  }
  function {
    signature {
      name: "RnnBody"
      input_arg { name: "i" type: DT_INT32 }
      input_arg { name: "n" type: DT_INT32 }
      input_arg { name: "inputs" type: DT_VARIANT }
      input_arg { name: "outputs" type: DT_VARIANT }
      input_arg { name: "h" type: DT_FLOAT }
      output_arg { name: "i_out" type: DT_INT32 }
      output_arg { name: "n_out" type: DT_INT32 }
      output_arg { name: "inputs_out" type: DT_VARIANT }
      output_arg { name: "outputs_out" type: DT_VARIANT }
      output_arg { name: "h_out" type: DT_FLOAT }
    }
    node_def {
      name: "shape"
      op: "Const"
      attr { key: "dtype" value { type: DT_INT32 } }
      attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } } int_val: 3 } } }
    }
    node_def {
      name: "x"
      op: "TensorListGetItem"
      input: "inputs"
      input: "i"
      input: "shape:output:0"
      attr { key: "element_dtype" value { type: DT_FLOAT } }
    }
    node_def {
      name: "half"
      op: "Const"
      attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 0.5 } } }
    }
    node_def { name: "mul" op: "Mul" input: "h" input: "half:output:0" attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "add" op: "AddV2" input: "mul:z:0" input: "x:item:0" attr { key: "T" value { type: DT_FLOAT } } }
    node_def {
      name: "write"
      op: "TensorListSetItem"
      input: "outputs"
      input: "i"
      input: "add:z:0"
      attr { key: "element_dtype" value { type: DT_FLOAT } }
    }
    node_def {
      name: "one"
      op: "Const"
      attr { key: "dtype" value { type: DT_INT32 } }
      attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } }
    }
    node_def { name: "next" op: "AddV2" input: "i" input: "one:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "i_out" value: "next:z:0" }
    ret { key: "n_out" value: "n" }
    ret { key: "inputs_out" value: "inputs" }
    ret { key: "outputs_out" value: "write:output_handle:0" }
    ret { key: "h_out" value: "add:z:0" }
  }
)pb";

TEST(ListKernelTest, KerasRnnLoopOverTensorLists) {
  constexpr int kSteps = 40;
  const Tensor x = RandomFloats({kSteps, 3}, 8);
  ListGraph g;
  Scope& root = g.root();
  tensorflow::FunctionDefLibrary lib;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kRnnLibrary, &lib));
  root.graph()->set_library(lib);
  Output xs = ops::Placeholder(root, DT_FLOAT);
  Output inputs = g.Op("TensorListFromTensor", {xs, g.Const(I32({3}))},
                       {A("element_dtype", DT_FLOAT), A("shape_type", DT_INT32)});
  Output outputs = g.Op("TensorListReserve",
                        {g.Const(I32({3})), g.Const(Tensor::Scalar<int32_t>(kSteps))},
                        {A("element_dtype", DT_FLOAT), A("shape_type", DT_INT32)});
  NodeBuilder w("while", "StatelessWhile");
  w.Input(std::vector<Output>{g.Const(Tensor::Scalar<int32_t>(0)),
                              g.Const(Tensor::Scalar<int32_t>(kSteps)), inputs, outputs,
                              g.Const(Tensor::FromVector<float>({0.f, 0.f, 0.f}))});
  w.Attr("T", std::vector<DataType>{DT_INT32, DT_INT32, DT_VARIANT, DT_VARIANT, DT_FLOAT});
  tensorflow::AttrValue cond, body;
  cond.mutable_func()->set_name("RnnCond");
  body.mutable_func()->set_name("RnnBody");
  w.Attr("cond", cond).Attr("body", body);
  Node* loop = root.AddNode(w);
  Output stacked = g.Op("TensorListStack", {Output(loop, 3), g.Const(I32({3}))},
                        {A("element_dtype", DT_FLOAT), A("num_elements", int64_t{kSteps})});
  ASSERT_TRUE(root.ok()) << root.status();
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  auto session = Session::Create(SessionOptions(), *def);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> out;
  absl::Status s = (*session)->Run({{xs.name(), x}}, {stacked.name(), Output(loop, 4).name()}, {},
                                   &out);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out[0].shape(), TensorShape({kSteps, 3}));
  std::vector<float> h(3, 0.f);
  for (int t = 0; t < kSteps; ++t) {
    for (int j = 0; j < 3; ++j) {
      h[j] = h[j] * 0.5f + x.flat<float>()[t * 3 + j];
      EXPECT_FLOAT_EQ(out[0].flat<float>()[t * 3 + j], h[j]) << t << "," << j;
    }
  }
  for (int j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(out[1].flat<float>()[j], h[j]);
}

}  // namespace
}  // namespace recflow
