#include "recflow/core/npy.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"

namespace recflow {
namespace {

using testing::HasSubstr;

// A .npy file as NumPy writes it: magic, version, header length (2 bytes
// for 1.0, 4 for 2.0 and 3.0), the header dict padded with spaces to a
// multiple of 64 and ended by '\n', then `data`; `cut` bytes dropped from
// the end.
std::string Npy(const std::string& descr, const std::string& shape,
                const std::string& data, bool fortran = false, int major = 1,
                size_t cut = 0) {
  std::string h = absl::StrCat(
      "{'descr': '", descr, "', 'fortran_order': ", fortran ? "True" : "False",
      ", 'shape': ", shape, ", }");
  const size_t pre = major == 1 ? 10 : 12;
  h.append((64 - (pre + h.size() + 1) % 64) % 64, ' ');
  h.push_back('\n');
  std::string b("\x93NUMPY", 6);
  b.push_back(static_cast<char>(major));
  b.push_back('\0');
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) {
    b.push_back(static_cast<char>((h.size() >> (8 * i)) & 0xff));
  }
  b += h;
  b += data;
  return b.substr(0, b.size() - cut);
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(T));
}

TEST(NpyTest, RoundTripsEveryDtypeAndRank) {
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  const std::vector<TensorShape> shapes = {
      TensorShape(), TensorShape({5}), TensorShape({3, 4}),
      TensorShape({2, 0, 3}), TensorShape({2, 3, 1, 2})};
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL}) {
    for (const TensorShape& shape : shapes) {
      Tensor t(dt, shape);
      for (int64_t i = 0; i < t.NumElements(); ++i) {
        const double v = u(rng);
        switch (dt) {
          case DT_FLOAT:
            t.flat<float>()[i] = static_cast<float>(v);
            break;
          case DT_DOUBLE:
            t.flat<double>()[i] = v;
            break;
          case DT_INT32:
            t.flat<int32_t>()[i] = static_cast<int32_t>(v);
            break;
          case DT_INT64:
            t.flat<int64_t>()[i] = static_cast<int64_t>(v * 1e9);
            break;
          default:
            t.flat<bool>()[i] = v > 0;
            break;
        }
      }
      absl::StatusOr<std::string> bytes = EncodeNpy(t);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      // NumPy's layout: the data starts at a multiple of 64.
      const size_t header_len = static_cast<uint8_t>((*bytes)[8]) |
                                (static_cast<uint8_t>((*bytes)[9]) << 8);
      EXPECT_EQ((10 + header_len) % 64, 0u);
      EXPECT_EQ((*bytes)[10 + header_len - 1], '\n');
      absl::StatusOr<Tensor> back = ParseNpy(*bytes, "t.npy");
      ASSERT_TRUE(back.ok()) << DataTypeString(dt) << " " << shape.DebugString()
                             << ": " << back.status();
      EXPECT_EQ(back->dtype(), dt);
      EXPECT_EQ(back->shape(), shape);
      EXPECT_EQ(0, std::memcmp(back->raw_data(), t.raw_data(),
                               t.NumElements() * DataTypeSize(dt)))
          << DataTypeString(dt) << " " << shape.DebugString();
    }
  }
}

// The other dtypes NumPy writes: each under NumPy's own descr, random bytes
// round-tripped exactly.
TEST(NpyTest, SmallIntegerAndHalfDtypes) {
  std::mt19937_64 rng(41);
  const std::vector<std::pair<DataType, std::string>> types = {
      {DT_HALF, "'<f2'"},   {DT_INT8, "'|i1'"},   {DT_INT16, "'<i2'"},
      {DT_UINT8, "'|u1'"},  {DT_UINT16, "'<u2'"}, {DT_UINT32, "'<u4'"},
      {DT_UINT64, "'<u8'"}};
  for (const auto& [dt, descr] : types) {
    Tensor t(dt, TensorShape({3, 2}));
    auto* bytes = reinterpret_cast<uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < t.NumElements() * DataTypeSize(dt); ++i) {
      bytes[i] = static_cast<uint8_t>(rng());
    }
    absl::StatusOr<std::string> npy = EncodeNpy(t);
    ASSERT_TRUE(npy.ok()) << npy.status();
    EXPECT_THAT(*npy, HasSubstr("'descr': " + descr)) << DataTypeString(dt);
    absl::StatusOr<Tensor> back = ParseNpy(*npy, "t.npy");
    ASSERT_TRUE(back.ok()) << DataTypeString(dt) << ": " << back.status();
    EXPECT_EQ(back->dtype(), dt);
    EXPECT_EQ(0, std::memcmp(back->raw_data(), t.raw_data(),
                             t.NumElements() * DataTypeSize(dt)));
  }
  // NumPy may write a one-byte type with '<' ("<u1"): the same type.
  absl::StatusOr<Tensor> u8 =
      ParseNpy(Npy("<u1", "(2,)", std::string("\x07\xff", 2)), "u.npy");
  ASSERT_TRUE(u8.ok()) << u8.status();
  EXPECT_EQ(u8->flat<uint8_t>()[1], 255);
}

TEST(NpyTest, HeaderShapesAsNumPyWritesThem) {
  Tensor v(DT_FLOAT, TensorShape({3}));
  Tensor s = Tensor::Scalar<float>(2.5f);
  Tensor m(DT_INT64, TensorShape({2, 1}));
  EXPECT_THAT(*EncodeNpy(v), HasSubstr("{'descr': '<f4', 'fortran_order': "
                                       "False, 'shape': (3,), }"));
  EXPECT_THAT(*EncodeNpy(s), HasSubstr("'shape': (), }"));
  EXPECT_THAT(*EncodeNpy(m), HasSubstr("'descr': '<i8'"));
  EXPECT_THAT(*EncodeNpy(m), HasSubstr("'shape': (2, 1), }"));
}

TEST(NpyTest, ReadsVersionsTwoAndThreeAndNativeOrder) {
  const std::string data = Bytes<float>({1, 2, 5});
  for (int major : {2, 3}) {
    absl::StatusOr<Tensor> t =
        ParseNpy(Npy("<f4", "(3,)", data, false, major), "v.npy");
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->shape(), TensorShape({3}));
    EXPECT_EQ(t->flat<float>()[2], 5.0f);
  }
  absl::StatusOr<Tensor> native =
      ParseNpy(Npy("=f8", "(1, 1)", Bytes<double>({-2})), "n.npy");
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_EQ(native->dtype(), DT_DOUBLE);
  EXPECT_EQ(native->flat<double>()[0], -2.0);
}

TEST(NpyTest, BoolBytesOtherThanOneAreTrue) {
  absl::StatusOr<Tensor> t =
      ParseNpy(Npy("|b1", "(3,)", std::string("\x00\x02\x01", 3)), "b.npy");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->flat<bool>()[0]);
  EXPECT_TRUE(t->flat<bool>()[1]);
  EXPECT_TRUE(t->flat<bool>()[2]);
  absl::StatusOr<Tensor> b1 =
      ParseNpy(Npy("<b1", "(1,)", std::string("\x01", 1)), "b.npy");
  ASSERT_TRUE(b1.ok()) << b1.status();
  EXPECT_EQ(b1->dtype(), DT_BOOL);
}

TEST(NpyTest, RefusesBadMagicAndVersion) {
  absl::StatusOr<Tensor> t = ParseNpy("not a numpy file at all", "magic.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(),
              HasSubstr("'magic.npy' is not a .npy file"));
  EXPECT_FALSE(ParseNpy("", "empty.npy").ok());
  std::string v4 = Npy("<f4", "(1,)", Bytes<float>({1}));
  v4[6] = 4;
  t = ParseNpy(v4, "v4.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(),
              HasSubstr(".npy format version 4 is not supported"));
}

TEST(NpyTest, RefusesTruncatedHeaders) {
  const std::string full = Npy("<f4", "(1,)", Bytes<float>({1}));
  // Cut inside the header: every cut from the magic to the header's end.
  for (size_t keep = 0; keep < 64; ++keep) {
    absl::StatusOr<Tensor> t = ParseNpy(full.substr(0, keep), "cut.npy");
    EXPECT_FALSE(t.ok()) << keep;
  }
  absl::StatusOr<Tensor> t = ParseNpy(full.substr(0, 40), "cut.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(t.status().message(),
              HasSubstr("'cut.npy': truncated .npy header"));
  std::string v2 = Npy("<f4", "(1,)", "", false, 2).substr(0, 11);
  t = ParseNpy(v2, "v2.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
}

TEST(NpyTest, RefusesBadHeaderFields) {
  const std::string data = Bytes<float>({1, 2});
  absl::StatusOr<Tensor> t =
      ParseNpy(Npy("<f4", "(2, 1)", data, /*fortran=*/true), "f.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(),
              HasSubstr("fortran_order arrays are not supported"));
  for (const char* descr : {"<c8", ">f4", "<U3", "|O", ""}) {
    t = ParseNpy(Npy(descr, "(2,)", data), "d.npy");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << descr;
    EXPECT_THAT(
        t.status().message(),
        HasSubstr(absl::StrCat("unsupported .npy dtype '", descr, "'")));
  }
  for (const char* shape : {"(2, -1)", "(x,)", "2", "(1.5,)", "[2]"}) {
    t = ParseNpy(Npy("<f4", shape, data), "s.npy");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << shape;
    EXPECT_THAT(t.status().message(), HasSubstr("'s.npy': bad .npy shape"))
        << shape;
  }
  std::string no_shape = Npy("<f4", "(2,)", data);
  no_shape.replace(no_shape.find("'shape'"), 7, "'shope'");
  t = ParseNpy(no_shape, "n.npy");
  EXPECT_THAT(t.status().message(), HasSubstr(".npy header has no 'shape'"));
}

TEST(NpyTest, RefusesTruncatedAndOverlongData) {
  absl::StatusOr<Tensor> t = ParseNpy(
      Npy("<f4", "(4, 1)", Bytes<float>({1, 2, 3, 4}), false, 1, /*cut=*/5),
      "trunc.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(t.status().message(),
              HasSubstr("'trunc.npy': truncated .npy data"));
  // One byte short of the last element.
  t = ParseNpy(Npy("<f8", "(2,)", Bytes<double>({1, 2}), false, 1, 1),
               "short.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  t = ParseNpy(Npy("<f4", "(1,)", Bytes<float>({1, 2})), "long.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(t.status().message(),
              HasSubstr("4 bytes after the array's data"));
}

// Shapes whose byte count wraps around 2^64, or whose element count does
// not fit int64: refused by what the file holds, never allocated.
TEST(NpyTest, RefusesShapesWhoseSizeOverflows) {
  absl::StatusOr<Tensor> t = ParseNpy(
      Npy("<f4", "(4611686018427387904, 1)", Bytes<float>({1, 2})), "wrap.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      t.status().message(),
      HasSubstr(
          "'wrap.npy': truncated .npy data: shape [4611686018427387904,1] of "
          "<f4 needs 4611686018427387904 elements of 4 bytes, file has 8 "
          "bytes"));
  t = ParseNpy(Npy("<f4", "(4611686018427387905, 1)", ""), "wrap1.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  // 2^61 elements of 8 bytes: a byte count that would wrap to 0.
  t = ParseNpy(Npy("<i8", "(536870912, 4294967296)", ""), "zero.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  // 2^63 elements: beyond int64.
  t = ParseNpy(Npy("<i8", "(2147483648, 4294967296)", ""), "over.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  t = ParseNpy(Npy("<f8", "(4294967296, 4294967296)", ""), "huge.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      t.status().message(),
      HasSubstr("'huge.npy': bad .npy shape '(4294967296, 4294967296)'"));
  t = ParseNpy(Npy("<f4", "(9223372036854775808,)", ""), "big.npy");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NpyTest, FilesThroughEnv) {
  MemEnv env;
  Tensor t(DT_INT32, TensorShape({2, 2}));
  for (int i = 0; i < 4; ++i) t.flat<int32_t>()[i] = 7 * i - 3;
  ASSERT_TRUE(WriteNpyFile(&env, "x.npy", t).ok());
  absl::StatusOr<Tensor> back = ReadNpyFile(&env, "x.npy");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->flat<int32_t>()[3], 18);

  absl::StatusOr<Tensor> missing = ReadNpyFile(&env, "nope.npy");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("'nope.npy' does not exist"));

  absl::StatusOr<Tensor> big = ReadNpyFile(&env, "x.npy", /*max_bytes=*/64);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("x.npy"));

  absl::Status s =
      WriteNpyFile(&env, "s.npy", Tensor(DT_STRING, TensorShape({1})));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("cannot write string to .npy"));
  EXPECT_THAT(s.message(), HasSubstr(": s.npy"));
  EXPECT_FALSE(env.FileExists("s.npy"));
}

}  // namespace
}  // namespace recflow
