#include "recflow/serving/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;

TEST(ServingMetricsTest, PrometheusTextExposition) {
  MetricsRegistry registry;
  Counter* requests = registry.AddCounter(
      "requests_total", "Requests served.", {"model", "status"});
  Gauge* depth = registry.AddGauge("queue_depth", "Waiting.", {});
  Histogram* latency = registry.AddHistogram(
      "latency_seconds", "Latency\nin seconds.", {"model"}, {0.1, 1});
  requests->Increment({"b", "OK"});
  requests->Increment({"a", "OK"}, 2);
  requests->Increment({"a\"x\\\n", "NOT_FOUND"});
  depth->Set({}, 3);
  depth->Add({}, -1);
  latency->Observe({"a"}, 0.05);
  latency->Observe({"a"}, 0.5);
  latency->Observe({"a"}, 0.25);
  latency->Observe({"a"}, 7);
  EXPECT_EQ(registry.PrometheusText(),
            "# HELP requests_total Requests served.\n"
            "# TYPE requests_total counter\n"
            "requests_total{model=\"a\",status=\"OK\"} 2\n"
            "requests_total{model=\"a\\\"x\\\\\\n\",status=\"NOT_FOUND\"} 1\n"
            "requests_total{model=\"b\",status=\"OK\"} 1\n"
            "# HELP queue_depth Waiting.\n"
            "# TYPE queue_depth gauge\n"
            "queue_depth 2\n"
            "# HELP latency_seconds Latency\\nin seconds.\n"
            "# TYPE latency_seconds histogram\n"
            "latency_seconds_bucket{model=\"a\",le=\"0.1\"} 1\n"
            "latency_seconds_bucket{model=\"a\",le=\"1\"} 3\n"
            "latency_seconds_bucket{model=\"a\",le=\"+Inf\"} 4\n"
            "latency_seconds_sum{model=\"a\"} 7.8\n"
            "latency_seconds_count{model=\"a\"} 4\n");
  EXPECT_EQ(requests->Value({"a", "OK"}), 2);
  EXPECT_EQ(latency->Count({"a"}), 4);
  EXPECT_EQ(latency->Count({"z"}), 0);
}

TEST(ServingMetricsTest, HistogramWithoutLabelsAndRegistration) {
  MetricsRegistry registry;
  Histogram* h = registry.AddHistogram("h", "H.", {}, {1});
  h->Observe({}, 2);
  EXPECT_THAT(registry.PrometheusText(),
              HasSubstr("h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 1\n"
                        "h_sum 2\nh_count 1\n"));
  // Same name, same kind: the same metric; another kind: null.
  EXPECT_EQ(registry.AddHistogram("h", "other", {}, {5}), h);
  EXPECT_EQ(registry.AddCounter("h", "H.", {}), nullptr);
}

TEST(ServingMetricsTest, ValueFormatting) {
  EXPECT_EQ(FormatMetricValue(3), "3");
  EXPECT_EQ(FormatMetricValue(-2), "-2");
  EXPECT_EQ(FormatMetricValue(0.25), "0.25");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FormatMetricValue(1e20), "1e+20");
  EXPECT_EQ(FormatMetricValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatMetricValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatMetricValue(NAN), "NaN");
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(ServingMetricsTest, ConcurrentUpdates) {
  MetricsRegistry registry;
  Counter* c = registry.AddCounter("c", "C.", {"t"});
  Histogram* h = registry.AddHistogram("h", "H.", {"t"}, {1, 2});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        c->Increment({"x"});
        h->Observe({std::to_string(t % 2)}, i % 3);
        if (i % 100 == 0) registry.PrometheusText();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->Value({"x"}), 4000);
  EXPECT_EQ(h->Count({"0"}) + h->Count({"1"}), 4000);
}

}  // namespace
}  // namespace recflow::serving

namespace recflow::serving {
namespace {

TEST(AppendPlainMetricTest, HelpTypeAndOneSample) {
  std::string text = "x\n";
  AppendPlainMetric(&text, "recflow_a_total", "counter", "As counted.", 7);
  EXPECT_EQ(text, "x\n# HELP recflow_a_total As counted.\n# TYPE recflow_a_total counter\n"
                  "recflow_a_total 7\n");
}

}  // namespace
}  // namespace recflow::serving
