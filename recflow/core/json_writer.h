// JsonWriter: the one way recflow writes JSON text (the REST API's
// responses, Chrome traces, TF_CONFIG, dataset descriptions). It appends to
// a string it does not own and inserts the separators itself:
//
//   std::string out;
//   JsonWriter w(&out);
//   w.BeginObject().Key("name").String("m").Key("scores").BeginArray();
//   for (float s : scores) w.Float(s);
//   w.EndArray().EndObject();
//   // {"name": "m", "scores": [0.5, 3.0]}
//
// Strings (RFC 8259, section 7 and 8.1): the output is always valid UTF-8
// JSON. '"' and '\' are escaped, and so is every control character U+0000
// to U+001F (\b \f \n \r \t, the others as \u00XX). Valid UTF-8 sequences
// are copied as they are. A byte that does not start a valid sequence (a
// stray continuation byte, a truncated or overlong sequence, a surrogate,
// a code point beyond U+10FFFF) cannot be escaped, since JSON escapes name
// code points, not bytes: it is written as U+FFFD, one per such byte.
//
// Numbers: integers in decimal. Floats and doubles are written so that they
// read back as the same value, in the form TF Serving's REST responses use
// (recflow's are matched byte for byte): "%g" with 6 significant digits when
// that reads back exactly, else "%.9g" (float) / "%.17g" (double); ".0" is
// added to a whole number written without '.' or an exponent, so 3 is
// "3.0" and 1e-05 stays "1e-05". NaN and the infinities are written NaN,
// Infinity and -Infinity: not strict JSON, but what TF Serving writes and
// what rapidjson reads with kParseNanAndInfFlag. Double(v, digits) writes
// "%.<digits>g" instead (for summaries read by people; it does not
// round-trip).
//
// Layout: separators ", " and ": " (Style::kSpaced, TF Serving's) or ","
// and ":" (Style::kCompact, rapidjson's). An object or array begun with
// Layout::kMultiline puts each of its elements on a line of its own,
// indented by Options::indent spaces per level of nesting, and its closing
// bracket on a line of its own (an empty one stays "[]" / "{}").
//
// The caller is responsible for the structure (a Key before each value in an
// object, none in an array, every Begin matched by its End); debug builds
// check it.
//
// Not thread-safe; one writer per document.
#ifndef RECFLOW_CORE_JSON_WRITER_H_
#define RECFLOW_CORE_JSON_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"

namespace recflow {

// Appends `s` as a JSON string literal, quotes included (see above).
void AppendJsonString(absl::string_view s, std::string* out);

// Appends a number as JsonWriter::Double / Float write it (see above).
void AppendJsonDouble(double value, std::string* out);
void AppendJsonFloat(float value, std::string* out);

class JsonWriter {
 public:
  enum class Style { kSpaced, kCompact };
  enum class Layout { kInline, kMultiline };
  struct Options {
    Style style = Style::kSpaced;
    int indent = 2;  // spaces per nesting level in kMultiline containers
  };

  // Appends to `*out`, which must outlive the writer. Not owned.
  explicit JsonWriter(std::string* out) : JsonWriter(out, Options()) {}
  JsonWriter(std::string* out, const Options& options);

  JsonWriter& BeginObject(Layout layout = Layout::kInline);
  JsonWriter& EndObject();
  JsonWriter& BeginArray(Layout layout = Layout::kInline);
  JsonWriter& EndArray();
  // The name of the next member of the current object.
  JsonWriter& Key(absl::string_view key);

  JsonWriter& String(absl::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Float(float value);
  JsonWriter& Double(double value, int significant_digits);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // A value that is already JSON text (e.g. a protobuf message printed by
  // protobuf's JSON printer), copied as is.
  JsonWriter& Raw(absl::string_view json);

  std::string* out() const { return out_; }

 private:
  struct Frame {
    bool object = false;
    bool multiline = false;
    bool empty = true;
  };
  // Writes what must precede an element of the current container: a
  // separator after the first, a line break in a multiline one.
  void Separate();
  // Separate(), unless the value follows its Key.
  void BeforeValue();
  void NewLine(size_t depth);
  JsonWriter& Begin(char open, bool object, Layout layout);
  JsonWriter& End(char close, bool object);

  std::string* const out_;  // Not owned.
  const Options options_;
  absl::InlinedVector<Frame, 8> stack_;
  bool after_key_ = false;
};

}  // namespace recflow

#endif  // RECFLOW_CORE_JSON_WRITER_H_
