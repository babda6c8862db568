// Test-only: a recflow-written stand-in for TF Serving's half_plus_two.
//
// TensorFlow's own copy (../shared/testdata, see core/testing/tf_testdata.h) lives
// outside the repository. Tests that exercise recflow's machinery rather
// than TensorFlow's bytes (the model server, `saved_model run`, hot swaps)
// use this one when TensorFlow's is absent, so they run in a clone of the
// repository alone.
//
// The model matches TensorFlow's in everything a client sees: the same
// TF1 graph idioms (VariableV2 + Assign + read Identity, a tf.Example input
// parsed by ParseExample, a SaverDef whose restore op reads a V2 bundle, an
// asset fed to a legacy init op), the same node names for every signature
// tensor, the same SignatureDefs (serving_default, classify_x_to_y,
// regress_x_to_y, regress_x_to_y2, regress_x2_to_y3) and the same values:
// y = 0.5x + 2, y2 = 0.5x + 3, y3 = 0.5x2 + 3, with x2 defaulting to 0.
//
// Header-only; not thread-safe.
#ifndef RECFLOW_CHECKPOINT_TESTING_HALF_PLUS_TWO_H_
#define RECFLOW_CHECKPOINT_TESTING_HALF_PLUS_TWO_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/proto/saved_model.pb.h"

namespace recflow::checkpoint::testutil {

// Writes the model into `dir` (a SavedModel directory: saved_model.pb,
// variables/, assets/foo.txt).
inline absl::Status WriteHalfPlusTwo(Env* env, const std::string& dir) {
  tensorflow::GraphDef graph;
  auto node = [&](const std::string& name, const std::string& op,
                  std::vector<std::string> inputs = {}) {
    tensorflow::NodeDef* n = graph.add_node();
    n->set_name(name);
    n->set_op(op);
    n->set_device("/device:CPU:0");
    for (std::string& in : inputs) n->add_input(std::move(in));
    return n;
  };
  auto attr = [](tensorflow::NodeDef* n, const std::string& key) {
    return &(*n->mutable_attr())[key];
  };
  auto typed = [&](tensorflow::NodeDef* n, const std::string& key,
                   tensorflow::DataType t) {
    attr(n, key)->set_type(t);
    return n;
  };
  auto constant = [&](const std::string& name, const Tensor& value) {
    tensorflow::NodeDef* n = node(name, "Const");
    typed(n, "dtype", static_cast<tensorflow::DataType>(value.dtype()));
    TensorToProto(value, attr(n, "value")->mutable_tensor());
  };
  // A TF1 variable: name/initial_value, name (VariableV2), name/Assign,
  // name/read.
  auto variable = [&](const std::string& name, const Tensor& initial) {
    const auto dtype = static_cast<tensorflow::DataType>(initial.dtype());
    constant(name + "/initial_value", initial);
    tensorflow::NodeDef* v = typed(node(name, "VariableV2"), "dtype", dtype);
    attr(v, "shape")->mutable_shape();  // a scalar
    attr(v, "container")->set_s("");
    attr(v, "shared_name")->set_s("");
    tensorflow::NodeDef* assign =
        typed(node(name + "/Assign", "Assign", {name, name + "/initial_value"}),
              "T", dtype);
    attr(assign, "use_locking")->set_b(true);
    attr(assign, "validate_shape")->set_b(true);
    typed(node(name + "/read", "Identity", {name}), "T", dtype);
  };
  auto binary = [&](const std::string& name, const std::string& op,
                    const std::string& lhs, const std::string& rhs) {
    typed(node(name, op, {lhs, rhs}), "T", tensorflow::DT_FLOAT);
  };
  auto identity = [&](const std::string& name, const std::string& input) {
    typed(node(name, "Identity", {input}), "T", tensorflow::DT_FLOAT);
  };

  const std::map<std::string, float> values = {
      {"a", 0.5f}, {"a2", 0.5f}, {"b", 2.f}, {"c", 3.f}, {"c2", 3.f}};
  for (const auto& [name, value] : values) {
    variable(name, Tensor::Scalar<float>(value));
  }

  // tf.Example input: x is required, x2 defaults to 0.
  tensorflow::NodeDef* examples =
      typed(node("tf_example", "Placeholder"), "dtype", tensorflow::DT_STRING);
  attr(examples, "shape")->mutable_shape()->set_unknown_rank(true);
  constant("ParseExample/Const", Tensor(DT_FLOAT, TensorShape({0})));
  constant("ParseExample/key_x2", Tensor::FromVector<float>({0.f}, TensorShape({1})));
  constant("ParseExample/names", Tensor(DT_STRING, TensorShape({0})));
  constant("ParseExample/dense_keys_0", Tensor::Scalar<std::string>("x"));
  constant("ParseExample/dense_keys_1", Tensor::Scalar<std::string>("x2"));
  tensorflow::NodeDef* parse = node(
      "ParseExample/ParseExample", "ParseExample",
      {"tf_example", "ParseExample/names", "ParseExample/dense_keys_0",
       "ParseExample/dense_keys_1", "ParseExample/Const", "ParseExample/key_x2"});
  attr(parse, "Ndense")->set_i(2);
  attr(parse, "Nsparse")->set_i(0);
  attr(parse, "Tdense")->mutable_list()->add_type(tensorflow::DT_FLOAT);
  attr(parse, "Tdense")->mutable_list()->add_type(tensorflow::DT_FLOAT);
  for (int i = 0; i < 2; ++i) {
    attr(parse, "dense_shapes")->mutable_list()->add_shape()->add_dim()->set_size(1);
  }
  attr(parse, "sparse_types")->mutable_list();

  identity("x", "ParseExample/ParseExample");
  binary("Mul", "Mul", "a/read", "x");
  binary("Add", "Add", "Mul", "b/read");
  identity("y", "Add");
  binary("Mul_1", "Mul", "a/read", "x");
  binary("Add_1", "Add", "Mul_1", "c/read");
  identity("y2", "Add_1");
  identity("x2", "ParseExample/ParseExample:1");
  binary("Mul_2", "Mul", "a2/read", "x2");
  binary("Add_2", "Add", "Mul_2", "c2/read");
  identity("y3", "Add_2");

  // The asset: its path is fed to "Const:0" when the init op runs.
  constant("Const", Tensor::Scalar<std::string>("assets/foo.txt"));
  node("init", "NoOp",
       {"^a/Assign", "^a2/Assign", "^b/Assign", "^c/Assign", "^c2/Assign"});
  typed(node("asset_path", "Identity", {"Const"}), "T", tensorflow::DT_STRING);
  node("group_deps", "NoOp", {"^asset_path"});

  // The saver's restore half (what loading runs).
  constant("save/filename/input", Tensor::Scalar<std::string>("model"));
  typed(node("save/Const", "PlaceholderWithDefault", {"save/filename/input"}),
        "dtype", tensorflow::DT_STRING);
  attr(graph.mutable_node(graph.node_size() - 1), "shape")->mutable_shape();
  std::vector<std::string> names;
  for (const auto& [name, value] : values) names.push_back(name);
  Tensor tensor_names(DT_STRING, TensorShape({static_cast<int64_t>(names.size())}));
  Tensor slices(DT_STRING, tensor_names.shape());
  for (size_t i = 0; i < names.size(); ++i) tensor_names.flat<std::string>()[i] = names[i];
  constant("save/RestoreV2/tensor_names", tensor_names);
  constant("save/RestoreV2/shape_and_slices", slices);
  tensorflow::NodeDef* restore =
      node("save/RestoreV2", "RestoreV2",
           {"save/Const", "save/RestoreV2/tensor_names",
            "save/RestoreV2/shape_and_slices"});
  for (size_t i = 0; i < names.size(); ++i) {
    attr(restore, "dtypes")->mutable_list()->add_type(tensorflow::DT_FLOAT);
  }
  std::vector<std::string> assigns;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string name = i == 0 ? "save/Assign" : "save/Assign_" + std::to_string(i);
    const std::string output =
        i == 0 ? "save/RestoreV2" : "save/RestoreV2:" + std::to_string(i);
    tensorflow::NodeDef* assign =
        typed(node(name, "Assign", {names[i], output}), "T", tensorflow::DT_FLOAT);
    attr(assign, "use_locking")->set_b(true);
    attr(assign, "validate_shape")->set_b(true);
    assigns.push_back("^" + name);
  }
  node("save/restore_all", "NoOp", assigns);

  tensorflow::SavedModel sm;
  sm.set_saved_model_schema_version(1);
  tensorflow::MetaGraphDef* mg = sm.add_meta_graphs();
  mg->mutable_meta_info_def()->add_tags(kSavedModelTagServe);
  *mg->mutable_graph_def() = std::move(graph);
  tensorflow::SaverDef* saver = mg->mutable_saver_def();
  saver->set_filename_tensor_name("save/Const:0");
  saver->set_restore_op_name("save/restore_all");
  saver->set_version(tensorflow::SaverDef::V2);
  (*mg->mutable_collection_def())[kSavedModelLegacyInitOpKey]
      .mutable_node_list()
      ->add_value("group_deps");
  tensorflow::AssetFileDef* asset = mg->add_asset_file_def();
  asset->mutable_tensor_info()->set_name("Const:0");
  asset->mutable_tensor_info()->set_dtype(tensorflow::DT_STRING);
  asset->set_filename("foo.txt");

  auto info = [](const std::string& name, tensorflow::DataType dtype, bool batch_of_one) {
    tensorflow::TensorInfo t;
    t.set_name(name);
    t.set_dtype(dtype);
    if (batch_of_one) {
      t.mutable_tensor_shape()->add_dim()->set_size(-1);
      t.mutable_tensor_shape()->add_dim()->set_size(1);
    } else {
      t.mutable_tensor_shape()->set_unknown_rank(true);
    }
    return t;
  };
  auto signature = [&](const std::string& key, const char* method) {
    tensorflow::SignatureDef& sig = (*mg->mutable_signature_def())[key];
    sig.set_method_name(method);
    return &sig;
  };
  const auto examples_in = info("tf_example:0", tensorflow::DT_STRING, false);
  tensorflow::SignatureDef* sig = signature(kDefaultServingSignatureDefKey, kPredictMethodName);
  (*sig->mutable_inputs())["x"] = info("x:0", tensorflow::DT_FLOAT, true);
  (*sig->mutable_outputs())["y"] = info("y:0", tensorflow::DT_FLOAT, true);
  sig = signature("classify_x_to_y", kClassifyMethodName);
  (*sig->mutable_inputs())[kClassifyInputs] = examples_in;
  (*sig->mutable_outputs())[kClassifyOutputScores] = info("y:0", tensorflow::DT_FLOAT, true);
  for (const auto& [key, output] : std::map<std::string, std::string>{
           {"regress_x_to_y", "y:0"}, {"regress_x_to_y2", "y2:0"}}) {
    sig = signature(key, kRegressMethodName);
    (*sig->mutable_inputs())[kRegressInputs] = examples_in;
    (*sig->mutable_outputs())[kRegressOutputs] = info(output, tensorflow::DT_FLOAT, true);
  }
  sig = signature("regress_x2_to_y3", kRegressMethodName);
  (*sig->mutable_inputs())[kRegressInputs] = info("x2:0", tensorflow::DT_FLOAT, true);
  (*sig->mutable_outputs())[kRegressOutputs] = info("y3:0", tensorflow::DT_FLOAT, true);

  SavedModelWriteOptions options;
  options.assets["foo.txt"] = "asset-file-contents";
  options.write_variables = [&](const std::string& prefix) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<BundleWriter> writer, BundleWriter::Create(env, prefix));
    for (const auto& [name, value] : values) {
      RETURN_IF_ERROR(writer->Add(name, Tensor::Scalar<float>(value)));
    }
    return writer->Finish();
  };
  return WriteSavedModel(env, dir, sm, options);
}

}  // namespace recflow::checkpoint::testutil

#endif  // RECFLOW_CHECKPOINT_TESTING_HALF_PLUS_TWO_H_
