// The model server's untrusted inputs (recflow/serving/): HTTP requests, the
// REST JSON bodies, the gRPC request protos, and the config files of
// `recflow serve`. Each target says its input layout and invariants above
// it; every error must come back as a status (or an HTTP error), never a
// crash.
#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "recflow/core/env.h"
#include "recflow/core/json_writer.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/tensor.h"
#include "recflow/proto/monitoring_config.pb.h"
#include "recflow/proto/serving_model_management.pb.h"
#include "recflow/serving/batching.h"
#include "recflow/serving/http_parser.h"
#include "recflow/serving/json_example.h"
#include "recflow/serving/json_predict.h"
#include "recflow/serving/json_response.h"
#include "recflow/serving/json_value.h"
#include "recflow/serving/prediction_api_proto.h"
#include "recflow/serving/server_core.h"
#include "tests/fuzz/fuzz_target.h"

namespace recflow::fuzz {
namespace {

namespace tfs = ::tensorflow::serving;
using serving::HttpBodyBudget;
using serving::HttpParserOptions;
using serving::HttpRequest;
using serving::HttpRequestParser;
using serving::JsonLimits;

// ---------------------------------------------------------------------------
// HTTP framing

HttpParserOptions HttpOptions(uint8_t choice, HttpBodyBudget* budget) {
  constexpr int64_t kHeader[] = {64 << 10, 256, 64, 16};
  constexpr int64_t kBody[] = {64LL << 20, 1024, 16, 0};
  HttpParserOptions options;
  options.max_header_bytes = kHeader[choice & 3];
  options.max_body_bytes = kBody[(choice >> 2) & 3];
  options.budget = budget;
  return options;
}

// What a parser made of a byte stream: the requests, in order, and how it
// stopped.
struct HttpOutcome {
  std::vector<HttpRequest> requests;
  HttpRequestParser::State last = HttpRequestParser::kNeedMore;
  int error_status = 0;
};

std::string Show(const HttpRequest& r) {
  std::string headers;
  for (const auto& [name, value] : r.headers) absl::StrAppend(&headers, name, "=", value, ";");
  return absl::StrCat(r.method, " ", r.target, " HTTP/1.", r.version_minor, " [", headers,
                      "] body ", r.body.size(), " bytes");
}

void CheckRequest(const HttpRequest& r, const HttpParserOptions& options) {
  static const std::set<std::string> kMethods = {"GET",    "HEAD",    "POST", "PUT",
                                                 "DELETE", "OPTIONS", "PATCH"};
  FUZZ_CHECK(kMethods.contains(r.method), Show(r));
  FUZZ_CHECK(r.version_minor == 0 || r.version_minor == 1, Show(r));
  FUZZ_CHECK(!r.target.empty() && !r.path.empty(), Show(r));
  FUZZ_CHECK(r.path[0] == '/' || r.path == "*", Show(r));
  FUZZ_CHECK(static_cast<int64_t>(r.body.size()) <= options.max_body_bytes,
             absl::StrCat(Show(r), "; max_body_bytes ", options.max_body_bytes));
  const bool chunked = r.headers.contains("Transfer-Encoding");
  auto length = r.headers.find("Content-Length");
  if (!chunked && length != r.headers.end()) {
    int64_t n = -1;
    FUZZ_CHECK(absl::SimpleAtoi(length->second, &n) && n == static_cast<int64_t>(r.body.size()),
               Show(r));
  } else if (!chunked) {
    FUZZ_CHECK(r.body.empty(), Show(r));
  }
}

// Feeds `stream` in pieces of the sizes in `cuts` (cycled; none, or only
// zeros: all at once), taking every request that completes.
HttpOutcome FeedHttp(absl::string_view stream, absl::string_view cuts,
                     const HttpParserOptions& options, HttpBodyBudget* budget) {
  if (cuts.find_first_not_of('\0') == absl::string_view::npos) cuts = "";
  HttpOutcome out;
  HttpRequestParser parser(options);
  size_t pos = 0, cut = 0;
  do {
    size_t n = stream.size() - pos;
    if (!cuts.empty()) n = std::min<size_t>(n, static_cast<uint8_t>(cuts[cut++ % cuts.size()]));
    out.last = parser.Feed(stream.substr(pos, n));
    pos += n;
    parser.TakeContinue();
    while (out.last == HttpRequestParser::kComplete) {
      out.requests.push_back(parser.TakeRequest());
      CheckRequest(out.requests.back(), options);
      FUZZ_CHECK(budget->used() == 0,
                 absl::StrCat(budget->used(), " body bytes still reserved after TakeRequest"));
      out.last = parser.Feed("");
    }
    FUZZ_CHECK(budget->used() >= 0 && budget->used() <= options.max_body_bytes,
               absl::StrCat(budget->used(), " body bytes reserved"));
    if (out.last == HttpRequestParser::kError) {
      static const std::set<int> kStatuses = {400, 413, 417, 431, 501, 503, 505};
      out.error_status = parser.error().status;
      FUZZ_CHECK(kStatuses.contains(out.error_status),
                 absl::StrCat(out.error_status, " ", parser.error().message));
      FUZZ_CHECK(parser.Feed("GET / HTTP/1.1\r\n\r\n") == HttpRequestParser::kError,
                 "an error is not final");
      Note(absl::StrCat("error ", out.error_status, ": ", parser.error().message));
      break;
    }
  } while (pos < stream.size());
  return out;
}

}  // namespace

// Input: an options byte (header limit 64 KiB/256/64/16 bytes in bits 0-1,
// body limit 64 MiB/1 KiB/16/0 in bits 2-3, a shared body budget of
// none/1 MiB/100/10 bytes in bits 4-5), the piece sizes as one
// length-prefixed part (a byte each, cycled; 0 feeds an empty piece; none,
// or only zeros: the whole stream at once), then
// the bytes of the connection. The stream is parsed twice: at once and in
// those pieces. Checked: every request has a known method, HTTP/1.0 or 1.1,
// a target starting with '/' (or "*"), a body within max_body_bytes and
// equal to its Content-Length; the budget holds at most what one request
// reserved and is given back by TakeRequest and the destructor; errors are
// final and have a documented status; and the pieces change nothing: the
// same requests and the same outcome as the stream fed at once.
RECFLOW_FUZZ_TARGET(http_request) {
  InitOnce();
  FuzzInput in(data, size);
  const uint8_t choice = in.ConsumeByte();
  const absl::string_view cuts = in.ConsumeLengthPrefixed();
  const absl::string_view stream = in.ConsumeRest();
  constexpr int64_t kBudget[] = {std::numeric_limits<int64_t>::max(), 1 << 20, 100, 10};
  HttpBodyBudget whole_budget(kBudget[(choice >> 4) & 3]);
  HttpBodyBudget piece_budget(kBudget[(choice >> 4) & 3]);
  const HttpParserOptions options = HttpOptions(choice, &whole_budget);
  const HttpOutcome whole = FeedHttp(stream, "", options, &whole_budget);
  const HttpOutcome pieces = FeedHttp(stream, cuts, HttpOptions(choice, &piece_budget),
                                      &piece_budget);
  FUZZ_CHECK(whole_budget.used() == 0 && piece_budget.used() == 0,
             "a destroyed parser kept body bytes reserved");
  Note(absl::StrCat(whole.requests.size(), " requests, then ",
                    whole.last == HttpRequestParser::kError ? "an error" : "need more"));
  for (const HttpRequest& r : whole.requests) Note(Show(r));
  FUZZ_CHECK(whole.requests.size() == pieces.requests.size(),
             absl::StrCat(whole.requests.size(), " requests at once, ",
                          pieces.requests.size(), " in pieces"));
  for (size_t i = 0; i < whole.requests.size(); ++i) {
    const HttpRequest& a = whole.requests[i];
    const HttpRequest& b = pieces.requests[i];
    FUZZ_CHECK(Show(a) == Show(b) && a.body == b.body && a.path == b.path && a.query == b.query,
               absl::StrCat("request ", i, ": ", Show(a), " at once, ", Show(b), " in pieces"));
  }
  FUZZ_CHECK(whole.last == pieces.last && whole.error_status == pieces.error_status,
             absl::StrCat("at once: state ", whole.last, " status ", whole.error_status,
                          "; in pieces: state ", pieces.last, " status ",
                          pieces.error_status));
  return 0;
}

RECFLOW_FUZZ_SEEDS(http_request) {
  const std::string generous = std::string(1, '\x00');  // 64 KiB, 64 MiB, no budget
  const std::string tight = std::string(1, '\x25');     // 256 B, 1 KiB, budget 100
  const std::string bytewise = LengthPrefixed(std::string(1, '\x01'));
  const std::string mixed = LengthPrefixed(std::string("\x05\x00\x11\x02\x40", 5));
  const std::string predict =
      "POST /v1/models/half_plus_two:predict HTTP/1.1\r\nHost: localhost:8501\r\n"
      "Content-Type: application/json\r\nContent-Length: 27\r\n\r\n"
      "{\"instances\": [1.0, 2, 5]}\n";
  auto chunk = [](absl::string_view data, absl::string_view extension = "") {
    return absl::StrCat(absl::Hex(data.size()), extension, "\r\n", data, "\r\n");
  };
  const std::string chunked =
      "POST /v1/models/m/versions/3:classify HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
      "Expect: 100-continue\r\n\r\n" +
      chunk("{\"examples", ";ext=1") + chunk("\": [{}]}  ") + "0\r\nX-Trailer: t\r\n\r\n";
  const std::string pipelined =
      "\r\nGET /v1/models/m HTTP/1.0\r\nConnection: keep-alive\r\nX-A: 1\r\nx-a: 2\r\n\r\n"
      "GET /monitoring/prometheus/metrics?x=1 HTTP/1.1\nHost: h\n\n"
      "DELETE http://h:8501/v1/models/m/metadata HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
  return {
      {"predict_bytewise", generous + bytewise + predict},
      {"chunked_expect_in_pieces", tight + mixed + chunked},
      {"pipelined", generous + mixed + pipelined},
      {"body_over_limit", std::string(1, '\x0c') + mixed + predict},
      {"budget_spent", std::string(1, '\x30') + mixed + chunked},
      {"bad_chunk_framing", generous + mixed +
                                "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                "5\r\nhello\n0\r\n\r\n"},
      {"bad_head", generous + bytewise +
                       "BREW /pot HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n"},
      // A chunk size line over 1 KiB was refused when it arrived in pieces
      // and accepted (or refused as 413) when it arrived whole.
      {"long_chunk_extension", generous + mixed +
                                   "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   "3;" + std::string(1100, 'e') + "\r\nabc\r\n0\r\n\r\n"},
      {"long_chunk_size_line_over_limit",
       std::string(1, '\x04') + mixed +
           "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffff" +
           std::string(1100, ' ') + "\r\n"},
  };
}

// ---------------------------------------------------------------------------
// REST predict JSON

namespace {

tensorflow::TensorInfo Info(DataType dtype, std::vector<int64_t> dims) {
  tensorflow::TensorInfo info;
  info.set_dtype(static_cast<tensorflow::DataType>(dtype));
  info.set_name("in:0");
  for (int64_t d : dims) info.mutable_tensor_shape()->add_dim()->set_size(d);
  return info;
}

// A few signatures of the kinds models serve: one float input, a
// recommendation model's ids, weights and raw bytes, one string input,
// narrow types, wide types, none at all.
tensorflow::SignatureDef PredictSignature(uint8_t choice) {
  std::map<std::string, tensorflow::TensorInfo> inputs;
  switch (choice % 6) {
    case 0:
      inputs["x"] = Info(DT_FLOAT, {-1});
      break;
    case 1:
      inputs["ids"] = Info(DT_INT64, {-1, 8});
      inputs["weights"] = Info(DT_FLOAT, {-1, 8});
      inputs["tag_bytes"] = Info(DT_STRING, {-1});
      break;
    case 2:
      inputs["query"] = Info(DT_STRING, {});
      break;
    case 3:
      inputs["mask"] = Info(DT_BOOL, {-1, -1});
      inputs["h"] = Info(DT_HALF, {-1});
      inputs["u8"] = Info(DT_UINT8, {-1});
      break;
    case 4:
      inputs["d"] = Info(DT_DOUBLE, {-1});
      inputs["i32"] = Info(DT_INT32, {-1});
      inputs["bf"] = Info(DT_BFLOAT16, {-1});
      inputs["u64"] = Info(DT_UINT64, {-1});
      inputs["i8"] = Info(DT_INT8, {-1});
      break;
    default:
      break;  // no inputs
  }
  tensorflow::SignatureDef def;
  for (auto& [name, info] : inputs) (*def.mutable_inputs())[name] = info;
  (*def.mutable_outputs())["y"] = Info(DT_FLOAT, {-1});
  def.set_method_name("tensorflow/serving/predict");
  return def;
}

// Small limits too, so that every limit is reached by short inputs; the
// largest are kept well under the server's (a fuzzer has little memory).
JsonLimits JsonLimitsFrom(uint8_t choice) {
  constexpr int kDepth[] = {64, 8, 3, 1};
  constexpr int64_t kElements[] = {1 << 20, 1000, 16, 1};
  constexpr int64_t kStringBytes[] = {1 << 20, 100, 16, 8};
  JsonLimits limits;
  limits.max_depth = kDepth[choice & 3];
  limits.max_elements = kElements[(choice >> 2) & 3];
  limits.max_string_bytes = kStringBytes[(choice >> 4) & 3];
  return limits;
}

std::string ShowTensors(const std::map<std::string, Tensor>& tensors) {
  std::vector<std::string> parts;
  for (const auto& [name, t] : tensors) {
    parts.push_back(absl::StrCat(name, ": ", DataTypeString(t.dtype()), " ",
                                 t.shape().DebugString(), " ", t.SummarizeValue(4)));
  }
  return absl::StrJoin(parts, "; ");
}

bool IsFloating(DataType dtype) {
  return dtype == DT_FLOAT || dtype == DT_DOUBLE || dtype == DT_HALF || dtype == DT_BFLOAT16;
}

// The decoded request written back as a response (json_response.h), read
// again as a request, written again: both writes must agree. The one
// exception: the largest finite values of a narrow float type are written
// with the fewest digits that read back as that float, which as a double
// lies just past the type's maximum, so the reader refuses them.
void CheckPredictRoundTrip(const std::map<std::string, Tensor>& inputs,
                           serving::JsonPredictFormat format,
                           const tensorflow::SignatureDef& signature, JsonLimits limits) {
  serving::PredictResponse response;
  response.outputs = inputs;
  absl::StatusOr<std::string> first = serving::PredictResponseToJson(response, format);
  FUZZ_CHECK(first.ok(), first.status().ToString());
  const bool row = format == serving::JsonPredictFormat::kRow;
  const absl::string_view key = row ? "{\"predictions\"" : "{\"outputs\"";
  FUZZ_CHECK(absl::StartsWith(*first, key), *first);
  const std::string again =
      absl::StrCat(row ? "{\"instances\"" : "{\"inputs\"", first->substr(key.size()));
  // A string read plainly comes back as {"b64": ...} when its key ends in
  // "_bytes": one level deeper.
  limits.max_depth += 1;
  absl::StatusOr<serving::PredictRequestJson> reparsed =
      serving::PredictRequestJson::Parse(again, limits);
  FUZZ_CHECK(reparsed.ok(), absl::StrCat(reparsed.status().ToString(), " for ", again));
  std::map<std::string, Tensor> back;
  absl::Status s = reparsed->ToInputs(signature, &back);
  if (!s.ok()) {
    bool extreme = false;
    for (const auto& [name, t] : inputs) extreme |= IsFloating(t.dtype());
    FUZZ_CHECK(extreme && absl::StrContains(s.message(), "without loss of precision"),
               absl::StrCat(s.ToString(), " reading back ", again));
    Note(absl::StrCat("the response does not read back: ", s.message()));
    return;
  }
  response.outputs = back;
  absl::StatusOr<std::string> second = serving::PredictResponseToJson(response, format);
  FUZZ_CHECK(second.ok(), second.status().ToString());
  FUZZ_CHECK(*first == *second, absl::StrCat(*first, " read back and written as ", *second));
}

}  // namespace

// Input: a byte choosing the signature (PredictSignature: float, int64 +
// float + bytes, string, bool + half + uint8, double + int32 + bfloat16 +
// uint64 + int8, none), a byte choosing the JsonLimits (depth 64/8/3/1 in
// bits 0-1, elements 1M/1000/16/1 in bits 2-3, string bytes 1M/100/16/8 in
// bits 4-5), then the body. Checked for a body that converts: exactly the
// signature's inputs, each of its dtype; row format: every tensor has one
// row per instance; at most max_elements elements, no string over
// max_string_bytes; and the tensors written as a response in the same
// format, read back and written again, give the same JSON.
RECFLOW_FUZZ_TARGET(rest_predict_json) {
  InitOnce();
  FuzzInput in(data, size);
  const tensorflow::SignatureDef signature = PredictSignature(in.ConsumeByte());
  const JsonLimits limits = JsonLimitsFrom(in.ConsumeByte());
  const absl::string_view body = in.ConsumeRest();
  absl::StatusOr<serving::PredictRequestJson> json =
      serving::PredictRequestJson::Parse(body, limits);
  if (!json.ok()) {
    Note(json.status().ToString());
    return 0;
  }
  const bool row = json->format() == serving::JsonPredictFormat::kRow;
  std::map<std::string, Tensor> inputs;
  absl::Status s = json->ToInputs(signature, &inputs);
  Note(absl::StrCat(row ? "row" : "columnar", ", signature '", json->signature_name(), "' -> ",
                    s.ok() ? ShowTensors(inputs) : s.ToString()));
  if (!s.ok()) return 0;
  FUZZ_CHECK(inputs.size() == static_cast<size_t>(signature.inputs_size()),
             ShowTensors(inputs));
  rapidjson::Document doc;
  FUZZ_CHECK(serving::ParseJsonRequest(body, limits, &doc).ok(), "parsed once, not twice");
  int64_t elements = 0;
  for (const auto& [name, t] : inputs) {
    auto info = signature.inputs().find(name);
    FUZZ_CHECK(info != signature.inputs().end(), absl::StrCat("unknown input ", name));
    FUZZ_CHECK(static_cast<int>(t.dtype()) == info->second.dtype(), ShowTensors(inputs));
    elements += t.NumElements();
    if (row) {
      FUZZ_CHECK(t.dims() >= 1 && t.dim_size(0) == doc["instances"].Size(),
                 absl::StrCat(ShowTensors(inputs), " from ", doc["instances"].Size(),
                              " instances"));
    }
    if (t.dtype() == DT_STRING) {
      for (int64_t i = 0; i < t.NumElements(); ++i) {
        FUZZ_CHECK(static_cast<int64_t>(t.data<std::string>()[i].size()) <=
                       limits.max_string_bytes,
                   absl::StrCat("input '", name, "' has a string of ",
                                t.data<std::string>()[i].size(), " bytes; the limit is ",
                                limits.max_string_bytes));
      }
    }
  }
  FUZZ_CHECK(elements <= limits.max_elements,
             absl::StrCat(elements, " elements; the limit is ", limits.max_elements));
  CheckPredictRoundTrip(inputs, json->format(), signature, limits);
  return 0;
}

RECFLOW_FUZZ_SEEDS(rest_predict_json) {
  auto seed = [](int signature, uint8_t limits, const std::string& body) {
    return std::string(1, static_cast<char>(signature)) +
           std::string(1, static_cast<char>(limits)) + body;
  };
  return {
      {"row_floats", seed(0, 0, R"({"instances": [1.0, 2, 5, -0.5, 1e-3]})")},
      {"columnar_nested", seed(0, 0, R"({"signature_name": "serving_default",
          "inputs": [[1.5, NaN], [Infinity, -Infinity], [3.4028234e38, 0]]})")},
      {"row_named_recsys", seed(1, 0, R"({"instances": [
          {"ids": [1, 2, 3, 4, 5, 6, 7, 8], "weights": [0.5, 0.5, 0.5, 0.5, 1, 1, 1, 1],
           "tag_bytes": {"b64": "aGVsbG8="}},
          {"weights": [1, 2, 3, 4, 5, 6, 7, 8], "ids": [9, 8, 7, 6, 5, 4, 3, 2],
           "tag_bytes": "plain"}]})")},
      {"columnar_named", seed(1, 0, R"({"inputs": {"ids": [[1], [-9223372036854775808]],
          "weights": [[0.25], [1e-46]], "tag_bytes": [{"b64": "_-8="}, "x"]}})")},
      {"row_strings", seed(2, 0, R"({"instances": ["caf\u00e9", {"b64": "AAEC"}, ""]})")},
      {"columnar_scalar_string", seed(2, 0, R"({"inputs": {"b64": "YWJj"}})")},
      {"narrow_types", seed(3, 0, R"({"instances": [{"mask": [[true, false]], "h": 65504.0,
          "u8": 255}, {"mask": [[false, true]], "h": -2047, "u8": 0}]})")},
      {"wide_types", seed(4, 0, R"({"inputs": {"d": [1.7976931348623157e308, 5e-324],
          "i32": [-2147483648, 2147483647], "bf": [3.0, -1e38], "u64": [18446744073709551615, 0],
          "i8": [-128, 127]}})")},
      {"ragged", seed(0, 0, R"({"instances": [[1, 2], [3]]})")},
      // Its first elements claim 2^20 strings; the rest is ragged.
      {"ragged_claims_many", seed(2, 0, [] {
         std::string ragged = "[\"a\", \"b\"]";
         for (int i = 1; i < 20; ++i) ragged = "[" + ragged + ", 0]";
         return R"({"inputs": )" + ragged + "}";
       }())},
      {"out_of_range", seed(4, 0, R"({"inputs": {"d": [1], "i32": [2147483648], "bf": [1],
          "u64": [-1], "i8": [1]}})")},
      {"over_limits", seed(1, 0x38, R"({"instances": [{"ids": [1, 2], "weights": [1, 2],
          "tag_bytes": "a string longer than eight bytes"}]})")},
      // Limit 8 bytes: a plain string of 10 got through, as the parser lets
      // base64 text up to 4/3 of the limit pass.
      {"string_over_limit", seed(2, 0x30, R"({"instances": ["ten bytes!"]})")},
      {"too_deep", seed(0, 0x02, R"({"inputs": [[[[1]]]]})")},
      {"no_inputs", seed(5, 0, R"({"instances": [1]})")},
      {"both_formats", seed(0, 0, R"({"instances": [1], "inputs": [1]})")},
      {"not_json", seed(0, 0, "{\"instances\": [1, 2,")},
  };
}

// ---------------------------------------------------------------------------
// REST classify / regress JSON

namespace {

void WriteFeatures(const tensorflow::Example& example, JsonWriter* w) {
  w->BeginObject();
  for (const auto& [name, feature] : example.features().feature()) {
    w->Key(name).BeginArray();
    switch (feature.kind_case()) {
      case tensorflow::Feature::kBytesList:
        for (const std::string& v : feature.bytes_list().value()) {
          w->BeginObject().Key("b64").String(absl::Base64Escape(v)).EndObject();
        }
        break;
      case tensorflow::Feature::kFloatList:
        for (float v : feature.float_list().value()) w->Float(v);
        break;
      case tensorflow::Feature::kInt64List:
        for (int64_t v : feature.int64_list().value()) w->Int(v);
        break;
      default:
        break;
    }
    w->EndArray();
  }
  w->EndObject();
}

// A classify / regress body; no "signature_name" when `signature_name` is
// null.
std::string ExamplesJson(const std::string* signature_name,
                         const serving::ExampleInput& input) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  if (signature_name != nullptr) w.Key("signature_name").String(*signature_name);
  if (input.context.has_value()) {
    w.Key("context");
    WriteFeatures(*input.context, &w);
  }
  w.Key("examples").BeginArray();
  for (const tensorflow::Example& e : input.examples) WriteFeatures(e, &w);
  w.EndArray().EndObject();
  return out;
}

// Equal protos, NaN equal to NaN (a round trip keeps NaN values).
bool Same(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  return differencer.Compare(a, b);
}

int64_t CountValues(const tensorflow::Example& e, const JsonLimits& limits) {
  int64_t n = 0;
  for (const auto& [name, f] : e.features().feature()) {
    n += f.bytes_list().value_size() + f.float_list().value_size() +
         f.int64_list().value_size();
    for (const std::string& v : f.bytes_list().value()) {
      FUZZ_CHECK(static_cast<int64_t>(v.size()) <= limits.max_string_bytes,
                 absl::StrCat("feature '", name, "' has a value of ", v.size(),
                              " bytes; the limit is ", limits.max_string_bytes));
    }
  }
  return n;
}

}  // namespace

// Input: a byte choosing the JsonLimits (as rest_predict_json), then the
// body. Checked for a body that parses: as many examples as the body's
// "examples" list, a context when it has one, at most max_elements values,
// no bytes value over max_string_bytes; and the examples written back as
// JSON (bytes as {"b64": ...}) parse to the same protos (by their
// deterministic serialization), but for the largest finite floats
// (CheckPredictRoundTrip says why).
RECFLOW_FUZZ_TARGET(rest_examples_json) {
  InitOnce();
  FuzzInput in(data, size);
  const JsonLimits limits = JsonLimitsFrom(in.ConsumeByte());
  const absl::string_view body = in.ConsumeRest();
  std::string signature_name = "(none)";
  serving::ExampleInput input;
  absl::Status s = serving::ParseExamplesRequestJson(body, limits, &signature_name, &input);
  Note(absl::StrCat("signature '", signature_name, "' -> ",
                    s.ok() ? absl::StrCat(input.examples.size(), " examples, ",
                                          input.context.has_value() ? "a" : "no", " context")
                           : s.ToString()));
  if (!s.ok()) return 0;
  rapidjson::Document doc;
  FUZZ_CHECK(serving::ParseJsonRequest(body, limits, &doc).ok(), "parsed once, not twice");
  FUZZ_CHECK(!input.examples.empty() && input.examples.size() == doc["examples"].Size(),
             absl::StrCat(input.examples.size(), " examples"));
  FUZZ_CHECK(input.context.has_value() == doc.HasMember("context"), "context");
  int64_t values = input.context.has_value() ? CountValues(*input.context, limits) : 0;
  for (const tensorflow::Example& e : input.examples) values += CountValues(e, limits);
  FUZZ_CHECK(values <= limits.max_elements,
             absl::StrCat(values, " values; the limit is ", limits.max_elements));

  const std::string again =
      ExamplesJson(doc.HasMember("signature_name") ? &signature_name : nullptr, input);
  JsonLimits relaxed = limits;
  relaxed.max_depth = std::max(limits.max_depth, 5);  // {"examples": [{"f": [{"b64":
  std::string name_back = signature_name;  // left alone when the body has none
  serving::ExampleInput back;
  s = serving::ParseExamplesRequestJson(again, relaxed, &name_back, &back);
  if (!s.ok()) {
    FUZZ_CHECK(absl::StrContains(s.message(), "without loss of precision"),
               absl::StrCat(s.ToString(), " reading back ", again));
    Note(absl::StrCat("the examples do not read back: ", s.message()));
    return 0;
  }
  FUZZ_CHECK(name_back == signature_name, name_back);
  FUZZ_CHECK(back.examples.size() == input.examples.size() &&
                 back.context.has_value() == input.context.has_value(),
             again);
  if (input.context.has_value()) {
    FUZZ_CHECK(Same(*back.context, *input.context), again);
  }
  for (size_t i = 0; i < input.examples.size(); ++i) {
    FUZZ_CHECK(Same(back.examples[i], input.examples[i]),
               absl::StrCat("example ", i, " of ", again));
  }
  return 0;
}

RECFLOW_FUZZ_SEEDS(rest_examples_json) {
  auto seed = [](uint8_t limits, const std::string& body) {
    return std::string(1, static_cast<char>(limits)) + body;
  };
  return {
      {"classify", seed(0, R"({"signature_name": "classify_x_to_y",
          "examples": [{"x": 1.5, "ids": [1, 2, 3], "name": "a", "ok": true},
                       {"x": [2.0, NaN, -Infinity], "name": {"b64": "AP8="}, "ok": [false]}]})")},
      {"regress_with_context", seed(0, R"({"context": {"user": [42], "country": "fr"},
          "examples": [{"item": 7, "price": 9.99}, {"item": 8, "price": 1e30, "x": []},
                       {"item": 9, "item": 10}]})")},
      {"mixed_kinds", seed(0, R"({"examples": [{"f": [1, 2.5]}]})")},
      {"float_limits", seed(0, R"({"examples": [{"f": [3.4028234e38, 1e-46, 16777217.0]}]})")},
      {"beyond_int64", seed(0, R"({"examples": [{"f": 9223372036854775808}]})")},
      {"nested_list", seed(0, R"({"examples": [{"f": [[1]]}]})")},
      {"over_limits", seed(0x38, R"({"examples": [{"f": "more than eight bytes",
          "g": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]}]})")},
      {"string_over_limit", seed(0x30, R"({"examples": [{"f": "ten bytes!"}]})")},
      {"no_examples", seed(0, R"({"context": {"a": 1}})")},
      {"bad_b64", seed(0, R"({"examples": [{"f": {"b64": "not base64!"}}]})")},
  };
}

// ---------------------------------------------------------------------------
// gRPC request protos

namespace {

serving::ProtoLimits ProtoLimitsFrom(uint8_t choice) {
  serving::ProtoLimits limits;
  if (choice & 1) {
    limits.max_tensor_elements = 16;
    limits.max_request_bytes = 1024;
  } else {
    limits.max_tensor_elements = 1 << 16;
    limits.max_request_bytes = 1 << 22;
  }
  return limits;
}

void CheckModelSpec(const tfs::ModelSpec& proto, const serving::ModelSpec& spec) {
  FUZZ_CHECK(spec.name == proto.name() && spec.signature_name == proto.signature_name(),
             proto.ShortDebugString());
  FUZZ_CHECK(!(spec.version.has_value() && !spec.version_label.empty()),
             proto.ShortDebugString());
  tfs::ModelSpec again;
  serving::ModelSpecToProto(spec, &again);
  serving::ModelSpec back;
  serving::ModelSpecFromProto(again, &back);
  FUZZ_CHECK(back.name == spec.name && back.version == spec.version &&
                 back.version_label == spec.version_label &&
                 back.signature_name == spec.signature_name,
             again.ShortDebugString());
}

// The decoded inputs fit the limits, and every tensor survives both
// response encodings (typed fields, tensor_content) unchanged.
void CheckPredictInputs(const serving::PredictRequest& request,
                        const serving::ProtoLimits& limits) {
  int64_t bytes = 0;
  for (const auto& [key, t] : request.inputs) {
    FUZZ_CHECK(t.NumElements() <= limits.max_tensor_elements,
               absl::StrCat(key, ": ", t.shape().DebugString()));
    bytes += t.NumElements() * static_cast<int64_t>(ElementStorageSize(t.dtype()));
    if (t.dtype() == DT_STRING) {
      for (int64_t i = 0; i < t.NumElements(); ++i) bytes += t.data<std::string>()[i].size();
    }
    for (bool content : {false, true}) {
      tensorflow::TensorProto proto;
      serving::TensorToApiProto(t, {.use_tensor_content = content}, &proto);
      absl::StatusOr<Tensor> back =
          serving::TensorFromRequestProto(key, proto, serving::ProtoLimits(), nullptr);
      FUZZ_CHECK(back.ok(), absl::StrCat(key, " (", DataTypeString(t.dtype()),
                                         ") written and read back: ",
                                         back.status().ToString()));
      FUZZ_CHECK(TensorsEqual(t, *back),
                 absl::StrCat(key, ": ", t.DebugString(), " read back as ",
                              back->DebugString()));
    }
  }
  FUZZ_CHECK(bytes <= limits.max_request_bytes,
             absl::StrCat(bytes, " bytes decoded; the limit is ", limits.max_request_bytes));
}

void CheckExamples(const tfs::Input& original, const serving::ExampleInput& input) {
  const bool with_context = original.has_example_list_with_context();
  const auto& examples = with_context ? original.example_list_with_context().examples()
                                      : original.example_list().examples();
  FUZZ_CHECK(!input.examples.empty() &&
                 input.examples.size() == static_cast<size_t>(examples.size()),
             absl::StrCat(input.examples.size(), " examples from ", examples.size()));
  for (int i = 0; i < examples.size(); ++i) {
    FUZZ_CHECK(Same(input.examples[i], examples.Get(i)),
               absl::StrCat("example ", i));
  }
  const bool context = with_context && original.example_list_with_context().has_context();
  FUZZ_CHECK(input.context.has_value() == context, "context");
}

template <typename Proto>
bool ParseProto(absl::string_view bytes, Proto* proto) {
  if (proto->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return true;
  Note(absl::StrCat("not a ", proto->GetTypeName()));
  return false;
}

}  // namespace

// Input: a byte choosing the request kind (mod 6: Predict, Classify,
// Regress, MultiInference, GetModelMetadata, GetModelStatus), a byte
// choosing the ProtoLimits (bit 0: 16 elements and 1 KiB per request, else
// 64K elements and 4 MiB), then the serialized request, which is parsed
// (ParseFromArray) and converted as the gRPC services do. Checked for a
// request that converts: the model spec as sent, and unchanged through
// ModelSpecToProto / FromProto; Predict: one tensor per input within the
// limits, unchanged through both response encodings; Classify / Regress:
// the examples and context as sent; MultiInference never fails and keeps
// its tasks; GetModelMetadata asks only for "signature_def".
namespace {

// Classify and Regress: the request converted, checked against the proto as
// it was (the conversion moves the examples out of it).
template <typename Proto, typename Request>
void ConvertExamplesRequest(absl::Status (*convert)(Proto*, Request*), Proto* proto) {
  const tfs::Input original = proto->input();
  const tfs::ModelSpec spec = proto->model_spec();
  Request request;
  absl::Status s = convert(proto, &request);
  Note(absl::StrCat(proto->GetTypeName(), ": ",
                    s.ok() ? absl::StrCat(request.input.examples.size(), " examples")
                           : s.ToString()));
  if (!s.ok()) return;
  CheckModelSpec(spec, request.model_spec);
  CheckExamples(original, request.input);
}

}  // namespace

// Input: a byte choosing the request kind (mod 6: Predict, Classify,
// Regress, MultiInference, GetModelMetadata, GetModelStatus), a byte
// choosing the ProtoLimits (bit 0: 16 elements and 1 KiB per request, else
// 64K elements and 4 MiB), then the serialized request, which is parsed
// (ParseFromArray) and converted as the gRPC services do. Checked for a
// request that converts: the model spec as sent, and unchanged through
// ModelSpecToProto / FromProto; Predict: one tensor per input within the
// limits, unchanged through both response encodings; Classify / Regress:
// the examples and context as sent; MultiInference never fails and keeps
// its tasks; GetModelMetadata asks only for "signature_def";
// GetModelStatus fails exactly when the model spec is missing.
RECFLOW_FUZZ_TARGET(grpc_requests) {
  InitOnce();
  FuzzInput in(data, size);
  const int kind = in.ConsumeByte() % 6;
  const serving::ProtoLimits limits = ProtoLimitsFrom(in.ConsumeByte());
  const absl::string_view bytes = in.ConsumeRest();
  switch (kind) {
    case 0: {
      tfs::PredictRequest proto;
      if (!ParseProto(bytes, &proto)) return 0;
      serving::PredictRequest request;
      absl::Status s = serving::PredictRequestFromProto(proto, limits, &request);
      Note(absl::StrCat("Predict: ", s.ok() ? ShowTensors(request.inputs) : s.ToString()));
      if (!s.ok()) return 0;
      CheckModelSpec(proto.model_spec(), request.model_spec);
      FUZZ_CHECK(request.inputs.size() == proto.inputs().size() &&
                     request.output_filter.size() ==
                         static_cast<size_t>(proto.output_filter_size()),
                 proto.ShortDebugString());
      CheckPredictInputs(request, limits);
      return 0;
    }
    case 1: {
      tfs::ClassificationRequest proto;
      if (ParseProto(bytes, &proto)) {
        ConvertExamplesRequest(&serving::ClassifyRequestFromProto, &proto);
      }
      return 0;
    }
    case 2: {
      tfs::RegressionRequest proto;
      if (ParseProto(bytes, &proto)) {
        ConvertExamplesRequest(&serving::RegressRequestFromProto, &proto);
      }
      return 0;
    }
    case 3: {
      tfs::MultiInferenceRequest proto;
      if (!ParseProto(bytes, &proto)) return 0;
      const tfs::MultiInferenceRequest original = proto;
      serving::MultiInferenceRequest request;
      absl::Status s = serving::MultiInferenceRequestFromProto(&proto, &request);
      Note(absl::StrCat("MultiInference: ", request.tasks.size(), " tasks, ",
                        request.input.examples.size(), " examples: ", s.ToString()));
      FUZZ_CHECK(s.ok(), s.ToString());
      FUZZ_CHECK(request.tasks.size() == static_cast<size_t>(original.tasks_size()),
                 original.ShortDebugString());
      for (int i = 0; i < original.tasks_size(); ++i) {
        CheckModelSpec(original.tasks(i).model_spec(), request.tasks[i].model_spec);
        FUZZ_CHECK(request.tasks[i].method_name == original.tasks(i).method_name(),
                   original.tasks(i).ShortDebugString());
      }
      const tfs::Input& input = original.input();
      if (input.example_list().examples_size() > 0 ||
          input.example_list_with_context().examples_size() > 0) {
        CheckExamples(input, request.input);
      } else {
        FUZZ_CHECK(request.input.examples.empty() && !request.input.context.has_value(),
                   "an empty Input became examples");
      }
      return 0;
    }
    case 4: {
      tfs::GetModelMetadataRequest proto;
      if (!ParseProto(bytes, &proto)) return 0;
      serving::MetadataRequest request;
      absl::Status s = serving::MetadataRequestFromProto(proto, &request);
      Note(absl::StrCat("GetModelMetadata: ", s.ToString()));
      if (!s.ok()) return 0;
      FUZZ_CHECK(proto.has_model_spec() && proto.metadata_field_size() > 0,
                 proto.ShortDebugString());
      for (const std::string& field : proto.metadata_field()) {
        FUZZ_CHECK(field == serving::kSignatureDefField, field);
      }
      CheckModelSpec(proto.model_spec(), request.model_spec);
      return 0;
    }
    default: {
      tfs::GetModelStatusRequest proto;
      if (!ParseProto(bytes, &proto)) return 0;
      serving::StatusRequest request;
      absl::Status s = serving::StatusRequestFromProto(proto, &request);
      Note(absl::StrCat("GetModelStatus: ", s.ToString()));
      FUZZ_CHECK(s.ok() == proto.has_model_spec(), s.ToString());
      if (s.ok()) CheckModelSpec(proto.model_spec(), request.model_spec);
      return 0;
    }
  }
}

RECFLOW_FUZZ_SEEDS(grpc_requests) {
  auto seed = [](int kind, int limits, const google::protobuf::Message& m) {
    return std::string(1, static_cast<char>(kind)) + std::string(1, static_cast<char>(limits)) +
           m.SerializeAsString();
  };
  auto set_spec = [](tfs::ModelSpec* spec) {
    spec->set_name("ranker");
    spec->mutable_version()->set_value(7);
    spec->set_signature_name("serving_default");
  };
  tfs::PredictRequest predict;
  set_spec(predict.mutable_model_spec());
  serving::TensorToApiProto(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}), {},
                            &(*predict.mutable_inputs())["x"]);
  serving::TensorToApiProto(Tensor::FromVector<int64_t>({11, -12}, {2}),
                            {.use_tensor_content = true}, &(*predict.mutable_inputs())["ids"]);
  tensorflow::TensorProto& repeated = (*predict.mutable_inputs())["tag_bytes"];
  repeated.set_dtype(tensorflow::DT_STRING);
  repeated.mutable_tensor_shape()->add_dim()->set_size(3);
  repeated.add_string_val("a");
  repeated.add_string_val(std::string("\x00\xff", 2));
  tensorflow::TensorProto& half = (*predict.mutable_inputs())["h"];
  half.set_dtype(tensorflow::DT_HALF);
  half.mutable_tensor_shape()->add_dim()->set_size(2);
  half.add_half_val(0x3c00);
  tensorflow::TensorProto& complex = (*predict.mutable_inputs())["c"];
  complex.set_dtype(tensorflow::DT_COMPLEX64);
  complex.add_scomplex_val(1);
  complex.add_scomplex_val(-1);
  predict.add_output_filter("y");

  tfs::PredictRequest huge;
  set_spec(huge.mutable_model_spec());
  tensorflow::TensorProto& big = (*huge.mutable_inputs())["x"];
  big.set_dtype(tensorflow::DT_FLOAT);
  big.mutable_tensor_shape()->add_dim()->set_size(int64_t{1} << 31);
  big.mutable_tensor_shape()->add_dim()->set_size(1);
  tfs::PredictRequest bad_content = huge;
  tensorflow::TensorProto& content = (*bad_content.mutable_inputs())["x"];
  content.mutable_tensor_shape()->mutable_dim(0)->set_size(2);
  content.set_tensor_content("12345");
  tfs::PredictRequest unknown_rank = huge;
  (*unknown_rank.mutable_inputs())["x"].mutable_tensor_shape()->set_unknown_rank(true);

  tensorflow::Example item;
  auto& features = *item.mutable_features()->mutable_feature();
  features["item_id"].mutable_int64_list()->add_value(12345);
  features["price"].mutable_float_list()->add_value(9.99f);
  features["title"].mutable_bytes_list()->add_value("shoes");
  tensorflow::Example user;
  (*user.mutable_features()->mutable_feature())["user_id"].mutable_int64_list()->add_value(42);
  tfs::ClassificationRequest classify;
  set_spec(classify.mutable_model_spec());
  classify.mutable_model_spec()->set_signature_name("classify_x_to_y");
  auto* with_context = classify.mutable_input()->mutable_example_list_with_context();
  *with_context->add_examples() = item;
  *with_context->add_examples() = item;
  *with_context->mutable_context() = user;
  tfs::RegressionRequest regress;
  regress.mutable_model_spec()->set_name("ranker");
  regress.mutable_model_spec()->set_version_label("stable");
  *regress.mutable_input()->mutable_example_list()->add_examples() = item;
  tfs::RegressionRequest no_examples = regress;
  no_examples.mutable_input()->mutable_example_list()->clear_examples();
  tfs::MultiInferenceRequest multi;
  for (const char* method : {"tensorflow/serving/classify", "tensorflow/serving/regress"}) {
    tfs::InferenceTask* task = multi.add_tasks();
    set_spec(task->mutable_model_spec());
    task->set_method_name(method);
  }
  *multi.mutable_input()->mutable_example_list()->add_examples() = item;
  tfs::GetModelMetadataRequest metadata;
  set_spec(metadata.mutable_model_spec());
  metadata.add_metadata_field("signature_def");
  tfs::GetModelMetadataRequest bad_metadata = metadata;
  bad_metadata.add_metadata_field("graph_def");
  tfs::GetModelStatusRequest status;
  status.mutable_model_spec()->set_name("ranker");
  return {
      {"predict", seed(0, 0, predict)},
      {"predict_small_limits", seed(0, 1, predict)},
      {"predict_huge_shape", seed(0, 0, huge)},
      {"predict_bad_content", seed(0, 0, bad_content)},
      {"predict_unknown_rank", seed(0, 0, unknown_rank)},
      {"classify_with_context", seed(1, 0, classify)},
      {"regress_label", seed(2, 0, regress)},
      {"regress_no_examples", seed(2, 0, no_examples)},
      {"multi_inference", seed(3, 0, multi)},
      {"metadata", seed(4, 0, metadata)},
      {"metadata_bad_field", seed(4, 0, bad_metadata)},
      {"status", seed(5, 0, status)},
      {"not_a_proto", std::string("\x00\x00\x0a\xff\xff\xff\xff\x0f", 8)},
  };
}

// ---------------------------------------------------------------------------
// The config files of `recflow serve`

namespace {

constexpr char kConfigPath[] = "/config/file";

// An in-memory file system with two empty model base paths, /models/a and
// /models/b, and the config file at kConfigPath.
std::unique_ptr<MemEnv> ConfigEnv(absl::string_view file) {
  auto env = std::make_unique<MemEnv>();
  for (const char* dir : {"/models", "/models/a", "/models/b", "/config"}) {
    FUZZ_CHECK(env->CreateDir(dir).ok(), dir);
  }
  FUZZ_CHECK(WriteStringToFile(env.get(), kConfigPath, file).ok(), kConfigPath);
  return env;
}

serving::ServerCoreOptions CoreOptions(Env* env, const tfs::ModelServerConfig& config) {
  serving::ServerCoreOptions options;
  options.model_server_config = config;
  options.file_system_poll_wait_seconds = 0;  // one listing in Create, no poll thread
  options.num_load_threads = 1;
  options.num_unload_threads = 0;
  options.env = env;
  return options;
}

std::vector<std::string> SortedNames(const tfs::ModelServerConfig& config) {
  std::set<std::string> names;
  for (const auto& m : config.model_config_list().config()) names.insert(m.name());
  return {names.begin(), names.end()};
}

// Printed as text and read again by `read`, `message` is unchanged.
template <typename Proto>
void CheckTextRoundTrip(const Proto& message, Env* env,
                        absl::Status (*read)(Env*, const std::string&, Proto*)) {
  std::string text;
  FUZZ_CHECK(google::protobuf::TextFormat::PrintToString(message, &text), "print");
  FUZZ_CHECK(WriteStringToFile(env, "/config/printed", text).ok(), "write");
  Proto again;
  absl::Status s = read(env, "/config/printed", &again);
  FUZZ_CHECK(s.ok(), absl::StrCat(s.ToString(), " reading back ", text));
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(message, again),
             absl::StrCat(text, " read back as ", again.ShortDebugString()));
}

template <typename Proto>
absl::Status ReadText(Env* env, const std::string& path, Proto* message) {
  return serving::ReadTextProtoFile(env, path, message);
}

void ModelConfigFile(absl::string_view file) {
  std::unique_ptr<MemEnv> env = ConfigEnv(file);
  tfs::ModelServerConfig config;
  absl::Status s = serving::ReadModelServerConfigFile(env.get(), kConfigPath, &config);
  Note(absl::StrCat("model config: ", s.ok() ? config.ShortDebugString() : s.ToString()));
  if (!s.ok()) return;
  CheckTextRoundTrip(config, env.get(), &serving::ReadModelServerConfigFile);
  auto core = serving::ServerCore::Create(CoreOptions(env.get(), config));
  Note(absl::StrCat("server core: ", core.status().ToString()));
  if (!core.ok()) return;
  FUZZ_CHECK((*core)->ModelNames() == SortedNames(config),
             absl::StrJoin((*core)->ModelNames(), ","));
  FUZZ_CHECK(static_cast<int>((*core)->ModelNames().size()) ==
                 config.model_config_list().config_size(),
             "a model is listed twice");
  s = (*core)->ReloadConfig(config);
  FUZZ_CHECK(s.ok(), absl::StrCat("reloading the config it started with: ", s.ToString()));
}

void ReloadConfigRequest(absl::string_view bytes) {
  tfs::ReloadConfigRequest request;
  if (!ParseProto(bytes, &request)) return;
  std::unique_ptr<MemEnv> env = ConfigEnv("");
  auto core = serving::ServerCore::Create(
      CoreOptions(env.get(), serving::SingleModelConfig("a", "/models/a")));
  FUZZ_CHECK(core.ok(), core.status().ToString());
  absl::Status s = (*core)->ReloadConfig(request.config());
  Note(absl::StrCat("reload ", request.config().ShortDebugString(), ": ", s.ToString()));
  const std::vector<std::string> expected =
      s.ok() ? SortedNames(request.config()) : std::vector<std::string>{"a"};
  FUZZ_CHECK((*core)->ModelNames() == expected,
             absl::StrCat(absl::StrJoin((*core)->ModelNames(), ","), " after ", s.ToString()));
}

void BatchingParametersFile(absl::string_view file) {
  std::unique_ptr<MemEnv> env = ConfigEnv(file);
  tfs::BatchingParameters params;
  absl::Status s = ReadText(env.get(), kConfigPath, &params);
  if (!s.ok()) {
    Note(s.ToString());
    return;
  }
  CheckTextRoundTrip(params, env.get(), &ReadText<tfs::BatchingParameters>);
  absl::StatusOr<serving::BatchingOptions> options = serving::BatchingOptionsFromProto(params);
  if (!options.ok()) {
    Note(options.status().ToString());
    return;
  }
  // Every valid thread count is valid; a fuzzer starts at most two.
  options->num_batch_threads = std::min(options->num_batch_threads, 2);
  auto scheduler = serving::BatchScheduler::Create(*options);
  Note(absl::StrCat("batching ", params.ShortDebugString(), ": ",
                    scheduler.status().ToString()));
  if (!scheduler.ok()) return;
  const serving::BatchingOptions& o = (*scheduler)->options();
  FUZZ_CHECK(o.max_batch_size >= 1 && o.max_enqueued_batches >= 1, params.ShortDebugString());
  FUZZ_CHECK(o.batch_timeout_micros >= 0 &&
                 o.batch_timeout_micros <= serving::kMaxBatchTimeoutMicros,
             params.ShortDebugString());
  const std::vector<int64_t>& sizes = o.allowed_batch_sizes;
  FUZZ_CHECK(sizes.empty() || sizes.back() == o.max_batch_size, params.ShortDebugString());
  for (size_t i = 0; i < sizes.size(); ++i) {
    FUZZ_CHECK(sizes[i] >= 1 && (i == 0 || sizes[i] > sizes[i - 1]),
               params.ShortDebugString());
  }
}

void MonitoringConfigFile(absl::string_view file) {
  std::unique_ptr<MemEnv> env = ConfigEnv(file);
  tfs::MonitoringConfig config;
  absl::Status s = ReadText(env.get(), kConfigPath, &config);
  Note(absl::StrCat("monitoring config: ", s.ok() ? config.ShortDebugString() : s.ToString()));
  if (s.ok()) CheckTextRoundTrip(config, env.get(), &ReadText<tfs::MonitoringConfig>);
}

}  // namespace

// Input: a byte choosing the file (mod 4: a --model_config_file, the
// binary ReloadConfigRequest of ModelService.HandleReloadConfigRequest, a
// --batching_parameters_file, a --monitoring_config_file), then its bytes.
// The text files are read from an in-memory file system as `recflow serve`
// reads them (ReadModelServerConfigFile, ReadTextProtoFile); a model config
// then starts a ServerCore there (base paths /models/a and /models/b exist,
// empty; no poll thread), a ReloadConfigRequest is applied to a core
// serving /models/a, batching parameters make a BatchScheduler. Checked:
// every file that reads prints as text and reads back equal; a core that
// starts serves exactly the configured names, once each, and takes its own
// config again; a reload that fails changes nothing and one that succeeds
// serves exactly the new names; a scheduler that starts has consistent
// options (sizes increasing up to max_batch_size, timeout in range).
RECFLOW_FUZZ_TARGET(model_server_config) {
  InitOnce();
  FuzzInput in(data, size);
  const int kind = in.ConsumeByte() % 4;
  const absl::string_view file = in.ConsumeRest();
  switch (kind) {
    case 0: ModelConfigFile(file); break;
    case 1: ReloadConfigRequest(file); break;
    case 2: BatchingParametersFile(file); break;
    default: MonitoringConfigFile(file); break;
  }
  return 0;
}

RECFLOW_FUZZ_SEEDS(model_server_config) {
  auto seed = [](int kind, const std::string& file) {
    return std::string(1, static_cast<char>(kind)) + file;
  };
  const std::string models = R"(model_config_list {
  config {
    name: "ranker"
    base_path: "/models/a"
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 1 versions: 2 } }
    version_labels { key: "stable" value: 1 }
    version_labels { key: "canary" value: 2 }
  }
  config: {
    name: 'retrieval'
    base_path: "/models/b"
    model_version_policy: { latest: { num_versions: 2 } }
  }
}
)";
  tfs::ReloadConfigRequest reload;
  auto* list = reload.mutable_config()->mutable_model_config_list();
  for (const char* name : {"a", "b"}) {
    auto* model = list->add_config();
    model->set_name(name);
    model->set_base_path(absl::StrCat("/models/", name));
    model->mutable_model_version_policy()->mutable_all();
  }
  tfs::ReloadConfigRequest reload_missing = reload;
  reload_missing.mutable_config()->mutable_model_config_list()->mutable_config(1)
      ->set_base_path("/models/c");
  return {
      {"models", seed(0, models)},
      {"models_num_versions_0", seed(0, "model_config_list { config { name: \"m\" "
                                        "base_path: \"/models/a\" model_version_policy { "
                                        "latest { num_versions: 0 } } } }")},
      {"models_twice", seed(0, "model_config_list { config { name: \"m\" base_path: "
                               "\"/models/a\" } config { name: \"m\" base_path: "
                               "\"/models/b\" } }")},
      {"models_missing_dir", seed(0, "model_config_list { config { name: \"m\" "
                                     "base_path: \"/models/zz\" } }")},
      {"models_syntax_error", seed(0, "model_config_list { config { nme: \"m\" } }")},
      {"reload", seed(1, reload.SerializeAsString())},
      {"reload_missing_dir", seed(1, reload_missing.SerializeAsString())},
      {"batching", seed(2, "max_batch_size { value: 128 }\n"
                           "batch_timeout_micros { value: 1000 }\n"
                           "max_enqueued_batches { value: 100 }\n"
                           "num_batch_threads { value: 2 }\n"
                           "allowed_batch_sizes: 32\nallowed_batch_sizes: 64\n"
                           "allowed_batch_sizes: 128\n")},
      {"batching_bad_sizes", seed(2, "max_batch_size { value: 100 } allowed_batch_sizes: 64 "
                                     "allowed_batch_sizes: 32")},
      {"batching_timeout", seed(2, "batch_timeout_micros { value: 9223372036854775807 }")},
      {"monitoring", seed(3, "prometheus_config {\n  enable: true\n"
                             "  path: \"/monitoring/prometheus/metrics\"\n}\n")},
  };
}

}  // namespace recflow::fuzz
