#include "recflow/core/histogram.h"

#include <algorithm>
#include <cfloat>

namespace recflow::histogram {

const std::vector<double>& DefaultBucketLimits() {
  static const std::vector<double>* limits = [] {
    std::vector<double> positive;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) positive.push_back(v);
    auto* out = new std::vector<double>;
    out->reserve(2 * positive.size() + 3);
    out->push_back(-DBL_MAX);
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) out->push_back(-*it);
    out->push_back(0.0);
    out->insert(out->end(), positive.begin(), positive.end());
    out->push_back(DBL_MAX);
    return out;
  }();
  return *limits;
}

Histogram::Histogram() : limits_(DefaultBucketLimits()) { Clear(); }

void Histogram::Clear() {
  counts_.assign(limits_.size(), 0.0);
  min_ = DBL_MAX;
  max_ = -DBL_MAX;
  num_ = sum_ = sum_squares_ = 0;
}

void Histogram::Add(double value) {
  const size_t b = std::upper_bound(limits_.begin(), limits_.end(), value) - limits_.begin();
  counts_[std::min(b, counts_.size() - 1)] += 1.0;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  num_ += 1;
  sum_ += value;
  sum_squares_ += value * value;
}

EncodedHistogram Histogram::Encode(bool preserve_zero_buckets) const {
  EncodedHistogram h;
  h.min = min_;
  h.max = max_;
  h.num = num_;
  h.sum = sum_;
  h.sum_squares = sum_squares_;
  size_t i = 0;
  while (i < counts_.size()) {
    double end = limits_[i];
    double count = counts_[i];
    ++i;
    if (!preserve_zero_buckets && count <= 0.0) {
      while (i < counts_.size() && counts_[i] <= 0.0) {
        end = limits_[i];
        count = counts_[i];
        ++i;
      }
    }
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
  }
  return h;
}

}  // namespace recflow::histogram
