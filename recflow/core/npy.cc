#include "recflow/core/npy.h"

#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "recflow/core/status.h"

namespace recflow {
namespace {

struct NpyType {
  const char* descr;
  DataType dtype;
  size_t size;
};
constexpr NpyType kNpyTypes[] = {
    {"<f4", DT_FLOAT, 4},  {"<f8", DT_DOUBLE, 8},  {"<f2", DT_HALF, 2},
    {"|i1", DT_INT8, 1},   {"<i2", DT_INT16, 2},   {"<i4", DT_INT32, 4},
    {"<i8", DT_INT64, 8},  {"|u1", DT_UINT8, 1},   {"<u2", DT_UINT16, 2},
    {"<u4", DT_UINT32, 4}, {"<u8", DT_UINT64, 8},  {"|b1", DT_BOOL, 1}};

// The value of 'key' in a .npy header dict, up to the next ',' (or the
// matching ')' for a tuple).
absl::StatusOr<std::string> HeaderField(absl::string_view header,
                                        absl::string_view key,
                                        absl::string_view path) {
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

}  // namespace

absl::StatusOr<Tensor> ParseNpy(absl::string_view data,
                                absl::string_view path) {
  if (data.size() < 10 || data.substr(0, 6) != "\x93NUMPY") {
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
  const absl::string_view header = data.substr(header_start, header_len);
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
  if (descr == "<b1" || descr == "<i1" || descr == "<u1") descr[0] = '|';
  const NpyType* type = nullptr;
  for (const NpyType& t : kNpyTypes) {
    if (descr == t.descr) type = &t;
  }
  if (type == nullptr) {
    return errors::Unimplemented(
        "'", path, "': unsupported .npy dtype '", descr,
        "'; supported: <f2, <f4, <f8 (float16/32/64), |i1, <i2, <i4, <i8 "
        "(int8..int64), |u1, <u2, <u4, <u8 (uint8..uint64), |b1 (bool), "
        "little endian");
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

absl::StatusOr<Tensor> ReadNpyFile(Env* env, const std::string& path,
                                   uint64_t max_bytes) {
  if (!env->FileExists(path))
    return errors::NotFound(".npy file '", path, "' does not exist");
  std::string data;
  RETURN_IF_ERROR(ReadFileToString(env, path, &data, max_bytes));
  return ParseNpy(data, path);
}

absl::StatusOr<std::string> EncodeNpy(const Tensor& t) {
  const NpyType* type = nullptr;
  for (const NpyType& nt : kNpyTypes) {
    if (nt.dtype == t.dtype()) type = &nt;
  }
  if (type == nullptr) {
    return errors::Unimplemented(
        "cannot write ", DataTypeString(t.dtype()),
        " to .npy (float16/32/64, int8..int64, uint8..uint64 and bool "
        "only)");
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
  return out;
}

absl::Status WriteNpyFile(Env* env, const std::string& path, const Tensor& t) {
  absl::StatusOr<std::string> bytes = EncodeNpy(t);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat(bytes.status().message(), ": ", path));
  }
  return WriteStringToFile(env, path, *bytes);
}

}  // namespace recflow
