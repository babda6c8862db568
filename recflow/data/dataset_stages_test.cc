// The stages: Batch, Shuffle, Repeat, Take, Skip, Cache, Map (sequential
// and parallel), Interleave, Prefetch.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/threadpool.h"
#include "recflow/data/dataset.h"
#include "recflow/data/testing/dataset_util.h"

namespace recflow::data {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testutil::Ints;
using testutil::ReadAll;

std::vector<int64_t> Iota(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

// i -> i * 10 (int64 scalar).
absl::StatusOr<Element> Times10(Element e) {
  return Element{Tensor::Scalar<int64_t>(e[0].scalar<int64_t>() * 10)};
}

// i -> an int64 vector [i % 4] of i's, and a float [2].
absl::StatusOr<Element> Ragged(Element e) {
  const int64_t i = e[0].scalar<int64_t>();
  std::vector<int64_t> ids(i % 4, i);
  return Element{Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids)),
                 Tensor::FromVector<float>({static_cast<float>(i), -1.f})};
}

// ---------------------------------------------------------------------------
// Batch

TEST(BatchTest, StacksAndKeepsRemainder) {
  Dataset ds = Dataset::Range(7).Map(
      [](Element e) -> absl::StatusOr<Element> {
        const int64_t i = e[0].scalar<int64_t>();
        return Element{e[0], Tensor::FromVector<float>({i * 1.f, i * 2.f}),
                       Tensor::Scalar<std::string>(absl::StrCat("s", i))};
      },
      1, {DT_INT64, DT_FLOAT, DT_STRING},
      {PartialShape({}), PartialShape({2}), PartialShape({})});
  Dataset b = ds.Batch(3);
  EXPECT_EQ(b.impl()->output_shapes()[1], PartialShape({kUnknownDim, 2}));
  auto out = ReadAll(b);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(TensorsEqual(out[1][0], Tensor::FromVector<int64_t>({3, 4, 5})));
  EXPECT_TRUE(TensorsEqual(
      out[1][1],
      Tensor::FromVector<float>({3, 6, 4, 8, 5, 10}, TensorShape({3, 2}))));
  EXPECT_TRUE(TensorsEqual(out[2][2], Tensor::FromVector<std::string>({"s6"})));

  Dataset d = ds.Batch(3, /*drop_remainder=*/true);
  EXPECT_EQ(d.impl()->output_shapes()[1], PartialShape({3, 2}));
  EXPECT_EQ(ReadAll(d).size(), 2u);
  EXPECT_EQ(ReadAll(Dataset::Range(2).Batch(3, true)).size(), 0u);
}

TEST(BatchTest, RaggedComponentsGetRowSplits) {
  Dataset ds =
      Dataset::Range(6).Map(Ragged, 1, {DT_INT64, DT_FLOAT},
                            {PartialShape({kUnknownDim}), PartialShape({2})});
  Dataset b = ds.Batch(4);
  EXPECT_EQ(b.impl()->output_dtypes(),
            (std::vector<DataType>{DT_INT64, DT_INT64, DT_FLOAT}));
  EXPECT_EQ(b.impl()->output_shapes()[1], PartialShape({kUnknownDim}));
  EXPECT_EQ(ds.Batch(4, true).impl()->output_shapes()[1], PartialShape({5}));
  auto out = ReadAll(b);
  ASSERT_EQ(out.size(), 2u);
  // Rows 0..3 hold 0, 1, 2, 3 copies of their index.
  EXPECT_TRUE(
      TensorsEqual(out[0][0], Tensor::FromVector<int64_t>({1, 2, 2, 3, 3, 3})));
  EXPECT_TRUE(
      TensorsEqual(out[0][1], Tensor::FromVector<int64_t>({0, 0, 1, 3, 6})));
  EXPECT_EQ(out[0][2].shape(), TensorShape({4, 2}));
  EXPECT_TRUE(TensorsEqual(out[1][0], Tensor::FromVector<int64_t>({5})));
  EXPECT_TRUE(TensorsEqual(out[1][1], Tensor::FromVector<int64_t>({0, 0, 1})));
}

TEST(BatchTest, RaggedMatrixRows) {
  // [?, 2] rows: values concatenated along dim 0.
  Dataset ds = Dataset::Range(3).Map(
      [](Element e) -> absl::StatusOr<Element> {
        const int64_t n = e[0].scalar<int64_t>() + 1;
        std::vector<float> v;
        for (int64_t i = 0; i < 2 * n; ++i)
          v.push_back(static_cast<float>(10 * n + i));
        return Element{Tensor::FromVector<float>(absl::MakeConstSpan(v),
                                                 TensorShape({n, 2}))};
      },
      1, {DT_FLOAT}, {PartialShape({kUnknownDim, 2})});
  auto out = ReadAll(ds.Batch(3));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0][0].shape(), TensorShape({6, 2}));
  EXPECT_TRUE(
      TensorsEqual(out[0][1], Tensor::FromVector<int64_t>({0, 1, 3, 6})));
  EXPECT_EQ(out[0][0].flat<float>()[2], 20.f);
}

TEST(BatchTest, ShapeMismatchIsInvalidArgument) {
  // Undeclared shapes: stacked densely, so differing lengths are an error.
  Dataset ds = Dataset::Range(4).Map(Ragged).Batch(4);
  auto it = ds.MakeIterator();
  ASSERT_TRUE(it.ok());
  Element e;
  bool end = false;
  absl::Status s = it->GetNext(&e, &end);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("component 0"));
}

TEST(BatchTest, InputErrorKeepsCollectedElements) {
  Dataset ds = Dataset::Range(7).Map([](Element e) -> absl::StatusOr<Element> {
    if (e[0].scalar<int64_t>() == 2) return absl::DataLossError("bad 2");
    return e;
  });
  auto it = ds.Batch(3).MakeIterator();
  ASSERT_TRUE(it.ok());
  Element e;
  bool end = false;
  EXPECT_TRUE(absl::IsDataLoss(it->GetNext(&e, &end)));
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_TRUE(TensorsEqual(e[0], Tensor::FromVector<int64_t>({0, 1, 3})));
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_TRUE(TensorsEqual(e[0], Tensor::FromVector<int64_t>({4, 5, 6})));
}

// ---------------------------------------------------------------------------
// Shuffle

TEST(ShuffleTest, IsASeededPermutation) {
  Dataset base = Dataset::Range(1000);
  auto a = Ints(ReadAll(base.Shuffle(100, 42)));
  auto b = Ints(ReadAll(base.Shuffle(100, 42)));
  auto c = Ints(ReadAll(base.Shuffle(100, 43)));
  EXPECT_EQ(a, b);  // Deterministic.
  EXPECT_NE(a, c);
  EXPECT_NE(a, Iota(0, 1000));  // Actually permutes.
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Iota(0, 1000));  // No loss, no duplicates.
  // A buffer of 100 moves an element at most ~100 places early.
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LT(a[i], static_cast<int64_t>(i) + 100);
  EXPECT_EQ(Ints(ReadAll(base.Shuffle(1, 5))), Iota(0, 1000));
  // A buffer larger than the input: a full shuffle.
  auto full = Ints(ReadAll(Dataset::Range(10).Shuffle(1000, 3)));
  std::sort(full.begin(), full.end());
  EXPECT_EQ(full, Iota(0, 10));
}

TEST(ShuffleTest, ReshufflesEachEpoch) {
  auto out = Ints(ReadAll(Dataset::Range(50).Shuffle(50, 9).Repeat(3)));
  ASSERT_EQ(out.size(), 150u);
  std::vector<int64_t> e0(out.begin(), out.begin() + 50);
  std::vector<int64_t> e1(out.begin() + 50, out.begin() + 100);
  std::vector<int64_t> e2(out.begin() + 100, out.end());
  EXPECT_NE(e0, e1);
  EXPECT_NE(e1, e2);
  for (auto* e : {&e0, &e1, &e2}) {
    std::vector<int64_t> s = *e;
    std::sort(s.begin(), s.end());
    EXPECT_EQ(s, Iota(0, 50));
  }
  // The first pass equals the unrepeated order; everything is reproducible.
  EXPECT_EQ(e0, Ints(ReadAll(Dataset::Range(50).Shuffle(50, 9))));
  EXPECT_EQ(out, Ints(ReadAll(Dataset::Range(50).Shuffle(50, 9).Repeat(3))));

  auto same = Ints(ReadAll(Dataset::Range(50).Shuffle(50, 9, false).Repeat(2)));
  EXPECT_EQ(std::vector<int64_t>(same.begin(), same.begin() + 50),
            std::vector<int64_t>(same.begin() + 50, same.end()));
}

TEST(ShuffleTest, UnseededStillAPermutation) {
  auto a = Ints(ReadAll(Dataset::Range(200).Shuffle(64, -1)));
  std::sort(a.begin(), a.end());
  EXPECT_EQ(a, Iota(0, 200));
}

// ---------------------------------------------------------------------------
// Repeat, Take, Skip, Cache

TEST(RepeatTakeSkipTest, Counts) {
  EXPECT_EQ(Ints(ReadAll(Dataset::Range(3).Repeat(2))),
            (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_TRUE(ReadAll(Dataset::Range(3).Repeat(0)).empty());
  EXPECT_EQ(Ints(ReadAll(Dataset::Range(3).Repeat().Take(7))),
            (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0}));
  // An empty input ends an endless repeat instead of spinning.
  EXPECT_TRUE(ReadAll(Dataset::Range(0).Repeat()).empty());
  EXPECT_EQ(Ints(ReadAll(Dataset::Range(5).Take(-1))), Iota(0, 5));
  EXPECT_TRUE(ReadAll(Dataset::Range(5).Take(0)).empty());
  EXPECT_EQ(Ints(ReadAll(Dataset::Range(5).Skip(3))), Iota(3, 5));
  EXPECT_TRUE(ReadAll(Dataset::Range(5).Skip(9)).empty());
  EXPECT_TRUE(ReadAll(Dataset::Range(5).Skip(-1)).empty());
}

// ---------------------------------------------------------------------------
// Shard

TEST(ShardTest, MatchesReferenceOnRandomSizes) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t n = std::uniform_int_distribution<int64_t>(0, 60)(rng);
    const int64_t num_shards = std::uniform_int_distribution<int64_t>(1, 7)(rng);
    // Distinct, unordered values, so that a wrong position shows.
    std::vector<int64_t> values(n);
    for (int64_t i = 0; i < n; ++i) values[i] = (i * 37 + 11) % 1009;
    Dataset input = Dataset::FromTensorSlices(
        {Tensor::FromVector<int64_t>(absl::MakeConstSpan(values))});
    std::multiset<int64_t> seen;
    for (int64_t index = 0; index < num_shards; ++index) {
      std::vector<int64_t> want;
      for (int64_t i = index; i < n; i += num_shards) want.push_back(values[i]);
      auto got = Ints(ReadAll(input.Shard(num_shards, index)));
      EXPECT_EQ(got, want) << "n=" << n << " shard " << index << "/" << num_shards;
      seen.insert(got.begin(), got.end());
    }
    EXPECT_EQ(seen, std::multiset<int64_t>(values.begin(), values.end()));
  }
  EXPECT_EQ(Dataset::Range(10).Shard(4, 3).DebugString(), "Shard(4, 3)<-Range(10)");
}

TEST(ShardTest, BadArguments) {
  struct Case {
    int64_t num_shards, index;
    const char* message;
  };
  for (const Case& c : {Case{0, 0, "Shard: num_shards is 0; must be >= 1"},
                        Case{-2, 0, "Shard: num_shards is -2; must be >= 1"},
                        Case{3, 3, "Shard: index is 3; must be in [0, 3)"},
                        Case{3, -1, "Shard: index is -1; must be in [0, 3)"}}) {
    Dataset ds = Dataset::Range(5).Shard(c.num_shards, c.index).Batch(2);
    auto it = ds.MakeIterator();
    ASSERT_FALSE(it.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(it.status())) << it.status();
    EXPECT_THAT(it.status().message(), HasSubstr(c.message));
  }
}

TEST(ShardTest, SaveAndRestoreMidway) {
  // Shuffled input under a Repeat, so that both the shard's position and the
  // input's must be restored for the continuation to match.
  Dataset ds = Dataset::Range(40).Shuffle(8, /*seed=*/5).Shard(3, 2).Repeat(2);
  const std::vector<int64_t> full = Ints(ReadAll(ds));
  ASSERT_EQ(full.size(), 2u * 13);
  for (int64_t cut : {0, 1, 6, 13, 14, 25, 26}) {
    auto it = ds.MakeIterator();
    ASSERT_TRUE(it.ok());
    std::vector<int64_t> got = Ints(ReadAll(*it, cut));
    auto saved = it->SaveToString();
    ASSERT_TRUE(saved.ok()) << saved.status();
    auto fresh = ds.MakeIterator();
    ASSERT_TRUE(fresh.ok());
    ASSERT_TRUE(fresh->RestoreFromString(*saved).ok());
    for (int64_t v : Ints(ReadAll(*fresh))) got.push_back(v);
    EXPECT_EQ(got, full) << "cut at " << cut;
  }
}

TEST(ShardTest, InputErrorTakesNoPosition) {
  // Element 4 fails; positions go on counting the elements that arrive.
  Dataset ds = Dataset::Range(10)
                   .Map([](Element e) -> absl::StatusOr<Element> {
                     if (e[0].scalar<int64_t>() == 4) {
                       return absl::InvalidArgumentError("bad element 4");
                     }
                     return e;
                   })
                   .Shard(2, 0);
  auto it = ds.MakeIterator();
  ASSERT_TRUE(it.ok());
  std::vector<int64_t> got;
  int errors = 0;
  for (int step = 0; step < 20; ++step) {
    Element e;
    bool end = false;
    absl::Status s = it->GetNext(&e, &end);
    if (!s.ok()) {
      EXPECT_THAT(s.message(), HasSubstr("bad element 4"));
      ++errors;
      continue;
    }
    if (end) break;
    got.push_back(e[0].scalar<int64_t>());
  }
  EXPECT_EQ(errors, 1);
  // Arriving elements 0 1 2 3 5 6 7 8 9 at positions 0..8: even positions.
  EXPECT_EQ(got, (std::vector<int64_t>{0, 2, 5, 7, 9}));
}

TEST(CacheTest, ReadsInputOnce) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  Dataset ds = Dataset::Range(5)
                   .Map([calls](Element e) -> absl::StatusOr<Element> {
                     ++*calls;
                     return e;
                   })
                   .Shuffle(5, 1)
                   .Cache()
                   .Repeat(3);
  auto out = Ints(ReadAll(ds));
  EXPECT_EQ(calls->load(), 5);
  ASSERT_EQ(out.size(), 15u);
  // Replays keep the first pass's order (the shuffle is below the cache).
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.begin() + 5),
            std::vector<int64_t>(out.begin() + 10, out.end()));
  // A new iterator starts its own cache.
  ReadAll(ds);
  EXPECT_EQ(calls->load(), 10);
}

// ---------------------------------------------------------------------------
// Map

TEST(MapTest, SequentialAndParallelAgree) {
  for (int p : {1, 2, 4, 8}) {
    auto out = Ints(ReadAll(Dataset::Range(100).Map(Times10, p)));
    std::vector<int64_t> want;
    for (int64_t i = 0; i < 100; ++i) want.push_back(10 * i);
    EXPECT_EQ(out, want) << "parallel " << p;
  }
}

TEST(MapTest, DeclaredTypesAreChecked) {
  auto it = Dataset::Range(3).Map(Times10, 2, {DT_FLOAT}).MakeIterator();
  ASSERT_TRUE(it.ok());
  Element e;
  bool end = false;
  absl::Status s = it->GetNext(&e, &end);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("component 0 is int64, declared float"));
}

// Out-of-order completion (later calls finish first) still yields in order.
TEST(MapTest, ParallelKeepsOrderWithSkewedDurations) {
  MapFn slow_first = [](Element e) -> absl::StatusOr<Element> {
    const int64_t i = e[0].scalar<int64_t>();
    std::this_thread::sleep_for(std::chrono::microseconds((7 - i % 8) * 300));
    return e;
  };
  EXPECT_EQ(Ints(ReadAll(Dataset::Range(64).Map(slow_first, 8))), Iota(0, 64));
}

// Calls must overlap: each call waits (bounded) for a second one to start.
TEST(MapTest, ParallelReallyRunsConcurrently) {
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    int active = 0;
    int max_active = 0;
  };
  auto gate = std::make_shared<Gate>();
  MapFn fn = [gate](Element e) -> absl::StatusOr<Element> {
    std::unique_lock<std::mutex> lock(gate->mu);
    ++gate->active;
    gate->max_active = std::max(gate->max_active, gate->active);
    gate->cv.notify_all();
    gate->cv.wait_for(lock, std::chrono::seconds(5),
                      [&] { return gate->max_active >= 2; });
    --gate->active;
    return e;
  };
  for (bool shared_pool : {false, true}) {
    gate->max_active = 0;
    ThreadPool pool("test_pool", 4);
    IteratorContext ctx;
    if (shared_pool) ctx.thread_pool = &pool;
    auto it = Dataset::Range(8).Map(fn, 4).MakeIterator(ctx);
    ASSERT_TRUE(it.ok());
    EXPECT_EQ(Ints(ReadAll(*it)), Iota(0, 8));
    EXPECT_GE(gate->max_active, 2) << "shared pool " << shared_pool;
  }
}

TEST(MapTest, ErrorsComeAtTheirPosition) {
  MapFn fn = [](Element e) -> absl::StatusOr<Element> {
    const int64_t i = e[0].scalar<int64_t>();
    if (i % 5 == 3) return absl::InvalidArgumentError(absl::StrCat("bad ", i));
    return e;
  };
  for (int p : {1, 4}) {
    auto it = Dataset::Range(12).Map(fn, p).MakeIterator();
    ASSERT_TRUE(it.ok());
    std::vector<std::string> seen;
    while (true) {
      Element e;
      bool end = false;
      absl::Status s = it->GetNext(&e, &end);
      if (s.ok() && end) break;
      seen.push_back(s.ok() ? absl::StrCat(e[0].scalar<int64_t>())
                            : std::string(s.message()));
    }
    EXPECT_THAT(seen, ElementsAre("0", "1", "2", "bad 3", "4", "5", "6", "7",
                                  "bad 8", "9", "10", "11"))
        << "parallel " << p;
  }
}

TEST(MapTest, DestroyedMidStreamShutsDownCleanly) {
  MapFn slow = [](Element e) -> absl::StatusOr<Element> {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return e;
  };
  ThreadPool pool("test_pool", 3);
  for (int round = 0; round < 5; ++round) {
    IteratorContext ctx;
    if (round % 2 == 1) ctx.thread_pool = &pool;
    auto it = Dataset::Range(1000).Map(slow, 8).Prefetch(4).MakeIterator(ctx);
    ASSERT_TRUE(it.ok());
    EXPECT_EQ(ReadAll(*it, 3).size(), 3u);
  }  // Destroyed with calls in flight: must neither hang nor crash.
}

// ---------------------------------------------------------------------------
// Interleave

// Input element i -> i*10, i*10+1, ..., i*10 + (i + 1) - 1 (i + 1 elements).
absl::StatusOr<Dataset> Block(const Element& e) {
  const int64_t i = e[0].scalar<int64_t>();
  return Dataset::Range(i + 1).Map([i](Element x) -> absl::StatusOr<Element> {
    return Element{Tensor::Scalar<int64_t>(i * 10 + x[0].scalar<int64_t>())};
  });
}

TEST(InterleaveTest, CycleAndBlockOrder) {
  // cycle 2, block 1 over inputs 0..3: TF's order.
  auto out = Ints(ReadAll(Dataset::Range(4).Interleave(Block, 2, 1)));
  EXPECT_THAT(out, ElementsAre(0, 10, 11, 20, 21, 30, 22, 31, 32, 33));
  out = Ints(ReadAll(Dataset::Range(3).Interleave(Block, 2, 2)));
  EXPECT_THAT(out, ElementsAre(0, 10, 11, 20, 21, 22));
  out = Ints(ReadAll(Dataset::Range(3).Interleave(Block, 1, 5)));
  EXPECT_THAT(out, ElementsAre(0, 10, 11, 20, 21, 22));
  EXPECT_TRUE(ReadAll(Dataset::Range(0).Interleave(Block, 3)).empty());
}

TEST(InterleaveTest, ParallelGivesTheSameOrder) {
  for (int cycle : {1, 3, 5}) {
    for (int block : {1, 2, 7}) {
      auto seq =
          Ints(ReadAll(Dataset::Range(12).Interleave(Block, cycle, block)));
      for (int p : {2, 4}) {
        auto par = Ints(
            ReadAll(Dataset::Range(12).Interleave(Block, cycle, block, p)));
        EXPECT_EQ(seq, par) << cycle << " " << block << " " << p;
      }
    }
  }
}

TEST(InterleaveTest, ErrorsPropagate) {
  auto fn = [](const Element& e) -> absl::StatusOr<Dataset> {
    if (e[0].scalar<int64_t>() == 1) return absl::NotFoundError("no file 1");
    return Block(e);
  };
  for (int p : {1, 3}) {
    auto it = Dataset::Range(3).Interleave(fn, 2, 1, p).MakeIterator();
    ASSERT_TRUE(it.ok());
    Element e;
    bool end = false;
    ASSERT_TRUE(it->GetNext(&e, &end).ok());
    EXPECT_EQ(e[0].scalar<int64_t>(), 0);
    absl::Status s = it->GetNext(&e, &end);
    EXPECT_TRUE(absl::IsNotFound(s)) << s;
    // Goes on with the next input element in that slot.
    std::vector<int64_t> rest;
    while (it->GetNext(&e, &end).ok() && !end)
      rest.push_back(e[0].scalar<int64_t>());
    EXPECT_THAT(rest, ElementsAre(20, 21, 22));
  }
  // An invalid inner dataset is reported.
  auto bad = [](const Element&) -> absl::StatusOr<Dataset> {
    return Dataset::Range(3).Batch(0);
  };
  auto it = Dataset::Range(3).Interleave(bad, 2).MakeIterator();
  ASSERT_TRUE(it.ok());
  Element e;
  bool end = false;
  EXPECT_TRUE(absl::IsInvalidArgument(it->GetNext(&e, &end)));
}

TEST(InterleaveTest, DestroyedMidStream) {
  auto slow_block = [](const Element& e) -> absl::StatusOr<Dataset> {
    return Dataset::Range(50).Map([](Element x) -> absl::StatusOr<Element> {
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      return x;
    });
  };
  for (int round = 0; round < 3; ++round) {
    auto it = Dataset::Range(10).Interleave(slow_block, 4, 2, 4).MakeIterator();
    ASSERT_TRUE(it.ok());
    EXPECT_EQ(ReadAll(*it, 5).size(), 5u);
  }
}

// ---------------------------------------------------------------------------
// Prefetch

TEST(PrefetchTest, OrderErrorsAndEnd) {
  EXPECT_EQ(Ints(ReadAll(Dataset::Range(100).Prefetch(3))), Iota(0, 100));
  MapFn fn = [](Element e) -> absl::StatusOr<Element> {
    if (e[0].scalar<int64_t>() == 1) return absl::DataLossError("bad 1");
    return e;
  };
  auto it = Dataset::Range(3).Map(fn).Prefetch(1).MakeIterator();
  ASSERT_TRUE(it.ok());
  Element e;
  bool end = false;
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_TRUE(absl::IsDataLoss(it->GetNext(&e, &end)));
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_EQ(e[0].scalar<int64_t>(), 2);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(it->GetNext(&e, &end).ok());
    EXPECT_TRUE(end);
  }
}

}  // namespace
}  // namespace recflow::data
