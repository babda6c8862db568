#include "recflow/core/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "rapidjson/document.h"

namespace recflow {
namespace {

std::string Json(absl::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

std::string Float(float v) {
  std::string s;
  AppendJsonFloat(v, &s);
  return s;
}

std::string Double(double v) {
  std::string s;
  AppendJsonDouble(v, &s);
  return s;
}

// Parses `json` strictly (valid UTF-8 required) as rapidjson does for the
// REST API; NaN and infinities allowed.
bool Parses(const std::string& json, rapidjson::Document* doc) {
  doc->Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseNanAndInfFlag |
             rapidjson::kParseFullPrecisionFlag>(json.data(), json.size());
  return !doc->HasParseError();
}

TEST(JsonWriterTest, StringEscaping) {
  EXPECT_EQ(Json(std::string("a\"b\\c\n\x01\xff\xc3\xa9", 10)),
            "\"a\\\"b\\\\c\\n\\u0001\xEF\xBF\xBD\xc3\xa9\"");
  EXPECT_EQ(Json(std::string("\b\f\r\t\x1f\x7f/", 7)),
            "\"\\b\\f\\r\\t\\u001f\x7f/\"");
  EXPECT_EQ(Json(std::string("\0", 1)), "\"\\u0000\"");
  EXPECT_EQ(Json(""), "\"\"");
  // Valid sequences of 2, 3 and 4 bytes pass through.
  EXPECT_EQ(Json("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
            "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
}

// Every byte that does not start a valid UTF-8 sequence becomes one U+FFFD.
TEST(JsonWriterTest, InvalidUtf8BecomesReplacementCharacters) {
  const std::string kFffd = "\xEF\xBF\xBD";
  struct Case {
    std::string in;
    std::string out;
  };
  for (const Case& c : std::vector<Case>{
           {"\x80", kFffd},                          // stray continuation
           {"\xc3", kFffd},                          // truncated at the end
           {"\xc3x", kFffd + "x"},                   // truncated mid-string
           {"\xe2\x82", kFffd + kFffd},              // truncated 3-byte
           {"\xc0\xaf", kFffd + kFffd},              // overlong '/'
           {"\xe0\x80\xaf", kFffd + kFffd + kFffd},  // overlong, 3 bytes
           {"\xed\xa0\x80", kFffd + kFffd + kFffd},  // surrogate U+D800
           {"\xf4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},  // > U+10FFFF
           {"\xf8\x88\x80\x80\x80", std::string()},  // 5-byte form
           {"\xfe\xff", kFffd + kFffd},
       }) {
    std::string want = c.out;
    if (want.empty()) {
      for (size_t i = 0; i < c.in.size(); ++i) want += kFffd;
    }
    EXPECT_EQ(Json(c.in), "\"" + want + "\"") << c.in.size();
  }
}

// Reference check: any bytes written as a JSON string parse back, under
// strict UTF-8 validation, to the same bytes when they were valid UTF-8.
TEST(JsonWriterTest, RandomStringsAlwaysParse) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s(rng() % 24, '\0');
    for (char& c : s) {
      switch (rng() % 4) {
        case 0: c = static_cast<char>(rng() % 0x20); break;
        case 1: c = static_cast<char>(0x20 + rng() % 0x60); break;
        default: c = static_cast<char>(rng());
      }
    }
    const std::string json = Json(s);
    rapidjson::Document doc;
    ASSERT_TRUE(Parses(json, &doc)) << json;
    ASSERT_TRUE(doc.IsString());
    const std::string back(doc.GetString(), doc.GetStringLength());
    if (back.find("\xEF\xBF\xBD") == std::string::npos) {
      EXPECT_EQ(back, s);
    }
  }
}

TEST(JsonWriterTest, FloatsPrintAsTfServing) {
  EXPECT_EQ(Float(2.5f), "2.5");
  EXPECT_EQ(Float(3.f), "3.0");
  EXPECT_EQ(Float(0.1f), "0.1");
  EXPECT_EQ(Float(-4.f), "-4.0");
  EXPECT_EQ(Float(1e-5f), "1e-05");
  EXPECT_EQ(Float(9e6f), "9e+06");
  EXPECT_EQ(Float(16777216.f), "16777216.0");
  EXPECT_EQ(Float(1.f / 3), "0.333333343");
  EXPECT_EQ(Float(std::nanf("")), "NaN");
  EXPECT_EQ(Float(std::numeric_limits<float>::infinity()), "Infinity");
  EXPECT_EQ(Float(-std::numeric_limits<float>::infinity()), "-Infinity");
  EXPECT_EQ(Double(0.1), "0.1");
  EXPECT_EQ(Double(1.0 / 3), "0.33333333333333331");
  EXPECT_EQ(Double(-0.0), "-0.0");
}

// Reference check: numbers read back as the same value.
TEST(JsonWriterTest, RandomNumbersRoundTrip) {
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 5000; ++iter) {
    double d;
    const uint64_t bits = rng();
    std::memcpy(&d, &bits, sizeof(d));
    if (!std::isfinite(d)) continue;
    const float f = static_cast<float>(static_cast<double>(rng() % 2000000) / 997 - 1000);
    std::string json = "[" + Double(d) + ", " + Float(f) + "]";
    rapidjson::Document doc;
    ASSERT_TRUE(Parses(json, &doc)) << json;
    EXPECT_EQ(doc[0].GetDouble(), d) << json;
    EXPECT_EQ(static_cast<float>(doc[1].GetDouble()), f) << json;
  }
}

TEST(JsonWriterTest, DocumentsWithSeparators) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject()
      .Key("name").String("m")
      .Key("scores").BeginArray().Float(0.5f).Float(3.f).EndArray()
      .Key("n").Int(-7)
      .Key("u").Uint(18446744073709551615u)
      .Key("ok").Bool(true)
      .Key("none").Null()
      .Key("raw").Raw("{\"a\":1}")
      .Key("empty").BeginObject().EndObject()
      .Key("list").BeginArray().EndArray()
      .Key("approx").Double(1.0 / 3, 4)
      .EndObject();
  EXPECT_EQ(out,
            "{\"name\": \"m\", \"scores\": [0.5, 3.0], \"n\": -7, "
            "\"u\": 18446744073709551615, \"ok\": true, \"none\": null, "
            "\"raw\": {\"a\":1}, \"empty\": {}, \"list\": [], \"approx\": 0.3333}");

  std::string compact;
  JsonWriter c(&compact, {.style = JsonWriter::Style::kCompact});
  c.BeginObject().Key("cluster").BeginObject().Key("ps").BeginArray()
      .String("h:1").String("h:2").EndArray().EndObject()
      .Key("task").BeginObject().Key("index").Int(0).EndObject().EndObject();
  EXPECT_EQ(compact, R"({"cluster":{"ps":["h:1","h:2"]},"task":{"index":0}})");

  std::string top;
  JsonWriter t(&top);
  t.BeginArray().BeginArray().Int(1).EndArray().String("\n").EndArray();
  EXPECT_EQ(top, "[[1], \"\\n\"]");
  top.clear();
  JsonWriter(&top).Double(2.0);
  EXPECT_EQ(top, "2.0");
}

TEST(JsonWriterTest, MultilineContainers) {
  using L = JsonWriter::Layout;
  std::string out;
  JsonWriter w(&out);
  w.BeginObject(L::kMultiline)
      .Key("a").Int(1)
      .Key("list").BeginArray(L::kMultiline)
      .BeginObject().Key("x").Int(1).Key("y").Int(2).EndObject()
      .BeginObject().Key("x").Int(3).EndObject()
      .EndArray()
      .Key("none").BeginArray(L::kMultiline).EndArray()
      .Key("inline").BeginArray().Int(1).Int(2).EndArray()
      .EndObject();
  EXPECT_EQ(out,
            "{\n"
            "  \"a\": 1,\n"
            "  \"list\": [\n"
            "    {\"x\": 1, \"y\": 2},\n"
            "    {\"x\": 3}\n"
            "  ],\n"
            "  \"none\": [],\n"
            "  \"inline\": [1, 2]\n"
            "}");
  std::string flat;
  JsonWriter f(&flat, {.indent = 0});
  f.BeginObject().Key("events").BeginArray(L::kMultiline).Int(1).Int(2).EndArray()
      .EndObject();
  EXPECT_EQ(flat, "{\"events\": [\n1,\n2\n]}");
}

}  // namespace
}  // namespace recflow
