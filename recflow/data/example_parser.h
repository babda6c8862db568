// tf.train.Example parsing: serialized Examples (recflow/proto/example.proto,
// TensorFlow's wire format) -> tensors, as TensorFlow's ParseExample does,
// and -> the recflow batch layout (recflow/data/batch.h).
//
// ExampleParser takes a feature spec as ParseExample takes it:
//   dense (fixed-length) features: key, dtype (float / int64 / string),
//     per-example shape; a default value, or none (then required);
//   var-len features: key, dtype; any number of values per example.
// For B serialized Examples it yields dense tensors [B, shape...] and, per
// var-len feature, values [nnz] + row_splits int64 [B + 1] (example b holds
// values[row_splits[b] : row_splits[b+1]]; a missing feature is an empty
// row).
//
// ExampleBatchParser maps Examples onto the batch layout: a label key, dense
// float keys (one value each, column order), sparse keys whose int64_list
// values are the ids and whose bytes_list values are hashed to ids with
// Fingerprint64 (as TensorFlow's StringToHashBucketFast hashes), optionally
// weighted by a float feature. In a pipeline it runs as a Map over record
// batches:
//
//   ASSIGN_OR_RETURN(auto parser, ExampleBatchParser::Create(spec, {
//       .policy = {ErrorMode::kSkip}, .stats = ctx_stats}));
//   Dataset ds = Dataset::TFRecord(files, {}, {.records_per_element = 4096,
//                                              .emit_origin = true})
//                    .Map(ParseExampleFn(std::move(parser)), 2);
//
// Bad examples: each error names the example (its index in the batch, and
// its name / origin "path:record N" when given), the feature key and the
// problem, with a stable reason tag used for DataStats:
//   "unparseable"      the bytes are not a valid Example proto
//   "wrong_type"       e.g. a float_list where an int64_list is expected
//   "wrong_length"     a fixed-length feature with the wrong value count (or
//                      weights whose count differs from the ids')
//   "missing_feature"  a required feature is absent
//   "invalid_utf8"     a bytes value of a string feature with validate_utf8
// With ErrorMode::kFail (the default here: a parser used outside a pipeline,
// e.g. by the ParseExample op, fails) Parse returns InvalidArgument for the
// first bad example. With kSkip the bad example is dropped (the result has
// fewer rows; kept_rows() says which) and counted in `stats` by reason.
//
// Proto semantics: unknown fields are skipped; a key present twice in an
// Example's feature map keeps the last value (as protobuf's map parsing
// does); a Feature with no list set is an empty list of any type; packed
// and unpacked repeated encodings are both accepted.
//
// Speed: the parser walks the wire bytes directly (no Example message is
// built), looks keys up with a prediction from the previous example's key
// order, and writes dense values straight into the output rows. Outputs are
// allocated once per batch. A batch is parsed on one thread.
//
// Thread-safety: parsers are immutable after Create; Parse may be called
// concurrently from any number of threads.

#ifndef RECFLOW_DATA_EXAMPLE_PARSER_H_
#define RECFLOW_DATA_EXAMPLE_PARSER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "recflow/core/tensor.h"
#include "recflow/core/threadpool.h"
#include "recflow/data/batch.h"
#include "recflow/data/dataset.h"
#include "recflow/data/text_parsers.h"
#include "recflow/framework/partial_shape.h"

namespace recflow::data {

// A fixed-length feature: every example holds shape.num_elements() values.
struct DenseFeature {
  std::string key;
  DataType dtype = DT_FLOAT;  // DT_FLOAT, DT_INT64 or DT_STRING.
  TensorShape shape;          // Per example: [] and [1] both mean one value.
  // Used when an example lacks the feature: shape.num_elements() values of
  // `dtype` (any shape with that many elements). An uninitialized Tensor()
  // or one with no elements (when shape has some) makes the feature
  // required.
  Tensor default_value;
  // DT_FLOAT only: an int64_list is accepted too and converted (labels are
  // often written as int64).
  bool accept_int64 = false;
  // DT_STRING only: every value must be valid UTF-8.
  bool validate_utf8 = false;
};

// A variable-length feature: any number of values per example.
struct VarLenFeature {
  std::string key;
  DataType dtype = DT_INT64;  // DT_FLOAT, DT_INT64 or DT_STRING.
  // DT_INT64 only: a bytes_list is accepted too; each value's id is
  // Fingerprint64(value) as int64.
  bool hash_bytes = false;
  bool validate_utf8 = false;  // DT_STRING only.
};

struct ExampleSpec {
  std::vector<DenseFeature> dense;
  std::vector<VarLenFeature> var_len;
};

struct ExampleParserOptions {
  ErrorPolicy policy = {ErrorMode::kFail};
  // Where skipped examples are counted under kSkip. May be null.
  std::shared_ptr<DataStats> stats;
};

struct ParsedExamples {
  struct VarLen {
    Tensor values;      // dtype [nnz]
    Tensor row_splits;  // int64 [batch_size + 1]
  };
  int64_t batch_size = 0;     // rows kept (== the input size unless skipped)
  std::vector<Tensor> dense;  // per ExampleSpec::dense: [batch_size, shape...]
  std::vector<VarLen> var_len;  // per ExampleSpec::var_len
  // Input index of each kept row; empty when every example was kept.
  std::vector<int64_t> kept_rows;
};

namespace example_internal {
struct Slot;  // one feature to extract (example_parser.cc)
}  // namespace example_internal
namespace wire {
class KeyTable;  // example_wire.h
}  // namespace wire

class ExampleParser {
 public:
  // InvalidArgument naming the feature for: an empty or duplicate key, an
  // unsupported dtype, a default of the wrong dtype or element count, an
  // option that does not fit the dtype.
  static absl::StatusOr<std::unique_ptr<ExampleParser>> Create(
      ExampleSpec spec, ExampleParserOptions options = {});
  ~ExampleParser();

  // Parses serialized[0..B). `names` is empty or holds one name per example
  // (used in errors only). With a `pool` and at least 2 *
  // kMinExamplesPerChunk examples, parses chunks on the pool's threads and
  // the caller's, then concatenates them (the same result; under kFail the
  // error of the lowest failing example).
  absl::StatusOr<ParsedExamples> Parse(
      absl::Span<const absl::string_view> serialized,
      absl::Span<const absl::string_view> names = {},
      ThreadPool* pool = nullptr) const;
  static constexpr int64_t kMinExamplesPerChunk = 256;

  const ExampleSpec& spec() const { return spec_; }
  const ExampleParserOptions& options() const { return options_; }

 private:
  friend class ExampleBatchParser;
  ExampleParser(ExampleSpec spec, ExampleParserOptions options);
  absl::Status Init();
  // Parses one range; example indices in errors and kept_rows start at base.
  absl::StatusOr<ParsedExamples> ParseRange(
      absl::Span<const absl::string_view> serialized,
      absl::Span<const absl::string_view> names, int64_t base) const;
  // Concatenates the chunks of Parse (each `per` examples but the last).
  absl::StatusOr<ParsedExamples> Merge(
      std::vector<absl::StatusOr<ParsedExamples>>& parts, int64_t per) const;

  ExampleSpec spec_;
  ExampleParserOptions options_;
  std::vector<example_internal::Slot> slots_;
  std::unique_ptr<wire::KeyTable> keys_;
  // (ids var-len index, weights var-len index) pairs whose counts must agree.
  std::vector<std::pair<int, int>> weight_pairs_;
};

// ---------------------------------------------------------------------------
// The batch layout.

struct ExampleSparseFeature {
  std::string key;  // int64_list: ids as they are; bytes_list: hashed ids.
  // Optional: a float_list feature with one weight per id (the feature is
  // then weighted in the BatchSchema). An example with ids but no weights
  // feature gets weight 1 for each id.
  std::string weight_key;
};

struct ExampleBatchSpec {
  // A float or int64 feature with one value. Empty: labels are all 0.
  std::string label_key;
  // Used when the label is missing; unset: the label is required.
  std::optional<float> label_default;
  // Float or int64 features with one value each, in column order.
  std::vector<std::string> dense_keys;
  float dense_default = 0.0f;  // For a missing dense feature.
  std::vector<ExampleSparseFeature> sparse;
};

class ExampleBatchParser {
 public:
  // InvalidArgument naming the key for empty or duplicate keys.
  static absl::StatusOr<std::unique_ptr<ExampleBatchParser>> Create(
      ExampleBatchSpec spec, ExampleParserOptions options = {});

  // BatchSchema: dense names are the dense keys, sparse names the sparse
  // keys.
  const BatchSchema& schema() const { return schema_; }

  absl::StatusOr<Batch> Parse(
      absl::Span<const absl::string_view> serialized,
      absl::Span<const absl::string_view> origins = {}) const;
  // A string tensor [B] (or a scalar: a batch of one), with origins of the
  // same shape or null. InvalidArgument on other dtypes or shapes.
  absl::StatusOr<Batch> ParseTensor(const Tensor& serialized,
                                    const Tensor* origins = nullptr) const;
  // {serialized} or {serialized, origins} -> Batch::ToElement().
  absl::StatusOr<Element> ParseElement(const Element& element) const;

  // For Dataset::Map's out_dtypes / out_shapes (batch dimension unknown).
  std::vector<DataType> output_dtypes() const { return schema_.dtypes(); }
  std::vector<PartialShape> output_shapes() const;

 private:
  ExampleBatchParser() = default;
  ExampleBatchSpec spec_;
  BatchSchema schema_;
  std::unique_ptr<ExampleParser> parser_;
};

// A MapFn over record elements that calls parser->ParseElement.
MapFn ParseExampleFn(std::shared_ptr<const ExampleBatchParser> parser);

// `parser` as a TextParser (format() "tfrecord"), so that the stages built
// for text lines (CountingParseFn, CheckedBatches: checked_batches.h) run
// over serialized Examples with "path:N" origins. With log_transform each
// dense value x becomes log(1 + max(x, 0)), as CriteoParser's (a missing
// one is dense_default, 0 by default, either way).
std::shared_ptr<const TextParser> ExampleTextParser(
    std::shared_ptr<const ExampleBatchParser> parser, bool log_transform);

// Views a string tensor (scalar or vector) as string_views into it, for
// Parse. InvalidArgument naming `what` for another dtype or rank.
absl::StatusOr<std::vector<absl::string_view>> StringViews(
    const Tensor& t, absl::string_view what);

}  // namespace recflow::data

#endif  // RECFLOW_DATA_EXAMPLE_PARSER_H_
