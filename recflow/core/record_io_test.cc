#include "recflow/core/record_io.h"

#include <time.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/crc32c.h"
#include "recflow/core/mem_env.h"

namespace recflow {
namespace {

using testing::AllOf;
using testing::HasSubstr;

// CPU time of this thread: rates stay meaningful on a loaded machine.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

class RecordIoTest : public testing::Test {
 protected:
  void Write(const std::vector<std::string>& records) {
    ASSERT_TRUE(WriteRecordsToFile(&env_, path_, records).ok());
  }
  void WriteRaw(const std::string& bytes) {
    ASSERT_TRUE(WriteStringToFile(&env_, path_, bytes).ok());
  }
  std::string ReadRaw() {
    std::string out;
    EXPECT_TRUE(ReadFileToString(&env_, path_, &out).ok());
    return out;
  }
  // Opens the file; the reader borrows it from files_.
  std::unique_ptr<RecordReader> Open(RecordReaderOptions opts = {}) {
    auto f = env_.NewRandomAccessFile(path_);
    EXPECT_TRUE(f.ok()) << f.status();
    files_.push_back(std::move(*f));
    return std::make_unique<RecordReader>(files_.back().get(), path_, opts);
  }
  std::vector<std::string> ReadAll(RecordReader* reader) {
    std::vector<std::string> out;
    std::string rec;
    absl::Status s;
    while ((s = reader->ReadRecord(&rec)).ok()) out.push_back(rec);
    EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
    return out;
  }

  MemEnv env_;
  std::string path_ = "/data.tfrecord";
  std::vector<std::unique_ptr<RandomAccessFile>> files_;
};

// Hand-computed from the format: u64 LE length, masked crc32c of those 8
// bytes, the data, masked crc32c of the data. crc32c("") = 0, so the empty
// record's data crc is the mask delta 0xa282ead8 itself.
constexpr unsigned char kAbcRecord[] = {
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // length 3
    0xb0, 0x99, 0x49, 0x0e,                          // masked crc of length
    'a',  'b',  'c',                                 // data
    0x6e, 0x57, 0xf1, 0x21};                         // masked crc of data
constexpr unsigned char kEmptyRecord[] = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                          0x00, 0x00, 0x29, 0x03, 0x98, 0x07,
                                          0xd8, 0xea, 0x82, 0xa2};

std::string Bytes(const unsigned char* p, size_t n) {
  return std::string(reinterpret_cast<const char*>(p), n);
}

TEST_F(RecordIoTest, ByteExactLayoutOfKnownRecords) {
  Write({"abc", ""});
  EXPECT_EQ(ReadRaw(), Bytes(kAbcRecord, sizeof(kAbcRecord)) +
                           Bytes(kEmptyRecord, sizeof(kEmptyRecord)));
  // And the hand-made bytes read back.
  WriteRaw(Bytes(kEmptyRecord, sizeof(kEmptyRecord)) +
           Bytes(kAbcRecord, sizeof(kAbcRecord)));
  auto reader = Open();
  EXPECT_THAT(ReadAll(reader.get()), testing::ElementsAre("", "abc"));
}

TEST_F(RecordIoTest, WriterCountsBytes) {
  auto f = env_.NewWritableFile(path_);
  ASSERT_TRUE(f.ok());
  RecordWriter w(f->get());
  ASSERT_TRUE(w.WriteRecord("abc").ok());
  ASSERT_TRUE(w.WriteRecord("").ok());
  ASSERT_TRUE(w.Flush().ok());
  EXPECT_EQ(w.bytes_written(), 19 + 16);
  ASSERT_TRUE((*f)->Close().ok());
  EXPECT_EQ(ReadRaw().size(), 35u);
}

TEST_F(RecordIoTest, RoundTripEmptyLargeAndManyRecords) {
  std::mt19937_64 rng(17);
  std::vector<std::string> records = {"", RandomBytes(rng, 3 << 20), ""};
  for (int i = 0; i < 5000; ++i)
    records.push_back(RandomBytes(rng, rng() % 300));
  records.push_back(RandomBytes(rng, 5000));  // larger than the small buffer
  records.push_back("");
  Write(records);
  // Default buffer, and a tiny one so that records straddle refills and
  // many take the large-record path.
  for (size_t buffer : {size_t{1} << 20, size_t{100}, size_t{64}}) {
    SCOPED_TRACE(buffer);
    auto reader = Open({.buffer_bytes = buffer});
    std::vector<std::string> got = ReadAll(reader.get());
    ASSERT_EQ(got.size(), records.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], records[i]) << i;
    EXPECT_EQ(reader->offset(), ReadRaw().size());
  }
}

TEST_F(RecordIoTest, RoundTripThroughPosixFiles) {
  std::string dir = testing::TempDir();
  std::string path = JoinPath(dir, "record_io_test.tfrecord");
  std::mt19937_64 rng(3);
  std::vector<std::string> records;
  for (int i = 0; i < 300; ++i)
    records.push_back(RandomBytes(rng, rng() % 9000));
  Env* env = Env::Default();
  ASSERT_TRUE(WriteRecordsToFile(env, path, records).ok());
  auto f = env->NewRandomAccessFile(path);
  ASSERT_TRUE(f.ok());
  RecordReader reader(f->get(), path, {.buffer_bytes = 4096});
  std::vector<std::string> got;
  std::string rec;
  while (reader.ReadRecord(&rec).ok()) got.push_back(rec);
  EXPECT_EQ(got, records);
  (void)env->DeleteFile(path);
}

TEST_F(RecordIoTest, ReadingPastTheEndIsOutOfRange) {
  Write({"x"});
  auto reader = Open();
  std::string rec;
  ASSERT_TRUE(reader->ReadRecord(&rec).ok());
  for (int i = 0; i < 3; ++i) {
    absl::Status s = reader->ReadRecord(&rec);
    EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
    EXPECT_EQ(reader->last_error(), RecordError::kNone);
  }
  WriteRaw("");
  reader = Open();
  EXPECT_TRUE(absl::IsOutOfRange(reader->ReadRecord(&rec)));
}

// Cuts a two-record file inside the second record: the first reads, then
// DataLoss "truncated" naming the file and offset 19, then OutOfRange.
TEST_F(RecordIoTest, TruncatedInHeaderDataAndCrc) {
  std::mt19937_64 rng(5);
  const std::string big = RandomBytes(rng, 1000);
  Write({"abc", big});
  const std::string full = ReadRaw();
  ASSERT_EQ(full.size(), 19u + 16 + 1000);
  struct Case {
    size_t cut;
    const char* where;
  } cases[] = {{19 + 5, "header"},
               {19 + 12, "inside the data"},
               {19 + 12 + 500, "inside the data"},
               {19 + 12 + 1000, "data crc"},
               {19 + 12 + 1002, "data crc"}};
  for (const Case& c : cases) {
    for (size_t buffer : {size_t{1} << 20, size_t{64}}) {  // both read paths
      SCOPED_TRACE(testing::Message()
                   << "cut " << c.cut << " buffer " << buffer);
      WriteRaw(full.substr(0, c.cut));
      auto reader = Open({.buffer_bytes = buffer});
      std::string rec;
      ASSERT_TRUE(reader->ReadRecord(&rec).ok());
      EXPECT_EQ(rec, "abc");
      absl::Status s = reader->ReadRecord(&rec);
      EXPECT_TRUE(absl::IsDataLoss(s)) << s;
      EXPECT_THAT(s.message(),
                  AllOf(HasSubstr("truncated"), HasSubstr(path_),
                        HasSubstr("offset 19"), HasSubstr(c.where)));
      EXPECT_EQ(reader->last_error(), RecordError::kTruncated);
      EXPECT_EQ(reader->offset(), 19u);  // still at the broken record
      s = reader->ReadRecord(&rec);
      EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
    }
  }
}

TEST_F(RecordIoTest, FlippedBitInLengthCrcLosesTheFraming) {
  Write({"abc", "defg", "hi"});
  std::string bytes = ReadRaw();
  bytes[19 + 9] ^= 0x10;  // second record's length crc
  WriteRaw(bytes);
  auto reader = Open();
  std::string rec;
  ASSERT_TRUE(reader->ReadRecord(&rec).ok());
  absl::Status s = reader->ReadRecord(&rec);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("corrupted"), HasSubstr(path_),
                                 HasSubstr("offset 19"), HasSubstr("length")));
  EXPECT_EQ(reader->last_error(), RecordError::kBadLengthCrc);
  EXPECT_TRUE(absl::IsOutOfRange(reader->ReadRecord(&rec)));
  // A flipped bit in the length itself is caught the same way.
  bytes = ReadRaw();
  bytes[19 + 9] ^= 0x10;
  bytes[19] ^= 0x01;
  WriteRaw(bytes);
  reader = Open();
  ASSERT_TRUE(reader->ReadRecord(&rec).ok());
  EXPECT_TRUE(absl::IsDataLoss(reader->ReadRecord(&rec)));
  EXPECT_EQ(reader->last_error(), RecordError::kBadLengthCrc);
}

TEST_F(RecordIoTest, FlippedBitInDataOrDataCrcSkipsTheRecord) {
  Write({"abc", "defg", "hi"});
  const std::string clean = ReadRaw();
  for (size_t pos :
       {size_t{19 + 12 + 2}, size_t{19 + 12 + 4 + 1}}) {  // data, crc
    for (size_t buffer : {size_t{1} << 20, size_t{64}}) {
      SCOPED_TRACE(testing::Message() << "pos " << pos << " buffer " << buffer);
      std::string bytes = clean;
      bytes[pos] ^= 0x04;
      WriteRaw(bytes);
      auto reader = Open({.buffer_bytes = buffer});
      std::string rec;
      ASSERT_TRUE(reader->ReadRecord(&rec).ok());
      absl::Status s = reader->ReadRecord(&rec);
      EXPECT_TRUE(absl::IsDataLoss(s)) << s;
      EXPECT_THAT(s.message(),
                  AllOf(HasSubstr("corrupted"), HasSubstr(path_),
                        HasSubstr("offset 19"), HasSubstr("data")));
      EXPECT_EQ(reader->last_error(), RecordError::kBadDataCrc);
      ASSERT_TRUE(reader->ReadRecord(&rec).ok());  // the next record is fine
      EXPECT_EQ(rec, "hi");
    }
  }
}

TEST_F(RecordIoTest, OversizedLengthIsNeverAllocated) {
  // A crc-valid header claiming 2^40 bytes, in a tiny file.
  std::string header(12, '\0');
  const uint64_t huge = uint64_t{1} << 40;
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>(huge >> (8 * i));
  const uint32_t crc = crc32c::Mask(crc32c::Value(header.data(), 8));
  for (int i = 0; i < 4; ++i) header[8 + i] = static_cast<char>(crc >> (8 * i));
  WriteRaw(header + "some bytes");
  auto reader = Open();
  std::string rec;
  absl::Status s = reader->ReadRecord(&rec);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("corrupted"), HasSubstr("offset 0"),
                    HasSubstr("1099511627776"), HasSubstr("limit")));
  EXPECT_EQ(reader->last_error(), RecordError::kTooLong);
  EXPECT_LT(rec.capacity(), 1000u);
  EXPECT_TRUE(absl::IsOutOfRange(reader->ReadRecord(&rec)));  // file ends first

  // A record that is merely over the limit is skipped whole.
  std::mt19937_64 rng(9);
  Write({"abc", RandomBytes(rng, 500), "hi"});
  reader = Open({.max_record_bytes = 100});
  ASSERT_TRUE(reader->ReadRecord(&rec).ok());
  s = reader->ReadRecord(&rec);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("length 500 exceeds the limit of 100"));
  EXPECT_EQ(reader->last_error(), RecordError::kTooLong);
  ASSERT_TRUE(reader->ReadRecord(&rec).ok());
  EXPECT_EQ(rec, "hi");
}

TEST_F(RecordIoTest, SeekToASavedOffset) {
  std::mt19937_64 rng(11);
  std::vector<std::string> records;
  for (int i = 0; i < 100; ++i)
    records.push_back(RandomBytes(rng, rng() % 200));
  Write(records);
  auto reader = Open({.buffer_bytes = 256});
  std::string rec;
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(reader->ReadRecord(&rec).ok());
  const uint64_t saved = reader->offset();
  for (int i = 40; i < 70; ++i) ASSERT_TRUE(reader->ReadRecord(&rec).ok());
  reader->Seek(saved);
  ASSERT_TRUE(reader->ReadRecord(&rec).ok());
  EXPECT_EQ(rec, records[40]);
  // A fresh reader continues from the saved offset too.
  auto other = Open();
  other->Seek(saved);
  std::vector<std::string> rest = ReadAll(other.get());
  EXPECT_EQ(rest,
            std::vector<std::string>(records.begin() + 40, records.end()));
  // Seeking back past a lost framing recovers it.
  reader->Seek(0);
  ASSERT_TRUE(reader->ReadRecord(&rec).ok());
  EXPECT_EQ(rec, records[0]);
}

// Prints the read rate; the assertion only guards against pathologies.
TEST_F(RecordIoTest, ReadThroughput) {
  std::mt19937_64 rng(1);
  std::vector<std::string> records;
  int64_t bytes = 0;
  for (int i = 0; i < 100000; ++i) {
    records.push_back(RandomBytes(rng, 100 + rng() % 400));
    bytes += records.back().size() + 16;
  }
  Write(records);
  auto reader = Open();
  std::string rec;
  const double t0 = ThreadCpuSeconds();
  int n = 0;
  while (reader->ReadRecord(&rec).ok()) ++n;
  const double secs = ThreadCpuSeconds() - t0;
  EXPECT_EQ(n, 100000);
  std::printf(
      "RecordReader: %d records of ~300 B, %.0f MB/s, %.2f M records/s\n", n,
      bytes / secs / 1e6, n / secs / 1e6);
}

}  // namespace
}  // namespace recflow
