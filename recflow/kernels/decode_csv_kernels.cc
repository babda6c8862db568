// CPU kernel of TensorFlow's DecodeCSV (ops/parsing_ops.cc), with
// TensorFlow's field rules:
//   - fields are separated by the one-character field_delim; a record that
//     ends with the delimiter has an empty last field; an empty record has
//     no field;
//   - with use_quote_delim, a field that starts with '"' runs to a '"'
//     followed by the delimiter or the end ("" inside is one '"'); a '"'
//     inside an unquoted field is an error, as is '\r' or '\n' (a '\r' or
//     '\n' where a field starts is skipped);
//   - an empty field or one equal to na_value takes the column's default,
//     and is an error when the column has none (required);
//   - numbers may have spaces around them; int32 / int64 must fit; float
//     and double accept inf and nan;
//   - with select_cols only those columns are decoded (and checked), and a
//     record needs at least select_cols.back() + 1 fields.
// Errors are InvalidArgument naming the record (its index in `records`),
// the field and the text. Records are decoded in parallel shards; the error
// reported is the one of the lowest failing record.
#include <cctype>
#include <charconv>
#include <deque>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

// At most 64 bytes of a record for messages.
std::string Show(absl::string_view s) {
  if (s.size() <= 64) return std::string(s);
  return absl::StrCat(s.substr(0, 64), "...");
}

absl::string_view TrimSpaces(absl::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

template <typename T>
bool ParseInt(absl::string_view s, T* out) {
  s = TrimSpaces(s);
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s.front() == '-') return false;
  }
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

template <typename T>
bool ParseReal(absl::string_view s, T* out) {
  s = TrimSpaces(s);
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s.front() == '-') return false;
  }
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out,
                                   std::chars_format::general);
  if (ptr != s.data() + s.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    // Rounded as TensorFlow rounds: to +-inf on overflow, to 0 on underflow.
    const std::string copy(s);
    const double v = std::strtod(copy.c_str(), nullptr);
    *out = static_cast<T>(v);
    return true;
  }
  return ec == std::errc();
}

struct CsvConfig {
  std::vector<DataType> types;
  std::vector<int64_t> select_cols;  // empty: every column
  char delim = ',';
  bool use_quote_delim = true;
  std::string na_value;
};

// Splits `record` into the selected fields (quotes removed). Fields are
// views into `record`, or into `scratch` (a deque: its strings never move)
// when a quoted field holds "".
absl::Status SplitRecord(const CsvConfig& cfg, absl::string_view record,
                         int64_t index, std::vector<absl::string_view>* fields,
                         std::deque<std::string>* scratch) {
  fields->clear();
  scratch->clear();
  const bool all = cfg.select_cols.empty();
  size_t want = 0;  // next index into select_cols
  int64_t column = 0;
  size_t i = 0;
  const size_t n = record.size();
  auto bad = [&](absl::string_view what) {
    return errors::InvalidArgument("record ", index, ", field ", column, ": ",
                                   what, ": '", Show(record), "'");
  };
  while (i < n) {
    if (record[i] == '\n' || record[i] == '\r') {
      ++i;
      continue;
    }
    const bool include =
        all || (want < cfg.select_cols.size() && cfg.select_cols[want] == column);
    absl::string_view field;
    if (cfg.use_quote_delim && record[i] == '"') {
      ++i;
      const size_t begin = i;
      bool escaped = false;
      while (true) {
        if (i >= n) return bad("quoted field has no closing quote");
        if (record[i] == '"') {
          if (i + 1 < n && record[i + 1] == '"') {
            escaped = true;
            i += 2;
            continue;
          }
          if (i + 1 == n || record[i + 1] == cfg.delim) break;
          return bad(
              "a quote inside a quoted field has to be escaped by another "
              "quote, and a quoted field has to end with a quote followed by "
              "the delimiter or the end");
        }
        ++i;
      }
      field = record.substr(begin, i - begin);
      if (escaped && include) {
        std::string unescaped;
        for (size_t k = 0; k < field.size(); ++k) {
          unescaped.push_back(field[k]);
          if (field[k] == '"') ++k;  // "" -> "
        }
        scratch->push_back(std::move(unescaped));
        field = scratch->back();
      }
      i += 2;  // the closing quote and the delimiter
    } else {
      const size_t begin = i;
      while (i < n && record[i] != cfg.delim) {
        if ((cfg.use_quote_delim && record[i] == '"') || record[i] == '\n' ||
            record[i] == '\r') {
          return bad("unquoted fields cannot have quotes or CR/LF inside");
        }
        ++i;
      }
      field = record.substr(begin, i - begin);
      ++i;  // the delimiter
    }
    if (include) {
      fields->push_back(field);
      ++want;
      if (!all && want == cfg.select_cols.size()) return absl::OkStatus();
    }
    ++column;
  }
  // A trailing delimiter ends with an empty field.
  if (n > 0 && record[n - 1] == cfg.delim &&
      (all ||
       (want < cfg.select_cols.size() && cfg.select_cols[want] == column))) {
    fields->push_back(absl::string_view());
  }
  return absl::OkStatus();
}

class DecodeCsvOp : public OpKernel {
 public:
  explicit DecodeCsvOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string delim;
    auto init = [&]() -> absl::Status {
      RETURN_IF_ERROR(c->GetAttr("OUT_TYPE", &cfg_.types));
      RETURN_IF_ERROR(c->GetAttr("field_delim", &delim));
      RETURN_IF_ERROR(c->GetAttr("use_quote_delim", &cfg_.use_quote_delim));
      RETURN_IF_ERROR(c->GetAttr("na_value", &cfg_.na_value));
      RETURN_IF_ERROR(c->GetAttr("select_cols", &cfg_.select_cols));
      if (delim.size() != 1) {
        return errors::InvalidArgument(
            "field_delim should be only 1 char, got '", delim, "'");
      }
      cfg_.delim = delim[0];
      const auto& sc = cfg_.select_cols;
      if (!sc.empty() && sc.size() != cfg_.types.size()) {
        return errors::InvalidArgument("select_cols has ", sc.size(),
                                       " columns but OUT_TYPE has ",
                                       cfg_.types.size());
      }
      for (size_t i = 0; i < sc.size(); ++i) {
        if (sc[i] < 0 || (i > 0 && sc[i - 1] >= sc[i])) {
          return errors::InvalidArgument(
              "select_cols should be strictly increasing non-negative "
              "indices, got ",
              sc[i], " at position ", i);
        }
      }
      return absl::OkStatus();
    };
    absl::Status s = init();
    if (!s.ok()) c->SetStatus(s);
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& records = ctx->input(0);
    const int num_cols = static_cast<int>(cfg_.types.size());
    OP_REQUIRES(ctx, records.dtype() == DT_STRING,
                errors::InvalidArgument("records must be strings, got ",
                                        DataTypeString(records.dtype())));
    for (int f = 0; f < num_cols; ++f) {
      const Tensor& d = ctx->input(1 + f);
      OP_REQUIRES(ctx, d.dims() <= 1 && d.NumElements() <= 1,
                  errors::InvalidArgument(
                      "record_defaults[", f, "] has shape ",
                      d.shape().DebugString(),
                      "; there should be at most 1 default per field"));
    }
    std::vector<Tensor*> out(num_cols);
    for (int f = 0; f < num_cols; ++f) {
      OP_REQUIRES_OK(ctx, ctx->allocate_output(f, records.shape(), &out[f]));
    }
    const std::string* recs = records.data<std::string>();
    const int64_t total = records.NumElements();

    std::mutex mu;
    int64_t first_bad = total;
    absl::Status first_error;
    kernels::ParallelRange(ctx, total, 2000, [&](int64_t begin, int64_t end) {
      std::vector<absl::string_view> fields;
      std::deque<std::string> scratch;
      for (int64_t r = begin; r < end; ++r) {
        absl::Status s = DecodeRecord(ctx, recs[r], r, out, &fields, &scratch);
        if (!s.ok()) {
          std::lock_guard<std::mutex> l(mu);
          if (r < first_bad) {
            first_bad = r;
            first_error = std::move(s);
          }
          return;
        }
      }
    });
    OP_REQUIRES_OK(ctx, first_error);
  }

 private:
  absl::Status DecodeRecord(OpKernelContext* ctx, absl::string_view record,
                            int64_t r, const std::vector<Tensor*>& out,
                            std::vector<absl::string_view>* fields,
                            std::deque<std::string>* scratch) const {
    RETURN_IF_ERROR(SplitRecord(cfg_, record, r, fields, scratch));
    const size_t num_cols = cfg_.types.size();
    if (fields->size() != num_cols) {
      if (cfg_.select_cols.empty()) {
        return errors::InvalidArgument("expect ", num_cols,
                                       " fields but have ", fields->size(),
                                       " in record ", r, ": '", Show(record),
                                       "'");
      }
      return errors::InvalidArgument(
          "expect at least ", cfg_.select_cols.back() + 1,
          " fields (select_cols) but have fewer in record ", r, ": '",
          Show(record), "'");
    }
    for (size_t f = 0; f < num_cols; ++f) {
      const absl::string_view field = (*fields)[f];
      const int64_t column =
          cfg_.select_cols.empty() ? static_cast<int64_t>(f) : cfg_.select_cols[f];
      const Tensor& def = ctx->input(1 + static_cast<int>(f));
      const bool missing = field.empty() || field == cfg_.na_value;
      if (missing && def.NumElements() == 0) {
        return errors::InvalidArgument("field ", column,
                                       " is required but missing in record ",
                                       r, ": '", Show(record), "'");
      }
      auto invalid = [&](const char* type) {
        return errors::InvalidArgument("field ", column, " in record ", r,
                                       " is not a valid ", type, ": '",
                                       Show(field), "'");
      };
      switch (cfg_.types[f]) {
        case DT_INT32: {
          int32_t v;
          if (missing) {
            v = def.flat<int32_t>()[0];
          } else if (!ParseInt(field, &v)) {
            return invalid("int32");
          }
          out[f]->data<int32_t>()[r] = v;
          break;
        }
        case DT_INT64: {
          int64_t v;
          if (missing) {
            v = def.flat<int64_t>()[0];
          } else if (!ParseInt(field, &v)) {
            return invalid("int64");
          }
          out[f]->data<int64_t>()[r] = v;
          break;
        }
        case DT_FLOAT: {
          float v;
          if (missing) {
            v = def.flat<float>()[0];
          } else if (!ParseReal(field, &v)) {
            return invalid("float");
          }
          out[f]->data<float>()[r] = v;
          break;
        }
        case DT_DOUBLE: {
          double v;
          if (missing) {
            v = def.flat<double>()[0];
          } else if (!ParseReal(field, &v)) {
            return invalid("double");
          }
          out[f]->data<double>()[r] = v;
          break;
        }
        case DT_STRING:
          out[f]->data<std::string>()[r] =
              missing ? def.flat<std::string>()[0] : std::string(field);
          break;
        default:
          return errors::InvalidArgument("DecodeCSV: dtype ",
                                         DataTypeString(cfg_.types[f]),
                                         " of field ", column,
                                         " is not supported");
      }
    }
    return absl::OkStatus();
  }

  CsvConfig cfg_;
};

REGISTER_KERNEL_BUILDER(Name("DecodeCSV").Device(DEVICE_CPU), DecodeCsvOp);

}  // namespace
}  // namespace recflow
