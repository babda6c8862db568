// Text parsers: batches of text lines (Criteo TSV, libsvm, CSV with a
// declared schema) -> the batch layout of recflow/data/batch.h.
//
// A parser turns B lines into one Batch (labels [B'], dense [B', n], ids +
// row_splits [+ weights] per sparse feature) where B' <= B: lines that are
// bad records are dropped under ErrorMode::kSkip (counted in DataStats by
// reason) or fail the whole batch under ErrorMode::kFail with an
// InvalidArgument that names the line (its origin "path:LINE" when origins
// are given, else its row in the batch), the field (index and name), the
// reason and the offending text (truncated, escaped). docs/formats/text.md
// states the formats, the id schemes and every bad-record rule.
//
// In a pipeline the parser runs as a Map over line batches:
//
//   ASSIGN_OR_RETURN(auto parser, CriteoParser::Create({}));
//   Dataset ds = Dataset::TextLine(files, {}, {.lines_per_element = 4096,
//                                              .emit_origin = true})
//                    .Map(ParseFn(std::move(parser)), /*num_parallel_calls=*/2)
//                    .Prefetch(2);
//
// ParseFn's element is {lines} or {lines, origins}: string tensors [B] (or
// scalars, a batch of one) as TextLine yields them; its result is
// Batch::ToElement() in the parser's BatchSchema.
//
// Speed: one pass over the bytes with hand-written integer / hex parsing, no
// allocation per field or line (outputs are allocated once per batch, at
// their largest size, and sliced), no locking on the good path. A batch is
// parsed on one thread; parallel Map parallelizes across batches.
//
// Thread-safety: parsers are immutable after Create; Parse and ParseFn's
// function may be called concurrently from any number of threads.

#ifndef RECFLOW_DATA_TEXT_PARSERS_H_
#define RECFLOW_DATA_TEXT_PARSERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "recflow/core/tensor.h"
#include "recflow/data/batch.h"
#include "recflow/data/dataset.h"
#include "recflow/framework/partial_shape.h"

namespace recflow::data {

// What a parser does with a bad line; shared by all formats.
struct BadRecordOptions {
  ErrorPolicy policy;  // kSkip (default): drop and count; kFail: error.
  // Where dropped lines are counted (by reason, with the first message).
  // May be null: lines are still dropped, just not counted. Pass the
  // IteratorContext's stats to see them in Iterator::stats().
  std::shared_ptr<DataStats> stats;
  // Longer lines (after removing a trailing '\r') are "line_too_long".
  int64_t max_line_bytes = 1 << 20;
};

// The common face of the text parsers.
class TextParser {
 public:
  virtual ~TextParser() = default;

  virtual const BatchSchema& schema() const = 0;
  // "criteo", "libsvm" or "csv" (for messages).
  virtual absl::string_view format() const = 0;

  // Parses `lines` (a trailing '\r' is removed from each) into one batch.
  // `origins` is empty or holds one "path:LINE" per line; it only names
  // lines in errors. Errors: InvalidArgument (kFail) for a bad line;
  // InvalidArgument when origins has the wrong size.
  virtual absl::StatusOr<Batch> Parse(
      absl::Span<const absl::string_view> lines,
      absl::Span<const absl::string_view> origins = {}) const = 0;

  // The same over a string tensor [B] or scalar (a batch of one), with
  // origins of the same shape or null. InvalidArgument on other dtypes,
  // ranks, or mismatched shapes.
  absl::StatusOr<Batch> ParseTensor(const Tensor& lines,
                                    const Tensor* origins = nullptr) const;

  // {lines} or {lines, origins} -> Batch::ToElement().
  absl::StatusOr<Element> ParseElement(const Element& element) const;

  // Dtypes and shapes of the parsed elements (batch dimension unknown), for
  // Dataset::Map's out_dtypes / out_shapes.
  std::vector<DataType> output_dtypes() const { return schema().dtypes(); }
  std::vector<PartialShape> output_shapes() const;
};

// A MapFn over line elements that calls parser->ParseElement. The parser is
// shared by the function's copies.
MapFn ParseFn(std::shared_ptr<const TextParser> parser);

// ---------------------------------------------------------------------------
// Criteo TSV (the Kaggle / Terabyte click logs):
//   label \t I1 .. I13 \t C1 .. C26
// label 0 or 1; I* integers (a decimal number is accepted too); C* 8 hex
// digits (e.g. 68fd1e64). Any field but the label may be empty (missing).
//
// Schema: dense "I1".."I<num_dense>", sparse "C1".."C<num_categorical>",
// unweighted; a missing C field is an empty row.
//
// Dense value of a present field x: log(1 + max(x, 0)) with log_transform
// (DLRM's preprocessing: negatives clamp to 0), else x. A missing field
// gives dense_default, not transformed.
//
// Categorical ids (IdMode::kHex): field k (0-based, C1 is 0) with hex value
// h (1 to 8 hex digits, either case) has id CriteoHexId(k, h) =
// (k << 32) | h, so equal strings in different fields are different ids and
// every id is >= 0. IdMode::kHash (any bytes, for data that is not hex):
// the id is Fingerprint64(field bytes) as int64 — TensorFlow's
// StringToHashBucketFast hash, not mixed with the field.
//
// Behaviour sequences (sequence_fields non-empty; off by default): after the
// last C field come sequence_fields.size() more columns, H1..Hk, each the
// list of one user's past items, oldest first, separated by ',' (which
// never occurs in a hex value); an empty column is an empty history:
//   label \t I1 .. I13 \t C1 .. C26 \t H1 [\t H2 ...]
//   e.g. "...\t68fd1e64\t05db9164,68fd1e64,8cf07265"
// Sequence Hs holds items of categorical field sequence_fields[s] (0-based:
// 0 is C1) and its ids are exactly that field's ids for the same text:
// CriteoHexId(sequence_fields[s], h) in kHex mode, Fingerprint64(item) in
// kHash mode; so a model can look both up in one embedding table. The
// schema gets sparse features "H1".."Hk" (unweighted) after the C fields.
// Bad records: a line without its sequence columns (or with more columns)
// is "wrong_field_count"; an empty item ("a,,b", a trailing ',') or, in
// kHex mode, an item that is not 1 to 8 hex digits is "bad_sequence"; more
// than max_sequence_length items is "sequence_too_long".
struct CriteoOptions {
  enum class IdMode { kHex, kHash };

  int num_dense = 13;
  int num_categorical = 26;
  bool log_transform = true;
  float dense_default = 0.0f;
  IdMode id_mode = IdMode::kHex;
  // One entry per sequence column H1.., the 0-based categorical field whose
  // id space it shares; each in [0, num_categorical).
  std::vector<int> sequence_fields;
  int64_t max_sequence_length = 1024;  // items per sequence, >= 1
  BadRecordOptions bad_records;
};

inline constexpr int64_t CriteoHexId(int field, uint32_t hex_value) {
  return (static_cast<int64_t>(field) << 32) | hex_value;
}

class CriteoParser : public TextParser {
 public:
  // InvalidArgument for negative feature counts, max_line_bytes < 1,
  // max_sequence_length < 1 or a sequence field out of range.
  static absl::StatusOr<std::unique_ptr<CriteoParser>> Create(
      CriteoOptions options);

  const BatchSchema& schema() const override { return schema_; }
  absl::string_view format() const override { return "criteo"; }
  absl::StatusOr<Batch> Parse(
      absl::Span<const absl::string_view> lines,
      absl::Span<const absl::string_view> origins = {}) const override;
  const CriteoOptions& options() const { return options_; }

 private:
  explicit CriteoParser(CriteoOptions options);
  CriteoOptions options_;
  BatchSchema schema_;
  std::string expected_fields_;  // "expected 40 (label, ...)" for errors
};

// ---------------------------------------------------------------------------
// libsvm / svmlight:  label idx:val idx:val ... [# comment]
// Tokens are separated by runs of spaces or tabs; leading and trailing
// whitespace is ignored; '#' starts a comment; "qid:N" tokens are ignored.
// One weighted sparse feature: ids = idx (a non-negative integer, kept as
// written: libsvm files are usually 1-based), weights = val (a finite
// number). Dense is [B, 0].
//
// Labels: with binary_labels, 1 / +1 -> 1, 0 / -1 -> 0 (written as an
// integer or a decimal, e.g. "1.0"), anything else is "bad_label"; without,
// any finite number is kept as it is.
struct LibsvmOptions {
  std::string feature_name = "features";
  bool binary_labels = true;
  BadRecordOptions bad_records;
};

class LibsvmParser : public TextParser {
 public:
  // InvalidArgument for an empty feature name or max_line_bytes < 1.
  static absl::StatusOr<std::unique_ptr<LibsvmParser>> Create(
      LibsvmOptions options);

  const BatchSchema& schema() const override { return schema_; }
  absl::string_view format() const override { return "libsvm"; }
  absl::StatusOr<Batch> Parse(
      absl::Span<const absl::string_view> lines,
      absl::Span<const absl::string_view> origins = {}) const override;

 private:
  explicit LibsvmParser(LibsvmOptions options);
  LibsvmOptions options_;
  BatchSchema schema_;
};

// ---------------------------------------------------------------------------
// CSV with a declared schema: every line has exactly columns.size() fields
// separated by `delimiter`.
//
// Fields: with `quoting`, a field that starts with '"' runs to the matching
// '"' ("" inside is one '"') and the delimiter may appear inside it (a line
// is still one line: quoted newlines are not supported, TextLine splits
// them). With `trim_whitespace`, spaces and tabs around a field (outside
// its quotes) are ignored unless the delimiter is one of them.
//
// Columns, in order:
//   kLabel  at most one; a finite number; empty is "bad_label". Without a
//           label column labels are 0.
//   kDense  a finite number; empty gives default_value.
//   kSparse one sparse feature (unweighted) named after the column. Values
//           separated by multi_value_separator when it is not '\0' (empty
//           items are skipped); an empty field is an empty row.
//           IdType::kString: id = Fingerprint64(value) as int64;
//           IdType::kInt64: the value is an int64 written in decimal.
//   kIgnore skipped (not even checked).
// Dense names / sparse features follow the column order.
//
// Header: with has_header, a line whose origin is "path:1" is dropped (not
// counted as bad); when no origins are given, a line whose fields equal the
// column names is dropped instead.
struct CsvColumn {
  enum class Kind { kLabel, kDense, kSparse, kIgnore };
  enum class IdType { kString, kInt64 };

  std::string name;
  Kind kind = Kind::kDense;
  IdType id_type = IdType::kString;   // kSparse only.
  char multi_value_separator = '\0';  // kSparse only; '\0': one value.
  float default_value = 0.0f;         // kDense only.
};

struct CsvOptions {
  std::vector<CsvColumn> columns;
  char delimiter = ',';
  bool has_header = false;
  bool quoting = true;
  bool trim_whitespace = true;
  BadRecordOptions bad_records;
};

class CsvParser : public TextParser {
 public:
  // InvalidArgument naming the column for: no columns, an empty or
  // duplicate name, more than one label column, a separator equal to the
  // delimiter or to '"', a delimiter that is '"', '\n' or '\r'.
  static absl::StatusOr<std::unique_ptr<CsvParser>> Create(CsvOptions options);

  const BatchSchema& schema() const override { return schema_; }
  absl::string_view format() const override { return "csv"; }
  absl::StatusOr<Batch> Parse(
      absl::Span<const absl::string_view> lines,
      absl::Span<const absl::string_view> origins = {}) const override;

 private:
  explicit CsvParser(CsvOptions options);
  CsvOptions options_;
  BatchSchema schema_;
  int label_column_ = -1;
};

}  // namespace recflow::data

#endif  // RECFLOW_DATA_TEXT_PARSERS_H_
