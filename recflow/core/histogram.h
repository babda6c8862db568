// A histogram of doubles over TensorFlow's default bucket boundaries, the
// one TensorBoard's histogram and distribution tabs read
// (tensorflow/core/lib/histogram/histogram.h defines the same buckets):
// limits grow by 10% from 1e-12 to 1e20 on both sides of zero, with
// -DBL_MAX and DBL_MAX at the ends. Bucket i counts the values v with
// limit[i-1] <= v < limit[i].
//
// Used by the HistogramSummary kernel (kernels/summary_kernels.cc) and the
// trainer's SummaryWriter (train/summary_writer.h); both turn Encode()'s
// result into a tensorflow.HistogramProto. Proto-free so that core stays
// below proto. Not thread-safe.
#ifndef RECFLOW_CORE_HISTOGRAM_H_
#define RECFLOW_CORE_HISTOGRAM_H_

#include <vector>

namespace recflow::histogram {

// The default bucket limits, ascending: -DBL_MAX, -1e20.., 0, ..1e20, DBL_MAX.
const std::vector<double>& DefaultBucketLimits();

// The fields of a tensorflow.HistogramProto.
struct EncodedHistogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;  // ascending
  std::vector<double> bucket;        // counts, same length
};

class Histogram {
 public:
  Histogram();
  // REQUIRES: value is not NaN (callers decide what a NaN means).
  void Add(double value);
  void Clear();
  double num() const { return num_; }

  // TensorFlow's encoding: min/max (DBL_MAX / -DBL_MAX when empty), num,
  // sum, sum_squares, and the buckets; unless `preserve_zero_buckets`, each
  // run of empty buckets is collapsed into one empty bucket ending where
  // the run ends, as TF's EncodeToProto(.., false) does.
  EncodedHistogram Encode(bool preserve_zero_buckets = false) const;

 private:
  const std::vector<double>& limits_;
  std::vector<double> counts_;
  double min_, max_, num_ = 0, sum_ = 0, sum_squares_ = 0;
};

}  // namespace recflow::histogram

#endif  // RECFLOW_CORE_HISTOGRAM_H_
