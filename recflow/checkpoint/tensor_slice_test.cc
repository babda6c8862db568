// Tensors TensorFlow saved in parts: the OrderedCode keys of the parts, and
// BundleReader assembling them (bundles built by hand the way TensorFlow's
// Saver lays them out), with a clear error for each kind of bad layout.
#include "recflow/checkpoint/tensor_slice.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/status.h"

namespace recflow::checkpoint {
namespace {

using testing::HasSubstr;

std::string Num(uint64_t v) {
  std::string s;
  ordered_code::WriteNumIncreasing(&s, v);
  return s;
}
std::string Signed(int64_t v) {
  std::string s;
  ordered_code::WriteSignedNumIncreasing(&s, v);
  return s;
}

TEST(OrderedCodeTest, UnsignedNumbers) {
  EXPECT_EQ(Num(0), std::string("\x00", 1));
  EXPECT_EQ(Num(1), std::string("\x01\x01", 2));
  EXPECT_EQ(Num(255), std::string("\x01\xff", 2));
  EXPECT_EQ(Num(256), std::string("\x02\x01\x00", 3));
  EXPECT_EQ(Num(~uint64_t{0}), std::string("\x08") + std::string(8, '\xff'));
}

// The examples of TensorFlow's ordered_code.cc comments, and the limits.
TEST(OrderedCodeTest, SignedNumbers) {
  EXPECT_EQ(Signed(0), "\x80");
  EXPECT_EQ(Signed(1), "\x81");
  EXPECT_EQ(Signed(-1), "\x7f");
  EXPECT_EQ(Signed(63), "\xbf");
  EXPECT_EQ(Signed(-64), "\x40");
  EXPECT_EQ(Signed(64), std::string("\xc0\x40", 2));
  EXPECT_EQ(Signed(-65), std::string("\x3f\xbf", 2));
  EXPECT_EQ(Signed(0x424242), std::string("\xf0\x42\x42\x42", 4));
  EXPECT_EQ(Signed(-0x800), std::string("\x38\x00", 2));
  EXPECT_EQ(Signed(INT64_MAX), std::string("\xff\xc0\x7f", 3) + std::string(7, '\xff'));
  EXPECT_EQ(Signed(INT64_MIN), std::string("\x00\x3f\x80", 3) + std::string(7, '\x00'));
}

// The point of the encoding: byte order is numeric order, at every length.
TEST(OrderedCodeTest, SignedOrderIsNumericOrder) {
  std::mt19937_64 rng(5);
  std::vector<int64_t> values = {INT64_MIN, INT64_MAX, 0, -1, 1, 63, 64, -64, -65};
  for (int i = 0; i < 2000; ++i) {
    const int shift = static_cast<int>(rng() % 64);
    values.push_back(static_cast<int64_t>(rng()) >> shift);
  }
  std::sort(values.begin(), values.end());
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] == values[i - 1]) continue;
    ASSERT_LT(Signed(values[i - 1]), Signed(values[i])) << values[i - 1] << " " << values[i];
  }
}

TEST(OrderedCodeTest, StringsEscapeNulAndFF) {
  std::string s;
  ordered_code::WriteString(&s, std::string("a\0b\xff", 4));
  EXPECT_EQ(s, std::string("a\0\xff" "b\xff\0" "\0\1", 8));
}

TEST(TensorSliceTest, KeyLayout) {
  // [-, 4:6] of a rank-2 tensor "w": 0, "w", rank 2, (0,-1), (4,6).
  const std::string key = EncodeTensorNameSlice("w", {{0, -1}, {4, 6}});
  EXPECT_EQ(key, std::string("\x00" "w\x00\x01" "\x01\x02" "\x80\x7f" "\x84\x86", 10));
  EXPECT_TRUE(IsSliceKey(key));
  EXPECT_FALSE(IsSliceKey("w"));
  EXPECT_EQ(SliceDebugString({{0, -1}, {4, 6}}), "-:4,6");
}

// Writes `full` the way TensorFlow's Saver writes a partitioned variable:
// each part under its slice key, then the whole tensor's entry listing the
// parts (no data of its own).
class SlicedBundle {
 public:
  explicit SlicedBundle(Env* env) : env_(env) {}

  void Add(const std::string& name, const Tensor& full, const std::vector<TensorSlice>& parts) {
    parts_[name] = {full, parts};
  }
  // Stores `t` as the part under `key` instead of the right one.
  void Replace(const std::string& key, const Tensor& t) { replace_[key] = t; }

  absl::Status Write(const std::string& prefix, const std::string& skip_part = "") {
    {
      ASSIGN_OR_RETURN(auto writer, BundleWriter::Create(env_, prefix, {}));
      RETURN_IF_ERROR(writer->Add("plain", Tensor::Scalar<int64_t>(7)));
      for (const auto& [name, fp] : parts_) {
        for (const TensorSlice& slice : fp.second) {
          const std::string key = EncodeTensorNameSlice(name, slice);
          if (key == skip_part) continue;
          auto r = replace_.find(key);
          RETURN_IF_ERROR(writer->Add(key, r != replace_.end() ? r->second
                                                              : Extract(fp.first, slice)));
        }
      }
      RETURN_IF_ERROR(writer->Finish());
    }
    ASSIGN_OR_RETURN(auto reader, BundleReader::Open(env_, prefix));
    std::map<std::string, tensorflow::BundleEntryProto, std::less<>> entries;
    RETURN_IF_ERROR(reader->ForEachEntry([&](absl::string_view n, const auto& e) {
      entries[std::string(n)] = e;
      return absl::OkStatus();
    }));
    for (const auto& [name, fp] : parts_) {
      tensorflow::BundleEntryProto& e = entries[name];
      e.set_dtype(static_cast<tensorflow::DataType>(fp.first.dtype()));
      for (int d = 0; d < fp.first.dims(); ++d) {
        e.mutable_shape()->add_dim()->set_size(fp.first.dim_size(d));
      }
      for (const TensorSlice& slice : fp.second) {
        auto* proto = e.add_slices();
        for (const SliceExtent& x : slice) {
          auto* ext = proto->add_extent();
          if (x.length >= 0) {
            ext->set_start(x.start);
            ext->set_length(x.length);
          }
        }
      }
    }
    return WriteBundleIndex(env_, prefix, reader->header(), entries, false);
  }

  // The part of `full` that `slice` covers, by brute force.
  static Tensor Extract(const Tensor& full, const TensorSlice& slice) {
    const TensorShape shape = SliceShape(slice, full.shape());
    Tensor part(full.dtype(), shape);
    const int rank = full.dims();
    std::vector<int64_t> idx(rank, 0);
    for (int64_t i = 0; i < part.NumElements(); ++i) {
      int64_t rem = i, at = 0, stride = 1;
      for (int d = rank - 1; d >= 0; --d) {
        idx[d] = rem % shape.dim_size(d);
        rem /= shape.dim_size(d);
      }
      for (int d = rank - 1; d >= 0; --d) {
        at += ((slice[d].length < 0 ? 0 : slice[d].start) + idx[d]) * stride;
        stride *= full.dim_size(d);
      }
      if (full.dtype() == DT_STRING) {
        part.flat<std::string>()[i] = full.flat<std::string>()[at];
      } else {
        part.flat<float>()[i] = full.flat<float>()[at];
      }
    }
    return part;
  }

 private:
  Env* env_;
  std::map<std::string, std::pair<Tensor, std::vector<TensorSlice>>> parts_;
  std::map<std::string, Tensor> replace_;
};

Tensor Iota(const TensorShape& shape) {
  Tensor t(DT_FLOAT, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.flat<float>()[i] = static_cast<float>(i) + 0.5f;
  return t;
}

void ExpectEqual(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    if (a.dtype() == DT_STRING) {
      ASSERT_EQ(a.flat<std::string>()[i], b.flat<std::string>()[i]) << i;
    } else {
      ASSERT_EQ(a.flat<float>()[i], b.flat<float>()[i]) << i;
    }
  }
}

TEST(SlicedBundleTest, AssemblesEveryLayout) {
  MemEnv env;
  SlicedBundle b(&env);
  const Tensor rows = Iota({10, 3});      // split by rows, as partitioned variables are
  const Tensor grid = Iota({4, 6, 2});    // split along two dimensions
  const Tensor vec = Iota({7});
  Tensor words(DT_STRING, TensorShape({5, 2}));
  for (int64_t i = 0; i < 10; ++i) words.flat<std::string>()[i] = std::string(i, 'a' + i);
  b.Add("emb/rows", rows, {{{0, 4}, {0, -1}}, {{4, 3}, {0, -1}}, {{7, 3}, {0, -1}}});
  b.Add("grid", grid, {{{0, 2}, {0, 3}, {0, -1}}, {{0, 2}, {3, 3}, {0, -1}},
                       {{2, 2}, {0, 3}, {0, -1}}, {{2, 2}, {3, 3}, {0, -1}}});
  b.Add("vec", vec, {{{0, 7}}});
  b.Add("words", words, {{{0, 2}, {0, -1}}, {{2, 3}, {0, -1}}});
  ASSERT_TRUE(b.Write("/ck/m").ok());
  auto reader = BundleReader::Open(&env, "/ck/m");
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (const auto& [name, want] : std::map<std::string, Tensor>{
           {"emb/rows", rows}, {"grid", grid}, {"vec", vec}, {"words", words}}) {
    auto got = (*reader)->Lookup(name);
    ASSERT_TRUE(got.ok()) << name << ": " << got.status();
    ExpectEqual(*got, want);
  }
  // The parts are not listed as tensors of their own.
  auto list = (*reader)->ListTensors();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const TensorInfo& i : *list) names.push_back(i.name);
  EXPECT_THAT(names, testing::ElementsAre("emb/rows", "grid", "plain", "vec", "words"));
  EXPECT_EQ((*list)[0].slices.size(), 3u);
  // Streaming a sliced tensor hands over the assembled bytes.
  std::string streamed;
  ASSERT_TRUE((*reader)->ReadChunks("grid", [&](absl::string_view piece) {
    streamed.append(piece.data(), piece.size());
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(streamed, std::string(grid.raw_data(), grid.TotalBytes()));
  // LookupMany takes them too.
  auto many = (*reader)->LookupMany({"vec", "emb/rows"}, nullptr);
  ASSERT_TRUE(many.ok());
  ExpectEqual((*many)[1], rows);
}

TEST(SlicedBundleTest, MissingPartIsDataLoss) {
  MemEnv env;
  SlicedBundle b(&env);
  const TensorSlice second = {{5, 5}, {0, -1}};
  b.Add("w", Iota({10, 2}), {{{0, 5}, {0, -1}}, second});
  ASSERT_TRUE(b.Write("/m", EncodeTensorNameSlice("w", second)).ok());
  auto got = BundleReader::Open(&env, "/m").value()->Lookup("w");
  EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("slice 5,5:- of tensor 'w'"));
}

TEST(SlicedBundleTest, PartOfTheWrongShapeOrDtypeIsDataLoss) {
  const TensorSlice first = {{0, 5}, {0, -1}};
  Tensor ints(DT_INT64, TensorShape({5, 2}));
  for (int64_t i = 0; i < 10; ++i) ints.flat<int64_t>()[i] = i;
  for (const Tensor& bad : {Iota({5, 3}), ints}) {
    MemEnv env;
    SlicedBundle b(&env);
    b.Add("w", Iota({10, 2}), {first, {{5, 5}, {0, -1}}});
    b.Replace(EncodeTensorNameSlice("w", first), bad);
    ASSERT_TRUE(b.Write("/m").ok());
    auto got = BundleReader::Open(&env, "/m").value()->Lookup("w");
    EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("slice 0,5:- of tensor 'w'"));
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("expected float [5,2]"));
  }
}

TEST(SlicedBundleTest, GapsAndOverlapsAreDataLoss) {
  for (const std::vector<TensorSlice>& parts :
       {std::vector<TensorSlice>{{{0, 4}, {0, -1}}, {{5, 5}, {0, -1}}},      // row 4 missing
        std::vector<TensorSlice>{{{0, 6}, {0, -1}}, {{5, 5}, {0, -1}}}}) {    // row 5 twice
    MemEnv env;
    SlicedBundle b(&env);
    b.Add("w", Iota({10, 2}), parts);
    ASSERT_TRUE(b.Write("/m").ok());
    auto got = BundleReader::Open(&env, "/m").value()->Lookup("w");
    EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("missing or overlapping"));
  }
}

TEST(SlicedBundleTest, BadExtentsAreDataLoss) {
  MemEnv env;
  SlicedBundle b(&env);
  b.Add("w", Iota({10, 2}), {{{0, 10}, {0, -1}}});
  ASSERT_TRUE(b.Write("/m").ok());
  auto reader = BundleReader::Open(&env, "/m").value();
  std::map<std::string, tensorflow::BundleEntryProto, std::less<>> entries;
  ASSERT_TRUE(reader->ForEachEntry([&](absl::string_view n, const auto& e) {
    entries[std::string(n)] = e;
    return absl::OkStatus();
  }).ok());
  const auto header = reader->header();
  reader.reset();
  auto rewrite = [&](const std::function<void(tensorflow::TensorSliceProto*)>& edit) {
    auto e = entries;
    edit(e["w"].mutable_slices(0));
    EXPECT_TRUE(WriteBundleIndex(&env, "/m", header, e, false).ok());
    return BundleReader::Open(&env, "/m").value()->Lookup("w").status();
  };
  absl::Status s = rewrite([](auto* p) { p->mutable_extent(0)->set_length(11); });
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("outside the shape"));
  s = rewrite([](auto* p) { p->mutable_extent(0)->set_start(-1); });
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  s = rewrite([](auto* p) { p->add_extent(); });  // rank 3 for a rank-2 tensor
  EXPECT_THAT(std::string(s.message()), HasSubstr("3 dimensions"));
  s = rewrite([](auto* p) { p->mutable_extent(1)->set_start(1); });  // whole, but from 1
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  // The part has the wrong shape for its slice: [0,5) listed, [0,10) stored.
  s = rewrite([](auto* p) { p->mutable_extent(0)->set_length(5); });
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("has no entry"));
}

}  // namespace
}  // namespace recflow::checkpoint
