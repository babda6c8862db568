// Longer fuzzing of the JSON request parsers (recflow_slow_tests only): 30 s
// of mutations of valid requests, structure-aware splices and random bytes.
// Every outcome must be OK or an error status with a message.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "recflow/serving/json_example.h"
#include "recflow/serving/json_predict.h"

namespace recflow::serving {
namespace {

std::shared_ptr<const tensorflow::SignatureDef> Sig(
    std::map<std::string, DataType> inputs) {
  auto def = std::make_shared<tensorflow::SignatureDef>();
  for (const auto& [name, dtype] : inputs) {
    tensorflow::TensorInfo info;
    info.set_dtype(static_cast<tensorflow::DataType>(dtype));
    (*def->mutable_inputs())[name] = info;
  }
  return def;
}

TEST(JsonRequestSlowTest, Fuzz30Seconds) {
  const std::vector<std::string> seeds = {
      R"({"instances": [1.0, 2.0, 5.0]})",
      R"({"instances": [[[1, 2]], [[3, 4]]]})",
      R"({"signature_name": "s", "instances": [{"a": [1, 2], "b": "x", "c": {"b64": "aGk="}}]})",
      R"({"inputs": {"a": [[1, 2], [3, 4]], "b": ["p", "q"], "c": [{"b64": "AA=="}]}})",
      R"({"inputs": [NaN, -Infinity, 1e38, -0.0]})",
      R"({"context": {"u": 1, "f": [0.5, 2]}, "examples": [{"i": [1, 2], "s": "x"}, {"b": true}]})",
  };
  const std::vector<std::shared_ptr<const tensorflow::SignatureDef>> sigs = {
      Sig({{"x", DT_FLOAT}}), Sig({{"x", DT_INT8}}), Sig({{"x", DT_STRING}}),
      Sig({{"a", DT_INT64}, {"b", DT_STRING}, {"c", DT_STRING}}),
      Sig({{"a", DT_HALF}, {"b", DT_BOOL}, {"c", DT_UINT16}})};
  JsonLimits limits;
  limits.max_depth = 16;
  limits.max_elements = 4096;
  limits.max_string_bytes = 256;
  std::mt19937_64 rng(20261130);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int64_t iterations = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string doc = seeds[rng() % seeds.size()];
    for (int m = 1 + rng() % 6; m > 0; --m) {
      size_t pos = rng() % (doc.size() + 1);
      switch (rng() % 6) {
        case 0: doc.erase(pos, 1 + rng() % 8); break;
        case 1: doc.insert(pos, std::string(1 + rng() % 40, "[{\"]},:"[rng() % 7])); break;
        case 2: if (pos < doc.size()) doc[pos] = static_cast<char>(rng()); break;
        case 3: {  // splice a piece of another seed
          const std::string& other = seeds[rng() % seeds.size()];
          size_t from = rng() % other.size();
          doc.insert(pos, other.substr(from, rng() % 30));
          break;
        }
        case 4: doc.insert(pos, std::to_string(static_cast<int64_t>(rng()))); break;
        default: doc.insert(pos, "1e" + std::to_string(rng() % 700)); break;
      }
    }
    const auto& sig = sigs[rng() % sigs.size()];
    absl::StatusOr<PredictRequestJson> json = PredictRequestJson::Parse(doc, limits);
    if (json.ok()) {
      std::map<std::string, Tensor> inputs;
      absl::Status s = json->ToInputs(*sig, &inputs);
      if (!s.ok()) {
        ASSERT_FALSE(s.message().empty());
      }
    } else {
      ASSERT_FALSE(json.status().message().empty());
    }
    std::string name;
    ExampleInput input;
    absl::Status s = ParseExamplesRequestJson(doc, limits, &name, &input);
    if (!s.ok()) {
      ASSERT_FALSE(s.message().empty());
    }
    ++iterations;
  }
  EXPECT_GT(iterations, 10000);
}

}  // namespace
}  // namespace recflow::serving
