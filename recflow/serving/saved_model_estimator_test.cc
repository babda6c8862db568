// A SavedModel laid out as tf.estimator exports are (written here node by
// node, following TensorFlow 1.15's structure, since TensorFlow is not
// installed): a partitioned embedding and a linear bias restored by
// save/RestoreV2 with slice specs ("5 2 0,3:0,2", "1 0,1") from a bundle
// holding TensorFlow's sliced entries; a vocabulary asset fed to its
// placeholder and read by InitializeTableFromTextFileV2 into a HashTableV2
// in the main op; LookupTableFindV2 in the serving signature. Loaded by
// the model server's loader and run, against a reference computed here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/env.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/serving/saved_model_bundle.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kRows = 5;  // 4 words + 1 out-of-vocabulary row
constexpr int64_t kDim = 2;
const std::vector<std::string> kVocab = {"red", "green", "blue", "cyan"};

struct Model {
  Tensor emb;   // [kRows, kDim]
  Tensor bias;  // [1]
};

// main_op_key: the collection that names the init op ("saved_model_main_op"
// or "legacy_init_op"), or "" for the __saved_model_init_op signature.
absl::Status WriteEstimatorExport(const std::string& dir, const Model& m,
                                  const std::string& main_op_key) {
  tensorflow::GraphDef graph;
  auto node = [&](const std::string& name, const std::string& op,
                  std::vector<std::string> inputs = {}) {
    tensorflow::NodeDef* n = graph.add_node();
    n->set_name(name);
    n->set_op(op);
    for (std::string& in : inputs) n->add_input(std::move(in));
    return n;
  };
  auto attr = [](tensorflow::NodeDef* n, const std::string& key) {
    return &(*n->mutable_attr())[key];
  };
  auto type = [&](tensorflow::NodeDef* n, const std::string& key, DataType t) {
    attr(n, key)->set_type(static_cast<tensorflow::DataType>(t));
    return n;
  };
  auto constant = [&](const std::string& name, const Tensor& value) {
    tensorflow::NodeDef* n = type(node(name, "Const"), "dtype", value.dtype());
    TensorToProto(value, attr(n, "value")->mutable_tensor());
  };
  auto strings = [](const std::vector<std::string>& v) {
    Tensor t(DT_STRING, TensorShape({static_cast<int64_t>(v.size())}));
    for (size_t i = 0; i < v.size(); ++i) t.flat<std::string>()[i] = v[i];
    return t;
  };
  // Variables: the partitioned embedding's parts and the bias.
  struct Var {
    std::string name;
    TensorShape shape;
  };
  const std::vector<Var> vars = {{"emb/part_0", TensorShape({3, kDim})},
                                 {"emb/part_1", TensorShape({2, kDim})},
                                 {"linear/bias_weights", TensorShape({1})}};
  for (const Var& v : vars) {
    tensorflow::NodeDef* n = type(node(v.name, "VariableV2"), "dtype", DT_FLOAT);
    for (int64_t d : v.shape.dim_sizes()) attr(n, "shape")->mutable_shape()->add_dim()->set_size(d);
    type(node(v.name + "/read", "Identity", {v.name}), "T", DT_FLOAT);
  }
  // The vocabulary table, as index_table_from_file builds it.
  constant("asset_path", Tensor::Scalar<std::string>("/original/export/path/vocab.txt"));
  tensorflow::NodeDef* table = node("hash_table", "HashTableV2");
  attr(table, "shared_name")->set_s("hash_table_vocab.txt_-1_-2_-1");
  type(type(table, "key_dtype", DT_STRING), "value_dtype", DT_INT64);
  tensorflow::NodeDef* init_table =
      node("hash_table/table_init", "InitializeTableFromTextFileV2", {"hash_table", "asset_path"});
  attr(init_table, "key_index")->set_i(-1);    // the whole line
  attr(init_table, "value_index")->set_i(-2);    // the line number
  attr(init_table, "vocab_size")->set_i(-1);
  attr(init_table, "delimiter")->set_s("\t");
  attr(init_table, "offset")->set_i(0);
  node("init_all_tables", "NoOp", {"^hash_table/table_init"});
  node("group_deps", "NoOp", {"^init_all_tables"});

  // Serving: ids = table[words] (OOV -> row 4), scores = emb[ids] . 1 + bias.
  tensorflow::NodeDef* words = type(node("words", "Placeholder"), "dtype", DT_STRING);
  attr(words, "shape")->mutable_shape()->add_dim()->set_size(-1);
  constant("oov_id", Tensor::Scalar<int64_t>(kRows - 1));
  tensorflow::NodeDef* find = node("lookup", "LookupTableFindV2", {"hash_table", "words", "oov_id"});
  type(type(find, "Tin", DT_STRING), "Tout", DT_INT64);
  constant("concat/axis", Tensor::Scalar<int32_t>(0));
  tensorflow::NodeDef* concat =
      node("emb/concat", "ConcatV2", {"emb/part_0/read", "emb/part_1/read", "concat/axis"});
  type(type(concat, "T", DT_FLOAT), "Tidx", DT_INT32);
  attr(concat, "N")->set_i(2);
  constant("gather/axis", Tensor::Scalar<int32_t>(0));
  tensorflow::NodeDef* gather = node("gather", "GatherV2", {"emb/concat", "lookup", "gather/axis"});
  type(type(type(gather, "Tparams", DT_FLOAT), "Tindices", DT_INT64), "Taxis", DT_INT32);
  attr(gather, "batch_dims")->set_i(0);
  constant("sum/axis", Tensor::Scalar<int32_t>(1));
  tensorflow::NodeDef* sum = node("sum", "Sum", {"gather", "sum/axis"});
  type(type(sum, "T", DT_FLOAT), "Tidx", DT_INT32);
  attr(sum, "keep_dims")->set_b(false);
  type(node("scores", "AddV2", {"sum", "linear/bias_weights/read"}), "T", DT_FLOAT);

  // The saver: TensorFlow's sliced restore of partitioned variables.
  constant("save/filename/input", Tensor::Scalar<std::string>("model"));
  tensorflow::NodeDef* filename =
      type(node("save/Const", "PlaceholderWithDefault", {"save/filename/input"}), "dtype",
           DT_STRING);
  attr(filename, "shape")->mutable_shape();
  constant("save/RestoreV2/tensor_names", strings({"emb", "emb", "linear/bias_weights"}));
  constant("save/RestoreV2/shape_and_slices",
           strings({"5 2 0,3:0,2", "5 2 3,2:0,2", "1 0,1"}));
  tensorflow::NodeDef* restore = node(
      "save/RestoreV2", "RestoreV2",
      {"save/Const", "save/RestoreV2/tensor_names", "save/RestoreV2/shape_and_slices"});
  for (int i = 0; i < 3; ++i) attr(restore, "dtypes")->mutable_list()->add_type(tensorflow::DT_FLOAT);
  std::vector<std::string> assigns;
  for (int i = 0; i < 3; ++i) {
    const std::string name = i == 0 ? "save/Assign" : "save/Assign_" + std::to_string(i);
    tensorflow::NodeDef* a = type(
        node(name, "Assign",
             {vars[i].name, i == 0 ? "save/RestoreV2" : "save/RestoreV2:" + std::to_string(i)}),
        "T", DT_FLOAT);
    attr(a, "validate_shape")->set_b(true);
    attr(a, "use_locking")->set_b(true);
    assigns.push_back("^" + name);
  }
  node("save/restore_shard", "NoOp", assigns);
  node("save/restore_all", "NoOp", {"^save/restore_shard"});

  tensorflow::SavedModel sm;
  sm.set_saved_model_schema_version(1);
  tensorflow::MetaGraphDef* mg = sm.add_meta_graphs();
  mg->mutable_meta_info_def()->add_tags(checkpoint::kSavedModelTagServe);
  *mg->mutable_graph_def() = std::move(graph);
  mg->mutable_saver_def()->set_filename_tensor_name("save/Const:0");
  mg->mutable_saver_def()->set_restore_op_name("save/restore_all");
  mg->mutable_saver_def()->set_version(tensorflow::SaverDef::V2);
  if (main_op_key.empty()) {
    tensorflow::SignatureDef& init = (*mg->mutable_signature_def())["__saved_model_init_op"];
    (*init.mutable_outputs())["__saved_model_init_op"].set_name("group_deps");
  } else {
    (*mg->mutable_collection_def())[main_op_key].mutable_node_list()->add_value("group_deps");
  }
  tensorflow::AssetFileDef* asset = mg->add_asset_file_def();
  asset->mutable_tensor_info()->set_name("asset_path:0");
  asset->mutable_tensor_info()->set_dtype(tensorflow::DT_STRING);
  asset->set_filename("vocab.txt");
  tensorflow::SignatureDef& sig = (*mg->mutable_signature_def())["serving_default"];
  sig.set_method_name(checkpoint::kPredictMethodName);
  (*sig.mutable_inputs())["words"].set_name("words:0");
  (*sig.mutable_inputs())["words"].set_dtype(tensorflow::DT_STRING);
  (*sig.mutable_outputs())["scores"].set_name("scores:0");
  (*sig.mutable_outputs())["scores"].set_dtype(tensorflow::DT_FLOAT);

  checkpoint::SavedModelWriteOptions options;
  std::string vocab;
  for (const std::string& w : kVocab) vocab += w + "\n";
  options.assets["vocab.txt"] = vocab;
  options.write_variables = [&](const std::string& prefix) -> absl::Status {
    ASSIGN_OR_RETURN(auto writer, checkpoint::BundleWriter::Create(Env::Default(), prefix));
    const TensorShape full({kRows, kDim});
    Tensor part0(DT_FLOAT, TensorShape({3, kDim})), part1(DT_FLOAT, TensorShape({2, kDim}));
    for (int64_t i = 0; i < 3 * kDim; ++i) part0.flat<float>()[i] = m.emb.flat<float>()[i];
    for (int64_t i = 0; i < 2 * kDim; ++i) part1.flat<float>()[i] = m.emb.flat<float>()[3 * kDim + i];
    RETURN_IF_ERROR(writer->AddSlice("emb", full, {{0, 3}, {0, kDim}}, part0));
    RETURN_IF_ERROR(writer->AddSlice("emb", full, {{3, 2}, {0, kDim}}, part1));
    RETURN_IF_ERROR(writer->AddSlice("linear/bias_weights", TensorShape({1}), {{0, 1}}, m.bias));
    return writer->Finish();
  };
  return checkpoint::WriteSavedModel(Env::Default(), dir, sm, options);
}

Model RandomModel(uint32_t seed) {
  std::mt19937 rng(seed);
  Model m{Tensor(DT_FLOAT, TensorShape({kRows, kDim})), Tensor(DT_FLOAT, TensorShape({1}))};
  for (float& v : m.emb.flat<float>()) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  m.bias.flat<float>()[0] = std::uniform_real_distribution<float>(-1, 1)(rng);
  return m;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/saved_model_estimator_test_" + name;
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  return dir;
}

TEST(SavedModelEstimatorTest, SlicedRestoreVocabularyAssetAndMainOp) {
  for (const std::string key : {"saved_model_main_op", "legacy_init_op", ""}) {
    const Model m = RandomModel(31 + key.size());
    const std::string dir = FreshDir("ok" + std::to_string(key.size()));
    absl::Status s = WriteEstimatorExport(dir, m, key);
    ASSERT_TRUE(s.ok()) << s;
    auto bundle = LoadSavedModel({}, dir, {"serve"});
    ASSERT_TRUE(bundle.ok()) << key << ": " << bundle.status();
    const std::vector<std::string> words = {"blue", "nope", "red", "cyan", "green", ""};
    Tensor in(DT_STRING, TensorShape({static_cast<int64_t>(words.size())}));
    for (size_t i = 0; i < words.size(); ++i) in.flat<std::string>()[i] = words[i];
    auto out = RunSignature(*bundle, "serving_default", {{"words", in}}, {"scores"}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    const Tensor& scores = out->at("scores");
    ASSERT_EQ(scores.NumElements(), static_cast<int64_t>(words.size()));
    for (size_t i = 0; i < words.size(); ++i) {
      int64_t row = kRows - 1;
      for (size_t v = 0; v < kVocab.size(); ++v) {
        if (kVocab[v] == words[i]) row = static_cast<int64_t>(v);
      }
      float want = m.bias.flat<float>()[0];
      for (int64_t d = 0; d < kDim; ++d) want += m.emb.flat<float>()[row * kDim + d];
      EXPECT_FLOAT_EQ(scores.flat<float>()[i], want) << key << " " << words[i];
    }
  }
}

TEST(SavedModelEstimatorTest, BadExports) {
  const Model m = RandomModel(41);
  // The vocabulary asset missing: NotFound naming it.
  std::string dir = FreshDir("no_vocab");
  ASSERT_TRUE(WriteEstimatorExport(dir, m, "legacy_init_op").ok());
  ASSERT_TRUE(Env::Default()->DeleteFile(dir + "/assets/vocab.txt").ok());
  auto bundle = LoadSavedModel({}, dir, {"serve"});
  EXPECT_TRUE(absl::IsNotFound(bundle.status())) << bundle.status();
  EXPECT_THAT(std::string(bundle.status().message()), HasSubstr("vocab.txt"));
  // A vocabulary with a duplicate word: TensorFlow's FailedPrecondition
  // from the init op.
  dir = FreshDir("dup_vocab");
  ASSERT_TRUE(WriteEstimatorExport(dir, m, "legacy_init_op").ok());
  ASSERT_TRUE(WriteStringToFile(Env::Default(), dir + "/assets/vocab.txt", "red\nblue\nred\n").ok());
  bundle = LoadSavedModel({}, dir, {"serve"});
  EXPECT_TRUE(absl::IsFailedPrecondition(bundle.status())) << bundle.status();
  EXPECT_THAT(std::string(bundle.status().message()), HasSubstr("running init op 'group_deps'"));
  EXPECT_THAT(std::string(bundle.status().message()), HasSubstr("Key red has 0"));
  // Variables saved whole under another shape than the restore op's spec.
  dir = FreshDir("bad_shape");
  ASSERT_TRUE(WriteEstimatorExport(dir, m, "legacy_init_op").ok());
  {
    auto writer = checkpoint::BundleWriter::Create(Env::Default(), dir + "/variables/variables");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Add("emb", Tensor(DT_FLOAT, TensorShape({6, kDim}))).ok());
    ASSERT_TRUE((*writer)->Add("linear/bias_weights", m.bias).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  bundle = LoadSavedModel({}, dir, {"serve"});
  EXPECT_TRUE(absl::IsInvalidArgument(bundle.status())) << bundle.status();
  EXPECT_THAT(std::string(bundle.status().message()), HasSubstr("restoring the variables"));
  EXPECT_THAT(std::string(bundle.status().message()), HasSubstr("tensor 'emb'"));
}

}  // namespace
}  // namespace recflow::serving
