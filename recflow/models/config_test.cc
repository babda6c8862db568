// Run configs from YAML: every section parsed, shorthands expanded, and bad
// configs rejected with file:line:column and the key named.
#include "recflow/models/config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"

namespace recflow::models {
namespace {

using testing::HasSubstr;

constexpr char kFull[] = R"(
model:
  type: deepfm
  embedding_dim: 8
  hidden_units: [64, 32]
  activation: tanh
  seed: 7
features:
  dense: 13
  sparse_defaults: {vocabulary_size: 1000, combiner: mean}
  sparse:
    - C1
    - {name: C2, vocabulary_size: 50, dim: 4}
    - {name: C3, hash_table: true}
optimizer:
  embedding: {type: adagrad, learning_rate: 0.1}
  dense: {type: adam, learning_rate: 0.002, schedule: linear_warmup, warmup_steps: 10}
data:
  format: criteo
  train: /data/train-*.tsv
  eval: /data/test-*.tsv
train: {batch_size: 512, steps: 300, threads: 2}
checkpoint: {save_steps: 100, keep: 3}
eval: {every_steps: 50, batches: 4}
)";

TEST(RunConfigTest, ParsesEverySection) {
  auto c = ParseRunConfig(kFull, "full.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.type, "deepfm");
  EXPECT_EQ(c->model.embedding_dim, 8);
  EXPECT_EQ(c->model.hidden_units, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(c->model.activation, "tanh");
  EXPECT_EQ(c->model.seed, 7u);
  ASSERT_EQ(c->model.dense_features.size(), 13u);
  EXPECT_EQ(c->model.dense_features[12], "I13");
  ASSERT_EQ(c->model.sparse_features.size(), 3u);
  EXPECT_EQ(c->model.sparse_features[0].name, "C1");
  EXPECT_EQ(c->model.sparse_features[0].vocabulary_size, 1000);
  EXPECT_EQ(c->model.sparse_features[0].combiner, "mean");
  EXPECT_EQ(c->model.sparse_features[1].vocabulary_size, 50);
  EXPECT_EQ(c->model.sparse_features[1].dim, 4);
  EXPECT_TRUE(c->model.sparse_features[2].hash_table);
  EXPECT_EQ(c->model.embedding_optimizer.type, "adagrad");
  EXPECT_DOUBLE_EQ(c->model.embedding_optimizer.learning_rate, 0.1);
  EXPECT_EQ(c->model.dense_optimizer.schedule, "linear_warmup");
  EXPECT_EQ(c->model.dense_optimizer.warmup_steps, 10);
  EXPECT_EQ(c->data.train, "/data/train-*.tsv");
  EXPECT_EQ(c->train.batch_size, 512);
  EXPECT_EQ(c->train.steps, 300);
  EXPECT_EQ(c->train.threads, 2);
  EXPECT_EQ(c->train.save_steps, 100);
  EXPECT_EQ(c->train.keep, 3);
  EXPECT_EQ(c->train.eval_every_steps, 50);
  EXPECT_EQ(c->train.eval_batches, 4);
}

TEST(RunConfigTest, CountsExpandToCriteoNames) {
  auto c = ParseRunConfig("model: {type: lr}\nfeatures: {dense: 2, sparse: 3}\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.dense_features, (std::vector<std::string>{"I1", "I2"}));
  ASSERT_EQ(c->model.sparse_features.size(), 3u);
  EXPECT_EQ(c->model.sparse_features[2].name, "C3");
  EXPECT_EQ(c->model.sparse_features[2].vocabulary_size, 100000);  // the default
}

TEST(RunConfigTest, ParsesInitializersMissingAndOptimizerParity) {
  auto c = ParseRunConfig(R"(
model:
  type: deepfm
  fm_dense: projection
  initializers:
    embedding: {type: uniform, limit: 1, scale: inverse_sqrt_rows}
    linear: zeros
    kernel: he_normal
    bias: {type: constant, value: 0.5}
features:
  dense: 2
  sparse_defaults: {vocabulary_size: 64, missing: empty}
  sparse:
    - C1
    - {name: C2, missing: id, initializer: {type: truncated_normal, stddev: 1, scale: inverse_sqrt_dim}}
optimizer:
  embedding: {learning_rate: 0.03, initial_accumulator_value: 0, epsilon: 1e-10}
  dense: {type: adam, lazy: false}
)",
                          "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelConfig& m = c->model;
  EXPECT_EQ(m.fm_dense, "projection");
  EXPECT_EQ(m.initializers.embedding.type, "uniform");
  EXPECT_DOUBLE_EQ(m.initializers.embedding.limit, 1);
  EXPECT_EQ(m.initializers.embedding.scale, "inverse_sqrt_rows");
  EXPECT_EQ(m.initializers.linear.type, "zeros");
  EXPECT_EQ(m.initializers.kernel.type, "he_normal");
  EXPECT_EQ(m.initializers.bias.type, "constant");
  EXPECT_DOUBLE_EQ(m.initializers.bias.value, 0.5);
  ASSERT_EQ(m.sparse_features.size(), 2u);
  EXPECT_EQ(m.sparse_features[0].missing, "empty");
  EXPECT_FALSE(m.sparse_features[0].initializer.has_value());
  EXPECT_EQ(m.sparse_features[1].missing, "id");
  ASSERT_TRUE(m.sparse_features[1].initializer.has_value());
  EXPECT_EQ(m.sparse_features[1].initializer->type, "truncated_normal");
  EXPECT_EQ(m.sparse_features[1].initializer->scale, "inverse_sqrt_dim");
  // A partial optimizer map keeps the zoo's type.
  EXPECT_EQ(m.embedding_optimizer.type, ModelConfig().embedding_optimizer.type);
  EXPECT_DOUBLE_EQ(m.embedding_optimizer.learning_rate, 0.03);
  EXPECT_DOUBLE_EQ(m.embedding_optimizer.initial_accumulator_value, 0);
  EXPECT_DOUBLE_EQ(m.embedding_optimizer.epsilon, 1e-10);
  EXPECT_FALSE(m.dense_optimizer.lazy);
}

struct BadCase {
  const char* yaml;
  const char* expected;  // substrings of the message
  const char* location;
};

TEST(RunConfigTest, BadConfigsNameFileLineAndKey) {
  const BadCase cases[] = {
      {"model: {type: lr}\nfeatures: {dense: 2}\ntrain: {batch_sise: 5}\n",
       "unknown key 'train.batch_sise' (known keys of train: batch_size", "c.yaml:3:9"},
      {"model:\n  type: lr\n  hiden_units: [3]\nfeatures: {dense: 2}\n",
       "unknown key 'model.hiden_units'", "c.yaml:3:3"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ntrain: {batch_size: abc}\n",
       "train.batch_size: expected an integer, got 'abc'", "c.yaml:3:21"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ntrain: {batch_size: 0}\n",
       "train.batch_size must be >= 1, got 0", "c.yaml:3"},
      {"model: {type: nope}\nfeatures: {dense: 2}\n", "model.type: unknown value 'nope'",
       "c.yaml:1:15"},
      {"model: {embedding_dim: 4}\nfeatures: {dense: 2}\n", "model.type is required", "c.yaml"},
      {"features: {dense: 2}\n", "model is required", "c.yaml"},
      {"model: {type: lr}\n", "features is required", "c.yaml"},
      {"model: {type: lr}\nfeatures: {dense: 0}\n", "no dense or sparse features", "c.yaml"},
      {"model: {type: mlp, hidden_units: [8, 0]}\nfeatures: {dense: 2}\n",
       "model.hidden_units[1] must be >= 1, got 0", "c.yaml:1"},
      {"model: {type: lr, embedding_dim: -1}\nfeatures: {dense: 2}\n",
       "model.embedding_dim must be >= 1", "c.yaml:1"},
      {"model: {type: lr}\nfeatures:\n  sparse: [{name: C1, vocabulary_size: 0}]\n",
       "feature 'C1' needs vocabulary_size > 0 or hash_table: true", "c.yaml"},
      {"model: {type: lr}\nfeatures: {sparse: [C1, C1]}\n", "'C1' is listed twice", "c.yaml:2"},
      {"model: {type: lr}\nfeatures: {dense: 2}\noptimizer: {dense: {type: rmsprop}}\n",
       "optimizer.dense.type: unknown value 'rmsprop'", "c.yaml:3"},
      {"model: {type: lr}\nfeatures: {dense: 2}\noptimizer: {dense: {learning_rate: 0}}\n",
       "learning_rate must be > 0", "c.yaml:3"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ndata: {format: parquet}\n",
       "data.format: unknown value 'parquet'", "c.yaml:3"},
      {"model: [1, 2]\nfeatures: {dense: 2}\n", "model must be a map", "c.yaml:1"},
      {"model: {type: lr, initializers: {embeding: zeros}}\nfeatures: {dense: 2}\n",
       "unknown key 'model.initializers.embeding'", "c.yaml:1"},
      {"model: {type: lr, initializers: {kernel: glorot}}\nfeatures: {dense: 2}\n",
       "model.initializers.kernel: unknown initializer 'glorot' (one of: zeros", "c.yaml:1"},
      {"model: {type: lr, initializers: {bias: {limit: 1}}}\nfeatures: {dense: 2}\n",
       "model.initializers.bias.type is required", "c.yaml:1"},
      {"model: {type: lr, initializers: {embedding: {type: uniform, limit: -1}}}\n"
       "features: {dense: 2}\n",
       "model.initializers.embedding.limit must be >= 0", "c.yaml:1"},
      {"model: {type: lr}\nfeatures:\n  sparse: [{name: C1, vocabulary_size: 9, missing: "
       "zero}]\n",
       "features.sparse[0].missing: unknown value 'zero' (one of: empty, id)", "c.yaml:3"},
      {"model: {type: lr, fm_dense: both}\nfeatures: {dense: 2}\n",
       "model.fm_dense: unknown value 'both'", "c.yaml:1"},
      {"- just\n- a list\n", "a config is a YAML map", "c.yaml"},
      {"model: {type: lr\nfeatures: {dense: 2}\n", "not valid YAML", "c.yaml:"},
      {"model: {type: lr}\nfeatures: {dense: 2}\nextra: 1\n", "unknown key 'extra'", "c.yaml:3:1"},
      // din and two_tower keys.
      {"model: {type: din}\nfeatures:\n  sparse: [C1, {name: H1, sequence_of: C9}]\n",
       "features.sparse[1].sequence_of: 'C9' is not another sparse feature", "c.yaml:3:40"},
      {"model: {type: din}\nfeatures:\n  sparse: [C1, {name: H1, sequence_of: H1}]\n",
       "features.sparse[1].sequence_of: 'H1' is not another", "c.yaml:3:40"},
      {"model: {type: din, attention_units: [0]}\nfeatures: {sparse: 2}\n",
       "model.attention_units[0] must be >= 1, got 0", "c.yaml:1:38"},
      {"model: {type: two_tower, user_features: C1}\nfeatures: {sparse: 2}\n",
       "model.user_features: expected a list of names", "c.yaml:1:41"},
      {"model:\n  type: two_tower\n  user_features: [C1]\n  item_features: [C2, C7]\n"
       "features: {sparse: 2}\n",
       "model.item_features[1]: 'C7' is not a dense or sparse feature", "c.yaml:4:23"},
      {"model: {type: two_tower, tower_dim: 0}\nfeatures: {sparse: 2}\n",
       "model.tower_dim must be >= 1, got 0", "c.yaml:1:37"},
      {"model: {type: two_tower, temperature: 0}\nfeatures: {sparse: 2}\n",
       "model.temperature must be > 0", "c.yaml:1:39"},
  };
  for (const BadCase& c : cases) {
    auto r = ParseRunConfig(c.yaml, "c.yaml");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.expected)) << c.yaml;
    EXPECT_THAT(std::string(r.status().message()), testing::StartsWith(c.location)) << c.yaml;
  }
}

TEST(RunConfigTest, ParsesDinAndTwoTowerKeys) {
  auto din = ParseRunConfig(R"(
model: {type: din, attention_units: [32, 8]}
features:
  sparse: [C1, C2, {name: H1, sequence_of: C1, combiner: mean}]
)",
                            "din.yaml");
  ASSERT_TRUE(din.ok()) << din.status();
  EXPECT_EQ(din->model.attention_units, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(din->model.sparse_features[2].sequence_of, "C1");
  EXPECT_EQ(din->model.sparse_features[0].sequence_of, "");
  auto tt = ParseRunConfig(R"(
model:
  type: two_tower
  user_features: [I1, C1]
  item_features: [C2]
  tower_dim: 8
  temperature: 0.2
features: {dense: 1, sparse: 2}
)",
                           "tt.yaml");
  ASSERT_TRUE(tt.ok()) << tt.status();
  EXPECT_EQ(tt->model.user_features, (std::vector<std::string>{"I1", "C1"}));
  EXPECT_EQ(tt->model.item_features, (std::vector<std::string>{"C2"}));
  EXPECT_EQ(tt->model.tower_dim, 8);
  EXPECT_DOUBLE_EQ(tt->model.temperature, 0.2);
}

TEST(RunConfigTest, OverridesAreAppliedAndReparse) {
  auto yaml = WithOverrides(kFull, {{"data.train", "/x/train.tsv"},
                                    {"train.steps", "7"},
                                    {"eval.every_steps", "3"}});
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  auto c = ParseRunConfig(*yaml, "effective.yaml");
  ASSERT_TRUE(c.ok()) << c.status() << "\n" << *yaml;
  EXPECT_EQ(c->data.train, "/x/train.tsv");
  EXPECT_EQ(c->data.eval, "/data/test-*.tsv");
  EXPECT_EQ(c->train.steps, 7);
  EXPECT_EQ(c->train.eval_every_steps, 3);
  EXPECT_EQ(c->model.sparse_features.size(), 3u);
  auto none = WithOverrides("model: {type: lr}\nfeatures: {dense: 1}\n", {{"data.eval", "/e"}});
  ASSERT_TRUE(none.ok());
  auto c2 = ParseRunConfig(*none, "e.yaml");
  ASSERT_TRUE(c2.ok()) << c2.status();
  EXPECT_EQ(c2->data.eval, "/e");
}

TEST(RunConfigTest, LoadNamesMissingAndOversizedFiles) {
  MemEnv env;
  auto missing = LoadRunConfig(&env, "/nope.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("/nope.yaml"));
  ASSERT_TRUE(WriteStringToFile(&env, "/big.yaml", std::string(2 << 20, '#')).ok());
  auto big = LoadRunConfig(&env, "/big.yaml");
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("too large"));
  ASSERT_TRUE(WriteStringToFile(&env, "/ok.yaml", "model: {type: lr}\nfeatures: {dense: 1}\n").ok());
  auto ok = LoadRunConfig(&env, "/ok.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->path, "/ok.yaml");
}

}  // namespace
}  // namespace recflow::models
