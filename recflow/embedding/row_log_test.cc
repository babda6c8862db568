// RowLog: rows come back as they were put (through a pool too), newer
// records replace older ones, removals and deltas by version, compaction
// keeps every live row and drops the dead; a full disk, a cut file and a
// record of another id are clear errors.
#include "recflow/embedding/row_log.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"

namespace recflow::embedding {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kFloats = 6;

struct Rows {
  std::vector<int64_t> ids, freqs, versions;
  std::vector<float> values;
};

// n rows with ids first, first + 1, ..., values seeded by `seed`.
Rows MakeRows(int64_t first, int64_t n, int64_t version, uint64_t seed) {
  Rows r;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < n; ++i) {
    r.ids.push_back(first + i);
    r.freqs.push_back(static_cast<int64_t>(rng() % 100));
    r.versions.push_back(version);
    for (int64_t k = 0; k < kFloats; ++k) r.values.push_back(u(rng));
  }
  return r;
}

absl::Status Put(RowLog* log, const Rows& r) {
  return log->Put(r.ids, r.values, r.freqs, r.versions);
}

// Reads `ids` back; EXPECTs each found one to equal the row in `want` with
// its id (absent from want: must not be found).
void ExpectRows(const RowLog& log, const std::vector<int64_t>& ids, const Rows& want,
                ThreadPool* pool = nullptr) {
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<float> rows(n * kFloats);
  std::vector<int64_t> freqs(n), versions(n);
  std::vector<char> found;
  ASSERT_TRUE(log.Get(ids, absl::MakeSpan(rows), absl::MakeSpan(freqs),
                      absl::MakeSpan(versions), &found, pool)
                  .ok());
  for (int64_t i = 0; i < n; ++i) {
    auto it = std::find(want.ids.begin(), want.ids.end(), ids[i]);
    if (it == want.ids.end()) {
      EXPECT_FALSE(found[i]) << ids[i];
      continue;
    }
    const int64_t j = it - want.ids.begin();
    ASSERT_TRUE(found[i]) << ids[i];
    EXPECT_EQ(freqs[i], want.freqs[j]);
    EXPECT_EQ(versions[i], want.versions[j]);
    for (int64_t k = 0; k < kFloats; ++k) {
      EXPECT_EQ(rows[i * kFloats + k], want.values[j * kFloats + k]) << ids[i];
    }
  }
}

TEST(RowLogTest, RowsComeBackAsPut) {
  MemEnv env;
  auto log = RowLog::Create(&env, "/log", {.row_floats = kFloats, .write_buffer_bytes = 500});
  ASSERT_TRUE(log.ok()) << log.status();
  const Rows a = MakeRows(-50, 200, 3, 1);
  ASSERT_TRUE(Put(log->get(), a).ok());
  EXPECT_EQ((*log)->size(), 200);
  std::vector<int64_t> ask = {-50, 0, 149, 7, 1000, -51};
  ExpectRows(**log, ask, a);
  ThreadPool pool("row_log_test", 3);
  ExpectRows(**log, a.ids, a, &pool);
  EXPECT_EQ((*log)->VersionOf(0), 3);
  EXPECT_EQ((*log)->VersionOf(5000), -1);
  const RowLogStats st = (*log)->GetStats();
  EXPECT_EQ(st.live, 200);
  EXPECT_EQ(st.dead, 0);
  EXPECT_EQ(st.file_bytes, 200 * (*log)->RecordBytes());
}

TEST(RowLogTest, NewerRecordsReplaceOlderOnesAndCompactionDropsTheDead) {
  MemEnv env;
  auto log = RowLog::Create(&env, "/log", {.row_floats = kFloats});
  ASSERT_TRUE(log.ok());
  const Rows a = MakeRows(0, 100, 1, 1);
  const Rows b = MakeRows(50, 100, 2, 2);  // ids 50..149: 50 replace rows of a
  ASSERT_TRUE(Put(log->get(), a).ok());
  ASSERT_TRUE(Put(log->get(), b).ok());
  EXPECT_EQ((*log)->size(), 150);
  EXPECT_EQ((*log)->GetStats().dead, 50);
  EXPECT_EQ((*log)->Remove({{0, 1, 2, 999}}), 3);
  Rows want;  // a's 3..49, then b
  for (int64_t i = 3; i < 50; ++i) {
    want.ids.push_back(a.ids[i]);
    want.freqs.push_back(a.freqs[i]);
    want.versions.push_back(a.versions[i]);
    want.values.insert(want.values.end(), a.values.begin() + i * kFloats,
                       a.values.begin() + (i + 1) * kFloats);
  }
  want.ids.insert(want.ids.end(), b.ids.begin(), b.ids.end());
  want.freqs.insert(want.freqs.end(), b.freqs.begin(), b.freqs.end());
  want.versions.insert(want.versions.end(), b.versions.begin(), b.versions.end());
  want.values.insert(want.values.end(), b.values.begin(), b.values.end());
  std::vector<int64_t> all;
  for (int64_t id = -5; id < 160; ++id) all.push_back(id);
  ExpectRows(**log, all, want);

  // A delta: rows with version > 1, in file order.
  std::vector<int64_t> delta;
  ASSERT_TRUE((*log)->ForEach(1, 7, [&](auto ids, auto rows, auto, auto versions) {
    EXPECT_LE(ids.size(), 7u);
    EXPECT_EQ(rows.size(), ids.size() * kFloats);
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(versions[i], 2);
      delta.push_back(ids[i]);
    }
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(delta, b.ids);

  // 53 dead of 200 records: no compaction unless forced.
  ASSERT_TRUE((*log)->Compact().ok());
  EXPECT_EQ((*log)->GetStats().compactions, 0);
  ASSERT_TRUE((*log)->Compact(/*force=*/true).ok());
  const RowLogStats st = (*log)->GetStats();
  EXPECT_EQ(st.compactions, 1);
  EXPECT_EQ(st.dead, 0);
  EXPECT_EQ(st.file_bytes, 147 * (*log)->RecordBytes());
  ExpectRows(**log, all, want);
  // Appends go on after the compacted records.
  const Rows c = MakeRows(1000, 10, 4, 3);
  ASSERT_TRUE(Put(log->get(), c).ok());
  ExpectRows(**log, c.ids, c);
  ExpectRows(**log, all, want);
}

TEST(RowLogTest, AFullDiskStopsPutsUntilCompactionAndKeepsWhatWasWritten) {
  MemEnv env;
  auto log = RowLog::Create(&env, "/log", {.row_floats = kFloats, .write_buffer_bytes = 480});
  ASSERT_TRUE(log.ok());
  const Rows a = MakeRows(0, 40, 1, 1);
  ASSERT_TRUE(Put(log->get(), a).ok());
  // Room for one more piece of 10 records and half of the next.
  env.FailAfterBytes(15 * (*log)->RecordBytes());
  const Rows b = MakeRows(0, 40, 2, 2);
  const absl::Status s = Put(log->get(), b);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("/log"));
  // The first piece of b (ids 0..9) is in; the rest keep a's rows.
  Rows want = a;
  for (int64_t i = 0; i < 10; ++i) {
    want.versions[i] = 2;
    want.freqs[i] = b.freqs[i];
    std::copy(b.values.begin() + i * kFloats, b.values.begin() + (i + 1) * kFloats,
              want.values.begin() + i * kFloats);
  }
  ExpectRows(**log, a.ids, want);
  EXPECT_TRUE(absl::IsFailedPrecondition(Put(log->get(), MakeRows(100, 1, 3, 3))));
  env.FailAfterBytes(-1);
  ASSERT_TRUE((*log)->Compact().ok());  // heals
  ExpectRows(**log, a.ids, want);
  ASSERT_TRUE(Put(log->get(), MakeRows(100, 1, 3, 3)).ok());
}

TEST(RowLogTest, ACutOrOverwrittenFileIsDataLoss) {
  auto check = [](const std::string& damage) {
    MemEnv env;
    auto log = RowLog::Create(&env, "/log", {.row_floats = kFloats});
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE(Put(log->get(), MakeRows(0, 20, 1, 1)).ok());
    std::string bytes;
    ASSERT_TRUE(ReadFileToString(&env, "/log", &bytes).ok());
    if (damage == "cut") {
      bytes.resize(bytes.size() - 5);
    } else {
      bytes[0] ^= 1;  // record 0 now holds another id
    }
    ASSERT_TRUE(WriteStringToFile(&env, "/log", bytes).ok());
    std::vector<float> rows(kFloats);
    std::vector<int64_t> freqs(1), versions(1);
    std::vector<char> found;
    const int64_t id = damage == "cut" ? 19 : 0;
    const absl::Status s = (*log)->Get({&id, 1}, absl::MakeSpan(rows), absl::MakeSpan(freqs),
                                       absl::MakeSpan(versions), &found);
    EXPECT_TRUE(absl::IsDataLoss(s)) << damage << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("/log"));
    EXPECT_TRUE(absl::IsDataLoss(
        (*log)->ForEach(-1, 100, [](auto, auto, auto, auto) { return absl::OkStatus(); })));
  };
  check("cut");
  check("id");
}

TEST(RowLogTest, OnTheLocalFileSystemToo) {
  const std::string path = ::testing::TempDir() + "/row_log_test.rowlog";
  auto log = RowLog::Create(Env::Default(), path, {.row_floats = kFloats});
  ASSERT_TRUE(log.ok()) << log.status();
  const Rows a = MakeRows(0, 300, 1, 1), b = MakeRows(0, 300, 2, 2);
  ASSERT_TRUE(Put(log->get(), a).ok());
  ASSERT_TRUE(Put(log->get(), b).ok());
  ThreadPool pool("row_log_test", 2);
  ExpectRows(**log, b.ids, b, &pool);
  ASSERT_TRUE((*log)->Compact().ok());  // 300 dead of 600: not yet
  EXPECT_EQ((*log)->GetStats().compactions, 0);
  ASSERT_TRUE(Put(log->get(), b).ok());  // 600 dead of 900
  ASSERT_TRUE((*log)->Compact().ok());
  EXPECT_EQ((*log)->GetStats().compactions, 1);
  EXPECT_EQ(*Env::Default()->GetFileSize(path), 300u * (*log)->RecordBytes());
  ExpectRows(**log, b.ids, b, &pool);
  const Rows c = MakeRows(300, 5, 3, 3);
  ASSERT_TRUE(Put(log->get(), c).ok());
  ExpectRows(**log, c.ids, c);
}

TEST(RowLogTest, BadArgumentsAreInvalidArgument) {
  MemEnv env;
  EXPECT_TRUE(absl::IsInvalidArgument(RowLog::Create(&env, "/log", {.row_floats = 0}).status()));
  auto log = RowLog::Create(&env, "/log", {.row_floats = kFloats});
  ASSERT_TRUE(log.ok());
  const Rows a = MakeRows(0, 3, 1, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*log)->Put(a.ids, absl::MakeConstSpan(a.values.data(), 5), a.freqs, a.versions)));
  std::vector<float> rows(1);
  std::vector<int64_t> f(3), v(3);
  std::vector<char> found;
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*log)->Get(a.ids, absl::MakeSpan(rows), absl::MakeSpan(f), absl::MakeSpan(v), &found)));
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*log)->ForEach(-1, 0, [](auto, auto, auto, auto) { return absl::OkStatus(); })));
  EXPECT_TRUE(absl::IsNotFound(
      RowLog::Create(&env, "/no/such/dir/log", {.row_floats = kFloats}).status()));
}

}  // namespace
}  // namespace recflow::embedding
