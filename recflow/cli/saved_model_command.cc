// recflow saved_model show|run: inspect a SavedModel's tag sets and
// signatures and run a signature on inputs given as expressions or .npy
// files, like TensorFlow's saved_model_cli.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/cli/commands.h"
#include "recflow/core/dtype.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/proto/example.pb.h"
#include "recflow/serving/saved_model_bundle.h"

namespace recflow::cli {
namespace {

constexpr char kUsage[] =
    "usage: recflow saved_model show --dir DIR [--all] [--tag_set serve] "
    "[--signature_def NAME]\n"
    "       recflow saved_model run --dir DIR [--tag_set serve] "
    "--signature_def NAME\n"
    "           [--input_exprs 'x=[1.0,2.0];y=3'] [--inputs "
    "'x=file.npy;y=other.npy']\n"
    "           [--input_examples 'inputs=[{\"x\": [1.0]}, {\"x\": [2.0]}]']\n"
    "           [--outdir DIR]\n"
    "\n"
    "show: without --tag_set, lists the tag sets; with it, the signature "
    "names; with\n"
    "--signature_def too, that signature's inputs and outputs (dtype, shape, "
    "tensor\n"
    "name) and method name; --all prints everything.\n"
    "run: loads the MetaGraph tagged --tag_set (default serve), feeds the "
    "inputs\n"
    "(values are cast to the signature's dtype; a vector is reshaped to the "
    "signature's\n"
    "shape when only one layout fits) and prints every output; --outdir also "
    "writes\n"
    "each output to OUTDIR/KEY.npy.\n\n";

// Input files larger than this are refused.
constexpr uint64_t kMaxNpyBytes = uint64_t{1} << 30;

// ---------------------------------------------------------------------------
// Values from the command line: a shape and row-major numbers.

struct Array {
  std::vector<int64_t> shape;
  std::vector<long double> values;
};

class ExprParser {
 public:
  explicit ExprParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Array> Parse() {
    Array out;
    RETURN_IF_ERROR(Value(0, &out));
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the value");
    return out;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return errors::InvalidArgument(what, " at position ", pos_, " of '", text_,
                                   "'");
  }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(text_[pos_])) ++pos_;
  }
  // Parses a value at nesting `depth`, checking that lists are rectangular.
  absl::Status Value(size_t depth, Array* out) {
    SkipSpace();
    if (pos_ >= text_.size()) return Error("expected a number or '['");
    if (depth > 32) return Error("lists nested too deeply");
    if (text_[pos_] == '[') {
      ++pos_;
      int64_t n = 0;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
      } else {
        while (true) {
          RETURN_IF_ERROR(Value(depth + 1, out));
          ++n;
          SkipSpace();
          if (pos_ < text_.size() && text_[pos_] == ',') {
            ++pos_;
            continue;
          }
          if (pos_ < text_.size() && text_[pos_] == ']') {
            ++pos_;
            break;
          }
          return Error("expected ',' or ']'");
        }
      }
      return SetDim(depth, n);
    }
    if (!scalar_seen_) {
      scalar_seen_ = true;
      scalar_depth_ = depth;
      for (size_t d = depth; d < dims_.size(); ++d) {
        if (dims_[d] != -1)
          return Error("ragged nested list (a number where a list was seen)");
      }
    } else if (depth != scalar_depth_) {
      return Error("ragged nested list (numbers at different depths)");
    }
    size_t end = pos_;
    while (end < text_.size() && text_[end] != ',' && text_[end] != ']' &&
           !absl::ascii_isspace(text_[end])) {
      ++end;
    }
    const std::string token(text_.substr(pos_, end - pos_));
    long double v = 0;
    if (token == "true" || token == "True") {
      v = 1;
    } else if (token == "false" || token == "False") {
      v = 0;
    } else {
      char* stop = nullptr;
      errno = 0;
      v = std::strtold(token.c_str(), &stop);
      if (token.empty() || stop != token.c_str() + token.size()) {
        return Error(absl::StrCat("'", token, "' is not a number"));
      }
    }
    out->values.push_back(v);
    pos_ = end;
    return absl::OkStatus();
  }
  absl::Status SetDim(size_t depth, int64_t n) {
    if (scalar_seen_ && depth >= scalar_depth_) {
      return Error("ragged nested list (a list where a number was seen)");
    }
    if (dims_.size() <= depth) dims_.resize(depth + 1, -1);
    if (dims_[depth] == -1) {
      dims_[depth] = n;
    } else if (dims_[depth] != n) {
      return Error(absl::StrCat("ragged nested list (lengths ", dims_[depth],
                                " and ", n, " at depth ", depth, ")"));
    }
    return absl::OkStatus();
  }

 public:
  // The shape of what Parse() read; an empty innermost list has size 0.
  std::vector<int64_t> shape() const {
    std::vector<int64_t> s = dims_;
    if (scalar_seen_) s.resize(scalar_depth_);
    for (int64_t& d : s) d = std::max<int64_t>(d, 0);
    return s;
  }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
  bool scalar_seen_ = false;
  size_t scalar_depth_ = 0;
  std::vector<int64_t> dims_;
};

absl::StatusOr<Array> ParseExpr(absl::string_view text) {
  ExprParser parser(text);
  ASSIGN_OR_RETURN(Array a, parser.Parse());
  a.shape = parser.shape();
  return a;
}

// ---------------------------------------------------------------------------
// tf.Examples from the command line (TensorFlow's --input_examples):
//   [{"x": [1.0, 2.0], "id": [7], "name": ["a"]}, {"x": 5}]
// A quoted string is a bytes_list value; a number with '.', 'e' or 'n'
// (nan, inf) a float_list value; another number an int64_list value. A
// feature's values must be of one kind.

class ExampleParser {
 public:
  explicit ExampleParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Tensor> Parse() {
    std::vector<std::string> serialized;
    RETURN_IF_ERROR(Expect('['));
    if (!Peek(']')) {
      while (true) {
        tensorflow::Example ex;
        RETURN_IF_ERROR(ParseExample(&ex));
        serialized.push_back(ex.SerializeAsString());
        if (Peek(',')) {
          ++pos_;
          continue;
        }
        break;
      }
    }
    RETURN_IF_ERROR(Expect(']'));
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the list");
    Tensor t(DT_STRING, TensorShape({static_cast<int64_t>(serialized.size())}));
    for (size_t i = 0; i < serialized.size(); ++i) {
      t.flat<std::string>()[i] = std::move(serialized[i]);
    }
    return t;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return errors::InvalidArgument(what, " at position ", pos_, " of '", text_,
                                   "'");
  }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(text_[pos_])) ++pos_;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  absl::Status Expect(char c) {
    if (!Peek(c))
      return Error(absl::StrCat("expected '", std::string(1, c), "'"));
    ++pos_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> String() {
    RETURN_IF_ERROR(Expect('"'));
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      out.push_back(text_[pos_++]);
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    ++pos_;
    return out;
  }
  absl::Status Value(tensorflow::Feature* f, const std::string& key) {
    SkipSpace();
    enum Kind { kNone, kBytes, kFloat, kInt } kind = kNone;
    if (f->has_bytes_list()) kind = kBytes;
    if (f->has_float_list()) kind = kFloat;
    if (f->has_int64_list()) kind = kInt;
    auto mixed = [&]() {
      return Error(absl::StrCat("feature '", key, "' mixes kinds of values"));
    };
    if (Peek('"')) {
      if (kind != kNone && kind != kBytes) return mixed();
      ASSIGN_OR_RETURN(std::string v, String());
      f->mutable_bytes_list()->add_value(std::move(v));
      return absl::OkStatus();
    }
    size_t end = pos_;
    while (end < text_.size() && text_[end] != ',' && text_[end] != ']' &&
           text_[end] != '}' && !absl::ascii_isspace(text_[end])) {
      ++end;
    }
    const std::string token(text_.substr(pos_, end - pos_));
    const bool is_float = token.find_first_of(".eEnN") != std::string::npos;
    if (is_float) {
      float v = 0;
      if (!absl::SimpleAtof(token, &v)) {
        return Error(absl::StrCat("'", token, "' is not a number"));
      }
      if (kind != kNone && kind != kFloat) return mixed();
      f->mutable_float_list()->add_value(v);
    } else {
      int64_t v = 0;
      if (!absl::SimpleAtoi(token, &v)) {
        return Error(absl::StrCat("'", token, "' is not a number"));
      }
      if (kind != kNone && kind != kInt) return mixed();
      f->mutable_int64_list()->add_value(v);
    }
    pos_ = end;
    return absl::OkStatus();
  }
  absl::Status ParseExample(tensorflow::Example* ex) {
    RETURN_IF_ERROR(Expect('{'));
    auto* features = ex->mutable_features()->mutable_feature();
    if (!Peek('}')) {
      while (true) {
        ASSIGN_OR_RETURN(std::string key, String());
        RETURN_IF_ERROR(Expect(':'));
        if (features->contains(key)) {
          return Error(absl::StrCat("feature '", key, "' given twice"));
        }
        tensorflow::Feature& f = (*features)[key];
        if (Peek('[')) {
          ++pos_;
          if (!Peek(']')) {
            while (true) {
              RETURN_IF_ERROR(Value(&f, key));
              if (Peek(',')) {
                ++pos_;
                continue;
              }
              break;
            }
          }
          RETURN_IF_ERROR(Expect(']'));
        } else {
          RETURN_IF_ERROR(Value(&f, key));
        }
        if (Peek(',')) {
          ++pos_;
          continue;
        }
        break;
      }
    }
    return Expect('}');
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------
// .npy files (NumPy format versions 1-3, little endian, C order).

struct NpyType {
  const char* descr;
  DataType dtype;
  size_t size;
};
constexpr NpyType kNpyTypes[] = {{"<f4", DT_FLOAT, 4},
                                 {"<f8", DT_DOUBLE, 8},
                                 {"<i4", DT_INT32, 4},
                                 {"<i8", DT_INT64, 8},
                                 {"|b1", DT_BOOL, 1}};

// The value of 'key' in a .npy header dict, up to the next ',' (or the
// matching ')' for a tuple).
absl::StatusOr<std::string> HeaderField(absl::string_view header,
                                        absl::string_view key,
                                        const std::string& path) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) {
    return errors::InvalidArgument("'", path, "': .npy header has no ", quoted,
                                   ": ", header);
  }
  at = header.find(':', at + quoted.size());
  if (at == absl::string_view::npos) {
    return errors::InvalidArgument("'", path,
                                   "': malformed .npy header: ", header);
  }
  absl::string_view rest =
      absl::StripLeadingAsciiWhitespace(header.substr(at + 1));
  size_t end = rest.empty() || rest[0] != '(' ? rest.find_first_of(",}")
                                              : rest.find(')') + 1;
  if (end == absl::string_view::npos || end == 0) {
    return errors::InvalidArgument("'", path,
                                   "': malformed .npy header: ", header);
  }
  return std::string(absl::StripAsciiWhitespace(rest.substr(0, end)));
}

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  Env* env = Env::Default();
  if (!env->FileExists(path))
    return errors::NotFound(".npy file '", path, "' does not exist");
  std::string data;
  RETURN_IF_ERROR(ReadFileToString(env, path, &data, kMaxNpyBytes));
  if (data.size() < 10 || data.compare(0, 6, "\x93NUMPY") != 0) {
    return errors::InvalidArgument(
        "'", path, "' is not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<uint8_t>(data[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len =
        static_cast<uint8_t>(data[8]) | (static_cast<uint8_t>(data[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (data.size() < 12)
      return errors::DataLoss("'", path, "': truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= size_t{static_cast<uint8_t>(data[8 + i])} << (8 * i);
    header_start = 12;
  } else {
    return errors::Unimplemented("'", path, "': .npy format version ", major,
                                 " is not supported (1, 2 or 3)");
  }
  if (header_start + header_len > data.size()) {
    return errors::DataLoss("'", path, "': truncated .npy header (needs ",
                            header_len, " bytes, file has ",
                            data.size() - header_start, ")");
  }
  const absl::string_view header(data.data() + header_start, header_len);
  ASSIGN_OR_RETURN(std::string descr, HeaderField(header, "descr", path));
  ASSIGN_OR_RETURN(std::string fortran,
                   HeaderField(header, "fortran_order", path));
  ASSIGN_OR_RETURN(std::string shape_text, HeaderField(header, "shape", path));
  if (fortran == "True") {
    return errors::Unimplemented(
        "'", path,
        "': fortran_order arrays are not supported; save a C-order "
        "array (np.ascontiguousarray)");
  }
  if (fortran != "False") {
    return errors::InvalidArgument("'", path, "': bad fortran_order '", fortran,
                                   "'");
  }
  descr = std::string(absl::StripSuffix(absl::StripPrefix(descr, "'"), "'"));
  if (!descr.empty() && descr[0] == '=') descr[0] = '<';
  if (descr == "<b1") descr = "|b1";
  const NpyType* type = nullptr;
  for (const NpyType& t : kNpyTypes) {
    if (descr == t.descr) type = &t;
  }
  if (type == nullptr) {
    return errors::Unimplemented(
        "'", path, "': unsupported .npy dtype '", descr,
        "'; supported: <f4 (float32), <f8 (float64), <i4 (int32), "
        "<i8 (int64), |b1 (bool), little endian");
  }
  if (shape_text.size() < 2 || shape_text.front() != '(' ||
      shape_text.back() != ')') {
    return errors::InvalidArgument("'", path, "': bad .npy shape '", shape_text,
                                   "'");
  }
  std::vector<int64_t> dims;
  for (absl::string_view d :
       absl::StrSplit(shape_text.substr(1, shape_text.size() - 2), ',',
                      absl::SkipWhitespace())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &v) || v < 0) {
      return errors::InvalidArgument("'", path, "': bad .npy shape '",
                                     shape_text, "'");
    }
    dims.push_back(v);
  }
  absl::StatusOr<TensorShape> built = TensorShape::Build(dims);
  if (!built.ok()) {
    return errors::InvalidArgument("'", path, "': bad .npy shape '", shape_text,
                                   "': ", built.status().message());
  }
  const TensorShape shape = *std::move(built);
  const uint64_t have = data.size() - header_start - header_len;
  // The element count fits in int64 (Build checked it); compare it with the
  // bytes present by division, so that no product can wrap around.
  const uint64_t count = static_cast<uint64_t>(shape.num_elements());
  if (count > have / type->size) {
    return errors::DataLoss("'", path, "': truncated .npy data: shape ",
                            shape.DebugString(), " of ", descr, " needs ",
                            count, " elements of ", type->size,
                            " bytes, file has ", have, " bytes");
  }
  const uint64_t want = count * type->size;
  if (have < want) {
    return errors::DataLoss("'", path, "': truncated .npy data: shape ",
                            shape.DebugString(), " of ", descr, " needs ", want,
                            " bytes, file has ", have);
  }
  if (have > want) {
    return errors::DataLoss("'", path, "': .npy file has ", have - want,
                            " bytes after the array's data (corrupt?)");
  }
  Tensor t(type->dtype, shape);
  std::memcpy(t.raw_data(), data.data() + header_start + header_len, want);
  if (type->dtype == DT_BOOL) {
    for (bool& b : t.flat<bool>()) b = reinterpret_cast<const uint8_t&>(b) != 0;
  }
  return t;
}

absl::Status WriteNpy(const std::string& path, const Tensor& t) {
  const NpyType* type = nullptr;
  for (const NpyType& nt : kNpyTypes) {
    if (nt.dtype == t.dtype()) type = &nt;
  }
  if (type == nullptr) {
    return errors::Unimplemented(
        "cannot write ", DataTypeString(t.dtype()),
        " to .npy (float, double, int32, int64, bool only): ", path);
  }
  std::vector<std::string> dims;
  for (int i = 0; i < t.shape().dims(); ++i)
    dims.push_back(absl::StrCat(t.shape().dim_size(i)));
  std::string shape = absl::StrCat("(", absl::StrJoin(dims, ", "),
                                   dims.size() == 1 ? ",)" : ")");
  std::string header =
      absl::StrCat("{'descr': '", type->descr,
                   "', 'fortran_order': False, 'shape': ", shape, ", }");
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(static_cast<const char*>(t.raw_data()),
             t.NumElements() * type->size);
  return WriteStringToFile(Env::Default(), path, out);
}

// ---------------------------------------------------------------------------
// Feeding.

absl::StatusOr<long double> ValueOf(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_FLOAT:
      return t.flat<float>()[i];
    case DT_DOUBLE:
      return t.flat<double>()[i];
    case DT_INT32:
      return t.flat<int32_t>()[i];
    case DT_INT64:
      return t.flat<int64_t>()[i];
    case DT_BOOL:
      return t.flat<bool>()[i] ? 1 : 0;
    default:
      return errors::Unimplemented("dtype ", DataTypeString(t.dtype()));
  }
}

// `a` as a tensor of `dtype`, shaped as `want` when `a` is a vector (or a
// scalar) and only one layout of `want` holds its elements.
absl::StatusOr<Tensor> ToTensor(const std::string& key, const Array& a,
                                DataType dtype, const PartialShape& want) {
  TensorShape shape(absl::MakeConstSpan(a.shape));
  const int64_t n = static_cast<int64_t>(a.values.size());
  if (a.shape.size() <= 1 && want.rank() >= 0 &&
      !want.IsCompatibleWith(PartialShape(shape))) {
    int unknown = 0;
    int64_t known = 1;
    for (int d = 0; d < want.rank(); ++d) {
      if (want.dim(d) < 0) {
        ++unknown;
      } else {
        known *= want.dim(d);
      }
    }
    if (unknown <= 1 && known > 0 && n % known == 0 &&
        (unknown == 1 || n == known)) {
      std::vector<int64_t> dims(want.dims().begin(), want.dims().end());
      for (int64_t& d : dims) {
        if (d < 0) d = n / known;
      }
      std::cerr << "note: input '" << key << "' reshaped from "
                << shape.DebugString() << " to "
                << TensorShape(absl::MakeConstSpan(dims)).DebugString()
                << " to match the signature\n";
      shape = TensorShape(absl::MakeConstSpan(dims));
    }
  }
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < n; ++i) {
    const long double v = a.values[i];
    const bool integral = v == std::floor(v);
    switch (dtype) {
      case DT_FLOAT:
        t.flat<float>()[i] = static_cast<float>(v);
        break;
      case DT_DOUBLE:
        t.flat<double>()[i] = static_cast<double>(v);
        break;
      case DT_INT32:
      case DT_INT64: {
        const long double lo = dtype == DT_INT32
                                   ? std::numeric_limits<int32_t>::min()
                                   : std::numeric_limits<int64_t>::min();
        const long double hi = dtype == DT_INT32
                                   ? std::numeric_limits<int32_t>::max()
                                   : std::numeric_limits<int64_t>::max();
        if (!integral || v < lo || v > hi) {
          return errors::InvalidArgument(
              "input '", key, "' is ", DataTypeString(dtype), " but value ",
              static_cast<double>(v), " is not an integer in range");
        }
        if (dtype == DT_INT32) {
          t.flat<int32_t>()[i] = static_cast<int32_t>(v);
        } else {
          t.flat<int64_t>()[i] = static_cast<int64_t>(v);
        }
        break;
      }
      case DT_BOOL:
        t.flat<bool>()[i] = v != 0;
        break;
      default:
        return errors::Unimplemented(
            "input '", key, "' is ", DataTypeString(dtype),
            "; only float, double, int32, int64 and bool inputs can be "
            "given on the command line");
    }
  }
  return t;
}

absl::StatusOr<Array> ArrayFromTensor(const Tensor& t) {
  Array a;
  for (int i = 0; i < t.shape().dims(); ++i)
    a.shape.push_back(t.shape().dim_size(i));
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    ASSIGN_OR_RETURN(long double v, ValueOf(t, i));
    a.values.push_back(v);
  }
  return a;
}

// "k=v;k2=v2" -> pairs; InvalidArgument naming `flag` when malformed.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
SplitAssignments(const std::string& text, const char* flag) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view part :
       absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    const size_t eq = part.find('=');
    std::string key(absl::StripAsciiWhitespace(part.substr(0, eq)));
    if (eq == absl::string_view::npos || key.empty()) {
      return errors::InvalidArgument("--", flag, ": expected KEY=VALUE, got '",
                                     part, "'");
    }
    out.emplace_back(
        key, std::string(absl::StripAsciiWhitespace(part.substr(eq + 1))));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Printing.

std::string ShapeString(const tensorflow::TensorShapeProto& shape) {
  if (shape.unknown_rank()) return "unknown_rank";
  std::vector<std::string> dims;
  for (const auto& d : shape.dim()) dims.push_back(absl::StrCat(d.size()));
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

void PrintTensorInfos(
    const google::protobuf::Map<std::string, tensorflow::TensorInfo>& infos,
    const char* kind, const std::string& indent) {
  std::map<std::string, tensorflow::TensorInfo> sorted(infos.begin(),
                                                       infos.end());
  for (const auto& [key, info] : sorted) {
    std::cout << indent << kind << "['" << key << "'] tensor_info:\n"
              << indent
              << "    dtype: " << tensorflow::DataType_Name(info.dtype())
              << "\n"
              << indent << "    shape: " << ShapeString(info.tensor_shape())
              << "\n"
              << indent << "    name: " << info.name() << "\n";
  }
}

void PrintSignature(const tensorflow::SignatureDef& sig,
                    const std::string& indent) {
  std::cout
      << indent
      << "The given SavedModel SignatureDef contains the following input(s):\n";
  PrintTensorInfos(sig.inputs(), "inputs", indent + "  ");
  std::cout << indent
            << "The given SavedModel SignatureDef contains the following "
               "output(s):\n";
  PrintTensorInfos(sig.outputs(), "outputs", indent + "  ");
  std::cout << indent << "Method name is: " << sig.method_name() << "\n";
}

std::string ElementString(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_FLOAT:
      return absl::StrCat(t.flat<float>()[i]);
    case DT_DOUBLE:
      return absl::StrCat(t.flat<double>()[i]);
    case DT_INT32:
      return absl::StrCat(t.flat<int32_t>()[i]);
    case DT_INT64:
      return absl::StrCat(t.flat<int64_t>()[i]);
    case DT_BOOL:
      return t.flat<bool>()[i] ? "true" : "false";
    case DT_STRING:
      return absl::StrCat("\"", absl::CHexEscape(t.flat<std::string>()[i]),
                          "\"");
    default:
      return "?";
  }
}

// Nested-list form: [[2.5], [3], [4.5]].
void AppendNested(const Tensor& t, int dim, int64_t* next, std::string* out) {
  if (dim == t.shape().dims()) {
    out->append(ElementString(t, (*next)++));
    return;
  }
  out->push_back('[');
  for (int64_t i = 0; i < t.shape().dim_size(dim); ++i) {
    if (i > 0) out->append(", ");
    AppendNested(t, dim + 1, next, out);
  }
  out->push_back(']');
}

std::vector<std::string> ParseTags(const std::string& tag_set) {
  std::vector<std::string> tags;
  for (absl::string_view t :
       absl::StrSplit(tag_set, ',', absl::SkipWhitespace())) {
    tags.emplace_back(absl::StripAsciiWhitespace(t));
  }
  return tags;
}

int Fail(const absl::Status& s) {
  std::cerr << "error: " << s.message() << "\n";
  return 1;
}

int Show(const std::string& dir, const std::string& tag_set,
         const std::string& signature, bool all) {
  auto sm = checkpoint::ReadSavedModel(Env::Default(), dir);
  if (!sm.ok()) return Fail(sm.status());
  if (all) {
    for (const auto& mg : sm->meta_graphs()) {
      std::cout << "\nMetaGraphDef with tag-set: '"
                << absl::StrJoin(mg.meta_info_def().tags(), ", ")
                << "' contains the following SignatureDefs:\n";
      std::map<std::string, tensorflow::SignatureDef> sigs(
          mg.signature_def().begin(), mg.signature_def().end());
      for (const auto& [name, sig] : sigs) {
        std::cout << "\nsignature_def['" << name << "']:\n";
        PrintSignature(sig, "  ");
      }
    }
    return 0;
  }
  if (tag_set.empty()) {
    if (!signature.empty()) {
      std::cerr << "error: --signature_def needs --tag_set\n";
      return 2;
    }
    std::cout << "The given SavedModel contains the following tag-sets:\n";
    for (const auto& mg : sm->meta_graphs()) {
      std::cout << "'" << absl::StrJoin(mg.meta_info_def().tags(), ", ")
                << "'\n";
    }
    return 0;
  }
  auto mg = checkpoint::FindMetaGraph(*sm, ParseTags(tag_set));
  if (!mg.ok()) return Fail(mg.status());
  if (signature.empty()) {
    std::cout << "The given SavedModel MetaGraphDef contains SignatureDefs "
                 "with the following "
                 "keys:\n";
    std::set<std::string> names;
    for (const auto& [name, sig] : (*mg)->signature_def()) names.insert(name);
    for (const std::string& name : names)
      std::cout << "SignatureDef key: \"" << name << "\"\n";
    return 0;
  }
  auto sig = checkpoint::FindSignature(**mg, signature);
  if (!sig.ok()) return Fail(sig.status());
  PrintSignature(**sig, "");
  return 0;
}

int Run(const std::string& dir, const std::string& tag_set,
        const std::string& signature, const std::string& input_exprs,
        const std::string& input_files, const std::string& input_examples,
        const std::string& outdir) {
  if (signature.empty()) {
    std::cerr << "error: --signature_def is required\n" << kUsage;
    return 2;
  }
  auto exprs = SplitAssignments(input_exprs, "input_exprs");
  if (!exprs.ok()) return Fail(exprs.status());
  auto files = SplitAssignments(input_files, "inputs");
  if (!files.ok()) return Fail(files.status());
  auto examples = SplitAssignments(input_examples, "input_examples");
  if (!examples.ok()) return Fail(examples.status());
  if (exprs->empty() && files->empty() && examples->empty()) {
    std::cerr << "error: give the inputs with --input_exprs, --inputs and/or "
                 "--input_examples\n"
              << kUsage;
    return 2;
  }
  auto bundle = serving::LoadSavedModel({}, dir, ParseTags(tag_set));
  if (!bundle.ok()) return Fail(bundle.status());
  auto sig = checkpoint::FindSignature(bundle->meta_graph_def, signature);
  if (!sig.ok()) return Fail(sig.status());

  std::map<std::string, Tensor> inputs;
  auto add = [&](const std::string& key,
                 absl::StatusOr<Array> array) -> absl::Status {
    if (!array.ok())
      return errors::Annotate(array.status(),
                              absl::StrCat("input '", key, "'"));
    if (inputs.contains(key))
      return errors::InvalidArgument("input '", key, "' given twice");
    auto it = (*sig)->inputs().find(key);
    if (it == (*sig)->inputs().end()) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : (*sig)->inputs()) keys.push_back(k);
      std::sort(keys.begin(), keys.end());
      return errors::InvalidArgument(
          "signature '", signature, "' has no input '", key,
          "'; its inputs are: ", absl::StrJoin(keys, ", "));
    }
    PartialShape want;
    if (it->second.has_tensor_shape()) {
      auto s = PartialShape::FromProto(it->second.tensor_shape());
      if (s.ok()) want = *s;
    }
    ASSIGN_OR_RETURN(
        Tensor t,
        ToTensor(key, *array, static_cast<DataType>(it->second.dtype()), want));
    inputs.emplace(key, std::move(t));
    return absl::OkStatus();
  };
  for (const auto& [key, expr] : *exprs) {
    absl::Status s = add(key, ParseExpr(expr));
    if (!s.ok()) return Fail(errors::Annotate(s, "--input_exprs"));
  }
  for (const auto& [key, path] : *files) {
    auto t = ReadNpy(path);
    absl::Status s = t.ok() ? add(key, ArrayFromTensor(*t)) : t.status();
    if (!s.ok()) return Fail(errors::Annotate(s, "--inputs"));
  }
  for (const auto& [key, text] : *examples) {
    absl::Status s;
    auto t = ExampleParser(text).Parse();
    if (!t.ok()) {
      s = errors::Annotate(t.status(), absl::StrCat("input '", key, "'"));
    } else if (inputs.contains(key)) {
      s = errors::InvalidArgument("input '", key, "' given twice");
    } else {
      inputs.emplace(key, std::move(*t));
    }
    if (!s.ok()) return Fail(errors::Annotate(s, "--input_examples"));
  }
  auto outputs = serving::RunSignature(*bundle, signature, inputs);
  if (!outputs.ok()) return Fail(outputs.status());
  if (!outdir.empty()) {
    absl::Status s = Env::Default()->RecursivelyCreateDir(outdir);
    if (!s.ok())
      return Fail(errors::Annotate(s, absl::StrCat("--outdir ", outdir)));
  }
  for (const auto& [key, t] : *outputs) {
    std::string text;
    int64_t next = 0;
    if (t.NumElements() <= 100000) {
      AppendNested(t, 0, &next, &text);
    } else {
      text = t.DebugString(20);
    }
    std::cout << "Result for output key " << key << ":\n" << text << "\n";
    if (!outdir.empty()) {
      const std::string path = JoinPath(outdir, key + ".npy");
      absl::Status s = WriteNpy(path, t);
      if (!s.ok()) return Fail(s);
      std::cout << "Output " << key << " is saved to " << path << "\n";
    }
  }
  return 0;
}

}  // namespace

int SavedModelCommand(const Args& args) {
  std::string dir, tag_set, signature, input_exprs, input_files, input_examples,
      outdir;
  bool all = false;
  std::vector<Flag> flags = {
      {"dir", &dir, nullptr, "the SavedModel directory (required)"},
      {"tag_set", &tag_set, nullptr,
       "comma-separated tags of the MetaGraph (run: default serve)"},
      {"signature_def", &signature, nullptr, "signature name"},
      {"all", nullptr, &all, "show: print every tag set and signature"},
      {"input_exprs", &input_exprs, nullptr,
       "run: KEY=VALUE;... with numbers or nested lists, e.g. 'x=[[1],[2]]'"},
      {"inputs", &input_files, nullptr,
       "run: KEY=FILE.npy;... (float32/64, int32/64, bool)"},
      {"input_examples", &input_examples, nullptr,
       "run: KEY=[{\"feature\": [values], ...}, ...] fed as serialized "
       "tf.Examples"},
      {"outdir", &outdir, nullptr,
       "run: also write each output to OUTDIR/KEY.npy"},
  };
  Args positional;
  if (!ParseFlags(args, flags, &positional, kUsage)) return 2;
  if (positional.size() != 1 ||
      (positional[0] != "show" && positional[0] != "run")) {
    std::cerr << "error: expected 'show' or 'run'\n" << kUsage;
    return 2;
  }
  if (dir.empty()) {
    std::cerr << "error: --dir is required\n" << kUsage;
    return 2;
  }
  if (positional[0] == "show") return Show(dir, tag_set, signature, all);
  return Run(dir, tag_set.empty() ? checkpoint::kSavedModelTagServe : tag_set,
             signature, input_exprs, input_files, input_examples, outdir);
}

}  // namespace recflow::cli
