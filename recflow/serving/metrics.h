// A small metrics registry for the model server: counters, gauges and
// histograms with labels, exported in Prometheus' text exposition format
// (version 0.0.4), which /monitoring/prometheus/metrics serves.
//
//   MetricsRegistry registry;
//   Counter* requests = registry.AddCounter(
//       "recflow_serving_request_count", "Requests served.",
//       {"model", "version", "api", "status"});
//   requests->Increment({"half_plus_two", "123", "predict", "OK"});
//   Histogram* latency = registry.AddHistogram(
//       "recflow_serving_request_latency_seconds", "Request latency.",
//       {"model", "version", "api"}, Histogram::LatencyBuckets());
//   latency->Observe({"half_plus_two", "123", "predict"}, 0.0012);
//   std::string text = registry.PrometheusText();
//
// Output, metrics in registration order, label sets sorted:
//   # HELP recflow_serving_request_count Requests served.
//   # TYPE recflow_serving_request_count counter
//   recflow_serving_request_count{model="half_plus_two",...} 1
//   # TYPE ..._latency_seconds histogram
//   ..._latency_seconds_bucket{model="half_plus_two",...,le="0.001"} 0
//   ..._latency_seconds_bucket{...,le="+Inf"} 1
//   ..._latency_seconds_sum{...} 0.0012
//   ..._latency_seconds_count{...} 1
// Label values are escaped (backslash, double quote, newline).
//
// Ownership: the registry owns its metrics; the pointers it returns live as
// long as the registry. Thread-safe: every method of every class here may be
// called concurrently (each metric has its own lock; a label set's cell is
// found by a map lookup under it, so keep label cardinality small).
#ifndef RECFLOW_SERVING_METRICS_H_
#define RECFLOW_SERVING_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "recflow/core/mutex.h"

namespace recflow::serving {

using LabelValues = std::vector<std::string>;

// What every metric kind shares: a name, help text, label names.
class Metric {
 public:
  Metric(std::string name, std::string help, std::vector<std::string> labels)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(labels)) {}
  virtual ~Metric() = default;
  const std::string& name() const { return name_; }
  // Appends this metric's HELP/TYPE lines and samples to *out.
  virtual void AppendText(std::string* out) const = 0;

 protected:
  // `{a="x",b="y"` without the closing brace (so `le` can be appended).
  std::string LabelText(const LabelValues& values) const;
  void AppendHeader(absl::string_view type, std::string* out) const;

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

// A monotonically increasing value per label set. A label set with the wrong
// number of values is ignored (and DCHECKed).
class Counter : public Metric {
 public:
  using Metric::Metric;
  void Increment(const LabelValues& labels, double delta = 1);
  double Value(const LabelValues& labels) const;  // 0 when never incremented
  void AppendText(std::string* out) const override;

 private:
  mutable Mutex mu_;
  std::map<LabelValues, double> values_ ABSL_GUARDED_BY(mu_);
};

// A value that goes up and down per label set.
class Gauge : public Metric {
 public:
  using Metric::Metric;
  void Set(const LabelValues& labels, double value);
  void Add(const LabelValues& labels, double delta);
  double Value(const LabelValues& labels) const;
  void AppendText(std::string* out) const override;

 private:
  mutable Mutex mu_;
  std::map<LabelValues, double> values_ ABSL_GUARDED_BY(mu_);
};

// Counts of observations at or below each bucket's upper bound, plus their
// sum and count, per label set (Prometheus' cumulative buckets).
class Histogram : public Metric {
 public:
  // `bounds`: increasing upper bounds; +Inf is implicit.
  Histogram(std::string name, std::string help,
            std::vector<std::string> labels, std::vector<double> bounds);
  void Observe(const LabelValues& labels, double value);
  // `count` observations of `value` at once.
  void ObserveMany(const LabelValues& labels, double value, int64_t count);
  // Observations so far for `labels` (0 when none).
  int64_t Count(const LabelValues& labels) const;
  double Sum(const LabelValues& labels) const;
  void AppendText(std::string* out) const override;

  // 50 us .. 10 s, roughly x2.5 steps (seconds).
  static std::vector<double> LatencyBuckets();
  // 1, 2, 4, ... 4096.
  static std::vector<double> PowersOfTwo(int max_exponent = 12);

 private:
  struct Cell {
    std::vector<int64_t> counts;  // per bound, not cumulative; +Inf last
    double sum = 0;
    int64_t count = 0;
  };
  const std::vector<double> bounds_;
  mutable Mutex mu_;
  std::map<LabelValues, Cell> cells_ ABSL_GUARDED_BY(mu_);
};

class MetricsRegistry {
 public:
  // Registering a name twice returns the first metric when the kind
  // matches (labels and help of the first registration win), else null.
  Counter* AddCounter(const std::string& name, const std::string& help,
                      std::vector<std::string> labels);
  Gauge* AddGauge(const std::string& name, const std::string& help,
                  std::vector<std::string> labels);
  Histogram* AddHistogram(const std::string& name, const std::string& help,
                          std::vector<std::string> labels,
                          std::vector<double> bounds);

  // Every metric in Prometheus text format, in registration order.
  std::string PrometheusText() const;

 private:
  template <typename T, typename... Args>
  T* Add(const std::string& name, Args&&... args);

  mutable Mutex mu_;
  std::vector<std::unique_ptr<Metric>> metrics_ ABSL_GUARDED_BY(mu_);
};

// Prometheus' number formatting: integers without a fraction, "+Inf",
// "-Inf", "NaN", otherwise the shortest round-trip decimal.
std::string FormatMetricValue(double value);
// Escapes a label value (\\, \", \n).
std::string EscapeLabelValue(absl::string_view value);
// Appends one unlabelled metric with its HELP and TYPE lines ("counter" or
// "gauge"), for servers that report a few plain numbers of their own.
void AppendPlainMetric(std::string* out, absl::string_view name, absl::string_view type,
                       absl::string_view help, int64_t value);

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_METRICS_H_
