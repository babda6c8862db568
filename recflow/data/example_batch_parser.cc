// ExampleBatchParser (declared in example_parser.h): tf.Example -> the batch
// layout of batch.h, on top of ExampleParser.

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "recflow/core/status.h"
#include "recflow/data/example_parser.h"

namespace recflow::data {

absl::StatusOr<std::unique_ptr<ExampleBatchParser>> ExampleBatchParser::Create(
    ExampleBatchSpec spec, ExampleParserOptions options) {
  std::unique_ptr<ExampleBatchParser> p(new ExampleBatchParser());
  ExampleSpec es;
  auto one_float = [](const std::string& key, std::optional<float> def) {
    DenseFeature f;
    f.key = key;
    f.dtype = DT_FLOAT;
    f.shape = TensorShape({1});
    f.accept_int64 = true;
    if (def.has_value())
      f.default_value = Tensor::FromVector<float>({*def}, TensorShape({1}));
    return f;
  };
  if (!spec.label_key.empty())
    es.dense.push_back(one_float(spec.label_key, spec.label_default));
  for (const std::string& key : spec.dense_keys) {
    if (key.empty()) return errors::InvalidArgument("a dense key is empty");
    es.dense.push_back(one_float(key, spec.dense_default));
    p->schema_.dense_names.push_back(key);
  }
  std::vector<std::pair<int, int>> weight_pairs;
  for (const ExampleSparseFeature& f : spec.sparse) {
    if (f.key.empty()) return errors::InvalidArgument("a sparse key is empty");
    VarLenFeature ids;
    ids.key = f.key;
    ids.dtype = DT_INT64;
    ids.hash_bytes = true;
    es.var_len.push_back(ids);
    p->schema_.sparse.push_back({f.key, !f.weight_key.empty()});
    if (!f.weight_key.empty()) {
      VarLenFeature w;
      w.key = f.weight_key;
      w.dtype = DT_FLOAT;
      es.var_len.push_back(w);
      weight_pairs.emplace_back(static_cast<int>(es.var_len.size()) - 2,
                                static_cast<int>(es.var_len.size()) - 1);
    }
  }
  ASSIGN_OR_RETURN(p->parser_,
                   ExampleParser::Create(std::move(es), std::move(options)));
  p->parser_->weight_pairs_ = std::move(weight_pairs);
  p->spec_ = std::move(spec);
  return p;
}

absl::StatusOr<Batch> ExampleBatchParser::Parse(
    absl::Span<const absl::string_view> serialized,
    absl::Span<const absl::string_view> origins) const {
  ASSIGN_OR_RETURN(ParsedExamples parsed, parser_->Parse(serialized, origins));
  const int64_t b = parsed.batch_size;
  const int64_t n = static_cast<int64_t>(spec_.dense_keys.size());
  Batch batch;
  batch.batch_size = b;
  int d = 0;
  if (!spec_.label_key.empty()) {
    ASSIGN_OR_RETURN(batch.labels,
                     parsed.dense[d++].Reshaped(TensorShape({b})));
  } else {
    ASSIGN_OR_RETURN(batch.labels, Tensor::Create(DT_FLOAT, TensorShape({b})));
    for (float& l : batch.labels.flat<float>()) l = 0.0f;
  }
  ASSIGN_OR_RETURN(batch.dense, Tensor::Create(DT_FLOAT, TensorShape({b, n})));
  float* dense = batch.dense.data<float>();
  for (int64_t j = 0; j < n; ++j) {
    const float* col = parsed.dense[d + j].data<float>();
    for (int64_t r = 0; r < b; ++r) dense[r * n + j] = col[r];
  }
  size_t v = 0;
  for (const ExampleSparseFeature& f : spec_.sparse) {
    SparseBatch sb;
    sb.ids = std::move(parsed.var_len[v].values);
    sb.row_splits = std::move(parsed.var_len[v].row_splits);
    ++v;
    if (!f.weight_key.empty())
      sb.weights = std::move(parsed.var_len[v++].values);
    batch.sparse.push_back(std::move(sb));
  }
  return batch;
}

absl::StatusOr<Batch> ExampleBatchParser::ParseTensor(
    const Tensor& serialized, const Tensor* origins) const {
  ASSIGN_OR_RETURN(std::vector<absl::string_view> records,
                   StringViews(serialized, "serialized examples"));
  std::vector<absl::string_view> names;
  if (origins != nullptr) {
    ASSIGN_OR_RETURN(names, StringViews(*origins, "origins"));
    if (origins->shape() != serialized.shape()) {
      return errors::InvalidArgument("origins ", origins->shape().DebugString(),
                                     " do not match the serialized examples ",
                                     serialized.shape().DebugString());
    }
  }
  return Parse(records, names);
}

absl::StatusOr<Element> ExampleBatchParser::ParseElement(
    const Element& element) const {
  if (element.size() != 1 && element.size() != 2) {
    return errors::InvalidArgument(
        "a tf.Example element is {serialized} or {serialized, origins}, got ",
        element.size(), " components");
  }
  ASSIGN_OR_RETURN(
      Batch batch,
      ParseTensor(element[0], element.size() == 2 ? &element[1] : nullptr));
  return batch.ToElement();
}

std::vector<PartialShape> ExampleBatchParser::output_shapes() const {
  std::vector<PartialShape> out = {
      PartialShape({-1}),
      PartialShape({-1, static_cast<int64_t>(spec_.dense_keys.size())})};
  for (const SparseFeatureSpec& f : schema_.sparse) {
    out.push_back(PartialShape({-1}));
    out.push_back(PartialShape({-1}));
    if (f.weighted) out.push_back(PartialShape({-1}));
  }
  return out;
}

MapFn ParseExampleFn(std::shared_ptr<const ExampleBatchParser> parser) {
  return
      [parser = std::move(parser)](Element element) -> absl::StatusOr<Element> {
        return parser->ParseElement(element);
      };
}

namespace {

class ExampleTextParserImpl final : public TextParser {
 public:
  ExampleTextParserImpl(std::shared_ptr<const ExampleBatchParser> parser, bool log_transform)
      : parser_(std::move(parser)), log_transform_(log_transform) {}
  const BatchSchema& schema() const override { return parser_->schema(); }
  absl::string_view format() const override { return "tfrecord"; }
  absl::StatusOr<Batch> Parse(absl::Span<const absl::string_view> lines,
                              absl::Span<const absl::string_view> origins) const override {
    ASSIGN_OR_RETURN(Batch batch, parser_->Parse(lines, origins));
    if (log_transform_ && batch.dense.NumElements() > 0) {
      for (float& x : batch.dense.flat<float>()) {
        x = x > 0 ? static_cast<float>(std::log1p(static_cast<double>(x))) : 0.0f;
      }
    }
    return batch;
  }

 private:
  std::shared_ptr<const ExampleBatchParser> parser_;
  bool log_transform_;
};

}  // namespace

std::shared_ptr<const TextParser> ExampleTextParser(
    std::shared_ptr<const ExampleBatchParser> parser, bool log_transform) {
  return std::make_shared<ExampleTextParserImpl>(std::move(parser), log_transform);
}

}  // namespace recflow::data
