// Models from outside: GraphDefs, whole SavedModel directories (the graph,
// its variables bundle and an asset, loaded as the model server loads a
// version) and serialized tf.Examples (what clients send to classify and
// regress, and what TFRecord training files hold).
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/checkpoint/testing/half_plus_two.h"
#include "recflow/core/env.h"
#include "recflow/core/mem_env.h"
#include "recflow/data/example_parser.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/scope.h"
#include "recflow/models/config.h"
#include "recflow/models/model.h"
#include "recflow/proto/example.pb.h"
#include "recflow/proto/graph.pb.h"
#include "recflow/proto/saved_model.pb.h"
#include "recflow/serving/saved_model_bundle.h"
#include "tests/fuzz/fuzz_target.h"

namespace recflow::fuzz {
namespace {

// A graph the model zoo builds from a config (inference only: no gradient
// or optimizer nodes, to keep the seed small).
std::string ZooGraph(const std::string& yaml) {
  absl::StatusOr<models::RunConfig> config = models::ParseRunConfig(yaml, "seed.yaml");
  FUZZ_CHECK(config.ok(), config.status().ToString());
  Scope root = Scope::NewRootScope();
  models::ModelInputs inputs = models::Placeholders(root, config->model);
  models::BuildOptions options;
  options.trainable = false;
  absl::StatusOr<models::Model> model = models::BuildModel(root, config->model, inputs, options);
  FUZZ_CHECK(model.ok(), model.status().ToString());
  absl::StatusOr<tensorflow::GraphDef> def = root.ToGraphDef();
  FUZZ_CHECK(def.ok(), def.status().ToString());
  return def->SerializeAsString();
}

std::string HalfPlusTwoFile(const std::string& rel) {
  MemEnv env;
  absl::Status s = checkpoint::testutil::WriteHalfPlusTwo(&env, "/m");
  FUZZ_CHECK(s.ok(), s.ToString());
  std::string bytes;
  s = ReadFileToString(&env, "/m/" + rel, &bytes);
  FUZZ_CHECK(s.ok(), s.ToString());
  return bytes;
}

}  // namespace

// ---------------------------------------------------------------------------
// GraphDef import (framework/graph.h), shape functions included. Input: the
// binary GraphDef. Checks: an imported graph exports a GraphDef that
// imports again with the same number of nodes.
RECFLOW_FUZZ_TARGET(graphdef) {
  tensorflow::GraphDef def;
  if (!def.ParseFromArray(data, static_cast<int>(size))) return 0;
  Graph graph;
  absl::Status s = ConvertGraphDefToGraph({}, def, &graph);
  Note(absl::StrCat("graphdef: ", def.node_size(), " nodes: ", s.ToString()));
  if (!s.ok()) return 0;
  tensorflow::GraphDef exported;
  graph.ToGraphDef(&exported);
  Graph again;
  s = ConvertGraphDefToGraph({}, exported, &again);
  FUZZ_CHECK(s.ok(), "an exported graph does not import: " + s.ToString());
  FUZZ_CHECK(again.num_nodes() == graph.num_nodes(),
             absl::StrCat(graph.num_nodes(), " nodes became ", again.num_nodes()));
  return 0;
}

RECFLOW_FUZZ_SEEDS(graphdef) {
  tensorflow::SavedModel half_plus_two;
  FUZZ_CHECK(half_plus_two.ParseFromString(HalfPlusTwoFile("saved_model.pb")), "half_plus_two");
  return {
      {"half_plus_two", half_plus_two.meta_graphs(0).graph_def().SerializeAsString()},
      {"deepfm", ZooGraph("model: {type: deepfm, embedding_dim: 4, hidden_units: [8]}\n"
                          "features: {dense: 3, sparse: 2, sparse_defaults: "
                          "{vocabulary_size: 100}}\n")},
      {"dcn_v2_hash", ZooGraph("model: {type: dcn_v2, embedding_dim: 4, hidden_units: [8], "
                               "cross_layers: 2}\nfeatures: {dense: 2, sparse: 2, "
                               "sparse_defaults: {hash_table: true}}\n")},
  };
}

// ---------------------------------------------------------------------------
// SavedModel load (serving/saved_model_bundle.h), as a model server loads a
// version: the MetaGraph for {"serve"}, its graph, the variables restore,
// the hash tables, the asset and the init ops. Input: saved_model.pb,
// variables.index and the data shard (each with a 3-byte length), then the
// asset (assets/foo.txt). The files go to a real directory (the restore ops
// read through the default Env), the same one for every input.
RECFLOW_FUZZ_TARGET(saved_model) {
  // Never destroyed: the exit handler that removes it runs after static
  // destructors registered later than itself.
  static const std::string& dir = *[] {
    const char* tmp = std::getenv("TMPDIR");
    auto* pattern = new std::string(absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp",
                                                 "/recflow_fuzz_saved_model_XXXXXX"));
    FUZZ_CHECK(mkdtemp(pattern->data()) != nullptr, "mkdtemp " + *pattern);
    std::atexit([] { DeleteRecursively(Env::Default(), dir).IgnoreError(); });
    return pattern;
  }();
  FuzzInput in(data, size);
  Env* env = Env::Default();
  const std::map<std::string, absl::string_view> files = {
      {"saved_model.pb", in.ConsumeLengthPrefixed(3)},
      {"variables/variables.index", in.ConsumeLengthPrefixed(3)},
      {"variables/variables.data-00000-of-00001", in.ConsumeLengthPrefixed(3)},
      {"assets/foo.txt", in.ConsumeRest()}};
  for (const auto& [rel, bytes] : files) {
    const std::string path = dir + "/" + rel;
    FUZZ_CHECK(env->RecursivelyCreateDir(Dirname(path)).ok(), "mkdir " + path);
    absl::Status s = WriteStringToFile(env, path, bytes);
    FUZZ_CHECK(s.ok(), s.ToString());
  }
  serving::LoadOptions options;
  options.session.inter_op_threads = 1;
  options.session.intra_op_threads = 1;
  absl::StatusOr<serving::SavedModelBundle> bundle =
      serving::LoadSavedModel(options, dir, {"serve"});
  Note("saved_model: " + bundle.status().ToString());
  return 0;
}

RECFLOW_FUZZ_SEEDS(saved_model) {
  return {{"half_plus_two", LengthPrefixed(HalfPlusTwoFile("saved_model.pb"), 3) +
                                LengthPrefixed(HalfPlusTwoFile("variables/variables.index"), 3) +
                                LengthPrefixed(HalfPlusTwoFile(
                                    "variables/variables.data-00000-of-00001"), 3) +
                                HalfPlusTwoFile("assets/foo.txt")}};
}

// ---------------------------------------------------------------------------
// tf.Example parsing (data/example_parser.h), the hand-written wire walker.
// Input: 1 byte for the error mode, then serialized Examples, each with a
// 2-byte length. The spec has every kind of feature. Checks: the output
// has the spec's shapes with row_splits that start at 0, never decrease
// and end at the values' count; and for an Example that both protobuf and
// recflow accept alone, the int64 and float var-len values agree with
// protobuf's reading of it.
RECFLOW_FUZZ_TARGET(tf_example) {
  static const data::ExampleSpec spec = [] {
    data::ExampleSpec s;
    data::DenseFeature label;
    label.key = "label";
    label.shape = TensorShape({1});
    label.default_value = Tensor::FromVector<float>({0.0f});
    label.accept_int64 = true;
    data::DenseFeature x;
    x.key = "x";
    x.shape = TensorShape({3});  // required
    data::DenseFeature name;
    name.key = "name";
    name.dtype = DT_STRING;
    name.default_value = Tensor(DT_STRING, TensorShape({}));
    name.validate_utf8 = true;
    s.dense = {label, x, name};
    data::VarLenFeature ids;
    ids.key = "ids";
    data::VarLenFeature hashed;
    hashed.key = "tags";
    hashed.hash_bytes = true;
    data::VarLenFeature weights;
    weights.key = "w";
    weights.dtype = DT_FLOAT;
    data::VarLenFeature words;
    words.key = "words";
    words.dtype = DT_STRING;
    s.var_len = {ids, hashed, weights, words};
    return s;
  }();
  FuzzInput in(data, size);
  data::ExampleParserOptions options;
  options.policy.mode = in.ConsumeBool() ? data::ErrorMode::kSkip : data::ErrorMode::kFail;
  options.stats = std::make_shared<data::DataStats>();
  absl::StatusOr<std::unique_ptr<data::ExampleParser>> parser =
      data::ExampleParser::Create(spec, options);
  FUZZ_CHECK(parser.ok(), parser.status().ToString());
  std::vector<absl::string_view> examples;
  while (in.remaining() > 0 && examples.size() < 64) examples.push_back(in.ConsumeLengthPrefixed());
  absl::StatusOr<data::ParsedExamples> parsed = (*parser)->Parse(examples);
  Note(absl::StrCat("tf_example: ", examples.size(), " examples -> ",
                    parsed.ok() ? absl::StrCat(parsed->batch_size, " rows")
                                : parsed.status().ToString()));
  if (!parsed.ok()) return 0;
  const int64_t b = parsed->batch_size;
  FUZZ_CHECK(b <= static_cast<int64_t>(examples.size()), "more rows than examples");
  for (size_t i = 0; i < spec.dense.size(); ++i) {
    const Tensor& t = parsed->dense[i];
    FUZZ_CHECK(t.dims() >= 1 && t.dim_size(0) == b &&
                   t.NumElements() == b * spec.dense[i].shape.num_elements(),
               spec.dense[i].key + ": dense output of shape " + t.shape().DebugString());
  }
  for (size_t i = 0; i < spec.var_len.size(); ++i) {
    const auto& v = parsed->var_len[i];
    auto splits = v.row_splits.flat<int64_t>();
    FUZZ_CHECK(static_cast<int64_t>(splits.size()) == b + 1 && splits[0] == 0 &&
                   splits[b] == v.values.NumElements(),
               spec.var_len[i].key + ": row_splits do not frame the values");
    for (int64_t r = 0; r < b; ++r) {
      FUZZ_CHECK(splits[r] <= splits[r + 1], spec.var_len[i].key + ": row_splits decrease");
    }
  }
  // Differential: each example alone, against protobuf.
  for (absl::string_view serialized : examples) {
    tensorflow::Example proto;
    if (!proto.ParseFromArray(serialized.data(), static_cast<int>(serialized.size()))) continue;
    absl::StatusOr<data::ParsedExamples> one = (*parser)->Parse({serialized});
    if (!one.ok() || one->batch_size != 1) continue;
    const auto& features = proto.features().feature();
    auto ids = features.find("ids");
    const Tensor& got_ids = one->var_len[0].values;
    if (ids != features.end() && ids->second.has_int64_list()) {
      const auto& want = ids->second.int64_list().value();
      FUZZ_CHECK(got_ids.NumElements() == want.size(), "ids: another count than protobuf's");
      for (int k = 0; k < want.size(); ++k) {
        FUZZ_CHECK(got_ids.flat<int64_t>()[k] == want[k], "ids: another value than protobuf's");
      }
    }
    auto w = features.find("w");
    const Tensor& got_w = one->var_len[2].values;
    if (w != features.end() && w->second.has_float_list()) {
      const auto& want = w->second.float_list().value();
      FUZZ_CHECK(got_w.NumElements() == want.size(), "w: another count than protobuf's");
      for (int k = 0; k < want.size(); ++k) {
        const float a = got_w.flat<float>()[k], e = want[k];
        FUZZ_CHECK(std::memcmp(&a, &e, sizeof a) == 0, "w: another value than protobuf's");
      }
    }
  }
  return 0;
}

RECFLOW_FUZZ_SEEDS(tf_example) {
  auto example = [](bool complete) {
    tensorflow::Example e;
    auto& f = *e.mutable_features()->mutable_feature();
    f["label"].mutable_int64_list()->add_value(1);
    for (float v : {0.5f, -1.0f, 3.0f}) f["x"].mutable_float_list()->add_value(v);
    if (complete) {
      f["name"].mutable_bytes_list()->add_value("user 7");
      for (int64_t v : {int64_t{3}, int64_t{1} << 40, int64_t{-5}}) f["ids"].mutable_int64_list()->add_value(v);
      for (const char* t : {"sports", "news"}) f["tags"].mutable_bytes_list()->add_value(t);
      for (float v : {0.25f, 2.0f}) f["w"].mutable_float_list()->add_value(v);
      f["words"].mutable_bytes_list()->add_value("hello");
    }
    return e.SerializeAsString();
  };
  tensorflow::Example missing_x;
  (*missing_x.mutable_features()->mutable_feature())["label"].mutable_float_list()->add_value(0);
  return {
      {"two_examples", "\x01" + LengthPrefixed(example(true)) + LengthPrefixed(example(false))},
      {"strict_with_bad", std::string(1, '\0') + LengthPrefixed(example(true)) +
                              LengthPrefixed(missing_x.SerializeAsString()) +
                              LengthPrefixed("\x0a\x05garbage")},
  };
}

}  // namespace recflow::fuzz
