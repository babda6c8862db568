#include "recflow/embedding/row_initializer.h"

#include <algorithm>
#include <cmath>

#include "recflow/core/philox.h"

namespace recflow::embedding {

using random::PhiloxRandom;

void RowInitializer::Init(int64_t id, float* dst) const {
  using Kind = InitializerOptions::Kind;
  switch (options_.kind) {
    case Kind::kZeros:
      std::fill(dst, dst + dim_, 0.0f);
      return;
    case Kind::kConstant:
      std::fill(dst, dst + dim_, options_.value);
      return;
    default:
      break;
  }
  PhiloxRandom gen(seed_, static_cast<uint64_t>(id));
  if (options_.kind == Kind::kUniform) {
    const float lo = options_.minval;
    const float range = options_.maxval - options_.minval;
    for (int64_t i = 0; i < dim_; i += 4) {
      const PhiloxRandom::ResultType block = gen();
      for (int64_t j = 0; j < 4 && i + j < dim_; ++j) {
        dst[i + j] = lo + range * random::Uint32ToFloat(block[j]);
      }
    }
    return;
  }
  const float mean = options_.mean;
  const float stddev = options_.stddev;
  if (options_.kind == Kind::kNormal) {
    for (int64_t i = 0; i < dim_; i += 4) {
      const PhiloxRandom::ResultType block = gen();
      float z[4];
      random::BoxMullerFloat(block[0], block[1], &z[0], &z[1]);
      random::BoxMullerFloat(block[2], block[3], &z[2], &z[3]);
      for (int64_t j = 0; j < 4 && i + j < dim_; ++j) {
        dst[i + j] = mean + stddev * z[j];
      }
    }
    return;
  }
  // kTruncatedNormal: pairs of deviates, each kept only when within two
  // standard deviations (TensorFlow's TruncatedNormalDistribution).
  random::SingleSampleAdapter<PhiloxRandom> words(&gen);
  int64_t i = 0;
  while (i < dim_) {
    float z[2];
    const uint32_t x0 = words();
    const uint32_t x1 = words();
    random::BoxMullerFloat(x0, x1, &z[0], &z[1]);
    for (float v : z) {
      if (std::fabs(v) < 2.0f && i < dim_) dst[i++] = mean + stddev * v;
    }
  }
}

double AdmissionDraw(uint64_t seed, int64_t id, int64_t k) {
  // A key of its own, so the admission draws never coincide with the
  // initializer's words for the same (seed, id).
  const uint64_t key = Mix64(seed ^ 0x61646d697373696fULL);  // "admissio"
  const uint64_t uid = static_cast<uint64_t>(id);
  const uint64_t uk = static_cast<uint64_t>(k);
  const PhiloxRandom::ResultType block = PhiloxRandom::Compute(
      {static_cast<uint32_t>(uk), static_cast<uint32_t>(uk >> 32),
       static_cast<uint32_t>(uid), static_cast<uint32_t>(uid >> 32)},
      {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
  return random::Uint64ToDouble(block[0], block[1]);
}

}  // namespace recflow::embedding
