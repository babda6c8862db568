#include "recflow/serving/batching.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include "recflow/core/status.h"
#include "recflow/core/testing/thread_creation_failure.h"

namespace recflow::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Tensors = BatchScheduler::Tensors;

// y = x * 10 + row-independent, a [n, 2] float input and [n] string input
// echoed; records the batch sizes it saw.
struct Model {
  Mutex mu;
  std::vector<int64_t> sizes;
  absl::StatusOr<Tensors> operator()(const Tensors& in) {
    {
      MutexLock lock(&mu);
      sizes.push_back(in.at("x").dim_size(0));
    }
    const Tensor& x = in.at("x");
    Tensor y(DT_FLOAT, x.shape());
    for (int64_t i = 0; i < x.NumElements(); ++i)
      y.flat<float>()[i] = x.flat<float>()[i] * 10;
    Tensors out;
    out["y"] = y;
    out["s"] = in.at("s");
    return out;
  }
};

Tensors Inputs(float base, int64_t rows) {
  Tensor x(DT_FLOAT, TensorShape({rows, 2}));
  Tensor s(DT_STRING, TensorShape({rows}));
  for (int64_t i = 0; i < rows; ++i) {
    x.flat<float>()[2 * i] = base + i;
    x.flat<float>()[2 * i + 1] = -(base + i);
    s.flat<std::string>()[i] = std::to_string(static_cast<int>(base + i));
  }
  return {{"x", x}, {"s", s}};
}

bool Matches(const Tensors& in, const Tensors& out) {
  const Tensor& x = in.at("x");
  const Tensor& y = out.at("y");
  if (y.shape() != x.shape()) return false;
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    if (y.flat<float>()[i] != x.flat<float>()[i] * 10) return false;
  }
  return TensorsEqual(in.at("s"), out.at("s").DeepCopy());
}

// A recommendation-style request: per example a dense value and a bag of
// ids ("f/ids" + "f/row_splits"); the model answers dense + sum(ids) per
// example, so a wrong row_splits offset shows in the answer.
absl::StatusOr<Tensors> BagModel(const Tensors& in, std::vector<int64_t>* sizes, Mutex* mu) {
  const Tensor& dense = in.at("dense");
  const Tensor& ids = in.at("f/ids");
  const Tensor& splits = in.at("f/row_splits");
  const int64_t rows = dense.dim_size(0);
  if (splits.dim_size(0) != rows + 1 || splits.data<int64_t>()[rows] != ids.dim_size(0)) {
    return errors::InvalidArgument("row_splits do not fit");
  }
  {
    MutexLock lock(mu);
    sizes->push_back(rows);
  }
  Tensor y(DT_FLOAT, TensorShape({rows}));
  for (int64_t b = 0; b < rows; ++b) {
    float sum = dense.data<float>()[b];
    for (int64_t k = splits.data<int64_t>()[b]; k < splits.data<int64_t>()[b + 1]; ++k) {
      sum += static_cast<float>(ids.data<int64_t>()[k]);
    }
    y.data<float>()[b] = sum;
  }
  return Tensors{{"y", y}};
}

TEST(BatchSchedulerTest, RaggedIdsAndRowSplitsBatchWithOffsets) {
  int64_t rows = 0;
  Tensors bag = {{"dense", Tensor::FromVector<float>({1, 2}, {2})},
                 {"f/ids", Tensor::FromVector<int64_t>({5, 6, 7}, {3})},
                 {"f/row_splits", Tensor::FromVector<int64_t>({0, 3, 3}, {3})}};
  ASSERT_TRUE(BatchScheduler::Batchable(bag, &rows));
  EXPECT_EQ(rows, 2);
  Tensors broken = bag;
  broken["f/row_splits"] = Tensor::FromVector<int64_t>({0, 2, 1}, {3});  // decreasing
  EXPECT_FALSE(BatchScheduler::Batchable(broken, &rows));

  BatchingOptions options;
  options.max_batch_size = 64;
  options.batch_timeout_micros = 3000;
  options.num_batch_threads = 1;
  options.max_enqueued_batches = 100;
  options.allowed_batch_sizes = {16, 64};  // padding rows are empty bags
  auto scheduler = BatchScheduler::Create(options);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  Mutex mu;
  std::vector<int64_t> sizes;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      for (int i = 0; i < 30; ++i) {
        const int64_t n = 1 + rng() % 6;
        std::vector<float> dense(n);
        std::vector<int64_t> ids, splits = {0};
        std::vector<float> want(n);
        for (int64_t b = 0; b < n; ++b) {
          dense[b] = static_cast<float>(t * 1000 + i * 10 + b);
          want[b] = dense[b];
          const int len = rng() % 4;  // empty bags too
          for (int k = 0; k < len; ++k) {
            ids.push_back(rng() % 50);
            want[b] += static_cast<float>(ids.back());
          }
          splits.push_back(static_cast<int64_t>(ids.size()));
        }
        Tensors in = {{"dense", Tensor::FromVector<float>(dense, {n})},
                      {"f/ids", Tensor::FromVector<int64_t>(ids, {static_cast<int64_t>(ids.size())})},
                      {"f/row_splits", Tensor::FromVector<int64_t>(splits, {n + 1})}};
        auto out = (*scheduler)->Run("bags", "m", in, [&](const Tensors& batch) {
          return BagModel(batch, &sizes, &mu);
        });
        if (!out.ok() || out->at("y").NumElements() != n) {
          ++bad;
          continue;
        }
        for (int64_t b = 0; b < n; ++b) {
          if (out->at("y").data<float>()[b] != want[b]) ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  MutexLock lock(&mu);
  // Some runs merged several callers (and were padded to an allowed size).
  EXPECT_TRUE(std::any_of(sizes.begin(), sizes.end(), [](int64_t s) { return s == 16 || s == 64; }));
}

TEST(BatchSchedulerTest, ConcurrentCallersGetTheirOwnRows) {
  BatchingOptions options;
  options.max_batch_size = 32;
  options.batch_timeout_micros = 3000;
  options.num_batch_threads = 2;
  options.max_enqueued_batches = 100;
  MetricsRegistry metrics;
  options.metrics = &metrics;
  auto scheduler = BatchScheduler::Create(options);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  Model model;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 40; ++i) {
        const int64_t rows = 1 + rng() % 5;
        Tensors in = Inputs(t * 10000 + i * 10, rows);
        auto out = (*scheduler)->Run("q", "m", in, std::ref(model));
        if (!out.ok() || !Matches(in, *out)) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  MutexLock lock(&model.mu);
  int64_t total = 0, merged = 0;
  for (int64_t s : model.sizes) {
    EXPECT_LE(s, 32);
    total += s;
    merged += s > 5;
  }
  EXPECT_GT(merged, 0) << "no batch merged more than one request";
  const std::string text = metrics.PrometheusText();
  EXPECT_THAT(text, HasSubstr("recflow_serving_batch_size_sum{model=\"m\"} " +
                              std::to_string(total)));
  EXPECT_THAT(text,
              HasSubstr("recflow_serving_batch_queue_depth{model=\"m\"} 0"));
}

TEST(BatchSchedulerTest, OversizedRequestIsRefused) {
  BatchingOptions options;
  options.max_batch_size = 4;
  options.num_batch_threads = 1;
  auto scheduler = BatchScheduler::Create(options);
  ASSERT_TRUE(scheduler.ok());
  Model model;
  auto out = (*scheduler)->Run("q", "m", Inputs(0, 5), std::ref(model));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("max_batch_size=4"));
  EXPECT_THAT(out.status().message(), HasSubstr("model m has 5 rows"));
}

TEST(BatchSchedulerTest, FullQueueRefusesAtOnce) {
  BatchingOptions options;
  options.max_batch_size = 1;
  options.max_enqueued_batches = 1;
  options.num_batch_threads = 1;
  MetricsRegistry metrics;
  options.metrics = &metrics;
  auto scheduler = BatchScheduler::Create(options);
  ASSERT_TRUE(scheduler.ok());
  Notification started, release;
  auto blocking = [&](const Tensors& in) -> absl::StatusOr<Tensors> {
    started.Notify();
    release.WaitForNotification();
    return in;
  };
  Tensors in = Inputs(1, 1);
  absl::Status first_status, second_status;
  std::thread first([&] {
    first_status = (*scheduler)->Run("q", "m", in, blocking).status();
  });
  started.WaitForNotification();  // the only batch thread is busy
  std::thread second([&] {
    second_status = (*scheduler)->Run("q", "m", in, blocking).status();
  });
  // Wait until the second request sits in the queue (depth 1).
  Gauge* depth = metrics.AddGauge("recflow_serving_batch_queue_depth", "", {"model"});
  for (int i = 0; i < 5000 && depth->Value({"m"}) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(depth->Value({"m"}), 1);
  const auto start = std::chrono::steady_clock::now();
  auto third = (*scheduler)->Run("q", "m", in, blocking);
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(100));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(third.status().message(),
              HasSubstr("batch queue full for model m: 1 batches enqueued"));
  // Another queue (another model or signature) is not affected.
  release.Notify();
  first.join();
  second.join();
  EXPECT_TRUE(first_status.ok()) << first_status;
  EXPECT_TRUE(second_status.ok()) << second_status;
  EXPECT_TRUE((*scheduler)->Run("q2", "m2", in, blocking).ok());
}

TEST(BatchSchedulerTest, PadsToAllowedBatchSizes) {
  BatchingOptions options;
  options.max_batch_size = 8;
  options.allowed_batch_sizes = {2, 4, 8};
  options.batch_timeout_micros = 100000;
  options.num_batch_threads = 1;
  auto scheduler = BatchScheduler::Create(options);
  ASSERT_TRUE(scheduler.ok());
  Model model;
  // One request of 3 rows waits out the timeout alone: padded to 4.
  Tensors in = Inputs(5, 3);
  auto out = (*scheduler)->Run("q", "m", in, std::ref(model));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(Matches(in, *out));
  MutexLock lock(&model.mu);
  EXPECT_THAT(model.sizes, ElementsAre(4));
}

TEST(BatchSchedulerTest, OutputsWithoutBatchDimRunOneByOne) {
  BatchingOptions options;
  options.max_batch_size = 8;
  options.batch_timeout_micros = 20000;
  options.num_batch_threads = 1;
  auto scheduler = BatchScheduler::Create(options);
  ASSERT_TRUE(scheduler.ok());
  std::atomic<int> runs{0};
  // Returns the sum of x as a scalar.
  auto sum = [&](const Tensors& in) -> absl::StatusOr<Tensors> {
    ++runs;
    float total = 0;
    for (float v : in.at("x").flat<float>()) total += v;
    return Tensors{{"sum", Tensor::Scalar<float>(total)}};
  };
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Tensors in = Inputs(t * 100 + 1, 2);
      auto out = (*scheduler)->Run("q", "m", in, sum);
      float want = 0;
      for (float v : in.at("x").flat<float>()) want += v;
      if (!out.ok() || out->at("sum").scalar<float>() != want) ++bad;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(BatchSchedulerTest, ErrorsReachEveryTaskAndUnbatchableRunsDirectly) {
  BatchingOptions options;
  options.num_batch_threads = 1;
  auto scheduler = BatchScheduler::Create(options);
  ASSERT_TRUE(scheduler.ok());
  auto fail = [](const Tensors&) -> absl::StatusOr<Tensors> {
    return errors::InvalidArgument("bad input x");
  };
  auto out = (*scheduler)->Run("q", "m", Inputs(0, 2), fail);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  // Scalars and disagreeing dim 0 are run unbatched.
  int64_t rows = 0;
  EXPECT_FALSE(BatchScheduler::Batchable({{"a", Tensor::Scalar<float>(1)}}, &rows));
  EXPECT_FALSE(BatchScheduler::Batchable(
      {{"a", Tensor::FromVector<float>({1, 2}, {2})},
       {"b", Tensor::FromVector<float>({1}, {1})}},
      &rows));
  EXPECT_FALSE(BatchScheduler::Batchable({}, &rows));
  EXPECT_TRUE(BatchScheduler::Batchable(Inputs(0, 3), &rows));
  EXPECT_EQ(rows, 3);
  auto echo = [](const Tensors& in) -> absl::StatusOr<Tensors> { return in; };
  out = (*scheduler)->Run("q", "m", {{"a", Tensor::Scalar<float>(1)}}, echo);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->at("a").scalar<float>(), 1.f);
}

TEST(BatchSchedulerTest, OptionsFromProtoAreValidated) {
  tensorflow::serving::BatchingParameters p;
  auto o = BatchingOptionsFromProto(p);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->max_batch_size, 1000);
  p.mutable_max_batch_size()->set_value(64);
  p.mutable_num_batch_threads()->set_value(3);
  p.add_allowed_batch_sizes(16);
  p.add_allowed_batch_sizes(64);
  o = BatchingOptionsFromProto(p);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->num_batch_threads, 3);
  EXPECT_TRUE(BatchScheduler::Create(*o).ok());

  p.set_allowed_batch_sizes(1, 32);
  o = BatchingOptionsFromProto(p);
  ASSERT_TRUE(o.ok());
  auto s = BatchScheduler::Create(*o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("must equal max_batch_size"));
  p.set_allowed_batch_sizes(0, 64);
  p.set_allowed_batch_sizes(1, 64);
  EXPECT_THAT(BatchScheduler::Create(*BatchingOptionsFromProto(p))
                  .status()
                  .message(),
              HasSubstr("increasing"));
  p.mutable_num_batch_threads()->set_value(0);
  EXPECT_THAT(BatchingOptionsFromProto(p).status().message(),
              HasSubstr("num_batch_threads"));
  p.mutable_num_batch_threads()->set_value(1);
  p.set_pad_variable_length_inputs(true);
  EXPECT_EQ(BatchingOptionsFromProto(p).status().code(),
            absl::StatusCode::kUnimplemented);
  BatchingOptions bad;
  bad.max_batch_size = 0;
  EXPECT_THAT(BatchScheduler::Create(bad).status().message(),
              HasSubstr("max_batch_size must be >= 1"));
}

TEST(BatchSchedulerTest, ThreadCountsAreBoundedAndThreadFailuresAreStatuses) {
  tensorflow::serving::BatchingParameters p;
  p.mutable_num_batch_threads()->set_value(100000);
  auto o = BatchingOptionsFromProto(p);
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      o.status().message(),
      HasSubstr("num_batch_threads is 100000; must be between 1 and 4096"));
  BatchingOptions options;
  options.num_batch_threads = 5000;
  EXPECT_THAT(BatchScheduler::Create(options).status().message(),
              HasSubstr("num_batch_threads is 5000"));

  options.num_batch_threads = 2;
  absl::StatusOr<std::unique_ptr<BatchScheduler>> scheduler;
  {
    ScopedThreadCreationFailure no_threads;
    scheduler = BatchScheduler::Create(options);
  }
  EXPECT_EQ(scheduler.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(scheduler.status().message(),
              HasSubstr("batch scheduler started 0 of 2 threads"));
}

// Issue 22 item 8: a batch timeout of 2^63-1 us left a request unanswered
// forever; it is refused, and Shutdown answers the queued requests at once
// instead of after the timeout.
TEST(BatchSchedulerTest, TimeoutIsBoundedAndShutdownRunsQueuedBatches) {
  tensorflow::serving::BatchingParameters p;
  p.mutable_batch_timeout_micros()->set_value(
      std::numeric_limits<int64_t>::max());
  auto o = BatchingOptionsFromProto(p);
  ASSERT_TRUE(o.ok());
  auto bad = BatchScheduler::Create(*o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("batch_timeout_micros is 9223372036854775807; must be "
                        "between 0 and 60000000"));

  BatchingOptions options;
  options.batch_timeout_micros = kMaxBatchTimeoutMicros;
  options.max_batch_size = 100;
  options.num_batch_threads = 1;
  MetricsRegistry metrics;
  options.metrics = &metrics;
  auto scheduler = BatchScheduler::Create(options);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  Model model;
  const Tensors in = Inputs(3, 2);
  absl::StatusOr<Tensors> out;
  std::thread caller(
      [&] { out = (*scheduler)->Run("q", "m", in, std::ref(model)); });
  // Wait until the request sits in its batch, which would wait a minute.
  Gauge* depth =
      metrics.AddGauge("recflow_serving_batch_queue_depth", "", {"model"});
  while (depth->Value({"m"}) < 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  (*scheduler)->Shutdown();
  caller.join();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(Matches(in, *out));
  // After Shutdown, requests run at once, unbatched.
  out = (*scheduler)->Run("q", "m", in, std::ref(model));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(Matches(in, *out));
  (*scheduler)->Shutdown();  // idempotent
  MutexLock lock(&model.mu);
  EXPECT_THAT(model.sizes, ElementsAre(2, 2));
}

TEST(BatchSchedulerTest, ConcatRowsCopiesAndPads) {
  Tensor a = Tensor::FromVector<int64_t>({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::FromVector<int64_t>({5, 6}, {1, 2});
  Tensor c = ConcatRows({&a, &b}, 4);
  EXPECT_THAT(c.flat<int64_t>(), ElementsAre(1, 2, 3, 4, 5, 6, 1, 2));
  Tensor s(DT_STRING, TensorShape({1}));
  s.flat<std::string>()[0] = "u";
  Tensor t(DT_STRING, TensorShape({2}));
  t.flat<std::string>()[0] = "v";
  t.flat<std::string>()[1] = "w";
  Tensor st = ConcatRows({&s, &t}, 3);
  EXPECT_THAT(st.flat<std::string>(), ElementsAre("u", "v", "w"));
}

}  // namespace
}  // namespace recflow::serving
