#include "recflow/serving/json_predict.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "recflow/core/allocator.h"
#include "recflow/core/tensor.h"
#include "recflow/serving/json_example.h"
#include "recflow/serving/json_response.h"

namespace recflow::serving {
namespace {

tensorflow::TensorInfo Info(DataType dtype) {
  tensorflow::TensorInfo info;
  info.set_dtype(static_cast<tensorflow::DataType>(dtype));
  return info;
}

tensorflow::SignatureDef Sig(std::map<std::string, DataType> inputs) {
  tensorflow::SignatureDef def;
  for (const auto& [name, dtype] : inputs) (*def.mutable_inputs())[name] = Info(dtype);
  (*def.mutable_outputs())["y"] = Info(DT_FLOAT);
  def.set_method_name("tensorflow/serving/predict");
  return def;
}

struct Parsed {
  absl::Status status;
  PredictRequest request;
  JsonPredictFormat format = JsonPredictFormat::kRow;
};

// Both steps: the body, then its tensors typed by `def`.
Parsed Parse(const std::string& json, const tensorflow::SignatureDef& def,
             const JsonLimits& limits = {}) {
  Parsed p;
  absl::StatusOr<PredictRequestJson> parsed = PredictRequestJson::Parse(json, limits);
  if (!parsed.ok()) {
    p.status = parsed.status();
    return p;
  }
  p.format = parsed->format();
  p.request.model_spec.signature_name = parsed->signature_name();
  p.status = parsed->ToInputs(def, &p.request.inputs);
  return p;
}

void ExpectError(const Parsed& p, const std::string& needle,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  EXPECT_EQ(p.status.code(), code) << p.status;
  EXPECT_NE(p.status.message().find(needle), std::string::npos)
      << "'" << needle << "' not in: " << p.status.message();
}

TEST(JsonPredictTest, RowFormatSingleInput) {
  Parsed p = Parse(R"({"instances": [1.0, 2.0, 5.0]})", Sig({{"x", DT_FLOAT}}));
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.format, JsonPredictFormat::kRow);
  EXPECT_TRUE(TensorsEqual(p.request.inputs.at("x"),
                           Tensor::FromVector<float>({1, 2, 5}, {3})));
  p = Parse(R"({"instances": [[[1, 2]], [[3, 4]]]})", Sig({{"x", DT_INT64}}));
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_TRUE(TensorsEqual(p.request.inputs.at("x"),
                           Tensor::FromVector<int64_t>({1, 2, 3, 4}, {2, 1, 2})));
}

TEST(JsonPredictTest, RowFormatNamedInputsWithStringsAndB64) {
  Parsed p = Parse(R"({"signature_name": "s", "instances": [
      {"ids": [1, 2], "tag": "foo", "img_bytes": {"b64": "aGVsbG8="}, "on": true},
      {"ids": [3, 4], "tag": "bar", "img_bytes": {"b64": "d29ybGQ="}, "on": false}]})",
                   Sig({{"ids", DT_INT32},
                        {"tag", DT_STRING},
                        {"img_bytes", DT_STRING},
                        {"on", DT_BOOL}}));
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.request.model_spec.signature_name, "s");
  EXPECT_TRUE(TensorsEqual(p.request.inputs.at("ids"),
                           Tensor::FromVector<int32_t>({1, 2, 3, 4}, {2, 2})));
  EXPECT_TRUE(TensorsEqual(p.request.inputs.at("tag"),
                           Tensor::FromVector<std::string>({"foo", "bar"}, {2})));
  EXPECT_TRUE(TensorsEqual(p.request.inputs.at("img_bytes"),
                           Tensor::FromVector<std::string>({"hello", "world"}, {2})));
  EXPECT_TRUE(TensorsEqual(p.request.inputs.at("on"),
                           Tensor::FromVector<bool>({true, false}, {2})));
}

// Issue 22: "refused when it does not fit without loss" is TF Serving's
// rule, stated exactly: a value beyond the dtype's range, or an integer
// beyond its exact integers, is refused; anything else rounds to nearest
// (1e-46 is 0 as a float, as in TF Serving). Half and bfloat16 check their
// own range and precision (70000 as half used to become infinity).
TEST(JsonPredictTest, FloatingValuesRoundOrAreRefusedOutsideTheRange) {
  Parsed p = Parse(R"({"instances": [1e-46, -1e-46, 1e-40, 0.1, 3.4e38]})",
                   Sig({{"x", DT_FLOAT}}));
  ASSERT_TRUE(p.status.ok()) << p.status;
  const float* x = p.request.inputs.at("x").data<float>();
  EXPECT_EQ(x[0], 0.f);
  EXPECT_TRUE(std::signbit(x[1]) && x[1] == 0.f);
  EXPECT_GT(x[2], 0.f);  // a subnormal float
  EXPECT_EQ(x[3], 0.1f);
  EXPECT_EQ(x[4], 3.4e38f);
  ExpectError(Parse(R"({"instances": [3.5e38]})", Sig({{"x", DT_FLOAT}})),
              "to float without loss");

  auto half_sig = Sig({{"h", DT_HALF}});
  p = Parse(R"({"instances": [65504.0, -2047, 0.5, 1e-10]})", half_sig);
  ASSERT_TRUE(p.status.ok()) << p.status;
  const half* h = p.request.inputs.at("h").data<half>();
  EXPECT_EQ(static_cast<float>(h[0]), 65504.f);
  EXPECT_EQ(static_cast<float>(h[1]), -2047.f);
  EXPECT_EQ(static_cast<float>(h[2]), 0.5f);
  EXPECT_EQ(static_cast<float>(h[3]), 0.f);
  ExpectError(Parse(R"({"instances": [70000.0]})", half_sig),
              "to half without loss");
  ExpectError(Parse(R"({"instances": [2049]})", half_sig),
              "to half without loss");
  auto bf16_sig = Sig({{"b", DT_BFLOAT16}});
  ExpectError(Parse(R"({"instances": [3.4e38]})", bf16_sig),
              "to bfloat16 without loss");
  ExpectError(Parse(R"({"instances": [256]})", bf16_sig),
              "to bfloat16 without loss");
  p = Parse(R"({"instances": [255, 1.5]})", bf16_sig);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(static_cast<float>(p.request.inputs.at("b").data<bfloat16>()[0]),
            255.f);
}

// Note [JSON numbers]: rapidjson 1.1.0's full-precision conversion turned
// zeros with large negative exponents into garbage (0e-324 -> -1.3e-141);
// numbers are converted by absl now, correctly rounded, typed as before.
TEST(JsonPredictTest, NumbersConvertExactly) {
  Parsed p = Parse(
      R"({"instances": [0e-324, 0.0000000000000000000000000001e-300, 1.7976931348623157e308,)"
      R"( 2.2250738585072014e-308, 5e-324, 0.1, -0, 123456789012345678901234, NaN, -Infinity]})",
      Sig({{"x", DT_DOUBLE}}));
  ASSERT_TRUE(p.status.ok()) << p.status;
  const double* x = p.request.inputs.at("x").data<double>();
  EXPECT_EQ(x[0], 0.0);
  EXPECT_EQ(x[1], 0.0);
  EXPECT_EQ(x[2], std::numeric_limits<double>::max());
  EXPECT_EQ(x[3], std::numeric_limits<double>::min());
  EXPECT_EQ(x[4], std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(x[5], 0.1);
  EXPECT_EQ(x[6], 0.0);
  EXPECT_EQ(x[7], 1.2345678901234568e23);
  EXPECT_TRUE(std::isnan(x[8]));
  EXPECT_EQ(x[9], -std::numeric_limits<double>::infinity());
  // Integers keep their integer types (an int64 input takes them exactly).
  p = Parse(R"({"instances": [-9223372036854775808, 9223372036854775807, -2147483649, 0]})",
            Sig({{"i", DT_INT64}}));
  ASSERT_TRUE(p.status.ok()) << p.status;
  const int64_t* i = p.request.inputs.at("i").data<int64_t>();
  EXPECT_EQ(i[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i[1], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i[2], -2147483649LL);
  ExpectError(Parse(R"({"instances": [1.5]})", Sig({{"i", DT_INT64}})), "");
  ExpectError(Parse(R"({"instances": [1e400]})", Sig({{"x", DT_DOUBLE}})), "JSON Parse error");
}

TEST(JsonPredictTest, RowFormatErrorsNameInputAndInstance) {
  auto sig = Sig({{"x", DT_FLOAT}});
  ExpectError(Parse(R"({"instances": [[1, 2], [3]]})", sig), "input 'x', instance 1");
  ExpectError(Parse(R"({"instances": [[1, 2], [3, [4]]]})", sig), "ragged");
  ExpectError(Parse(R"({"instances": [[1, 2], 3]})", sig), "instance 1");
  ExpectError(Parse(R"({"instances": ["a"]})", sig), "is not of expected type float");
  ExpectError(Parse(R"({"instances": [16777217]})", sig), "without loss");
  ExpectError(Parse(R"({"instances": [1e300]})", sig), "without loss");
  ExpectError(Parse(R"({"instances": []})", sig), "empty");
  ExpectError(Parse(R"({"instances": {"x": 1}})", sig), "must be a list");
  ExpectError(Parse(R"({"instances": [null]})", sig), "null");
  ExpectError(Parse(R"({"instances": [1.5]})", Sig({{"i", DT_INT32}})),
              "not of expected type int32");
  ExpectError(Parse(R"({"instances": [3000000000]})", Sig({{"i", DT_INT32}})),
              "out of range for int32");
  ExpectError(Parse(R"({"instances": [256]})", Sig({{"i", DT_UINT8}})),
              "out of range for uint8");
  ExpectError(Parse(R"({"instances": [-1]})", Sig({{"i", DT_UINT64}})),
              "out of range for uint64");
  ExpectError(Parse(R"({"instances": [{"b64": "!!"}]})", Sig({{"s", DT_STRING}})),
              "not valid base64");
  auto two = Sig({{"a", DT_FLOAT}, {"b", DT_FLOAT}});
  ExpectError(Parse(R"({"instances": [1, 2]})", two), "plain list");
  ExpectError(Parse(R"({"instances": [{"a": 1, "b": 2, "c": 3}]})", two),
              "unknown input 'c'");
  ExpectError(Parse(R"({"instances": [{"a": 1, "b": 2}, {"a": 1}]})", two),
              "instance 1 lacks input 'b'");
  ExpectError(Parse(R"({"instances": [{"a": 1, "b": 2}, [1]]})", two),
              "instance 1 is array");
}

TEST(JsonPredictTest, ColumnarFormat) {
  auto sig = Sig({{"a", DT_FLOAT}, {"b", DT_STRING}});
  Parsed p = Parse(R"({"inputs": {"a": [[1, 2], [3, 4], [5, 6]], "b": "x"}})", sig);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.format, JsonPredictFormat::kColumnar);
  EXPECT_TRUE(TensorsEqual(p.request.inputs.at("a"),
                           Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2})));
  EXPECT_TRUE(TensorsEqual(p.request.inputs.at("b"), Tensor::Scalar<std::string>("x")));
  p = Parse(R"({"inputs": 5})", Sig({{"x", DT_DOUBLE}}));
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_TRUE(TensorsEqual(p.request.inputs.at("x"), Tensor::Scalar<double>(5)));
  p = Parse(R"({"inputs": [NaN, Infinity, -Infinity]})", Sig({{"x", DT_FLOAT}}));
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_TRUE(std::isnan(p.request.inputs.at("x").data<float>()[0]));
  EXPECT_TRUE(std::isinf(p.request.inputs.at("x").data<float>()[2]));
  ExpectError(Parse(R"({"inputs": {"a": 1, "b": "x", "zz": 2}})", sig),
              "unknown input 'zz'; the signature's inputs are: a, b");
  ExpectError(Parse(R"({"inputs": {"a": 1}})", sig), "lacks input 'b'");
  ExpectError(Parse(R"({"inputs": [1, 2]})", sig), "plain value");
  ExpectError(Parse(R"({"inputs": {"a": [[1], [2, 3]], "b": "x"}})", sig),
              "input 'a'");
}

TEST(JsonPredictTest, RequestLevelErrors) {
  auto sig = Sig({{"x", DT_FLOAT}});
  ExpectError(Parse(R"({"instances": [1], "inputs": [1]})", sig), "both");
  ExpectError(Parse(R"({"foo": 1})", sig),
              "Missing 'inputs' or 'instances' key");
  ExpectError(Parse(R"({"signature_name": 3, "inputs": [1]})", sig),
              "'signature_name' must be a string");
  ExpectError(Parse(R"({"instances": [1, 2)", sig),
              "JSON Parse error: Missing a comma or ']' after an array element.");
  ExpectError(Parse(R"({"instances": [1, 2)", sig), " at offset: 19");
  ExpectError(Parse(R"({"instances": [1, 2]} trailing)", sig), "must not be followed");
  ExpectError(Parse("", sig), "JSON Parse error: The document is empty");
  ExpectError(Parse("[1, 2]", sig), "must be a JSON object");
  ExpectError(Parse("{\"inputs\": \"\xff\xfe\"}", sig), "JSON Parse error");
  // The signature name is the request's, as written.
  Parsed p = Parse(R"({"signature_name": "missing", "inputs": [1]})", sig);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.request.model_spec.signature_name, "missing");
  p = Parse(R"({"inputs": [1]})", sig);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.request.model_spec.signature_name, "");
  tensorflow::SignatureDef no_inputs;
  // TF Serving's REST API refuses a signature without inputs, whatever the
  // body holds (json_tensor.cc), before it looks for "instances"/"inputs".
  ExpectError(Parse(R"({"inputs": [1]})", no_inputs),
              "Failed to get input map for signature: DEFAULT");
  ExpectError(Parse(R"({"signature_name": "s"})", no_inputs),
              "Failed to get input map for signature: s");
}

// One parsed body, typed by the signature of whichever version runs it.
TEST(JsonPredictTest, OneBodyTypedByEachSignature) {
  auto json = PredictRequestJson::Parse(R"({"instances": [1, 2]})", {});
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->format(), JsonPredictFormat::kRow);
  std::map<std::string, Tensor> inputs;
  ASSERT_TRUE(json->ToInputs(Sig({{"x", DT_FLOAT}}), &inputs).ok());
  EXPECT_TRUE(TensorsEqual(inputs.at("x"), Tensor::FromVector<float>({1, 2}, {2})));
  ASSERT_TRUE(json->ToInputs(Sig({{"ids", DT_INT64}}), &inputs).ok());
  EXPECT_EQ(inputs.count("x"), 0u);
  EXPECT_TRUE(TensorsEqual(inputs.at("ids"), Tensor::FromVector<int64_t>({1, 2}, {2})));
  EXPECT_FALSE(json->ToInputs(Sig({{"s", DT_STRING}}), &inputs).ok());
}

TEST(JsonPredictTest, DeepNestingIsRefusedAtTheLimit) {
  auto sig = Sig({{"x", DT_FLOAT}});
  std::string deep = "{\"inputs\": " + std::string(1000000, '[');
  ExpectError(Parse(deep, sig), "deeper than the limit of 64");
  std::string objs;
  for (int i = 0; i < 100000; ++i) objs += "{\"a\":";
  ExpectError(Parse(objs, sig), "deeper than the limit of 64");
  // 63 list levels inside the top-level object is fine.
  std::string ok = "{\"inputs\": " + std::string(63, '[') + "1" + std::string(63, ']') + "}";
  Parsed p = Parse(ok, sig);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.request.inputs.at("x").dims(), 63);
}

TEST(JsonPredictTest, ElementAndStringLimits) {
  JsonLimits limits;
  limits.max_elements = 10;
  limits.max_string_bytes = 8;
  ExpectError(Parse(R"({"inputs": [1,2,3,4,5,6,7,8,9,10,11]})", Sig({{"x", DT_FLOAT}}),
                    limits),
              "over the limit of 10", absl::StatusCode::kResourceExhausted);
  ExpectError(Parse(R"({"instances": [[1,2,3,4],[1,2,3,4],[1,2,3,4]]})",
                    Sig({{"x", DT_FLOAT}}), limits),
              "over the limit of 10", absl::StatusCode::kResourceExhausted);
  ExpectError(Parse(R"({"inputs": ["a very long string indeed"]})",
                    Sig({{"x", DT_STRING}}), limits),
              "exceeds the limit of 8");
  ExpectError(Parse(R"({"inputs": [{"b64": "MTIzNDU2Nzg5"}]})",
                    Sig({{"x", DT_STRING}}), limits),
              "exceeds the limit of 8", absl::StatusCode::kResourceExhausted);
  // Short enough to pass the parser's bound (base64 of 8 bytes), too long
  // as a plain string.
  ExpectError(Parse(R"({"inputs": ["ten bytes!"]})", Sig({{"x", DT_STRING}}), limits),
              "exceeds the limit of 8", absl::StatusCode::kResourceExhausted);
}

TEST(JsonPredictTest, RaggedListsAreRefusedBeforeAnyAllocation) {
  // 120 bytes whose first elements claim 2^24 elements: [[[0, 0], 0], 0]...
  std::string ragged = "[0, 0]";
  for (int i = 1; i < 24; ++i) ragged = "[" + ragged + ", 0]";
  const auto sig = Sig({{"x", DT_STRING}});
  const int64_t allocs = cpu_allocator()->GetStats().num_allocs;
  ExpectError(Parse(R"({"inputs": )" + ragged + "}", sig), "expected a list there");
  ExpectError(Parse(R"({"instances": [)" + ragged + "]}", sig), "expected a list there");
  EXPECT_EQ(cpu_allocator()->GetStats().num_allocs, allocs);
}

// Reference check: random tensors written as columnar JSON parse back to the
// same tensors (floats print with enough digits to round-trip).
TEST(JsonPredictTest, RandomRoundTrip) {
  std::mt19937 rng(42);
  for (int iter = 0; iter < 200; ++iter) {
    int rank = rng() % 4;
    std::vector<int64_t> dims;
    for (int d = 0; d < rank; ++d) dims.push_back(1 + rng() % 5);
    TensorShape shape{absl::MakeConstSpan(dims)};
    const DataType dtypes[] = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_STRING, DT_BOOL};
    DataType dtype = dtypes[iter % 6];
    Tensor t(dtype, shape);
    std::uniform_real_distribution<double> real(-1e6, 1e6);
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      switch (dtype) {
        case DT_FLOAT: t.data<float>()[i] = static_cast<float>(real(rng)) / 7; break;
        case DT_DOUBLE: t.data<double>()[i] = real(rng) / 3; break;
        case DT_INT32: t.data<int32_t>()[i] = static_cast<int32_t>(rng()); break;
        case DT_INT64:
          t.data<int64_t>()[i] = (static_cast<int64_t>(rng()) << 31) ^ rng();
          break;
        case DT_BOOL: t.data<bool>()[i] = rng() & 1; break;
        default: {
          std::string s;
          for (int k = rng() % 6; k > 0; --k) s.push_back(static_cast<char>(32 + rng() % 95));
          t.data<std::string>()[i] = s;
        }
      }
    }
    PredictResponse r;
    r.outputs["v"] = t;
    std::string json = *PredictResponseToJson(r, JsonPredictFormat::kColumnar);
    std::string request = "{\"inputs\"" + json.substr(json.find(':'));
    Parsed p = Parse(request, Sig({{"v", dtype}}));
    ASSERT_TRUE(p.status.ok()) << p.status << " " << request;
    if (t.NumElements() > 0) {
      EXPECT_TRUE(TensorsEqual(p.request.inputs.at("v"), t))
          << request << " -> " << p.request.inputs.at("v").DebugString(100);
    }
  }
}

// Bounded fuzz: random mutations of valid requests and random bytes. Every
// outcome must be OK or an error status; nothing may crash or hang.
TEST(JsonPredictTest, FuzzRequestParsers) {
  const std::vector<std::string> seeds = {
      R"({"instances": [1.0, 2.0, 5.0]})",
      R"({"signature_name": "s", "instances": [{"a": [1, 2], "b": "x", "c": {"b64": "aGk="}}, {"a": [3, 4], "b": "y", "c": {"b64": "aGk="}}]})",
      R"({"inputs": {"a": [[1, 2], [3, 4]], "b": ["p", "q"], "c": [{"b64": "AA=="}]}})",
      R"({"context": {"u": 1, "f": [0.5, 2]}, "examples": [{"i": [1, 2], "s": "x"}, {"i": 3, "b": true}]})",
  };
  auto multi = Sig({{"a", DT_INT64}, {"b", DT_STRING}, {"c", DT_STRING}});
  auto single = Sig({{"x", DT_FLOAT}});
  const char kTokens[][8] = {"[", "]", "{", "}", ",", ":", "\"", "1e999", "-",
                             "null", "true", "NaN", "0.5", "\\u0000", "\xff", "[[[["};
  std::mt19937 rng(1234);
  int iterations = 0, ok = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (iterations < 20000 && std::chrono::steady_clock::now() < deadline) {
    std::string doc = seeds[rng() % seeds.size()];
    const int mutations = 1 + rng() % 4;
    for (int m = 0; m < mutations; ++m) {
      size_t pos = doc.empty() ? 0 : rng() % doc.size();
      switch (rng() % 5) {
        case 0: if (!doc.empty()) doc.erase(pos, 1 + rng() % 3); break;
        case 1: doc.insert(pos, kTokens[rng() % 16]); break;
        case 2: if (!doc.empty()) doc[pos] = static_cast<char>(rng()); break;
        case 3: doc = doc.substr(0, pos); break;
        default: {
          std::string junk(rng() % 16, '\0');
          for (char& c : junk) c = static_cast<char>(rng());
          doc.insert(pos, junk);
        }
      }
    }
    if (iterations % 50 == 0) {
      doc.assign(rng() % 200, '\0');
      for (char& c : doc) c = static_cast<char>(rng());
    }
    absl::Status s1 = Parse(doc, multi).status;
    absl::Status s2 = Parse(doc, single).status;
    std::string sig;
    ExampleInput input;
    absl::Status s3 = ParseExamplesRequestJson(doc, {}, &sig, &input);
    for (const absl::Status& s : {s1, s2, s3}) {
      if (s.ok()) {
        ++ok;
      } else {
        EXPECT_FALSE(s.message().empty());
      }
    }
    ++iterations;
  }
  EXPECT_GT(iterations, 1000);
  EXPECT_GT(ok, 0);
}

}  // namespace
}  // namespace recflow::serving
