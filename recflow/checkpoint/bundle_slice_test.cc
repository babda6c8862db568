// Sliced tensors written by BundleWriter::AddSlice (TensorFlow's layout:
// the full-name entry with `slices` and no data, one slice-key entry per
// part), read back whole and by slice (BundleReader::LookupSlice, from whole
// and from sliced entries), and merged across shards by MergeBundles.
#include <map>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/tensor_slice.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/status.h"

namespace recflow::checkpoint {
namespace {

using testing::HasSubstr;

Tensor Random(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DT_FLOAT, shape);
  for (float& v : t.flat<float>()) v = std::uniform_real_distribution<float>(-3, 3)(*rng);
  return t;
}

// The part of `full` that `slice` covers, element by element.
Tensor Extract(const Tensor& full, const TensorSlice& slice) {
  const TensorShape shape = SliceShape(slice, full.shape());
  Tensor part(full.dtype(), shape);
  const int rank = full.dims();
  for (int64_t i = 0; i < part.NumElements(); ++i) {
    int64_t rem = i, at = 0, stride = 1;
    std::vector<int64_t> idx(rank);
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

std::map<std::string, tensorflow::BundleEntryProto> Entries(const BundleReader& reader) {
  std::map<std::string, tensorflow::BundleEntryProto> out;
  EXPECT_TRUE(reader.ForEachEntry([&](absl::string_view n, const auto& e) {
    out[std::string(n)] = e;
    return absl::OkStatus();
  }).ok());
  return out;
}

TEST(BundleSliceTest, AddSliceWritesTensorFlowsLayout) {
  MemEnv env;
  std::mt19937 rng(11);
  const Tensor full = Random({7, 3}, &rng);
  const TensorShape shape({7, 3});
  const std::vector<TensorSlice> parts = {{{0, 3}, {0, 3}}, {{3, 2}, {0, 3}}, {{5, 2}, {0, 3}}};
  {
    auto w = BundleWriter::Create(&env, "/m", {});
    ASSERT_TRUE(w.ok());
    for (const TensorSlice& s : parts) {
      ASSERT_TRUE((*w)->AddSlice("emb", shape, s, Extract(full, s)).ok());
    }
    // A slice covering the whole tensor is an ordinary entry.
    ASSERT_TRUE((*w)->AddSlice("bias", TensorShape({1}), {{0, 1}}, Tensor::Scalar<float>(2.f)
                                                                        .Reshaped(TensorShape({1}))
                                                                        .value())
                    .ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto r = BundleReader::Open(&env, "/m");
  ASSERT_TRUE(r.ok()) << r.status();
  const auto entries = Entries(**r);
  // "bias", "emb" and three slice keys (which sort first: they start with NUL).
  ASSERT_EQ(entries.size(), 5u);
  const tensorflow::BundleEntryProto& e = entries.at("emb");
  EXPECT_EQ(e.dtype(), tensorflow::DT_FLOAT);
  EXPECT_EQ(e.shape().dim_size(), 2);
  EXPECT_EQ(e.size(), 0);
  ASSERT_EQ(e.slices_size(), 3);
  EXPECT_EQ(e.slices(1).extent(0).start(), 3);
  EXPECT_EQ(e.slices(1).extent(0).length(), 2);
  EXPECT_EQ(e.slices(1).extent(1).length(), 3);
  for (const TensorSlice& s : parts) {
    EXPECT_EQ(entries.count(EncodeTensorNameSlice("emb", s)), 1u);
  }
  EXPECT_EQ(entries.at("bias").slices_size(), 0);
  auto whole = (*r)->Lookup("emb");
  ASSERT_TRUE(whole.ok()) << whole.status();
  ExpectEqual(*whole, full);
}

TEST(BundleSliceTest, LookupSliceFromWholeAndSlicedEntries) {
  MemEnv env;
  std::mt19937 rng(12);
  const Tensor full = Random({10, 6}, &rng);
  const std::vector<TensorSlice> parts = {
      {{0, 4}, {0, -1}}, {{4, 6}, {0, 2}}, {{4, 6}, {2, 4}}};
  {
    auto w = BundleWriter::Create(&env, "/m", {});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add("whole", full).ok());
    for (const TensorSlice& s : parts) {
      ASSERT_TRUE((*w)->AddSlice("sliced", full.shape(), s, Extract(full, s)).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto r = BundleReader::Open(&env, "/m");
  ASSERT_TRUE(r.ok());
  // Random query slices: each read from either layout equals the brute
  // force extraction.
  for (int trial = 0; trial < 200; ++trial) {
    TensorSlice q(2);
    for (int d = 0; d < 2; ++d) {
      const int64_t size = full.dim_size(d);
      if (rng() % 4 == 0) continue;  // "-"
      const int64_t start = rng() % size;
      q[d] = {start, 1 + static_cast<int64_t>(rng() % (size - start))};
    }
    const Tensor want = Extract(full, q);
    for (const char* name : {"whole", "sliced"}) {
      auto got = (*r)->LookupSlice(name, q);
      ASSERT_TRUE(got.ok()) << name << " " << SliceDebugString(q) << ": " << got.status();
      ExpectEqual(*got, want);
    }
  }
  // Out of shape, or of the wrong rank.
  auto bad = (*r)->LookupSlice("sliced", {{8, 3}, {0, -1}});
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'sliced'"));
  bad = (*r)->LookupSlice("whole", {{0, 1}});
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
}

TEST(BundleSliceTest, SlicesThatDoNotCoverTheQueryAreNotFound) {
  MemEnv env;
  std::mt19937 rng(13);
  const Tensor full = Random({6, 2}, &rng);
  {
    auto w = BundleWriter::Create(&env, "/m", {});
    ASSERT_TRUE(w.ok());
    // Only rows [0, 3) saved (one shard of a sharded save).
    ASSERT_TRUE((*w)->AddSlice("w", full.shape(), {{0, 3}, {0, -1}},
                               Extract(full, {{0, 3}, {0, -1}})).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto r = BundleReader::Open(&env, "/m");
  ASSERT_TRUE(r.ok());
  auto part = (*r)->LookupSlice("w", {{1, 2}, {0, -1}});
  ASSERT_TRUE(part.ok()) << part.status();
  ExpectEqual(*part, Extract(full, {{1, 2}, {0, -1}}));
  auto missing = (*r)->LookupSlice("w", {{2, 3}, {0, -1}});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("do not cover slice 2,3:-"));
}

TEST(BundleSliceTest, AddSliceBadInputs) {
  MemEnv env;
  auto fresh = [&]() { return std::move(BundleWriter::Create(&env, "/m", {}).value()); };
  const Tensor part(DT_FLOAT, TensorShape({2, 3}));
  {
    auto w = fresh();
    absl::Status s = w->AddSlice("w", TensorShape({4, 3}), {{0, 3}, {0, -1}}, part);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("slice 0,3:- of tensor 'w'"));
  }
  {
    auto w = fresh();
    ASSERT_TRUE(w->AddSlice("w", TensorShape({4, 3}), {{0, 2}, {0, -1}}, part).ok());
    absl::Status s = w->AddSlice("w", TensorShape({5, 3}), {{2, 2}, {0, -1}}, part);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("earlier slices"));
  }
  {
    auto w = fresh();
    ASSERT_TRUE(w->Add("w", Tensor(DT_FLOAT, TensorShape({4, 3}))).ok());
    absl::Status s = w->AddSlice("w", TensorShape({4, 3}), {{0, 2}, {0, -1}}, part);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("added whole and as slice"));
  }
  {
    auto w = fresh();
    ASSERT_TRUE(w->AddSlice("w", TensorShape({4, 3}), {{0, 2}, {0, -1}}, part).ok());
    absl::Status s = w->AddSlice("w", TensorShape({4, 3}), {{0, 2}, {0, -1}}, part);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;  // the same part twice
  }
}

TEST(BundleSliceTest, MergeBundlesMergesSlicesFromShards) {
  MemEnv env;
  std::mt19937 rng(14);
  const Tensor full = Random({9, 4}, &rng);
  const std::vector<TensorSlice> parts = {{{0, 3}, {0, -1}}, {{3, 3}, {0, -1}},
                                          {{6, 3}, {0, -1}}};
  // Three shards (as a sharded Saver writes one per device), each with one
  // part of "emb"; the second also has a plain tensor.
  std::vector<std::string> prefixes;
  for (int i = 0; i < 3; ++i) {
    const std::string prefix = absl::StrCat("/tmp", i, "/part");
    auto w = BundleWriter::Create(&env, prefix, {});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->AddSlice("emb", full.shape(), parts[i], Extract(full, parts[i])).ok());
    if (i == 1) {
      ASSERT_TRUE((*w)->Add("step", Tensor::Scalar<int64_t>(5)).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
    prefixes.push_back(prefix);
  }
  ASSERT_TRUE(MergeBundles(&env, prefixes, "/ck/model", false, false).ok());
  auto r = BundleReader::Open(&env, "/ck/model");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->num_shards(), 3);
  auto got = (*r)->Lookup("emb");
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectEqual(*got, full);
  auto info = (*r)->GetInfo("emb");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->slices.size(), 3u);
  auto middle = (*r)->LookupSlice("emb", {{2, 5}, {1, 2}});
  ASSERT_TRUE(middle.ok()) << middle.status();
  ExpectEqual(*middle, Extract(full, {{2, 5}, {1, 2}}));

  // Slices of one name with different full shapes do not merge, nor a
  // sliced and a whole entry of one name.
  for (int variant = 0; variant < 2; ++variant) {
    auto a = BundleWriter::Create(&env, "/x0/part", {});
    ASSERT_TRUE((*a)->AddSlice("emb", TensorShape({9, 4}), parts[0], Extract(full, parts[0])).ok());
    ASSERT_TRUE((*a)->Finish().ok());
    auto b = BundleWriter::Create(&env, "/x1/part", {});
    if (variant == 0) {
      Tensor other(DT_FLOAT, TensorShape({3, 4}));
      ASSERT_TRUE((*b)->AddSlice("emb", TensorShape({10, 4}), parts[1], other).ok());
    } else {
      ASSERT_TRUE((*b)->Add("emb", full).ok());
    }
    ASSERT_TRUE((*b)->Finish().ok());
    absl::Status s = MergeBundles(&env, {"/x0/part", "/x1/part"}, "/x/model", false, false);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("'emb'"));
  }
}

}  // namespace
}  // namespace recflow::checkpoint
