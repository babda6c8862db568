// Run configs from YAML: every section parsed, shorthands expanded, and bad
// configs rejected with file:line:column and the key named.
#include "recflow/models/config.h"

#include "absl/strings/str_cat.h"
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
    - {name: C3, hash_table: true, dram_budget_mb: 64, cold_dir: /ssd/c3}
optimizer:
  embedding: {type: adagrad, learning_rate: 0.1}
  dense: {type: adam, learning_rate: 0.002, schedule: linear_warmup, warmup_steps: 10}
data:
  format: criteo
  train: /data/train-*.tsv
  eval: /data/test-*.tsv
train: {batch_size: 512, steps: 300, threads: 2}
checkpoint: {save_steps: 100, keep: 3, open_in_place: true}
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
  EXPECT_EQ(c->model.sparse_features[2].dram_budget_mb, 64);
  EXPECT_EQ(c->model.sparse_features[2].cold_dir, "/ssd/c3");
  EXPECT_EQ(c->model.sparse_features[1].dram_budget_mb, 0);
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
  EXPECT_TRUE(c->train.open_in_place);
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
      {"model: {type: lr}\nfeatures:\n  sparse: [{name: C1, vocabulary_size: 9, "
       "dram_budget_mb: 8, cold_dir: /x}]\n",
       "feature 'C1' has dram_budget_mb 8, which needs hash_table: true", "c.yaml"},
      {"model: {type: lr}\nfeatures:\n  sparse: [{name: C1, hash_table: true, "
       "dram_budget_mb: 8}]\n",
       "feature 'C1' has dram_budget_mb 8, which needs hash_table: true, a cold_dir", "c.yaml"},
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

// Issue 22: sizes and thread counts that cannot work are refused up front,
// naming the key and its line.
TEST(RunConfigTest, RefusesImpossibleSizesAndThreadCounts) {
  const BadCase cases[] = {
      // A batch of 1e9 lines crashed the reader (a tensor of 1e9 strings
      // made up front).
      {"model: {type: lr}\nfeatures: {dense: 2}\ntrain: {batch_size: 1000000000}\n",
       "train.batch_size must be <= 16777216, got 1000000000", "c.yaml:3:21"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ndata: {parse_threads: 1000000}\n",
       "data.parse_threads is 1000000; must be between 0 and 4096 threads", "c.yaml:3:23"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ntrain: {threads: 100000}\n",
       "train.threads is 100000; must be between 0 and 4096 threads", "c.yaml:3:18"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ntrain: {threads: 4294967297}\n",
       "train.threads is 4294967297; must be between 0 and 4096", "c.yaml:3:18"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ncheckpoint: {keep: 4294967297}\n",
       "checkpoint.keep must be <= 2147483647", "c.yaml:3:20"},
      // 2^63-1 rows (+1 for the missing id) x 16 was reported as a model of
      // 142885 parameters.
      {"model: {type: deepfm}\nfeatures:\n  sparse_defaults: {vocabulary_size: "
       "9223372036854775807}\n  sparse: 2\n",
       "features.sparse: the table of 'C1' (vocabulary_size 9223372036854775807 + 1 missing-id "
       "row x dim 16) has more parameters than fit in int64",
       "c.yaml:3:38"},
      {"model: {type: lr, embedding_dim: 4}\nfeatures:\n  sparse:\n    - {name: C1, "
       "vocabulary_size: 4611686018427387904, missing: empty}\n",
       "the table of 'C1' (vocabulary_size 4611686018427387904 x dim 4)", "c.yaml:4:35"},
      {"model: {type: lr}\nfeatures:\n  sparse:\n    - {name: C1, vocabulary_size: "
       "288230376151711744}\n    - {name: C2, vocabulary_size: 288230376151711744}\n",
       "the table of 'C2' (vocabulary_size 288230376151711744 + 1 missing-id row x dim 16, "
       "with the tables before it)",
       "c.yaml:5:35"},
      // 100,000 layers took minutes and gigabytes to build.
      {"model: {type: mlp, hidden_units: [1, 1, 1]}\nfeatures: {dense: 2}\n", nullptr, ""},
      {"model: {type: dcn_v2, cross_layers: 100000}\nfeatures: {dense: 2}\n",
       "model.cross_layers must be <= 1024, got 100000", "c.yaml:1:37"},
      {"model: {type: lr}\nfeatures: {sparse: 100000000}\n",
       "features.sparse must be between 0 and 4096, got 100000000", "c.yaml:2:20"},
  };
  for (const BadCase& c : cases) {
    auto r = ParseRunConfig(c.yaml, "c.yaml");
    if (c.expected == nullptr) {
      EXPECT_TRUE(r.ok()) << c.yaml << r.status();
      continue;
    }
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.expected)) << c.yaml;
    EXPECT_THAT(std::string(r.status().message()), testing::StartsWith(c.location)) << c.yaml;
  }
  // The bounds themselves are accepted.
  auto ok = ParseRunConfig(
      "model: {type: lr}\nfeatures: {dense: 2}\ntrain: {batch_size: 16777216, threads: 4096}\n"
      "data: {parse_threads: 0}\n",
      "c.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->train.batch_size, kMaxBatchSize);
  EXPECT_EQ(ok->train.threads, 4096);
  std::string layers = "model: {type: mlp, hidden_units: [";
  for (int i = 0; i < 100000; ++i) absl::StrAppend(&layers, i ? ", " : "", 1);
  layers += "]}\nfeatures: {dense: 2}\n";
  auto many = ParseRunConfig(layers, "c.yaml");
  ASSERT_FALSE(many.ok());
  EXPECT_THAT(std::string(many.status().message()),
              testing::StartsWith("c.yaml:1:34: model.hidden_units has 100000 entries; at most "
                                  "1024"));
}

// Duplicate keys, keys without a value and numbers that are not finite were
// accepted silently (the first duplicate won; `batch_size: ~` meant 4096;
// `learning_rate: .inf` became a NaN loss later).
// Bytes that are not UTF-8 (a path with a Latin-1 byte) are refused where
// they are: yaml-cpp read them as they were and wrote them back altered,
// so a config changed under WithOverrides (found by the run_config_yaml
// fuzzer).
TEST(RunConfigTest, RefusesTextThatIsNotUtf8) {
  auto c = ParseRunConfig("model: {type: lr}\nfeatures: {dense: 2}\ndata: {train: /d\xff/x}\n",
                          "c.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("c.yaml:3:17: not valid UTF-8 (byte 0xff)"));
  EXPECT_TRUE(ParseRunConfig("model: {type: lr}\nfeatures: {dense: [\"pr\xc3\xa9x\"]}\n", "u.yaml")
                  .ok());
  auto o = WithOverrides("model: {type: lr}\nfeatures: {dense: 2}\n", {{"data.train", "\xc3("}});
  EXPECT_THAT(o.status().message(), HasSubstr("the override:1:12: not valid UTF-8 (byte 0xc3)"));
}

TEST(RunConfigTest, RefusesDuplicateNullAndNonFiniteValues) {
  const BadCase cases[] = {
      {"model: {type: lr}\nfeatures: {dense: 2}\ntrain:\n  batch_size: 64\n  steps: 3\n"
       "  batch_size: 128\n",
       "duplicate key 'train.batch_size' (lines 4 and 6)", "c.yaml:6:3"},
      {"model: {type: lr}\nfeatures: {dense: 2}\nmodel: {type: fm}\n",
       "duplicate key 'model' (lines 1 and 3)", "c.yaml:3:1"},
      {"model: {type: lr}\nfeatures:\n  sparse:\n    - {name: C1, vocabulary_size: 5}\n"
       "    - {name: C2, vocabulary_size: 5, name: C3}\n",
       "duplicate key 'features.sparse[1].name' (lines 5 and 5)", "c.yaml:5:38"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ntrain: {batch_size: ~}\n",
       "train.batch_size has no value (null); expected an integer, or leave the key out for the "
       "default (4096)",
       "c.yaml:3:9"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ntrain:\n  batch_size:\n  steps: 3\n",
       "train.batch_size has no value (null)", "c.yaml:4:3"},
      {"model: {type: lr}\nfeatures: {dense: 2}\noptimizer: {dense: {learning_rate: null}}\n",
       "optimizer.dense.learning_rate has no value (null); expected a number, or leave the key "
       "out for the default (the model's)",
       "c.yaml:3:21"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ndata: {train: ~}\n",
       "data.train has no value (null); expected a string", "c.yaml:3:8"},
      {"model: {type: mlp, hidden_units: ~}\nfeatures: {dense: 2}\n",
       "model.hidden_units has no value (null); expected a list of integers like [256, 128] ([] "
       "for none), or leave the key out for the default ([256, 128])",
       "c.yaml:1:20"},
      {"model: {type: mlp, hidden_units: [8, ~]}\nfeatures: {dense: 2}\n",
       "model.hidden_units[1]: expected an integer, got null", "c.yaml:1:38"},
      {"model: {type: lr}\nfeatures: {dense: ~}\n", "features.dense has no value (null)",
       "c.yaml:2:12"},
      {"model: {type: lr}\nfeatures: {sparse: [C1, ~]}\n",
       "features.sparse[1] has no value (null)", "c.yaml:2:25"},
      {"model: {type: lr, initializers: {kernel: ~}}\nfeatures: {dense: 2}\n",
       "model.initializers.kernel has no value (null)", "c.yaml:1:34"},
      {"model: {type: lr}\nfeatures: {dense: 2}\noptimizer: {dense: {learning_rate: .inf}}\n",
       "optimizer.dense.learning_rate must be a finite number (at most 3.40282e+38 in "
       "magnitude: float32's range), got '.inf'",
       "c.yaml:3:36"},
      {"model: {type: lr}\nfeatures: {dense: 2}\noptimizer: {embedding: {learning_rate: "
       ".nan}}\n",
       "optimizer.embedding.learning_rate must be a finite number", "c.yaml:3:40"},
      {"model: {type: lr}\nfeatures: {dense: 2}\noptimizer: {dense: {learning_rate: 1e39}}\n",
       "optimizer.dense.learning_rate must be a finite number", "c.yaml:3:36"},
      {"model: {type: lr}\nfeatures: {dense: 2}\noptimizer: {dense: {learning_rate: -0.1}}\n",
       "optimizer.dense.learning_rate must be > 0, got -0.1", "c.yaml:3:36"},
      {"model: {type: lr}\nfeatures: {dense: 2}\noptimizer: {dense: {beta1: 1}}\n",
       "optimizer.dense.beta1 must be in [0, 1), got 1", "c.yaml:3:28"},
      {"model: {type: lr}\nfeatures: {dense: 2}\noptimizer: {dense: {decay_rate: 0}}\n",
       "optimizer.dense.decay_rate must be > 0, got 0", "c.yaml:3:33"},
      {"model: {type: lr, initializers: {bias: {type: constant, value: -.inf}}}\n"
       "features: {dense: 2}\n",
       "model.initializers.bias.value must be a finite number", "c.yaml:1:"},
      {"model: {type: two_tower, temperature: .inf}\nfeatures: {sparse: 2}\n",
       "model.temperature must be a finite number", "c.yaml:1:39"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ncheckpoint: {save_secs: .inf}\n",
       "checkpoint.save_secs must be a finite number", "c.yaml:3:25"},
      {"model: {type: lr}\nfeatures: {dense: 2}\ntrain: {log_every_secs: -1}\n",
       "train.log_every_secs must be >= 0, got -1", "c.yaml:3:25"},
  };
  for (const BadCase& c : cases) {
    auto r = ParseRunConfig(c.yaml, "c.yaml");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.expected)) << c.yaml;
    EXPECT_THAT(std::string(r.status().message()), testing::StartsWith(c.location)) << c.yaml;
  }
  // A section may be empty: its keys keep their defaults.
  auto empty = ParseRunConfig(
      "model: {type: lr}\nfeatures: {dense: 2}\noptimizer:\ndata: ~\ntrain: {}\neval:\n",
      "c.yaml");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->train.batch_size, 4096);
  // An alias repeats a node: not a duplicate.
  auto alias = ParseRunConfig(
      "model:\n  type: lr\n  initializers: {embedding: &i {type: uniform, limit: 0.1}}\n"
      "features:\n  sparse: [{name: C1, vocabulary_size: 9, initializer: *i},\n"
      "           {name: C2, vocabulary_size: 9, initializer: *i}]\n",
      "c.yaml");
  ASSERT_TRUE(alias.ok()) << alias.status();
  EXPECT_DOUBLE_EQ(alias->model.sparse_features[1].initializer->limit, 0.1);
  // The effective config recflow train writes says `eval: ""`, not null.
  auto effective = WithOverrides("model: {type: lr}\nfeatures: {dense: 2}\n",
                                 {{"data.eval", ""}, {"train.threads", "0"}});
  ASSERT_TRUE(effective.ok()) << effective.status();
  auto reparsed = ParseRunConfig(*effective, "run_config.yaml");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status() << "\n" << *effective;
  EXPECT_EQ(reparsed->data.eval, "");
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
