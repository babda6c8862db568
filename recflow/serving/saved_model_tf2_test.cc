// TF2 SavedModel structures, written here as tf.saved_model.save writes
// them (tensorflow/python/saved_model/save.py; compare the TF2
// half_plus_two fixture: `recflow saved_model show --all`): every signature
// is a StatefulPartitionedCall of a "__inference_signature_wrapper_*"
// function that calls the traced function in turn, resource variables are
// VarHandleOps passed to the calls as DT_RESOURCE arguments, the variables
// are restored by running saver_def.restore_op_name, a call of
// "__inference__traced_restore_*" whose RestoreV2 reads the object graph's
// checkpoint keys ("v/.ATTRIBUTES/VARIABLE_VALUE",
// "_CHECKPOINTABLE_OBJECT_GRAPH"), the "__saved_model_init_op" signature
// names the init NoOp, control flow is a StatelessIf over branch functions,
// and fingerprint.pb sits beside saved_model.pb. Then the same model with
// its function library truncated or inconsistent, which must fail at load
// naming the function.
#include <random>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/env.h"
#include "recflow/serving/saved_model_bundle.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;

// The graph: v (float [3]); signatures serving_default (y = x * v + 1,
// through two nested calls), branch (z = flag ? x + x : x * x, a
// StatelessIf), __saved_model_init_op; the restore function.
constexpr char kMetaGraph[] = R"pb(
  meta_info_def {
    tags: "serve"
    tensorflow_version: "2.14.0"
    tensorflow_git_version: "unknown"
    stripped_default_attrs: true
  }
  graph_def {
    node {
      name: "v"
      op: "VarHandleOp"
      attr { key: "_class" value { list { s: "loc:@v" } } }
      attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "shape" value { shape { dim { size: 3 } } } }
      attr { key: "shared_name" value { s: "v" } }
    }
    node {
      name: "serving_default_x"
      op: "Placeholder"
      attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "shape" value { shape { dim { size: -1 } dim { size: 3 } } } }
    }
    node {
      name: "StatefulPartitionedCall"
      op: "StatefulPartitionedCall"
      input: "serving_default_x"
      input: "v"
      attr { key: "Tin" value { list { type: DT_FLOAT type: DT_RESOURCE } } }
      attr { key: "Tout" value { list { type: DT_FLOAT } } }
      attr { key: "_collective_manager_ids" value { list {} } }
      attr { key: "_read_only_resource_inputs" value { list { i: 1 } } }
      attr { key: "config_proto" value { s: "\202\001\0008\0012\002J\000" } }
      attr { key: "f" value { func { name: "__inference_signature_wrapper_predict_40" } } }
    }
    node {
      name: "branch_flag"
      op: "Placeholder"
      attr { key: "dtype" value { type: DT_BOOL } }
      attr { key: "shape" value { shape {} } }
    }
    node {
      name: "branch_x"
      op: "Placeholder"
      attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "shape" value { shape { dim { size: -1 } dim { size: 3 } } } }
    }
    node {
      name: "StatefulPartitionedCall_1"
      op: "StatefulPartitionedCall"
      input: "branch_flag"
      input: "branch_x"
      attr { key: "Tin" value { list { type: DT_BOOL type: DT_FLOAT } } }
      attr { key: "Tout" value { list { type: DT_FLOAT } } }
      attr { key: "_read_only_resource_inputs" value { list {} } }
      attr { key: "f" value { func { name: "__inference_signature_wrapper_branch_60" } } }
    }
    node { name: "NoOp" op: "NoOp" }
    node {
      name: "saver_filename"
      op: "Placeholder"
      attr { key: "dtype" value { type: DT_STRING } }
      attr { key: "shape" value { shape {} } }
    }
    node {
      name: "StatefulPartitionedCall_2"
      op: "StatefulPartitionedCall"
      input: "saver_filename"
      input: "v"
      attr { key: "Tin" value { list { type: DT_STRING type: DT_RESOURCE } } }
      attr { key: "Tout" value { list { type: DT_STRING } } }
      attr { key: "_read_only_resource_inputs" value { list {} } }
      attr { key: "f" value { func { name: "__inference__traced_restore_90" } } }
    }
    library {
      function {
        signature {
          name: "__inference_predict_30"
          input_arg { name: "x" type: DT_FLOAT }
          input_arg {
            name: "mul_readvariableop_resource"
            type: DT_RESOURCE
            handle_data { dtype: DT_FLOAT shape { dim { size: 3 } } }
          }
          output_arg { name: "identity" type: DT_FLOAT }
          is_stateful: true
        }
        node_def {
          name: "mul/ReadVariableOp"
          op: "ReadVariableOp"
          input: "mul_readvariableop_resource"
          attr { key: "dtype" value { type: DT_FLOAT } }
        }
        node_def {
          name: "mul"
          op: "Mul"
          input: "x"
          input: "mul/ReadVariableOp:value:0"
          attr { key: "T" value { type: DT_FLOAT } }
        }
        node_def {
          name: "add/y"
          op: "Const"
          attr { key: "dtype" value { type: DT_FLOAT } }
          attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } }
        }
        node_def {
          name: "add"
          op: "AddV2"
          input: "mul:z:0"
          input: "add/y:output:0"
          attr { key: "T" value { type: DT_FLOAT } }
        }
        node_def {
          name: "Identity"
          op: "Identity"
          input: "add:z:0"
          input: "^NoOp"
          attr { key: "T" value { type: DT_FLOAT } }
        }
        node_def { name: "NoOp" op: "NoOp" input: "^mul/ReadVariableOp" }
        ret { key: "identity" value: "Identity:output:0" }
        attr { key: "_input_shapes" value { list { shape { dim { size: -1 } dim { size: 3 } } shape {} } } }
        arg_attr { key: 0 value { attr { key: "_user_specified_name" value { s: "x" } } } }
        arg_attr { key: 1 value { attr { key: "_user_specified_name" value { s: "resource" } } } }
      }
      function {
        signature {
          name: "__inference_signature_wrapper_predict_40"
          input_arg { name: "x" type: DT_FLOAT }
          input_arg { name: "unknown" type: DT_RESOURCE }
          output_arg { name: "identity" type: DT_FLOAT }
          is_stateful: true
          control_output: "StatefulPartitionedCall"
        }
        node_def {
          name: "StatefulPartitionedCall"
          op: "StatefulPartitionedCall"
          input: "x"
          input: "unknown"
          attr { key: "Tin" value { list { type: DT_FLOAT type: DT_RESOURCE } } }
          attr { key: "Tout" value { list { type: DT_FLOAT } } }
          attr { key: "_read_only_resource_inputs" value { list { i: 1 } } }
          attr { key: "f" value { func { name: "__inference_predict_30" } } }
        }
        node_def {
          name: "Identity"
          op: "Identity"
          input: "StatefulPartitionedCall:output:0"
          attr { key: "T" value { type: DT_FLOAT } }
        }
        ret { key: "identity" value: "Identity:output:0" }
        control_ret { key: "StatefulPartitionedCall" value: "StatefulPartitionedCall" }
      }
      function {
        signature {
          name: "cond_true_45"
          input_arg { name: "x" type: DT_FLOAT }
          output_arg { name: "identity" type: DT_FLOAT }
        }
        node_def { name: "add" op: "AddV2" input: "x" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
        node_def { name: "Identity" op: "Identity" input: "add:z:0" attr { key: "T" value { type: DT_FLOAT } } }
        ret { key: "identity" value: "Identity:output:0" }
      }
      function {
        signature {
          name: "cond_false_46"
          input_arg { name: "x" type: DT_FLOAT }
          output_arg { name: "identity" type: DT_FLOAT }
        }
        node_def { name: "mul" op: "Mul" input: "x" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
        node_def { name: "Identity" op: "Identity" input: "mul:z:0" attr { key: "T" value { type: DT_FLOAT } } }
        ret { key: "identity" value: "Identity:output:0" }
      }
      function {
        signature {
          name: "__inference_branch_50"
          input_arg { name: "x" type: DT_FLOAT }
          input_arg { name: "flag" type: DT_BOOL }
          output_arg { name: "identity" type: DT_FLOAT }
        }
        node_def {
          name: "cond"
          op: "StatelessIf"
          input: "flag"
          input: "x"
          attr { key: "Tcond" value { type: DT_BOOL } }
          attr { key: "Tin" value { list { type: DT_FLOAT } } }
          attr { key: "Tout" value { list { type: DT_FLOAT } } }
          attr { key: "_lower_using_switch_merge" value { b: true } }
          attr { key: "_read_only_resource_inputs" value { list {} } }
          attr { key: "else_branch" value { func { name: "cond_false_46" } } }
          attr { key: "output_shapes" value { list { shape { dim { size: -1 } dim { size: 3 } } } } }
          attr { key: "then_branch" value { func { name: "cond_true_45" } } }
        }
        node_def { name: "cond/Identity" op: "Identity" input: "cond:output:0" attr { key: "T" value { type: DT_FLOAT } } }
        node_def { name: "Identity" op: "Identity" input: "cond/Identity:output:0" attr { key: "T" value { type: DT_FLOAT } } }
        ret { key: "identity" value: "Identity:output:0" }
      }
      function {
        signature {
          name: "__inference_signature_wrapper_branch_60"
          input_arg { name: "flag" type: DT_BOOL }
          input_arg { name: "x" type: DT_FLOAT }
          output_arg { name: "identity" type: DT_FLOAT }
        }
        node_def {
          name: "PartitionedCall"
          op: "PartitionedCall"
          input: "x"
          input: "flag"
          attr { key: "Tin" value { list { type: DT_FLOAT type: DT_BOOL } } }
          attr { key: "Tout" value { list { type: DT_FLOAT } } }
          attr { key: "f" value { func { name: "__inference_branch_50" } } }
        }
        node_def {
          name: "Identity"
          op: "Identity"
          input: "PartitionedCall:output:0"
          attr { key: "T" value { type: DT_FLOAT } }
        }
        ret { key: "identity" value: "Identity:output:0" }
      }
      function {
        signature {
          name: "__inference__traced_restore_90"
          input_arg { name: "file_prefix" type: DT_STRING }
          input_arg { name: "assignvariableop_v" type: DT_RESOURCE }
          output_arg { name: "identity_2" type: DT_STRING }
          is_stateful: true
          control_output: "AssignVariableOp"
        }
        node_def {
          name: "RestoreV2/tensor_names"
          op: "Const"
          device: "/device:CPU:0"
          attr { key: "dtype" value { type: DT_STRING } }
          attr {
            key: "value"
            value {
              tensor {
                dtype: DT_STRING
                tensor_shape { dim { size: 2 } }
                string_val: "v/.ATTRIBUTES/VARIABLE_VALUE"
                string_val: "_CHECKPOINTABLE_OBJECT_GRAPH"
              }
            }
          }
        }
        node_def {
          name: "RestoreV2/shape_and_slices"
          op: "Const"
          device: "/device:CPU:0"
          attr { key: "dtype" value { type: DT_STRING } }
          attr {
            key: "value"
            value {
              tensor { dtype: DT_STRING tensor_shape { dim { size: 2 } } string_val: "" string_val: "" }
            }
          }
        }
        node_def {
          name: "RestoreV2"
          op: "RestoreV2"
          input: "file_prefix"
          input: "RestoreV2/tensor_names:output:0"
          input: "RestoreV2/shape_and_slices:output:0"
          device: "/device:CPU:0"
          attr { key: "dtypes" value { list { type: DT_FLOAT type: DT_STRING } } }
        }
        node_def {
          name: "Identity"
          op: "Identity"
          input: "RestoreV2:tensors:0"
          device: "/device:CPU:0"
          attr { key: "T" value { type: DT_FLOAT } }
        }
        node_def {
          name: "AssignVariableOp"
          op: "AssignVariableOp"
          input: "assignvariableop_v"
          input: "Identity:output:0"
          device: "/device:CPU:0"
          attr { key: "_has_manual_control_dependencies" value { b: true } }
          attr { key: "dtype" value { type: DT_FLOAT } }
        }
        node_def {
          name: "NoOp"
          op: "NoOp"
          device: "/device:CPU:0"
          attr { key: "_has_manual_control_dependencies" value { b: true } }
        }
        node_def {
          name: "Identity_1"
          op: "Identity"
          input: "file_prefix"
          input: "^AssignVariableOp"
          input: "^NoOp"
          device: "/device:CPU:0"
          attr { key: "T" value { type: DT_STRING } }
        }
        node_def {
          name: "Identity_2"
          op: "Identity"
          input: "Identity_1:output:0"
          input: "^NoOp_1"
          attr { key: "T" value { type: DT_STRING } }
        }
        node_def { name: "NoOp_1" op: "NoOp" input: "^AssignVariableOp" }
        ret { key: "identity_2" value: "Identity_2:output:0" }
        control_ret { key: "AssignVariableOp" value: "AssignVariableOp" }
        arg_attr { key: 0 value { attr { key: "_user_specified_name" value { s: "file_prefix" } } } }
        arg_attr { key: 1 value { attr { key: "_user_specified_name" value { s: "v" } } } }
      }
    }
    versions { producer: 1569 min_consumer: 12 }
  }
  saver_def {
    filename_tensor_name: "saver_filename:0"
    save_tensor_name: "StatefulPartitionedCall_3:0"
    restore_op_name: "StatefulPartitionedCall_2"
    version: V2
  }
  collection_def {
    key: "saved_model_main_op"
    value { node_list { value: "NoOp" } }
  }
  signature_def {
    key: "__saved_model_init_op"
    value {
      outputs {
        key: "__saved_model_init_op"
        value { name: "NoOp" tensor_shape { unknown_rank: true } }
      }
    }
  }
  signature_def {
    key: "serving_default"
    value {
      inputs {
        key: "x"
        value {
          name: "serving_default_x:0"
          dtype: DT_FLOAT
          tensor_shape { dim { size: -1 } dim { size: 3 } }
        }
      }
      outputs {
        key: "y"
        value {
          name: "StatefulPartitionedCall:0"
          dtype: DT_FLOAT
          tensor_shape { dim { size: -1 } dim { size: 3 } }
        }
      }
      method_name: "tensorflow/serving/predict"
    }
  }
  signature_def {
    key: "branch"
    value {
      inputs {
        key: "flag"
        value { name: "branch_flag:0" dtype: DT_BOOL tensor_shape {} }
      }
      inputs {
        key: "x"
        value {
          name: "branch_x:0"
          dtype: DT_FLOAT
          tensor_shape { dim { size: -1 } dim { size: 3 } }
        }
      }
      outputs {
        key: "z"
        value {
          name: "StatefulPartitionedCall_1:0"
          dtype: DT_FLOAT
          tensor_shape { dim { size: -1 } dim { size: 3 } }
        }
      }
      method_name: "tensorflow/serving/predict"
    }
  }
)pb";

tensorflow::MetaGraphDef MetaGraph() {
  tensorflow::MetaGraphDef mg;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kMetaGraph, &mg));
  return mg;
}

tensorflow::FunctionDef* FindFunction(tensorflow::MetaGraphDef* mg, const std::string& name) {
  for (auto& f : *mg->mutable_graph_def()->mutable_library()->mutable_function()) {
    if (f.signature().name() == name) return &f;
  }
  ADD_FAILURE() << "no function " << name;
  return nullptr;
}

// FingerprintDef (tensorflow/core/protobuf/fingerprint.proto) as TF 2.14
// writes it: saved_model_checksum (1), graph_def_program_hash (2),
// signature_def_hash (3), saved_object_graph_hash (4), checkpoint_hash (5),
// version (6: VersionDef { producer: 1 }).
std::string FingerprintBytes() {
  std::string out;
  for (int field = 1; field <= 5; ++field) {
    out.push_back(static_cast<char>(field << 3));  // varint wire type
    out.push_back(static_cast<char>(0x80 | field));
    out.push_back(0x01);
  }
  out += std::string("\x32\x02\x08\x01", 4);
  return out;
}

class Tf2SavedModelTest : public ::testing::Test {
 protected:
  // Writes `mg` as a SavedModel with v = v_ and the object graph entry.
  std::string Write(const tensorflow::MetaGraphDef& mg, const std::string& name) {
    const std::string dir = ::testing::TempDir() + "/tf2_saved_model_" + name;
    DeleteRecursively(Env::Default(), dir).IgnoreError();
    tensorflow::SavedModel sm;
    sm.set_saved_model_schema_version(1);
    *sm.add_meta_graphs() = mg;
    checkpoint::SavedModelWriteOptions options;
    options.write_variables = [this](const std::string& prefix) -> absl::Status {
      checkpoint::BundleWriterOptions bo;
      bo.sync = false;
      ASSIGN_OR_RETURN(auto writer, checkpoint::BundleWriter::Create(Env::Default(), prefix, bo));
      RETURN_IF_ERROR(writer->Add("v/.ATTRIBUTES/VARIABLE_VALUE", v_));
      RETURN_IF_ERROR(writer->Add("_CHECKPOINTABLE_OBJECT_GRAPH",
                                  Tensor::Scalar<std::string>("\n\x05\x12\x01v\x08\x01")));
      return writer->Finish();
    };
    absl::Status s = checkpoint::WriteSavedModel(Env::Default(), dir, sm, options);
    EXPECT_TRUE(s.ok()) << s;
    s = WriteStringToFile(Env::Default(), JoinPath(dir, "fingerprint.pb"), FingerprintBytes());
    EXPECT_TRUE(s.ok()) << s;
    return dir;
  }

  Tensor RandomX(int rows, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-2.f, 2.f);
    Tensor t(DT_FLOAT, TensorShape({rows, 3}));
    for (float& v : t.flat<float>()) v = dist(rng);
    return t;
  }

  Tensor v_ = Tensor::FromVector<float>({0.5f, -1.25f, 3.f}, TensorShape({3}));
};

TEST_F(Tf2SavedModelTest, SignaturesRunNestedCallsVariablesAndControlFlow) {
  const std::string dir = Write(MetaGraph(), "ok");
  auto bundle = LoadSavedModel({}, dir, {"serve"});
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const Tensor x = RandomX(4, 1);
  auto predict = RunSignature(*bundle, "serving_default", {{"x", x}});
  ASSERT_TRUE(predict.ok()) << predict.status();
  const Tensor& y = predict->at("y");
  ASSERT_EQ(y.shape(), x.shape());
  for (int i = 0; i < 12; ++i) {
    EXPECT_FLOAT_EQ(y.flat<float>()[i], x.flat<float>()[i] * v_.flat<float>()[i % 3] + 1.f);
  }
  for (bool flag : {true, false}) {
    auto branch = RunSignature(*bundle, "branch",
                               {{"flag", Tensor::Scalar<bool>(flag)}, {"x", x}});
    ASSERT_TRUE(branch.ok()) << branch.status();
    const Tensor& z = branch->at("z");
    for (int i = 0; i < 12; ++i) {
      const float xi = x.flat<float>()[i];
      EXPECT_FLOAT_EQ(z.flat<float>()[i], flag ? xi + xi : xi * xi) << flag;
    }
  }
}

TEST_F(Tf2SavedModelTest, TruncatedOrInconsistentLibraryFailsAtLoad) {
  struct Case {
    std::string what;
    std::function<void(tensorflow::MetaGraphDef*)> mutate;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"missing traced function",
       [](tensorflow::MetaGraphDef* mg) {
         auto* lib = mg->mutable_graph_def()->mutable_library()->mutable_function();
         lib->DeleteSubrange(0, 1);  // __inference_predict_30
       },
       "function '__inference_signature_wrapper_predict_40': node 'StatefulPartitionedCall' "
       "(StatefulPartitionedCall) names function '__inference_predict_30' in attr 'f', which "
       "is not in the function library"},
      {"missing branch",
       [](tensorflow::MetaGraphDef* mg) {
         FindFunction(mg, "cond_false_46")->mutable_signature()->set_name("cond_false_47");
       },
       "function '__inference_branch_50': node 'cond' (StatelessIf) names function "
       "'cond_false_46' in attr 'else_branch'"},
      {"wrong arg count",
       [](tensorflow::MetaGraphDef* mg) {
         auto* f = FindFunction(mg, "__inference_signature_wrapper_predict_40");
         auto* call = f->mutable_node_def(0);
         call->mutable_input()->RemoveLast();
         (*call->mutable_attr())["Tin"].mutable_list()->mutable_type()->RemoveLast();
       },
       "calls function '__inference_predict_30' (attr 'f') with 1 argument(s) (float) but "
       "'__inference_predict_30' takes 2 (float, resource)"},
      {"wrong result count in the graph",
       [](tensorflow::MetaGraphDef* mg) {
         auto* node = mg->mutable_graph_def()->mutable_node(2);
         (*node->mutable_attr())["Tout"].mutable_list()->add_type(tensorflow::DT_FLOAT);
       },
       "node 'StatefulPartitionedCall' (StatefulPartitionedCall) wants 2 result(s) (float, "
       "float) from function '__inference_signature_wrapper_predict_40'"},
      {"branch of the wrong signature",
       [](tensorflow::MetaGraphDef* mg) {
         FindFunction(mg, "cond_true_45")->mutable_signature()->mutable_input_arg(0)->set_type(
             tensorflow::DT_INT32);
       },
       "calls function 'cond_true_45' (attr 'then_branch') with 1 argument(s) (float) but "
       "'cond_true_45' takes 1 (int32)"},
  };
  for (const Case& c : cases) {
    tensorflow::MetaGraphDef mg = MetaGraph();
    c.mutate(&mg);
    const std::string dir = Write(mg, "bad");
    auto bundle = LoadSavedModel({}, dir, {"serve"});
    ASSERT_FALSE(bundle.ok()) << c.what;
    EXPECT_THAT(std::string(bundle.status().message()), HasSubstr(c.error)) << c.what;
    EXPECT_THAT(std::string(bundle.status().message()),
                HasSubstr("checking the function library"))
        << c.what;
  }
}

TEST_F(Tf2SavedModelTest, MissingVariableKeyFailsTheRestoreNamingIt) {
  tensorflow::MetaGraphDef mg = MetaGraph();
  auto* names = FindFunction(&mg, "__inference__traced_restore_90")->mutable_node_def(0);
  (*names->mutable_attr())["value"].mutable_tensor()->set_string_val(
      0, "w/.ATTRIBUTES/VARIABLE_VALUE");
  const std::string dir = Write(mg, "missing_key");
  auto bundle = LoadSavedModel({}, dir, {"serve"});
  ASSERT_FALSE(bundle.ok());
  EXPECT_THAT(std::string(bundle.status().message()), HasSubstr("restoring the variables"));
  EXPECT_THAT(std::string(bundle.status().message()), HasSubstr("w/.ATTRIBUTES/VARIABLE_VALUE"));
}

}  // namespace
}  // namespace recflow::serving
