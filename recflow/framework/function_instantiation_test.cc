#include "recflow/framework/function_instantiation.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "recflow/framework/graph.h"

namespace recflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

tensorflow::FunctionDef ParseFunction(const std::string& text) {
  tensorflow::FunctionDef f;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &f)) << text;
  return f;
}

AttrMap TypeAttr(const std::string& name, DataType t) {
  AttrMap m;
  SetAttrValue(t, &m[name]);
  return m;
}

// name -> "op(input, input, ...)"
std::map<std::string, std::string> Summarize(const tensorflow::GraphDef& g) {
  std::map<std::string, std::string> out;
  for (const auto& n : g.node()) {
    std::string s = n.op() + "(";
    for (int i = 0; i < n.input_size(); ++i) s += (i ? ", " : "") + n.input(i);
    out[n.name()] = s + ")";
  }
  return out;
}

// f(x: T, y: T) -> z: T = x * y, T a placeholder bound at instantiation.
constexpr char kMulFunction[] = R"pb(
  signature {
    name: "MulT"
    input_arg { name: "x" type_attr: "T" }
    input_arg { name: "y" type_attr: "T" }
    output_arg { name: "z" type_attr: "T" }
    attr { name: "T" type: "type" }
  }
  node_def {
    name: "mul"
    op: "Mul"
    input: "x"
    input: "y"
    attr { key: "T" value { placeholder: "T" } }
  }
  ret { key: "z" value: "mul:z:0" }
)pb";

TEST(FunctionInstantiationTest, ArgsBodyAndRetvals) {
  auto inst = InstantiateFunction(ParseFunction(kMulFunction), TypeAttr("T", DT_INT32), nullptr);
  ASSERT_TRUE(inst.ok()) << inst.status();
  EXPECT_THAT(inst->arg_types, ElementsAre(DT_INT32, DT_INT32));
  EXPECT_THAT(inst->ret_types, ElementsAre(DT_INT32));
  auto nodes = Summarize(inst->graph);
  EXPECT_EQ(nodes["x"], "_Arg()");
  EXPECT_EQ(nodes["y"], "_Arg()");
  EXPECT_EQ(nodes["mul"], "Mul(x, y)");
  EXPECT_EQ(nodes["z_RetVal"], "_Retval(mul)");
  for (const auto& n : inst->graph.node()) {
    if (n.name() == "mul") {
      EXPECT_EQ(n.attr().at("T").type(), tensorflow::DT_INT32);
    }
    if (n.name() == "y") {
      EXPECT_EQ(n.attr().at("index").i(), 1);
    }
  }
  // The result is a graph the runtime can build.
  Graph graph;
  GraphConstructorOptions opts;
  opts.allow_unknown_ops = false;
  EXPECT_TRUE(ConvertGraphDefToGraph(opts, inst->graph, &graph).ok());
}

TEST(FunctionInstantiationTest, ListArgumentsExpand) {
  // xs: N*T summed with AddN (whole argument), ys: a type list whose second
  // element is returned alone; Split's outputs named by output arg.
  auto f = ParseFunction(R"pb(
    signature {
      name: "Lists"
      input_arg { name: "xs" type_attr: "T" number_attr: "N" }
      input_arg { name: "ys" type_list_attr: "Tys" }
      output_arg { name: "sum" type_attr: "T" }
      output_arg { name: "second" type: DT_INT64 }
      output_arg { name: "parts" type_attr: "T" number_attr: "N" }
      attr { name: "T" type: "type" }
      attr { name: "N" type: "int" }
      attr { name: "Tys" type: "list(type)" }
    }
    node_def {
      name: "add"
      op: "AddN"
      input: "xs"
      attr { key: "T" value { placeholder: "T" } }
      attr { key: "N" value { placeholder: "N" } }
    }
    node_def {
      name: "dim"
      op: "Const"
      attr { key: "dtype" value { type: DT_INT32 } }
      attr {
        key: "value"
        value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } }
      }
    }
    node_def {
      name: "split"
      op: "Split"
      input: "dim:output:0"
      input: "add:sum:0"
      input: "^ys:0"
      attr { key: "T" value { placeholder: "T" } }
      attr { key: "num_split" value { placeholder: "N" } }
    }
    ret { key: "sum" value: "add:sum:0" }
    ret { key: "second" value: "ys:1" }
    ret { key: "parts" value: "split:output" }
  )pb");
  AttrMap attrs = TypeAttr("T", DT_FLOAT);
  SetAttrValue(int64_t{2}, &attrs["N"]);
  SetAttrValue(std::vector<DataType>{DT_STRING, DT_INT64}, &attrs["Tys"]);
  auto inst = InstantiateFunction(f, attrs, nullptr);
  ASSERT_TRUE(inst.ok()) << inst.status();
  EXPECT_THAT(inst->arg_types, ElementsAre(DT_FLOAT, DT_FLOAT, DT_STRING, DT_INT64));
  EXPECT_THAT(inst->ret_types, ElementsAre(DT_FLOAT, DT_INT64, DT_FLOAT, DT_FLOAT));
  auto nodes = Summarize(inst->graph);
  EXPECT_EQ(nodes["xs_0"], "_Arg()");
  EXPECT_EQ(nodes["ys_1"], "_Arg()");
  EXPECT_EQ(nodes["add"], "AddN(xs_0, xs_1)");
  EXPECT_EQ(nodes["split"], "Split(dim, add, ^ys_0)");
  EXPECT_EQ(nodes["second_RetVal"], "_Retval(ys_1)");
  EXPECT_EQ(nodes["parts_RetVal_0"], "_Retval(split)");
  EXPECT_EQ(nodes["parts_RetVal_1"], "_Retval(split:1)");
  int retval_index = -1;
  for (const auto& n : inst->graph.node()) {
    if (n.name() == "parts_RetVal_1") retval_index = n.attr().at("index").i();
  }
  EXPECT_EQ(retval_index, 3);
}

TEST(FunctionInstantiationTest, SignatureDefaultsAndArgAttrs) {
  auto f = ParseFunction(R"pb(
    signature {
      name: "Id"
      input_arg { name: "x" type_attr: "T" }
      output_arg { name: "y" type_attr: "T" }
      attr { name: "T" type: "type" default_value { type: DT_DOUBLE } }
    }
    arg_attr {
      key: 0
      value { attr { key: "_user" value { s: "note" } } }
    }
    resource_arg_unique_id { key: 0 value: 7 }
    node_def { name: "id" op: "Identity" input: "x" attr { key: "T" value { placeholder: "T" } } }
    ret { key: "y" value: "id:output:0" }
  )pb");
  auto inst = InstantiateFunction(f, AttrMap(), nullptr);
  ASSERT_TRUE(inst.ok()) << inst.status();
  EXPECT_THAT(inst->arg_types, ElementsAre(DT_DOUBLE));
  const auto& arg = inst->graph.node(0);
  EXPECT_EQ(arg.attr().at("_user").s(), "note");
  EXPECT_EQ(arg.attr().at("_resource_arg_unique_id").i(), 7);
}

TEST(FunctionInstantiationTest, CallByNameBecomesStatefulPartitionedCall) {
  tensorflow::FunctionDef mul = ParseFunction(kMulFunction);
  auto outer = ParseFunction(R"pb(
    signature {
      name: "Square"
      input_arg { name: "a" type: DT_FLOAT }
      output_arg { name: "b" type: DT_FLOAT }
    }
    node_def {
      name: "call"
      op: "MulT"
      input: "a"
      input: "a"
      attr { key: "T" value { type: DT_FLOAT } }
    }
    ret { key: "b" value: "call:z:0" }
  )pb");
  FunctionLookup lookup = [&](absl::string_view name) {
    return name == "MulT" ? &mul : nullptr;
  };
  auto inst = InstantiateFunction(outer, AttrMap(), lookup);
  ASSERT_TRUE(inst.ok()) << inst.status();
  const tensorflow::NodeDef* call = nullptr;
  for (const auto& n : inst->graph.node()) {
    if (n.name() == "call") call = &n;
  }
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->op(), "StatefulPartitionedCall");
  EXPECT_EQ(call->attr().at("f").func().name(), "MulT");
  EXPECT_EQ(call->attr().at("f").func().attr().at("T").type(), tensorflow::DT_FLOAT);
  EXPECT_EQ(call->attr().at("Tin").list().type_size(), 2);
  EXPECT_EQ(call->attr().at("Tout").list().type_size(), 1);
}

struct BadCase {
  std::string what;
  std::string text;
  std::string error;
};

TEST(FunctionInstantiationTest, ErrorsNameFunctionAndCulprit) {
  const std::string sig = R"pb(
    signature {
      name: "Bad"
      input_arg { name: "x" type: DT_FLOAT }
      output_arg { name: "y" type: DT_FLOAT }
    }
  )pb";
  const std::vector<BadCase> cases = {
      {"unknown op", sig + R"pb(node_def { name: "n" op: "NoSuchOp" input: "x" }
                                ret { key: "y" value: "x" })pb",
       "node 'n' (NoSuchOp) uses op 'NoSuchOp', which is neither a registered op"},
      {"unbound placeholder", sig + R"pb(node_def {
                                           name: "n"
                                           op: "Identity"
                                           input: "x"
                                           attr { key: "T" value { placeholder: "U" } }
                                         }
                                         ret { key: "y" value: "n:output:0" })pb",
       "attr 'T' is the placeholder $U"},
      {"graph-form input", sig + R"pb(node_def {
                                        name: "n"
                                        op: "Identity"
                                        input: "x"
                                        attr { key: "T" value { type: DT_FLOAT } }
                                      }
                                      node_def {
                                        name: "m"
                                        op: "Identity"
                                        input: "n:0"
                                        attr { key: "T" value { type: DT_FLOAT } }
                                      }
                                      ret { key: "y" value: "m:output:0" })pb",
       "input 'n:0' is not an argument or node output"},
      {"dtype mismatch", sig + R"pb(node_def {
                                      name: "n"
                                      op: "Identity"
                                      input: "x"
                                      attr { key: "T" value { type: DT_INT32 } }
                                    }
                                    ret { key: "y" value: "n:output:0" })pb",
       "expects int32 but 'x'[0] is float"},
      {"missing ret", sig + R"pb(node_def {
                                   name: "n"
                                   op: "Identity"
                                   input: "x"
                                   attr { key: "T" value { type: DT_FLOAT } }
                                 })pb",
       "output 'y' has no entry in ret"},
      {"ret type", sig + R"pb(node_def {
                                name: "n"
                                op: "Cast"
                                input: "x"
                                attr { key: "SrcT" value { type: DT_FLOAT } }
                                attr { key: "DstT" value { type: DT_INT32 } }
                              }
                              ret { key: "y" value: "n:y:0" })pb",
       "output 'y: float' is [float] but 'n:y:0' is [int32]"},
      {"duplicate name", sig + R"pb(node_def {
                                      name: "x"
                                      op: "Identity"
                                      input: "x"
                                      attr { key: "T" value { type: DT_FLOAT } }
                                    }
                                    ret { key: "y" value: "x" })pb",
       "defined twice"},
      {"too many inputs", sig + R"pb(node_def {
                                       name: "n"
                                       op: "Identity"
                                       input: "x"
                                       input: "x"
                                       attr { key: "T" value { type: DT_FLOAT } }
                                     }
                                     ret { key: "y" value: "n:output:0" })pb",
       "one more data input than op Identity takes"},
      {"control_ret", sig + R"pb(ret { key: "y" value: "x" }
                                 control_ret { key: "done" value: "nowhere" })pb",
       "control_ret 'done' names node 'nowhere'"},
  };
  for (const BadCase& c : cases) {
    auto inst = InstantiateFunction(ParseFunction(c.text), AttrMap(), nullptr);
    ASSERT_FALSE(inst.ok()) << c.what;
    EXPECT_THAT(std::string(inst.status().message()), HasSubstr("function 'Bad'")) << c.what;
    EXPECT_THAT(std::string(inst.status().message()), HasSubstr(c.error)) << c.what;
  }
}

TEST(FunctionInstantiationTest, SignatureAttrErrors) {
  auto f = ParseFunction(kMulFunction);
  auto unbound = InstantiateFunction(f, AttrMap(), nullptr);
  ASSERT_FALSE(unbound.ok());
  EXPECT_THAT(std::string(unbound.status().message()),
              HasSubstr("function 'MulT': attr 'T' (type) is not bound"));
  AttrMap wrong;
  SetAttrValue(int64_t{3}, &wrong["T"]);
  auto bad_kind = InstantiateFunction(f, wrong, nullptr);
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_THAT(std::string(bad_kind.status().message()),
              HasSubstr("attr 'T' must be type but the call gives int 3"));
}

TEST(FunctionInstantiationTest, CanonicalCallNameSortsAttrs) {
  tensorflow::NameAttrList f;
  f.set_name("g");
  SetAttrValue(DT_FLOAT, &(*f.mutable_attr())["T"]);
  SetAttrValue(int64_t{2}, &(*f.mutable_attr())["N"]);
  EXPECT_EQ(CanonicalCallName(f), "g[N=2, T=float]");
}

}  // namespace
}  // namespace recflow
