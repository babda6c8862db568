// Tests of the SSTable format pieces (table_format.h), the table builder and
// reader (table.h) and the snappy decoder (snappy.h).
#include "recflow/checkpoint/table.h"

#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/snappy.h"
#include "recflow/checkpoint/table_format.h"
#include "recflow/core/crc32c.h"
#include "recflow/core/mem_env.h"

namespace recflow::table {
namespace {

using testing::HasSubstr;

TEST(TableFormatTest, VarintsRoundTrip) {
  std::mt19937_64 rng(1);
  std::string buf;
  std::vector<uint64_t> values = {0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX,
                                  uint64_t{1} << 63, UINT64_MAX};
  for (int i = 0; i < 100; ++i) values.push_back(rng() >> (rng() % 64));
  for (uint64_t v : values) PutVarint64(&buf, v);
  absl::string_view in = buf;
  for (uint64_t v : values) {
    uint64_t got;
    ASSERT_TRUE(GetVarint64(&in, &got));
    EXPECT_EQ(got, v);
  }
  EXPECT_TRUE(in.empty());
  for (uint64_t v : values) {
    std::string one;
    PutVarint64(&one, v);
    EXPECT_EQ(static_cast<int>(one.size()), VarintLength(v));
  }
}

TEST(TableFormatTest, VarintBadInput) {
  uint64_t v;
  absl::string_view truncated("\xff\xff", 2);
  EXPECT_FALSE(GetVarint64(&truncated, &v));
  std::string too_long(10, '\xff');
  too_long.push_back('\x01');
  absl::string_view in = too_long;
  EXPECT_FALSE(GetVarint64(&in, &v));
  std::string big;
  PutVarint64(&big, uint64_t{1} << 40);
  absl::string_view in32 = big;
  uint32_t v32;
  EXPECT_FALSE(GetVarint32(&in32, &v32));
}

TEST(TableFormatTest, FooterLayout) {
  Footer f;
  f.metaindex_handle = {92, 8};
  f.index_handle = {105, 14};
  std::string enc;
  f.EncodeTo(&enc);
  ASSERT_EQ(enc.size(), 48u);
  // The magic number, little endian, in the last 8 bytes.
  EXPECT_EQ(enc.substr(40), std::string("\x57\xfb\x80\x8b\x24\x75\x47\xdb", 8));
  Footer g;
  ASSERT_TRUE(g.DecodeFrom(enc, "f").ok());
  EXPECT_EQ(g.index_handle.offset, 105u);
  EXPECT_EQ(g.index_handle.size, 14u);
  enc[45] ^= 1;
  EXPECT_THAT(std::string(g.DecodeFrom(enc, "f").message()), HasSubstr("bad magic"));
}

TEST(TableFormatTest, ShortKeys) {
  std::string s = "abcd";
  FindShortestSeparator(&s, "abzz");
  EXPECT_EQ(s, "abd");
  s = "abc";
  FindShortestSeparator(&s, "abcdef");  // prefix: unchanged
  EXPECT_EQ(s, "abc");
  s = "abc";
  FindShortestSeparator(&s, "abd");  // adjacent: unchanged
  EXPECT_EQ(s, "abc");
  s = "c";
  FindShortSuccessor(&s);
  EXPECT_EQ(s, "d");
  s = std::string("\xff\xff" "a", 3);
  FindShortSuccessor(&s);
  EXPECT_EQ(s, std::string("\xff\xff" "b", 3));
}

// Writes `kv` into a table in a MemEnv and returns the file's bytes.
std::string BuildTable(MemEnv* env, const std::string& path,
                       const std::map<std::string, std::string>& kv,
                       TableBuilderOptions options = {}) {
  auto file = env->NewWritableFile(path);
  EXPECT_TRUE(file.ok());
  TableBuilder b(options, file->get());
  for (const auto& [k, v] : kv) EXPECT_TRUE(b.Add(k, v).ok());
  EXPECT_TRUE(b.Finish().ok());
  EXPECT_TRUE((*file)->Close().ok());
  std::string contents;
  EXPECT_TRUE(ReadFileToString(env, path, &contents).ok());
  EXPECT_EQ(contents.size(), b.FileSize());
  return contents;
}

std::map<std::string, std::string> RandomKv(int n, std::mt19937* rng) {
  std::map<std::string, std::string> kv;
  const char* words[] = {"dense", "emb", "layer", "kernel", "bias", "Adam", "m", "v"};
  while (static_cast<int>(kv.size()) < n) {
    std::string key;
    const int parts = 1 + (*rng)() % 4;
    for (int p = 0; p < parts; ++p) {
      if (p > 0) key += "/";
      key += words[(*rng)() % 8];
      key += std::to_string((*rng)() % 50);
    }
    std::string value((*rng)() % 200, '\0');
    for (char& c : value) c = static_cast<char>((*rng)());
    kv[key] = value;
  }
  return kv;
}

class TableRoundTripTest : public testing::TestWithParam<int> {};

TEST_P(TableRoundTripTest, WritesAndReadsBack) {
  std::mt19937 rng(GetParam());
  MemEnv env;
  const auto kv = RandomKv(GetParam(), &rng);
  TableBuilderOptions opts;
  opts.block_size = 512;  // many blocks
  const std::string contents = BuildTable(&env, "/t", kv, opts);
  ASSERT_GE(contents.size(), kFooterSize);
  auto file = env.NewRandomAccessFile("/t");
  ASSERT_TRUE(file.ok());
  auto table = Table::Open(file->get(), contents.size(), "/t");
  ASSERT_TRUE(table.ok()) << table.status();
  // Full scan in order.
  auto it = (*table)->NewIterator();
  it->SeekToFirst();
  auto want = kv.begin();
  for (; it->Valid(); it->Next(), ++want) {
    ASSERT_NE(want, kv.end());
    EXPECT_EQ(it->key(), want->first);
    EXPECT_EQ(it->value(), want->second);
  }
  EXPECT_EQ(want, kv.end());
  EXPECT_TRUE(it->status().ok());
  // Point lookups, hits and misses.
  for (const auto& [k, v] : kv) {
    auto got = (*table)->Get(k);
    ASSERT_TRUE(got.ok()) << k;
    EXPECT_EQ(*got, v);
    EXPECT_TRUE(absl::IsNotFound((*table)->Get(k + "\x01").status()));
  }
  // Seek lands on the first key >= target.
  for (const auto& [k, v] : kv) {
    std::string target = k.substr(0, k.size() - 1);
    it->Seek(target);
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ(it->key(), kv.lower_bound(target)->first);
  }
  it->Seek("\xff\xff\xff");
  EXPECT_FALSE(it->Valid());
  // A tiny block cache (constant eviction), read from several threads.
  TableReadOptions tiny;
  tiny.block_cache_bytes = 700;
  auto small = Table::Open(file->get(), contents.size(), "/t", tiny);
  ASSERT_TRUE(small.ok());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      int i = 0;
      for (const auto& [k, v] : kv) {
        if (i++ % 3 != t) continue;
        auto got = (*small)->Get(k);
        if (!got.ok() || *got != v) mismatches.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Sizes, TableRoundTripTest, testing::Values(0, 1, 2, 17, 300, 2000));

TEST(TableTest, RejectsUnsortedKeys) {
  MemEnv env;
  auto file = env.NewWritableFile("/t");
  TableBuilder b({}, file->get());
  ASSERT_TRUE(b.Add("b", "1").ok());
  EXPECT_THAT(std::string(b.Add("a", "2").message()), HasSubstr("increasing order"));
  EXPECT_FALSE(b.Finish().ok());
}

TEST(TableTest, EmptyKeyFirstAndEmptyMetaindex) {
  MemEnv env;
  const std::string c = BuildTable(&env, "/t", {{"", "header"}, {"a", "x"}});
  Footer f;
  ASSERT_TRUE(f.DecodeFrom(absl::string_view(c).substr(c.size() - kFooterSize), "t").ok());
  // An empty metaindex block: one restart at 0, count 1.
  EXPECT_EQ(f.metaindex_handle.size, 8u);
  EXPECT_EQ(c.substr(f.metaindex_handle.offset, 8), std::string("\0\0\0\0\1\0\0\0", 8));
  // Uncompressed block trailers.
  EXPECT_EQ(c[f.metaindex_handle.offset + 8], kNoCompression);
  EXPECT_EQ(c[f.index_handle.offset + f.index_handle.size], kNoCompression);
}

// Each kind of damage to a table is a DataLoss naming the file.
class TableCorruptionTest : public testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(5);
    TableBuilderOptions opts;
    opts.block_size = 256;
    good_ = BuildTable(&env_, "/good", RandomKv(100, &rng), opts);
  }
  absl::Status OpenAndScan(const std::string& bytes) {
    absl::Status w = WriteStringToFile(&env_, "/bad", bytes);
    if (!w.ok()) return w;
    auto file = env_.NewRandomAccessFile("/bad");
    if (!file.ok()) return file.status();
    auto table = Table::Open(file->get(), bytes.size(), "/bad");
    if (!table.ok()) return table.status();
    auto it = (*table)->NewIterator();
    int n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    return it->status();
  }
  MemEnv env_;
  std::string good_;
};

TEST_F(TableCorruptionTest, Truncated) {
  for (size_t len : {size_t{0}, size_t{10}, size_t{47}, good_.size() / 2, good_.size() - 1}) {
    absl::Status s = OpenAndScan(good_.substr(0, len));
    EXPECT_TRUE(absl::IsDataLoss(s)) << len << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("/bad"));
  }
}

TEST_F(TableCorruptionTest, BadMagic) {
  std::string bad = good_;
  bad[bad.size() - 1] ^= 0x40;
  absl::Status s = OpenAndScan(bad);
  EXPECT_TRUE(absl::IsDataLoss(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("bad magic"));
}

TEST_F(TableCorruptionTest, FlippedByteInEveryRegion) {
  // A flipped byte anywhere in the blocks is caught by a block checksum (or
  // earlier by the footer/handle checks); it never crashes or passes.
  for (size_t pos = 0; pos + kFooterSize < good_.size(); pos += 7) {
    std::string bad = good_;
    bad[pos] ^= 0x10;
    absl::Status s = OpenAndScan(bad);
    EXPECT_TRUE(absl::IsDataLoss(s)) << "byte " << pos << ": " << s;
  }
}

TEST_F(TableCorruptionTest, OversizedBlockHandle) {
  // A footer whose index handle claims an enormous block.
  std::string bad = good_.substr(0, good_.size() - kFooterSize);
  Footer f;
  f.metaindex_handle = {0, 8};
  f.index_handle = {0, uint64_t{1} << 50};
  f.EncodeTo(&bad);
  absl::Status s = OpenAndScan(bad);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("limit"));
}

TEST(SnappyTest, LiteralsAndCopies) {
  // "abcd" literal, then a copy of 8 bytes at offset 4 (overlapping: abcdabcd),
  // then a 2-byte-offset copy of 3 bytes at offset 12, then literal "!".
  std::string c;
  c.push_back(15);                // uncompressed length 4 + 8 + 2 + 1
  c.push_back((4 - 1) << 2);      // literal, 4 bytes
  c += "abcd";
  c.push_back(static_cast<char>(((8 - 4) << 2) | 1));  // copy-1, len 8
  c.push_back(4);                 // offset 4
  c.push_back(static_cast<char>(((2 - 1) << 2) | 2));  // copy-2, len 2
  c.push_back(12);
  c.push_back(0);
  c.push_back(0);                 // literal, 1 byte
  c += "!";
  std::string out;
  ASSERT_TRUE(snappy::Uncompress(c, &out, 1000).ok());
  EXPECT_EQ(out, "abcdabcdabcdab!");
}

TEST(SnappyTest, LongLiteral) {
  std::string payload(1000, 'x');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
  std::string c;
  PutVarint32(&c, 1000);
  c.push_back(static_cast<char>(61 << 2));  // 2-byte literal length
  c.push_back(static_cast<char>((1000 - 1) & 0xff));
  c.push_back(static_cast<char>((1000 - 1) >> 8));
  c += payload;
  std::string out;
  ASSERT_TRUE(snappy::Uncompress(c, &out, 1 << 20).ok());
  EXPECT_EQ(out, payload);
}

TEST(SnappyTest, BadStreams) {
  std::string out;
  // Copy before any output.
  EXPECT_TRUE(absl::IsDataLoss(snappy::Uncompress(std::string("\x04\x01\x01", 3), &out, 100)));
  // Literal past the input.
  EXPECT_TRUE(absl::IsDataLoss(snappy::Uncompress(std::string("\x08\x1c" "ab", 4), &out, 100)));
  // Output shorter than declared.
  EXPECT_TRUE(absl::IsDataLoss(snappy::Uncompress(std::string("\x05\x00" "a", 3), &out, 100)));
  // Output longer than declared.
  EXPECT_TRUE(absl::IsDataLoss(snappy::Uncompress(std::string("\x01\x04" "ab", 4), &out, 100)));
  // Oversized declared length: refused before allocating.
  std::string huge;
  PutVarint32(&huge, 0xffffffffu);
  EXPECT_THAT(std::string(snappy::Uncompress(huge, &out, 1 << 20).message()),
              HasSubstr("limit"));
  // Bad preamble.
  EXPECT_TRUE(absl::IsDataLoss(snappy::Uncompress(std::string("\xff\xff", 2), &out, 100)));
}

}  // namespace
}  // namespace recflow::table
