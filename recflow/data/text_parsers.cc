// The text parsers' common part and the Criteo TSV parser. libsvm and CSV
// are in libsvm_parser.cc and csv_parser.cc.
#include "recflow/data/text_parsers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/fingerprint.h"
#include "recflow/core/status.h"
#include "recflow/data/text_parser_util.h"

namespace recflow::data {
namespace text_internal {

std::string ShowText(absl::string_view s) {
  constexpr size_t kMax = 64;
  if (s.size() <= kMax) return absl::CHexEscape(s);
  return absl::StrCat(absl::CHexEscape(s.substr(0, kMax)), "...");
}

std::string LineName(absl::Span<const absl::string_view> origins, int64_t row) {
  if (origins.empty()) return absl::StrCat("row ", row, " of the batch");
  return std::string(origins[row]);
}

absl::Status CheckOrigins(absl::string_view format, size_t num_lines,
                          size_t num_origins) {
  if (num_origins != 0 && num_origins != num_lines) {
    return errors::InvalidArgument(
        format, " parser: ", num_lines, " lines but ", num_origins,
        " origins; give one origin per line or none");
  }
  return absl::OkStatus();
}

absl::Status ReportBadLine(const BadRecordOptions& opts,
                           absl::string_view format,
                           absl::Span<const absl::string_view> origins,
                           int64_t row, absl::string_view field_name,
                           const LineError& error) {
  if (opts.policy.mode == ErrorMode::kSkip && opts.stats == nullptr) {
    return absl::OkStatus();
  }
  std::string where = absl::StrCat(format, " line ", LineName(origins, row));
  if (error.field >= 0) {
    absl::StrAppend(&where, ", field ", error.field, " (", field_name, ")");
  }
  std::string what = error.expected;
  if (std::strcmp(error.reason, "wrong_field_count") == 0) {
    what = absl::StrCat(error.count, " fields, ", error.expected);
  }
  absl::Status status = errors::InvalidArgument(
      where, ": ", error.reason, ": ", what, ": '", ShowText(error.text), "'");
  if (opts.stats == nullptr) return status;  // kFail
  return HandleBadRecord(opts.policy, opts.stats.get(), error.reason,
                         std::move(status));
}

}  // namespace text_internal

using text_internal::LineError;

// ---------------------------------------------------------------------------
// TextParser

absl::StatusOr<Batch> TextParser::ParseTensor(const Tensor& lines,
                                              const Tensor* origins) const {
  if (lines.dtype() != DT_STRING || lines.dims() > 1) {
    return errors::InvalidArgument(
        format(), " parser: lines must be a string scalar or vector, got ",
        DataTypeString(lines.dtype()), " ", lines.shape().DebugString());
  }
  if (origins != nullptr &&
      (origins->dtype() != DT_STRING || origins->shape() != lines.shape())) {
    return errors::InvalidArgument(
        format(), " parser: origins must be string ",
        lines.shape().DebugString(), " like the lines, got ",
        DataTypeString(origins->dtype()), " ", origins->shape().DebugString());
  }
  const int64_t n = lines.NumElements();
  std::vector<absl::string_view> views(n);
  const std::string* src = lines.data<std::string>();
  for (int64_t i = 0; i < n; ++i) views[i] = src[i];
  std::vector<absl::string_view> origin_views;
  if (origins != nullptr) {
    origin_views.resize(n);
    const std::string* o = origins->data<std::string>();
    for (int64_t i = 0; i < n; ++i) origin_views[i] = o[i];
  }
  return Parse(views, origin_views);
}

absl::StatusOr<Element> TextParser::ParseElement(const Element& element) const {
  if (element.empty() || element.size() > 2) {
    return errors::InvalidArgument(
        format(),
        " parser: expected an element {lines} or {lines, origins}, "
        "got ",
        element.size(), " components");
  }
  ASSIGN_OR_RETURN(
      Batch batch,
      ParseTensor(element[0], element.size() == 2 ? &element[1] : nullptr));
  return batch.ToElement();
}

std::vector<PartialShape> TextParser::output_shapes() const {
  const BatchSchema& s = schema();
  std::vector<PartialShape> out = {
      PartialShape({kUnknownDim}),
      PartialShape({kUnknownDim, static_cast<int64_t>(s.dense_names.size())})};
  for (const SparseFeatureSpec& f : s.sparse) {
    out.push_back(PartialShape({kUnknownDim}));
    out.push_back(PartialShape({kUnknownDim}));
    if (f.weighted) out.push_back(PartialShape({kUnknownDim}));
  }
  return out;
}

MapFn ParseFn(std::shared_ptr<const TextParser> parser) {
  return [parser = std::move(parser)](Element element) {
    return parser->ParseElement(element);
  };
}

// ---------------------------------------------------------------------------
// Criteo

namespace {

// log(1 + x) for small non-negative integers, computed as the slow path
// computes it (double log1p rounded to float), so both paths agree bit for
// bit.
constexpr int64_t kLogTableSize = 4096;
const float* LogTable() {
  static const float* table = [] {
    float* t = new float[kLogTableSize];
    for (int64_t i = 0; i < kLogTableSize; ++i) {
      t[i] = static_cast<float>(std::log1p(static_cast<double>(i)));
    }
    return t;
  }();
  return table;
}

inline float DenseFromInt(int64_t x, bool log_transform, const float* table) {
  if (!log_transform) return static_cast<float>(x);
  if (x <= 0) return 0.0f;
  if (x < kLogTableSize) return table[x];
  return static_cast<float>(std::log1p(static_cast<double>(x)));
}

inline float DenseFromFloat(float x, bool log_transform) {
  if (!log_transform) return x;
  if (!(x > 0)) return 0.0f;
  return static_cast<float>(std::log1p(static_cast<double>(x)));
}

inline const char* FieldEnd(const char* p, const char* end) {
  const void* tab = std::memchr(p, '\t', end - p);
  return tab == nullptr ? end : static_cast<const char*>(tab);
}

// 8 hex digits at u[0..7] -> *out; false (and *out untouched) if any is not
// a hex digit. Branch-free: the common Criteo case in one step.
inline bool Hex8(const uint8_t* u, uint32_t* out) {
  const auto& t = text_internal::kHexValue;
  const uint32_t d0 = t[u[0]], d1 = t[u[1]], d2 = t[u[2]], d3 = t[u[3]];
  const uint32_t d4 = t[u[4]], d5 = t[u[5]], d6 = t[u[6]], d7 = t[u[7]];
  if ((d0 | d1 | d2 | d3 | d4 | d5 | d6 | d7) > 15) return false;
  *out = (d0 << 28) | (d1 << 24) | (d2 << 20) | (d3 << 16) | (d4 << 12) |
         (d5 << 8) | (d6 << 4) | d7;
  return true;
}

int64_t CountFields(const char* p, const char* end) {
  return 1 + std::count(p, end, '\t');
}

// Output pointers of one batch. The running id count of feature k is
// splits[k][row]: a failed line never advances `row`, so it needs no undo
// (a sequence's ids are cut back to seq_splits[s][row] before each line).
struct CriteoOut {
  float* labels;
  float* dense;                      // [B, nd]
  int64_t* const* ids;               // [nc] arrays of B
  int64_t* const* splits;            // [nc] arrays of B + 1
  std::vector<int64_t>* seq_ids;     // [ns] growing id lists
  int64_t* const* seq_splits;        // [ns] arrays of B + 1
};

// Parses one line into row `row` of `out`. On failure fills *err and
// returns false.
template <bool kHex>
bool ParseCriteoLine(const char* p, const char* end, const CriteoOptions& o,
                     const float* table, int64_t row, const CriteoOut& out,
                     const char* expected_fields, LineError* err) {
  const int nd = o.num_dense;
  const int nc = o.num_categorical;
  const int ns = static_cast<int>(o.sequence_fields.size());
  const int num_fields = 1 + nd + nc + ns;
  const char* const line_begin = p;
  auto wrong_count = [&]() {
    err->reason = "wrong_field_count";
    err->field = -1;
    err->text = absl::string_view(line_begin, end - line_begin);
    err->count = CountFields(line_begin, end);
    err->expected = expected_fields;
    return false;
  };
  // After field `index` (0-based column): a tab, or the end for the last.
  auto separator = [&](int index) {
    if (index + 1 < num_fields) {
      if (p == end) return false;
      ++p;  // It is a tab: every field parser stops at a tab or the end.
      return true;
    }
    return p == end;
  };

  // Label.
  if (end - p >= 2 && (p[0] == '0' || p[0] == '1') && p[1] == '\t') {
    out.labels[row] = static_cast<float>(p[0] - '0');
    p += 1;
  } else {
    const char* fe = FieldEnd(p, end);
    float v;
    if (!text_internal::ParseFiniteFloat(absl::string_view(p, fe - p), &v) ||
        (v != 0.0f && v != 1.0f)) {
      err->reason = "bad_label";
      err->field = 0;
      err->text = absl::string_view(p, fe - p);
      err->expected = "expected 0 or 1";
      return false;
    }
    out.labels[row] = v == 1.0f ? 1.0f : 0.0f;
    p = fe;
  }
  if (!separator(0)) return wrong_count();

  // Dense.
  float* dense_row = out.dense + row * nd;
  for (int j = 0; j < nd; ++j) {
    const char* fs = p;
    float v;
    if (p == end || *p == '\t') {
      v = o.dense_default;
    } else {
      bool neg = false;
      if (*p == '-') {
        neg = true;
        ++p;
      }
      const char* ds = p;
      const char* dlimit = end - p > 18 ? p + 18 : end;
      uint64_t x = 0;
      unsigned d;
      while (p < dlimit && (d = static_cast<unsigned>(*p) - '0') < 10) {
        x = x * 10 + d;
        ++p;
      }
      if (p > ds && (p == end || *p == '\t')) {
        const int64_t xi =
            neg ? -static_cast<int64_t>(x) : static_cast<int64_t>(x);
        v = DenseFromInt(xi, o.log_transform, table);
      } else {  // A decimal, a long integer, or junk.
        const char* fe = FieldEnd(fs, end);
        float f;
        if (!text_internal::ParseFiniteFloat(absl::string_view(fs, fe - fs),
                                             &f)) {
          err->reason = "not_a_number";
          err->field = 1 + j;
          err->text = absl::string_view(fs, fe - fs);
          err->expected = "expected an integer (or a decimal number)";
          return false;
        }
        v = DenseFromFloat(f, o.log_transform);
        p = fe;
      }
    }
    dense_row[j] = v;
    if (!separator(1 + j)) return wrong_count();
  }

  // Categorical.
  for (int k = 0; k < nc; ++k) {
    const char* fs = p;
    int64_t id;
    if constexpr (kHex) {
      uint32_t h = 0;
      if (end - p >= 8 && (end - p == 8 || p[8] == '\t') &&
          Hex8(reinterpret_cast<const uint8_t*>(p), &h)) {
        p += 8;  // Criteo's own form: exactly 8 hex digits.
      } else {
        unsigned d;
        while (p < end &&
               (d = text_internal::kHexValue[static_cast<uint8_t>(*p)]) < 16) {
          h = (h << 4) | d;
          ++p;
        }
      }
      if ((p != end && *p != '\t') || p - fs > 8) {
        const char* fe = FieldEnd(fs, end);
        err->reason = "bad_id";
        err->field = 1 + nd + k;
        err->text = absl::string_view(fs, fe - fs);
        err->expected = "expected 1 to 8 hex digits";
        return false;
      }
      id = CriteoHexId(k, h);
    } else {
      p = FieldEnd(p, end);
      id = p > fs ? static_cast<int64_t>(
                        Fingerprint64(absl::string_view(fs, p - fs)))
                  : 0;
    }
    int64_t* const splits = out.splits[k];
    const int64_t n = splits[row];
    out.ids[k][n] = id;
    splits[row + 1] = n + (p > fs ? 1 : 0);
    if (!separator(1 + nd + k)) return wrong_count();
  }

  // Sequences: items separated by ','.
  for (int s = 0; s < ns; ++s) {
    const char* const fs = p;
    const char* const fe = FieldEnd(p, end);
    std::vector<int64_t>& ids = out.seq_ids[s];
    int64_t* const splits = out.seq_splits[s];
    ids.resize(splits[row]);  // Drops what a failed line left.
    const int field = o.sequence_fields[s];
    auto bad = [&](const char* reason, absl::string_view text,
                   const char* expected) {
      err->reason = reason;
      err->field = 1 + nd + nc + s;
      err->text = text;
      err->expected = expected;
      return false;
    };
    int64_t count = 0;
    while (p < fe) {
      const char* const is = p;
      const void* comma = std::memchr(p, ',', fe - p);
      const char* const ie =
          comma == nullptr ? fe : static_cast<const char*>(comma);
      if (ie == is) {
        return bad("bad_sequence", absl::string_view(fs, fe - fs),
                   "expected items separated by single ',' (an empty item)");
      }
      if (++count > o.max_sequence_length) {
        return bad("sequence_too_long", absl::string_view(fs, fe - fs),
                   "more items than max_sequence_length");
      }
      if constexpr (kHex) {
        uint32_t h = 0;
        if (ie - is == 8 && Hex8(reinterpret_cast<const uint8_t*>(is), &h)) {
          p = ie;
        } else {
          unsigned d;
          while (p < ie && (d = text_internal::kHexValue[static_cast<uint8_t>(
                                *p)]) < 16) {
            h = (h << 4) | d;
            ++p;
          }
          if (p != ie || ie - is > 8) {
            return bad("bad_sequence", absl::string_view(is, ie - is),
                       "expected items of 1 to 8 hex digits");
          }
        }
        ids.push_back(CriteoHexId(field, h));
      } else {
        ids.push_back(static_cast<int64_t>(
            Fingerprint64(absl::string_view(is, ie - is))));
        p = ie;
      }
      if (p < fe) {
        ++p;  // The ','.
        if (p == fe) {
          return bad("bad_sequence", absl::string_view(fs, fe - fs),
                     "expected items separated by single ',' (a trailing "
                     "',')");
        }
      }
    }
    splits[row + 1] = static_cast<int64_t>(ids.size());
    if (!separator(1 + nd + nc + s)) return wrong_count();
  }
  return true;
}

}  // namespace

CriteoParser::CriteoParser(CriteoOptions options)
    : options_(std::move(options)) {
  for (int j = 0; j < options_.num_dense; ++j) {
    schema_.dense_names.push_back(absl::StrCat("I", j + 1));
  }
  for (int k = 0; k < options_.num_categorical; ++k) {
    schema_.sparse.push_back({absl::StrCat("C", k + 1), false});
  }
  const int ns = static_cast<int>(options_.sequence_fields.size());
  for (int s = 0; s < ns; ++s) {
    schema_.sparse.push_back({absl::StrCat("H", s + 1), false});
  }
  expected_fields_ = absl::StrCat(
      "expected ", 1 + options_.num_dense + options_.num_categorical + ns,
      " (label, ", options_.num_dense, " integer, ", options_.num_categorical,
      " categorical");
  if (ns > 0) {
    absl::StrAppend(&expected_fields_, ", ", ns, " sequence",
                    ns == 1 ? " H1" : absl::StrCat("s H1..H", ns));
  }
  absl::StrAppend(&expected_fields_, ")");
}

absl::StatusOr<std::unique_ptr<CriteoParser>> CriteoParser::Create(
    CriteoOptions options) {
  if (options.num_dense < 0 || options.num_categorical < 0) {
    return errors::InvalidArgument(
        "criteo parser: num_dense and num_categorical must be >= 0, got ",
        options.num_dense, " and ", options.num_categorical);
  }
  if (options.bad_records.max_line_bytes < 1) {
    return errors::InvalidArgument(
        "criteo parser: max_line_bytes must be >= 1, got ",
        options.bad_records.max_line_bytes);
  }
  if (options.max_sequence_length < 1) {
    return errors::InvalidArgument(
        "criteo parser: max_sequence_length must be >= 1, got ",
        options.max_sequence_length);
  }
  for (size_t s = 0; s < options.sequence_fields.size(); ++s) {
    const int f = options.sequence_fields[s];
    if (f < 0 || f >= options.num_categorical) {
      return errors::InvalidArgument(
          "criteo parser: sequence H", s + 1, " holds items of field ", f,
          " (0-based), but the categorical fields are 0..",
          options.num_categorical - 1, " (C1..C", options.num_categorical,
          ")");
    }
  }
  return std::unique_ptr<CriteoParser>(new CriteoParser(std::move(options)));
}

absl::StatusOr<Batch> CriteoParser::Parse(
    absl::Span<const absl::string_view> lines,
    absl::Span<const absl::string_view> origins) const {
  RETURN_IF_ERROR(
      text_internal::CheckOrigins("criteo", lines.size(), origins.size()));
  const int64_t num_lines = static_cast<int64_t>(lines.size());
  const int nd = options_.num_dense;
  const int nc = options_.num_categorical;

  ASSIGN_OR_RETURN(Tensor labels,
                   Tensor::Create(DT_FLOAT, TensorShape({num_lines})));
  ASSIGN_OR_RETURN(Tensor dense,
                   Tensor::Create(DT_FLOAT, TensorShape({num_lines, nd})));
  std::vector<Tensor> ids(nc), splits(nc);
  std::vector<int64_t*> ids_p(nc), splits_p(nc);
  for (int k = 0; k < nc; ++k) {
    // At most one id per line: allocate B and slice to nnz.
    ASSIGN_OR_RETURN(ids[k],
                     Tensor::Create(DT_INT64, TensorShape({num_lines})));
    ASSIGN_OR_RETURN(splits[k],
                     Tensor::Create(DT_INT64, TensorShape({num_lines + 1})));
    ids_p[k] = ids[k].data<int64_t>();
    splits_p[k] = splits[k].data<int64_t>();
    splits_p[k][0] = 0;
  }
  const int ns = static_cast<int>(options_.sequence_fields.size());
  std::vector<std::vector<int64_t>> seq_ids(ns);
  std::vector<Tensor> seq_splits(ns);
  std::vector<int64_t*> seq_splits_p(ns);
  for (int s = 0; s < ns; ++s) {
    seq_ids[s].reserve(num_lines * 16);
    ASSIGN_OR_RETURN(seq_splits[s],
                     Tensor::Create(DT_INT64, TensorShape({num_lines + 1})));
    seq_splits_p[s] = seq_splits[s].data<int64_t>();
    seq_splits_p[s][0] = 0;
  }
  const CriteoOut out{labels.data<float>(), dense.data<float>(),
                      ids_p.data(),         splits_p.data(),
                      seq_ids.data(),       seq_splits_p.data()};
  const char* const expected_fields = expected_fields_.c_str();

  const float* table = LogTable();
  const bool hex = options_.id_mode == CriteoOptions::IdMode::kHex;
  const BadRecordOptions& bad = options_.bad_records;
  int64_t row = 0;
  for (int64_t i = 0; i < num_lines; ++i) {
    const absl::string_view line = text_internal::StripCr(lines[i]);
    LineError err;
    bool ok;
    if (line.empty()) {
      err.reason = "empty_line";
      err.expected = expected_fields;
      ok = false;
    } else if (static_cast<int64_t>(line.size()) > bad.max_line_bytes) {
      err.reason = "line_too_long";
      err.expected = "longer than max_line_bytes";
      err.text = line;
      ok = false;
    } else {
      const char* p = line.data();
      const char* end = p + line.size();
      ok =
          hex ? ParseCriteoLine<true>(p, end, options_, table, row, out,
                                      expected_fields, &err)
              : ParseCriteoLine<false>(p, end, options_, table, row, out,
                                       expected_fields, &err);
    }
    if (ABSL_PREDICT_TRUE(ok)) {
      ++row;
      continue;
    }
    std::string field_name;
    if (err.field == 0) {
      field_name = "label";
    } else if (err.field > 0 && err.field <= nd) {
      field_name = schema_.dense_names[err.field - 1];
    } else if (err.field > nd) {
      field_name = schema_.sparse[err.field - 1 - nd].name;
    }
    RETURN_IF_ERROR(text_internal::ReportBadLine(bad, "criteo", origins, i,
                                                 field_name, err));
  }

  Batch batch;
  batch.batch_size = row;
  batch.labels = row == num_lines ? labels : labels.Slice(0, row);
  batch.dense = row == num_lines ? dense : dense.Slice(0, row);
  batch.sparse.resize(nc + ns);
  for (int k = 0; k < nc; ++k) {
    batch.sparse[k].ids = ids[k].Slice(0, splits_p[k][row]);
    batch.sparse[k].row_splits = splits[k].Slice(0, row + 1);
  }
  for (int s = 0; s < ns; ++s) {
    const int64_t nnz = seq_splits_p[s][row];
    ASSIGN_OR_RETURN(Tensor seq, Tensor::Create(DT_INT64, TensorShape({nnz})));
    if (nnz > 0) {
      std::memcpy(seq.data<int64_t>(), seq_ids[s].data(),
                  nnz * sizeof(int64_t));
    }
    batch.sparse[nc + s].ids = std::move(seq);
    batch.sparse[nc + s].row_splits = seq_splits[s].Slice(0, row + 1);
  }
  return batch;
}

}  // namespace recflow::data
