#include "recflow/data/example_parser.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/fingerprint.h"
#include "recflow/core/status.h"
#include "recflow/data/example_wire.h"

namespace recflow::data {
namespace example_internal {

// One feature to extract, in the order of ExampleSpec (dense first, then
// var-len).
struct Slot {
  std::string key;
  bool dense = true;
  int index = 0;  // into ExampleSpec::dense or ::var_len
  DataType dtype = DT_FLOAT;
  int64_t num_values = 0;  // dense only
  bool required = false;   // dense only
  bool accept_int64 = false;
  bool hash_bytes = false;
  bool validate_utf8 = false;
  // Weights var-len slot that gets 1.0 per id when its feature is absent:
  // the index (into var_len) of the ids it weights, else -1.
  int weights_of = -1;
};

// Per-Parse scratch and the growing var-len outputs.
class ParseState {
 public:
  ParseState(size_t num_slots, size_t num_var_len)
      : feature(num_slots), found(num_slots), var_len(num_var_len) {}

  struct VarLenBuffer {
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::vector<std::string> strings;
    std::vector<int64_t> splits{0};
    size_t size(DataType dtype) const {
      return dtype == DT_INT64   ? ints.size()
             : dtype == DT_FLOAT ? floats.size()
                                 : strings.size();
    }
    void Truncate(DataType dtype, size_t n) {
      if (dtype == DT_INT64)
        ints.resize(n);
      else if (dtype == DT_FLOAT)
        floats.resize(n);
      else
        strings.resize(n);
    }
  };

  std::vector<absl::string_view> feature;  // per slot: Feature message bytes
  std::vector<uint8_t> found;              // per slot
  std::vector<VarLenBuffer> var_len;
  // Scratch for dense features.
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<absl::string_view> bytes;
  // The error of the current example.
  const char* reason = nullptr;
  std::string detail;
  int error_slot = -1;

  bool Fail(const char* why, int slot, std::string text) {
    reason = why;
    error_slot = slot;
    detail = std::move(text);
    return false;
  }
};

}  // namespace example_internal

using example_internal::ParseState;
using example_internal::Slot;
using wire::ListKind;
using wire::Reader;

namespace {

const char* ListName(ListKind kind) {
  switch (kind) {
    case ListKind::kBytes:
      return "bytes_list";
    case ListKind::kFloat:
      return "float_list";
    case ListKind::kInt64:
      return "int64_list";
    case ListKind::kNone:
      break;
  }
  return "no list";
}

const char* ExpectedList(const Slot& s) {
  switch (s.dtype) {
    case DT_INT64:
      return s.hash_bytes ? "int64_list or bytes_list" : "int64_list";
    case DT_FLOAT:
      return s.accept_int64 ? "float_list or int64_list" : "float_list";
    default:
      return "bytes_list";
  }
}

template <typename T>
void CopyDefault(const Tensor& def, int64_t n, T* dst) {
  const T* src = def.data<T>();
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

absl::Status CheckDtype(DataType dtype, absl::string_view what,
                        absl::string_view key) {
  if (dtype == DT_FLOAT || dtype == DT_INT64 || dtype == DT_STRING) {
    return absl::OkStatus();
  }
  return errors::InvalidArgument(what, " feature '", key, "': dtype ",
                                 DataTypeString(dtype),
                                 " is not supported (float, int64 or string)");
}

}  // namespace

ExampleParser::ExampleParser(ExampleSpec spec, ExampleParserOptions options)
    : spec_(std::move(spec)), options_(std::move(options)) {}
ExampleParser::~ExampleParser() = default;

absl::StatusOr<std::unique_ptr<ExampleParser>> ExampleParser::Create(
    ExampleSpec spec, ExampleParserOptions options) {
  std::unique_ptr<ExampleParser> p(
      new ExampleParser(std::move(spec), std::move(options)));
  RETURN_IF_ERROR(p->Init());
  return p;
}

absl::Status ExampleParser::Init() {
  absl::flat_hash_set<std::string> seen;
  std::vector<std::string> keys;
  auto add_key = [&](const std::string& key,
                     absl::string_view what) -> absl::Status {
    if (key.empty())
      return errors::InvalidArgument(what, " feature with an empty key");
    keys.push_back(key);
    if (!seen.insert(key).second) {
      return errors::InvalidArgument("feature key '", key,
                                     "' appears more than once in the spec");
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < spec_.dense.size(); ++i) {
    const DenseFeature& f = spec_.dense[i];
    RETURN_IF_ERROR(add_key(f.key, "dense"));
    RETURN_IF_ERROR(CheckDtype(f.dtype, "dense", f.key));
    Slot s;
    s.key = f.key;
    s.dense = true;
    s.index = static_cast<int>(i);
    s.dtype = f.dtype;
    s.num_values = f.shape.num_elements();
    s.accept_int64 = f.accept_int64;
    s.validate_utf8 = f.validate_utf8;
    if (f.accept_int64 && f.dtype != DT_FLOAT) {
      return errors::InvalidArgument("dense feature '", f.key,
                                     "': accept_int64 needs dtype float");
    }
    if (f.validate_utf8 && f.dtype != DT_STRING) {
      return errors::InvalidArgument("dense feature '", f.key,
                                     "': validate_utf8 needs dtype string");
    }
    s.required = !f.default_value.IsInitialized() ||
                 (f.default_value.NumElements() == 0 && s.num_values > 0);
    if (!s.required) {
      if (f.default_value.dtype() != f.dtype ||
          f.default_value.NumElements() != s.num_values) {
        return errors::InvalidArgument(
            "dense feature '", f.key, "': the default must be ", s.num_values,
            " ", DataTypeString(f.dtype), " values (shape ",
            f.shape.DebugString(), "), got ",
            DataTypeString(f.default_value.dtype()), " ",
            f.default_value.shape().DebugString());
      }
    }
    slots_.push_back(std::move(s));
  }
  for (size_t i = 0; i < spec_.var_len.size(); ++i) {
    const VarLenFeature& f = spec_.var_len[i];
    RETURN_IF_ERROR(add_key(f.key, "var-len"));
    RETURN_IF_ERROR(CheckDtype(f.dtype, "var-len", f.key));
    if (f.hash_bytes && f.dtype != DT_INT64) {
      return errors::InvalidArgument("var-len feature '", f.key,
                                     "': hash_bytes needs dtype int64");
    }
    if (f.validate_utf8 && f.dtype != DT_STRING) {
      return errors::InvalidArgument("var-len feature '", f.key,
                                     "': validate_utf8 needs dtype string");
    }
    Slot s;
    s.key = f.key;
    s.dense = false;
    s.index = static_cast<int>(i);
    s.dtype = f.dtype;
    s.hash_bytes = f.hash_bytes;
    s.validate_utf8 = f.validate_utf8;
    slots_.push_back(std::move(s));
  }
  keys_ = std::make_unique<wire::KeyTable>();
  keys_->Build(keys);
  return absl::OkStatus();
}

namespace {

// Walks Example -> Features -> map entries and records, per slot, the bytes
// of its Feature message (the last one wins for a repeated key).
bool LocateFeatures(absl::string_view example, const std::vector<Slot>& slots,
                    const wire::KeyTable& keys, ParseState* st) {
  if (!st->found.empty()) std::memset(st->found.data(), 0, st->found.size());
  Reader ex(example);
  while (!ex.done()) {
    uint32_t field, wire_type;
    if (!ex.ReadTag(&field, &wire_type)) return false;
    if (field != 1 || wire_type != wire::kLengthDelimited) {
      if (!ex.Skip(wire_type)) return false;
      continue;
    }
    absl::string_view features;
    if (!ex.ReadBytes(&features)) return false;
    Reader fs(features);
    while (!fs.done()) {
      if (!fs.ReadTag(&field, &wire_type)) return false;
      if (field != 1 || wire_type != wire::kLengthDelimited) {
        if (!fs.Skip(wire_type)) return false;
        continue;
      }
      absl::string_view entry, key, value;
      if (!fs.ReadBytes(&entry)) return false;
      if (!wire::ParseMapEntry(entry, &key, &value)) return false;
      const int slot = keys.Find(key);
      if (slot >= 0) {
        st->feature[slot] = value;
        st->found[slot] = 1;
      }
    }
  }
  return true;
}

std::string ValueCount(int64_t n) {
  return absl::StrCat(n, n == 1 ? " value" : " values");
}

}  // namespace

// Decodes the located features of one example into dense row `row` and the
// var-len buffers. On failure sets st's error and returns false (the caller
// rolls the var-len buffers back).
static bool DecodeExample(const std::vector<Slot>& slots,
                          const ExampleSpec& spec,
                          const std::vector<std::pair<int, int>>& weight_pairs,
                          int64_t row, std::vector<Tensor>* dense,
                          ParseState* st) {
  for (size_t si = 0; si < slots.size(); ++si) {
    const Slot& s = slots[si];
    const int slot = static_cast<int>(si);
    ListKind kind = ListKind::kNone;
    absl::string_view list;
    if (st->found[si] && !wire::FindList(st->feature[si], &kind, &list)) {
      return st->Fail("unparseable", slot, "malformed Feature message");
    }
    if (s.dense) {
      Tensor& out = (*dense)[s.index];
      const int64_t n = s.num_values;
      if (!st->found[si]) {
        if (s.required)
          return st->Fail("missing_feature", slot,
                          "required feature is missing");
        const Tensor& def = spec.dense[s.index].default_value;
        switch (s.dtype) {
          case DT_INT64:
            CopyDefault(def, n, out.data<int64_t>() + row * n);
            break;
          case DT_FLOAT:
            CopyDefault(def, n, out.data<float>() + row * n);
            break;
          default:
            CopyDefault(def, n, out.data<std::string>() + row * n);
            break;
        }
        continue;
      }
      int64_t got = 0;
      bool ok = true;
      if (s.dtype == DT_INT64 &&
          (kind == ListKind::kInt64 || kind == ListKind::kNone)) {
        st->ints.clear();
        ok = kind == ListKind::kNone || wire::AppendInt64s(list, &st->ints);
        got = static_cast<int64_t>(st->ints.size());
        if (ok && got == n && n > 0) {
          std::memcpy(out.data<int64_t>() + row * n, st->ints.data(),
                      n * sizeof(int64_t));
        }
      } else if (s.dtype == DT_FLOAT &&
                 (kind == ListKind::kFloat || kind == ListKind::kNone ||
                  (kind == ListKind::kInt64 && s.accept_int64))) {
        st->floats.clear();
        ok = kind == ListKind::kNone ||
             (kind == ListKind::kFloat
                  ? wire::AppendFloats(list, &st->floats)
                  : wire::AppendInt64sAsFloats(list, &st->floats));
        got = static_cast<int64_t>(st->floats.size());
        if (ok && got == n && n > 0) {
          std::memcpy(out.data<float>() + row * n, st->floats.data(),
                      n * sizeof(float));
        }
      } else if (s.dtype == DT_STRING &&
                 (kind == ListKind::kBytes || kind == ListKind::kNone)) {
        st->bytes.clear();
        ok = kind == ListKind::kNone || wire::AppendBytes(list, &st->bytes);
        got = static_cast<int64_t>(st->bytes.size());
        if (ok && got == n) {
          std::string* dst = out.data<std::string>() + row * n;
          for (int64_t i = 0; i < n; ++i) {
            if (s.validate_utf8 && !wire::IsValidUtf8(st->bytes[i])) {
              return st->Fail("invalid_utf8", slot,
                              absl::StrCat("value ", i, " is not valid UTF-8"));
            }
            dst[i].assign(st->bytes[i].data(), st->bytes[i].size());
          }
        }
      } else {
        return st->Fail("wrong_type", slot,
                        absl::StrCat("expected ", ExpectedList(s), ", got ",
                                     ListName(kind)));
      }
      if (!ok)
        return st->Fail("unparseable", slot,
                        absl::StrCat("malformed ", ListName(kind)));
      if (got != n) {
        return st->Fail("wrong_length", slot,
                        absl::StrCat("expected ", ValueCount(n), " (shape ",
                                     spec.dense[s.index].shape.DebugString(),
                                     "), got ", got));
      }
      continue;
    }
    // Var-len.
    if (!st->found[si] || kind == ListKind::kNone) continue;
    ParseState::VarLenBuffer& buf = st->var_len[s.index];
    bool ok;
    if (s.dtype == DT_INT64 && kind == ListKind::kInt64) {
      ok = wire::AppendInt64s(list, &buf.ints);
    } else if (s.dtype == DT_INT64 && kind == ListKind::kBytes &&
               s.hash_bytes) {
      ok = wire::ForEachBytes(list, [&](absl::string_view v) {
        buf.ints.push_back(static_cast<int64_t>(Fingerprint64(v)));
        return true;
      });
    } else if (s.dtype == DT_FLOAT && kind == ListKind::kFloat) {
      ok = wire::AppendFloats(list, &buf.floats);
    } else if (s.dtype == DT_STRING && kind == ListKind::kBytes) {
      int64_t i = 0;
      bool utf8_ok = true;
      ok = wire::ForEachBytes(list, [&](absl::string_view v) {
        if (s.validate_utf8 && !wire::IsValidUtf8(v)) {
          utf8_ok = false;
          return false;
        }
        buf.strings.emplace_back(v.data(), v.size());
        ++i;
        return true;
      });
      if (!utf8_ok) {
        return st->Fail("invalid_utf8", slot,
                        absl::StrCat("value ", i, " is not valid UTF-8"));
      }
    } else {
      return st->Fail(
          "wrong_type", slot,
          absl::StrCat("expected ", ExpectedList(s), ", got ", ListName(kind)));
    }
    if (!ok)
      return st->Fail("unparseable", slot,
                      absl::StrCat("malformed ", ListName(kind)));
  }
  // Weighted ids: the weights' count must match the ids'.
  for (const auto& [ids, weights] : weight_pairs) {
    ParseState::VarLenBuffer& ib = st->var_len[ids];
    ParseState::VarLenBuffer& wb = st->var_len[weights];
    const int64_t n_ids =
        static_cast<int64_t>(ib.ints.size()) - ib.splits.back();
    const int64_t n_w =
        static_cast<int64_t>(wb.floats.size()) - wb.splits.back();
    const int wslot = static_cast<int>(spec.dense.size()) + weights;
    if (n_w == 0 && !st->found[wslot]) {
      wb.floats.insert(wb.floats.end(), n_ids, 1.0f);
    } else if (n_w != n_ids) {
      return st->Fail(
          "wrong_length", wslot,
          absl::StrCat("has ", ValueCount(n_w), " but feature '",
                       spec.var_len[ids].key, "' has ", n_ids, " ids"));
    }
  }
  return true;
}

absl::StatusOr<ParsedExamples> ExampleParser::Parse(
    absl::Span<const absl::string_view> serialized,
    absl::Span<const absl::string_view> names, ThreadPool* pool) const {
  const int64_t batch = static_cast<int64_t>(serialized.size());
  if (!names.empty() && names.size() != serialized.size()) {
    return errors::InvalidArgument("got ", names.size(), " names for ", batch,
                                   " serialized examples");
  }
  const int64_t chunks = pool == nullptr
                             ? 1
                             : std::min<int64_t>(pool->NumThreads() + 1,
                                                 batch / kMinExamplesPerChunk);
  if (chunks <= 1) return ParseRange(serialized, names, 0);
  std::vector<absl::StatusOr<ParsedExamples>> parts(chunks);
  const int64_t per = (batch + chunks - 1) / chunks;
  pool->ParallelFor(
      chunks, /*cost_per_unit=*/per * 2000, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          const int64_t lo = c * per, hi = std::min(batch, lo + per);
          parts[c] = ParseRange(
              serialized.subspan(lo, hi - lo),
              names.empty() ? names : names.subspan(lo, hi - lo), lo);
        }
      });
  return Merge(parts, per);
}

absl::StatusOr<ParsedExamples> ExampleParser::Merge(
    std::vector<absl::StatusOr<ParsedExamples>>& parts, int64_t per) const {
  for (const auto& p : parts)
    RETURN_IF_ERROR(p.status());  // the first example's error
  ParsedExamples out;
  bool skipped = false;
  for (const auto& p : parts) {
    out.batch_size += p->batch_size;
    skipped |= !p->kept_rows.empty();
  }
  const int64_t b = out.batch_size;
  for (size_t d = 0; d < spec_.dense.size(); ++d) {
    TensorShape shape = spec_.dense[d].shape;
    shape.InsertDim(0, b);
    ASSIGN_OR_RETURN(Tensor t, Tensor::Create(spec_.dense[d].dtype, shape));
    const int64_t row = spec_.dense[d].shape.num_elements();
    int64_t at = 0;
    for (auto& p : parts) {
      const Tensor& src = p->dense[d];
      const int64_t n = p->batch_size * row;
      if (t.dtype() == DT_STRING) {
        for (int64_t i = 0; i < n; ++i) {
          t.data<std::string>()[at + i] =
              std::move(p->dense[d].data<std::string>()[i]);
        }
      } else if (n > 0) {
        std::memcpy(t.raw_data() + at * DataTypeSize(t.dtype()), src.raw_data(),
                    n * DataTypeSize(t.dtype()));
      }
      at += n;
    }
    out.dense.push_back(std::move(t));
  }
  out.var_len.resize(spec_.var_len.size());
  for (size_t v = 0; v < spec_.var_len.size(); ++v) {
    const DataType dtype = spec_.var_len[v].dtype;
    int64_t nnz = 0;
    for (const auto& p : parts) nnz += p->var_len[v].values.NumElements();
    ASSIGN_OR_RETURN(Tensor values, Tensor::Create(dtype, TensorShape({nnz})));
    ASSIGN_OR_RETURN(Tensor splits, Tensor::Create(DT_INT64, TensorShape({b + 1})));
    int64_t* sp = splits.data<int64_t>();
    sp[0] = 0;
    int64_t at = 0, row = 0;
    for (auto& p : parts) {
      Tensor& src = p->var_len[v].values;
      const int64_t n = src.NumElements();
      if (dtype == DT_STRING) {
        for (int64_t i = 0; i < n; ++i) {
          values.data<std::string>()[at + i] =
              std::move(src.data<std::string>()[i]);
        }
      } else if (n > 0) {
        std::memcpy(values.raw_data() + at * DataTypeSize(dtype),
                    src.raw_data(), n * DataTypeSize(dtype));
      }
      const int64_t* ps = p->var_len[v].row_splits.data<int64_t>();
      for (int64_t r = 1; r <= p->batch_size; ++r) sp[row + r] = at + ps[r];
      row += p->batch_size;
      at += n;
    }
    out.var_len[v].values = std::move(values);
    out.var_len[v].row_splits = std::move(splits);
  }
  if (skipped) {
    for (size_t c = 0; c < parts.size(); ++c) {
      const ParsedExamples& p = *parts[c];
      if (!p.kept_rows.empty()) {
        out.kept_rows.insert(out.kept_rows.end(), p.kept_rows.begin(),
                             p.kept_rows.end());
      } else {
        for (int64_t i = 0; i < p.batch_size; ++i) {
          out.kept_rows.push_back(static_cast<int64_t>(c) * per + i);
        }
      }
    }
  }
  return out;
}

absl::StatusOr<ParsedExamples> ExampleParser::ParseRange(
    absl::Span<const absl::string_view> serialized,
    absl::Span<const absl::string_view> names, int64_t base) const {
  const int64_t batch = static_cast<int64_t>(serialized.size());
  ParsedExamples out;
  out.dense.reserve(spec_.dense.size());
  for (const DenseFeature& f : spec_.dense) {
    TensorShape shape = f.shape;
    shape.InsertDim(0, batch);
    ASSIGN_OR_RETURN(Tensor t, Tensor::Create(f.dtype, shape));
    out.dense.push_back(std::move(t));
  }
  ParseState st(slots_.size(), spec_.var_len.size());
  std::vector<size_t> marks(spec_.var_len.size());
  int64_t kept = 0;
  for (int64_t i = 0; i < batch; ++i) {
    for (size_t v = 0; v < marks.size(); ++v) {
      marks[v] = st.var_len[v].size(spec_.var_len[v].dtype);
    }
    bool ok = LocateFeatures(serialized[i], slots_, *keys_, &st);
    if (!ok) {
      st.Fail("unparseable", -1, "not a valid serialized Example proto");
    } else {
      ok = DecodeExample(slots_, spec_, weight_pairs_, kept, &out.dense, &st);
    }
    if (ok) {
      for (size_t v = 0; v < marks.size(); ++v) {
        st.var_len[v].splits.push_back(
            static_cast<int64_t>(st.var_len[v].size(spec_.var_len[v].dtype)));
      }
      if (kept != i) out.kept_rows.push_back(base + i);
      ++kept;
      continue;
    }
    for (size_t v = 0; v < marks.size(); ++v) {
      st.var_len[v].Truncate(spec_.var_len[v].dtype, marks[v]);
    }
    if (out.kept_rows.empty()) {  // first skip: the rows kept so far
      for (int64_t k = 0; k < kept; ++k) out.kept_rows.push_back(base + k);
    }
    std::string where = absl::StrCat("example ", base + i);
    if (!names.empty() && !names[i].empty())
      absl::StrAppend(&where, " (", names[i], ")");
    if (st.error_slot >= 0) {
      absl::StrAppend(&where, ", feature '", slots_[st.error_slot].key, "'");
    }
    absl::Status error =
        errors::InvalidArgument(where, ": ", st.detail, " [", st.reason, "]");
    if (options_.policy.mode == ErrorMode::kFail) return error;
    if (options_.stats) options_.stats->AddSkipped(st.reason, error.message());
  }
  if (kept < batch) {
    for (Tensor& t : out.dense) t = t.Slice(0, kept);
  } else {
    out.kept_rows.clear();
  }
  out.batch_size = kept;
  out.var_len.resize(spec_.var_len.size());
  for (size_t v = 0; v < spec_.var_len.size(); ++v) {
    ParseState::VarLenBuffer& buf = st.var_len[v];
    const DataType dtype = spec_.var_len[v].dtype;
    const int64_t nnz = static_cast<int64_t>(buf.size(dtype));
    ASSIGN_OR_RETURN(out.var_len[v].values,
                     Tensor::Create(dtype, TensorShape({nnz})));
    Tensor& values = out.var_len[v].values;
    if (dtype == DT_INT64) {
      if (nnz > 0)
        std::memcpy(values.data<int64_t>(), buf.ints.data(),
                    nnz * sizeof(int64_t));
    } else if (dtype == DT_FLOAT) {
      if (nnz > 0)
        std::memcpy(values.data<float>(), buf.floats.data(),
                    nnz * sizeof(float));
    } else {
      std::string* dst = values.data<std::string>();
      for (int64_t k = 0; k < nnz; ++k) dst[k] = std::move(buf.strings[k]);
    }
    out.var_len[v].row_splits = Tensor::FromVector<int64_t>(
        buf.splits, TensorShape({static_cast<int64_t>(buf.splits.size())}));
  }
  return out;
}

absl::StatusOr<std::vector<absl::string_view>> StringViews(
    const Tensor& t, absl::string_view what) {
  if (t.dtype() != DT_STRING || t.dims() > 1) {
    return errors::InvalidArgument(
        what, " must be a string scalar or vector, got ",
        DataTypeString(t.dtype()), " ", t.shape().DebugString());
  }
  std::vector<absl::string_view> out;
  out.reserve(t.NumElements());
  for (const std::string& s : t.flat<std::string>()) out.emplace_back(s);
  return out;
}

}  // namespace recflow::data
