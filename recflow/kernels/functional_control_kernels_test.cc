// If / StatelessIf, Case / StatelessCase, While / StatelessWhile
// (functional_control_kernels.cc) run in a Session over small FunctionDefs
// written here as TF2 writes them: TensorFlow's truthiness of any cond
// dtype, the default branch of Case, loops of many iterations, an If nested
// in a While body, constant inputs (never folded), and clear errors for a
// bad cond, a missing function, a branch of the wrong signature and a
// gradient request.
#include <random>

#include "absl/strings/ascii.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using ::testing::HasSubstr;

template <typename Proto>
Proto Parse(const std::string& text) {
  Proto p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

// Branches over x: float: Keep(x) = x, Double(x) = x + x, Square(x) = x * x,
// TwoOut(x) = (x, x) (a wrong signature for the ops below).
// Loop over (i, n, x: int64): LoopCond = i < n; LoopBody = (i + 1, n,
// If(i % 2, SubThree, AddFive)(x)), the If's cond an int64. BadCond returns
// a half; TwoConds returns two tensors.
constexpr char kLibrary[] = R"pb(
  function {
    signature {
      name: "Keep"
      input_arg { name: "x" type: DT_FLOAT }
      output_arg { name: "identity" type: DT_FLOAT }
    }
    node_def { name: "Identity" op: "Identity" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "identity" value: "Identity:output:0" }
  }
  function {
    signature {
      name: "Double"
      input_arg { name: "x" type: DT_FLOAT }
      output_arg { name: "identity" type: DT_FLOAT }
    }
    node_def { name: "add" op: "AddV2" input: "x" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "Identity" op: "Identity" input: "add:z:0" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "identity" value: "Identity:output:0" }
  }
  function {
    signature {
      name: "Square"
      input_arg { name: "x" type: DT_FLOAT }
      output_arg { name: "identity" type: DT_FLOAT }
    }
    node_def { name: "mul" op: "Mul" input: "x" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "identity" value: "mul:z:0" }
  }
  function {
    signature {
      name: "TwoOut"
      input_arg { name: "x" type: DT_FLOAT }
      output_arg { name: "a" type: DT_FLOAT }
      output_arg { name: "b" type: DT_FLOAT }
    }
    ret { key: "a" value: "x" }
    ret { key: "b" value: "x" }
  }
  function {
    signature {
      name: "SubThree"
      input_arg { name: "x" type: DT_INT64 }
      output_arg { name: "identity" type: DT_INT64 }
    }
    node_def {
      name: "three"
      op: "Const"
      attr { key: "dtype" value { type: DT_INT64 } }
      attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: 3 } } }
    }
    node_def { name: "sub" op: "Sub" input: "x" input: "three:output:0" attr { key: "T" value { type: DT_INT64 } } }
    ret { key: "identity" value: "sub:z:0" }
  }
  function {
    signature {
      name: "AddFive"
      input_arg { name: "x" type: DT_INT64 }
      output_arg { name: "identity" type: DT_INT64 }
    }
    node_def {
      name: "five"
      op: "Const"
      attr { key: "dtype" value { type: DT_INT64 } }
      attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: 5 } } }
    }
    node_def { name: "add" op: "AddV2" input: "x" input: "five:output:0" attr { key: "T" value { type: DT_INT64 } } }
    ret { key: "identity" value: "add:z:0" }
  }
  function {
    signature {
      name: "LoopCond"
      input_arg { name: "i" type: DT_INT64 }
      input_arg { name: "n" type: DT_INT64 }
      input_arg { name: "x" type: DT_INT64 }
      output_arg { name: "identity" type: DT_BOOL }
    }
    node_def { name: "Less" op: "Less" input: "i" input: "n" attr { key: "T" value { type: DT_INT64 } } }
    node_def { name: "Identity" op: "Identity" input: "Less:z:0" attr { key: "T" value { type: DT_BOOL } } }
    ret { key: "identity" value: "Identity:output:0" }
  }
  function {
    signature {
      name: "LoopBody"
      input_arg { name: "i" type: DT_INT64 }
      input_arg { name: "n" type: DT_INT64 }
      input_arg { name: "x" type: DT_INT64 }
      output_arg { name: "identity" type: DT_INT64 }
      output_arg { name: "identity_1" type: DT_INT64 }
      output_arg { name: "identity_2" type: DT_INT64 }
    }
    node_def {
      name: "one"
      op: "Const"
      attr { key: "dtype" value { type: DT_INT64 } }
      attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: 1 } } }
    }
    node_def {
      name: "two"
      op: "Const"
      attr { key: "dtype" value { type: DT_INT64 } }
      attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: 2 } } }
    }
    node_def { name: "add" op: "AddV2" input: "i" input: "one:output:0" attr { key: "T" value { type: DT_INT64 } } }
    node_def { name: "mod" op: "FloorMod" input: "i" input: "two:output:0" attr { key: "T" value { type: DT_INT64 } } }
    node_def {
      name: "cond"
      op: "StatelessIf"
      input: "mod:z:0"
      input: "x"
      attr { key: "Tcond" value { type: DT_INT64 } }
      attr { key: "Tin" value { list { type: DT_INT64 } } }
      attr { key: "Tout" value { list { type: DT_INT64 } } }
      attr { key: "then_branch" value { func { name: "SubThree" } } }
      attr { key: "else_branch" value { func { name: "AddFive" } } }
      attr { key: "output_shapes" value { list { shape {} } } }
      attr { key: "_lower_using_switch_merge" value { b: true } }
    }
    node_def { name: "Identity" op: "Identity" input: "add:z:0" attr { key: "T" value { type: DT_INT64 } } }
    node_def { name: "Identity_1" op: "Identity" input: "n" attr { key: "T" value { type: DT_INT64 } } }
    node_def { name: "Identity_2" op: "Identity" input: "cond:output:0" attr { key: "T" value { type: DT_INT64 } } }
    ret { key: "identity" value: "Identity:output:0" }
    ret { key: "identity_1" value: "Identity_1:output:0" }
    ret { key: "identity_2" value: "Identity_2:output:0" }
  }
  function {
    signature {
      name: "BadCond"
      input_arg { name: "i" type: DT_INT64 }
      input_arg { name: "n" type: DT_INT64 }
      input_arg { name: "x" type: DT_INT64 }
      output_arg { name: "identity" type: DT_HALF }
    }
    node_def { name: "cast" op: "Cast" input: "i" attr { key: "SrcT" value { type: DT_INT64 } } attr { key: "DstT" value { type: DT_HALF } } }
    ret { key: "identity" value: "cast:y:0" }
  }
  function {
    signature {
      name: "TwoConds"
      input_arg { name: "i" type: DT_INT64 }
      input_arg { name: "n" type: DT_INT64 }
      input_arg { name: "x" type: DT_INT64 }
      output_arg { name: "a" type: DT_BOOL }
      output_arg { name: "b" type: DT_BOOL }
    }
    node_def { name: "Less" op: "Less" input: "i" input: "n" attr { key: "T" value { type: DT_INT64 } } }
    ret { key: "a" value: "Less:z:0" }
    ret { key: "b" value: "Less:z:0" }
  }
)pb";

// "DT_FLOAT" for DT_FLOAT: the enum name text format wants.
std::string DataTypeEnumName(DataType t) {
  return "DT_" + absl::AsciiStrToUpper(DataTypeString(t));
}

std::string FuncAttr(const std::string& name) {
  return absl::StrCat("func { name: \"", name, "\" }");
}

// Placeholders `c` (dtype `cond_type`) and `x` (float); node "if" = op(c, x).
tensorflow::GraphDef IfGraph(const std::string& op, DataType cond_type,
                             const std::string& then_branch = "Keep",
                             const std::string& else_branch = "Double",
                             const std::string& tout = "type: DT_FLOAT") {
  return Parse<tensorflow::GraphDef>(absl::StrCat(R"pb(
    node { name: "c" op: "Placeholder" attr { key: "dtype" value { type: )pb",
                                                  DataTypeEnumName(cond_type), R"pb( } } }
    node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
    node {
      name: "if"
      op: ")pb", op, R"pb("
      input: "c"
      input: "x"
      attr { key: "Tcond" value { type: )pb", DataTypeEnumName(cond_type), R"pb( } }
      attr { key: "Tin" value { list { type: DT_FLOAT } } }
      attr { key: "Tout" value { list { )pb", tout, R"pb( } } }
      attr { key: "then_branch" value { )pb", FuncAttr(then_branch), R"pb( } }
      attr { key: "else_branch" value { )pb", FuncAttr(else_branch), R"pb( } }
    }
    library { )pb", kLibrary, "}"));
}

// Placeholders i, n, x (int64); node "while" = op(i, n, x).
tensorflow::GraphDef WhileGraph(const std::string& op, const std::string& cond = "LoopCond",
                                const std::string& body = "LoopBody") {
  return Parse<tensorflow::GraphDef>(absl::StrCat(R"pb(
    node { name: "i" op: "Placeholder" attr { key: "dtype" value { type: DT_INT64 } } }
    node { name: "n" op: "Placeholder" attr { key: "dtype" value { type: DT_INT64 } } }
    node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_INT64 } } }
    node {
      name: "while"
      op: ")pb", op, R"pb("
      input: "i"
      input: "n"
      input: "x"
      attr { key: "T" value { list { type: DT_INT64 type: DT_INT64 type: DT_INT64 } } }
      attr { key: "cond" value { )pb", FuncAttr(cond), R"pb( } }
      attr { key: "body" value { )pb", FuncAttr(body), R"pb( } }
      attr { key: "output_shapes" value { list { shape {} shape {} shape {} } } }
      attr { key: "parallel_iterations" value { i: 10 } }
    }
    library { )pb", kLibrary, "}"));
}

std::unique_ptr<Session> NewSession(const tensorflow::GraphDef& def) {
  SessionOptions options;
  options.inter_op_threads = 2;
  options.intra_op_threads = 1;
  auto s = Session::Create(options, def);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::vector<float> RandomValues(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-3.f, 3.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct CondCase {
  Tensor cond;
  bool truth;
};

TEST(IfKernelTest, CondOfAnyDtypeFollowsTensorFlowsTruthiness) {
  const std::vector<CondCase> cases = {
      {Tensor::Scalar<bool>(true), true},
      {Tensor::Scalar<bool>(false), false},
      {Tensor::Scalar<int32_t>(-4), true},
      {Tensor::Scalar<int32_t>(0), false},
      {Tensor::Scalar<int64_t>(1LL << 40), true},
      {Tensor::Scalar<int64_t>(0), false},
      {Tensor::Scalar<float>(0.25f), true},
      {Tensor::Scalar<float>(-0.0f), false},
      {Tensor::Scalar<double>(1e-300), true},
      {Tensor::Scalar<uint8_t>(0), false},
      {Tensor::Scalar<int8_t>(-1), true},
      {Tensor::Scalar<int16_t>(0), false},
      {Tensor::Scalar<std::string>("x"), true},
      {Tensor::Scalar<std::string>(""), false},
      // Not a scalar: true when it has elements, whatever they hold.
      {Tensor::FromVector<bool>({false, false}, TensorShape({2})), true},
      {Tensor::FromVector<float>({0.f}, TensorShape({1, 1})), true},
      {Tensor(DT_FLOAT, TensorShape({0})), false},
      {Tensor(DT_STRING, TensorShape({2, 0})), false},
  };
  const std::vector<float> x = RandomValues(4, 1);
  for (const char* op : {"If", "StatelessIf"}) {
    for (const CondCase& c : cases) {
      auto session = NewSession(IfGraph(op, c.cond.dtype()));
      ASSERT_NE(session, nullptr);
      std::vector<Tensor> out;
      absl::Status s = session->Run(
          {{"c", c.cond}, {"x", Tensor::FromVector<float>(absl::MakeConstSpan(x))}}, {"if:0"}, {},
          &out);
      ASSERT_TRUE(s.ok()) << op << " " << c.cond.DebugString() << ": " << s;
      for (int i = 0; i < 4; ++i) {
        EXPECT_FLOAT_EQ(out[0].flat<float>()[i], c.truth ? x[i] : x[i] + x[i])
            << op << " cond " << c.cond.DebugString();
      }
    }
  }
}

TEST(IfKernelTest, CondOfAnUnsupportedScalarDtypeIsAnError) {
  auto session = NewSession(IfGraph("If", DT_HALF));
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> out;
  absl::Status s = session->Run(
      {{"c", Tensor::Scalar<half>(half(1.0f))}, {"x", Tensor::Scalar<float>(1.f)}}, {"if:0"}, {},
      &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("half cannot be converted to a boolean"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'if'"));
}

TEST(IfKernelTest, MissingFunctionAndWrongSignatureFailNamingTheFunction) {
  struct Bad {
    std::string then_branch, else_branch, tout, error;
  };
  const std::vector<Bad> cases = {
      {"Keep", "Nope", "type: DT_FLOAT",
       "else_branch 'Nope': function 'Nope' is not in the graph's library"},
      {"TwoOut", "Keep", "type: DT_FLOAT",
       "then_branch 'TwoOut' returns (float, float) but the op outputs (float)"},
      {"Keep", "Double", "type: DT_INT32",
       "returns (float) but the op outputs (int32)"},
      {"SubThree", "Keep", "type: DT_FLOAT", "then_branch 'SubThree' takes (int64) but the op "
                                             "passes (float)"},
  };
  for (const Bad& c : cases) {
    auto session = NewSession(IfGraph("If", DT_BOOL, c.then_branch, c.else_branch, c.tout));
    ASSERT_NE(session, nullptr);
    std::vector<Tensor> out;
    absl::Status s = session->Run(
        {{"c", Tensor::Scalar<bool>(true)}, {"x", Tensor::Scalar<float>(1.f)}}, {"if:0"}, {},
        &out);
    ASSERT_FALSE(s.ok()) << c.error;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.error));
    EXPECT_THAT(std::string(s.message()), HasSubstr("node 'if'"));
  }
}

TEST(CaseKernelTest, PicksTheBranchAndDefaultsToTheLast) {
  for (const char* op : {"Case", "StatelessCase"}) {
    auto def = Parse<tensorflow::GraphDef>(absl::StrCat(R"pb(
      node { name: "b" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }
      node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
      node {
        name: "case"
        op: ")pb", op, R"pb("
        input: "b"
        input: "x"
        attr { key: "Tin" value { list { type: DT_FLOAT } } }
        attr { key: "Tout" value { list { type: DT_FLOAT } } }
        attr {
          key: "branches"
          value { list { func { name: "Keep" } func { name: "Double" } func { name: "Square" } } }
        }
      }
      library { )pb", kLibrary, "}"));
    auto session = NewSession(def);
    ASSERT_NE(session, nullptr);
    const std::vector<float> x = RandomValues(3, 2);
    for (int32_t index : {0, 1, 2, -1, 3, 1000}) {
      std::vector<Tensor> out;
      ASSERT_TRUE(session
                      ->Run({{"b", Tensor::Scalar<int32_t>(index)},
                             {"x", Tensor::FromVector<float>(absl::MakeConstSpan(x))}},
                            {"case:0"}, {}, &out)
                      .ok());
      for (int i = 0; i < 3; ++i) {
        const float want = index == 0 ? x[i] : index == 1 ? x[i] + x[i] : x[i] * x[i];
        EXPECT_FLOAT_EQ(out[0].flat<float>()[i], want) << op << " index " << index;
      }
    }
    std::vector<Tensor> out;
    absl::Status s = session->Run(
        {{"b", Tensor::FromVector<int32_t>({0, 1}, TensorShape({2}))},
         {"x", Tensor::Scalar<float>(1.f)}},
        {"case:0"}, {}, &out);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("branch_index must be scalar"));
  }
}

// The reference of LoopBody iterated from i to n.
int64_t LoopReference(int64_t i, int64_t n, int64_t x) {
  for (; i < n; ++i) x = (i % 2 != 0) ? x - 3 : x + 5;
  return x;
}

TEST(WhileKernelTest, ManyIterationsWithAnIfInTheBody) {
  for (const char* op : {"While", "StatelessWhile"}) {
    auto session = NewSession(WhileGraph(op));
    ASSERT_NE(session, nullptr);
    for (auto [i0, n, x0] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {0, 2500, 17}, {3, 8, -4}, {10, 2, 7}, {-5, 0, 100}}) {
      std::vector<Tensor> out;
      ASSERT_TRUE(session
                      ->Run({{"i", Tensor::Scalar<int64_t>(i0)},
                             {"n", Tensor::Scalar<int64_t>(n)},
                             {"x", Tensor::Scalar<int64_t>(x0)}},
                            {"while:0", "while:1", "while:2"}, {}, &out)
                      .ok());
      EXPECT_EQ(out[0].scalar<int64_t>(), std::max(i0, n)) << op;
      EXPECT_EQ(out[1].scalar<int64_t>(), n) << op;
      EXPECT_EQ(out[2].scalar<int64_t>(), LoopReference(i0, n, x0)) << op << " n=" << n;
    }
  }
}

TEST(WhileKernelTest, BadCondAndBadBodyGiveClearErrors) {
  auto run = [](const tensorflow::GraphDef& def) {
    auto session = NewSession(def);
    std::vector<Tensor> out;
    return session->Run({{"i", Tensor::Scalar<int64_t>(0)},
                         {"n", Tensor::Scalar<int64_t>(3)},
                         {"x", Tensor::Scalar<int64_t>(1)}},
                        {"while:2"}, {}, &out);
  };
  absl::Status s = run(WhileGraph("While", "BadCond"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("cond 'BadCond' at iteration 0: half cannot be converted to a boolean"));
  s = run(WhileGraph("While", "TwoConds"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("cond 'TwoConds' returns (bool, bool); a While cond must return a "
                        "single tensor"));
  s = run(WhileGraph("StatelessWhile", "LoopCond", "Missing"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("body 'Missing'"));
  s = run(WhileGraph("While", "LoopCond", "AddFive"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("body 'AddFive' takes (int64) but the op passes (int64, int64, int64)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'while'"));
}

TEST(FunctionalControlKernelTest, ConstantInputsAreNotFoldedAway) {
  // Stateless ops with constant inputs: the optimizer's constant folding
  // must leave them (it has no function library) and they still run.
  auto def = Parse<tensorflow::GraphDef>(absl::StrCat(R"pb(
    node {
      name: "b"
      op: "Const"
      attr { key: "dtype" value { type: DT_INT32 } }
      attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 2 } } }
    }
    node {
      name: "x"
      op: "Const"
      attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 3 } } }
    }
    node {
      name: "case"
      op: "StatelessCase"
      input: "b"
      input: "x"
      attr { key: "Tin" value { list { type: DT_FLOAT } } }
      attr { key: "Tout" value { list { type: DT_FLOAT } } }
      attr { key: "branches" value { list { func { name: "Keep" } func { name: "Square" } } } }
    }
    node {
      name: "if"
      op: "StatelessIf"
      input: "b"
      input: "case"
      attr { key: "Tcond" value { type: DT_INT32 } }
      attr { key: "Tin" value { list { type: DT_FLOAT } } }
      attr { key: "Tout" value { list { type: DT_FLOAT } } }
      attr { key: "then_branch" value { func { name: "Double" } } }
      attr { key: "else_branch" value { func { name: "Keep" } } }
    }
    library { )pb", kLibrary, "}"));
  auto session = NewSession(def);
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"if:0"}, {}, &out).ok());
  EXPECT_FLOAT_EQ(out[0].scalar<float>(), 18.f);  // Double(Square(3))
}

TEST(FunctionalControlKernelTest, GradientsAreAClearError) {
  Scope root = Scope::NewRootScope();
  root.graph()->set_library(Parse<tensorflow::FunctionDefLibrary>(kLibrary));
  Output c = ops::Placeholder(root, DT_BOOL);
  Output x = ops::Placeholder(root, DT_FLOAT);
  NodeBuilder b("cond", "StatelessIf");
  tensorflow::AttrValue keep, twice;
  keep.mutable_func()->set_name("Keep");
  twice.mutable_func()->set_name("Double");
  b.Input(c).Input(std::vector<Output>{x}).Attr("Tcond", DT_BOOL);
  b.Attr("Tin", std::vector<DataType>{DT_FLOAT}).Attr("Tout", std::vector<DataType>{DT_FLOAT});
  b.Attr("then_branch", keep).Attr("else_branch", twice);
  Node* node = root.AddNode(b);
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<Output> grads;
  absl::Status s = AddSymbolicGradients(root, {Output(node, 0)}, {x}, &grads);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("node 'cond' (StatelessIf) runs function(s) Keep, Double: gradients of "
                        "StatelessIf are not supported"));
}

}  // namespace
}  // namespace recflow
