#include "recflow/serving/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "recflow/core/logging.h"

namespace recflow::serving {

void AppendPlainMetric(std::string* out, absl::string_view name, absl::string_view type,
                       absl::string_view help, int64_t value) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                  value, "\n");
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Metric::LabelText(const LabelValues& values) const {
  std::string out = "{";
  for (size_t i = 0; i < label_names_.size() && i < values.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, label_names_[i], "=\"", EscapeLabelValue(values[i]),
                    "\"");
  }
  return out;
}

void Metric::AppendHeader(absl::string_view type, std::string* out) const {
  std::string help;
  for (char c : help_) {
    if (c == '\\') {
      help += "\\\\";
    } else if (c == '\n') {
      help += "\\n";
    } else {
      help += c;
    }
  }
  absl::StrAppend(out, "# HELP ", name_, " ", help, "\n# TYPE ", name_, " ",
                  type, "\n");
}

namespace {

// "{a="x"}" or "" for a metric without labels.
std::string Close(std::string labels) {
  if (labels == "{") return "";
  return labels + "}";
}

}  // namespace

void Counter::Increment(const LabelValues& labels, double delta) {
  if (labels.size() != label_names_.size()) {
    DCHECK(false) << name_ << ": wrong number of label values";
    return;
  }
  MutexLock lock(&mu_);
  values_[labels] += delta;
}

double Counter::Value(const LabelValues& labels) const {
  MutexLock lock(&mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void Counter::AppendText(std::string* out) const {
  AppendHeader("counter", out);
  MutexLock lock(&mu_);
  for (const auto& [labels, value] : values_) {
    absl::StrAppend(out, name_, Close(LabelText(labels)), " ",
                    FormatMetricValue(value), "\n");
  }
}

void Gauge::Set(const LabelValues& labels, double value) {
  if (labels.size() != label_names_.size()) return;
  MutexLock lock(&mu_);
  values_[labels] = value;
}

void Gauge::Add(const LabelValues& labels, double delta) {
  if (labels.size() != label_names_.size()) return;
  MutexLock lock(&mu_);
  values_[labels] += delta;
}

double Gauge::Value(const LabelValues& labels) const {
  MutexLock lock(&mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void Gauge::AppendText(std::string* out) const {
  AppendHeader("gauge", out);
  MutexLock lock(&mu_);
  for (const auto& [labels, value] : values_) {
    absl::StrAppend(out, name_, Close(LabelText(labels)), " ",
                    FormatMetricValue(value), "\n");
  }
}

Histogram::Histogram(std::string name, std::string help,
                     std::vector<std::string> labels,
                     std::vector<double> bounds)
    : Metric(std::move(name), std::move(help), std::move(labels)),
      bounds_(std::move(bounds)) {}

void Histogram::Observe(const LabelValues& labels, double value) {
  ObserveMany(labels, value, 1);
}

void Histogram::ObserveMany(const LabelValues& labels, double value, int64_t count) {
  if (labels.size() != label_names_.size() || count <= 0) return;
  size_t bucket = 0;
  while (bucket < bounds_.size() && value > bounds_[bucket]) ++bucket;
  MutexLock lock(&mu_);
  Cell& cell = cells_[labels];
  if (cell.counts.empty()) cell.counts.assign(bounds_.size() + 1, 0);
  cell.counts[bucket] += count;
  cell.sum += value * static_cast<double>(count);
  cell.count += count;
}

int64_t Histogram::Count(const LabelValues& labels) const {
  MutexLock lock(&mu_);
  auto it = cells_.find(labels);
  return it == cells_.end() ? 0 : it->second.count;
}

double Histogram::Sum(const LabelValues& labels) const {
  MutexLock lock(&mu_);
  auto it = cells_.find(labels);
  return it == cells_.end() ? 0 : it->second.sum;
}

void Histogram::AppendText(std::string* out) const {
  AppendHeader("histogram", out);
  MutexLock lock(&mu_);
  for (const auto& [labels, cell] : cells_) {
    const std::string open = LabelText(labels);
    const std::string sep = open == "{" ? "" : ",";
    int64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += cell.counts[i];
      const std::string le =
          i < bounds_.size() ? FormatMetricValue(bounds_[i]) : "+Inf";
      absl::StrAppend(out, name_, "_bucket", open, sep, "le=\"", le, "\"} ",
                      cumulative, "\n");
    }
    absl::StrAppend(out, name_, "_sum", Close(open), " ",
                    FormatMetricValue(cell.sum), "\n", name_, "_count",
                    Close(open), " ", cell.count, "\n");
  }
}

std::vector<double> Histogram::LatencyBuckets() {
  return {50e-6,  100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3,
          10e-3,  25e-3,  50e-3,  100e-3, 250e-3, 500e-3, 1,
          2.5,    5,      10};
}

std::vector<double> Histogram::PowersOfTwo(int max_exponent) {
  std::vector<double> bounds;
  for (int i = 0; i <= max_exponent; ++i) bounds.push_back(double(1 << i));
  return bounds;
}

template <typename T, typename... Args>
T* MetricsRegistry::Add(const std::string& name, Args&&... args) {
  MutexLock lock(&mu_);
  for (const auto& m : metrics_) {
    if (m->name() == name) return dynamic_cast<T*>(m.get());
  }
  metrics_.push_back(std::make_unique<T>(name, std::forward<Args>(args)...));
  return static_cast<T*>(metrics_.back().get());
}

Counter* MetricsRegistry::AddCounter(const std::string& name,
                                     const std::string& help,
                                     std::vector<std::string> labels) {
  return Add<Counter>(name, help, std::move(labels));
}

Gauge* MetricsRegistry::AddGauge(const std::string& name,
                                 const std::string& help,
                                 std::vector<std::string> labels) {
  return Add<Gauge>(name, help, std::move(labels));
}

Histogram* MetricsRegistry::AddHistogram(const std::string& name,
                                         const std::string& help,
                                         std::vector<std::string> labels,
                                         std::vector<double> bounds) {
  return Add<Histogram>(name, help, std::move(labels), std::move(bounds));
}

std::string MetricsRegistry::PrometheusText() const {
  MutexLock lock(&mu_);
  std::string out;
  for (const auto& m : metrics_) m->AppendText(&out);
  return out;
}

}  // namespace recflow::serving
