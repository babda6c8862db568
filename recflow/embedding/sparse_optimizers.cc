#include "recflow/embedding/sparse_optimizers.h"

#include <cmath>

#include "recflow/core/status.h"

namespace recflow::embedding {

namespace {

absl::Status CheckFinite(const char* optimizer, const char* name, float v) {
  if (!std::isfinite(v)) {
    return errors::InvalidArgument(optimizer, ": ", name,
                                   " must be finite, got ", v);
  }
  return absl::OkStatus();
}

absl::Status CheckUnit(const char* optimizer, const char* name, float v) {
  if (!(v >= 0.0f && v < 1.0f)) {
    return errors::InvalidArgument(optimizer, ": ", name,
                                   " must be in [0, 1), got ", v);
  }
  return absl::OkStatus();
}

absl::Status CheckNonNegative(const char* optimizer, const char* name,
                              float v) {
  if (!(v >= 0.0f) || !std::isfinite(v)) {
    return errors::InvalidArgument(optimizer, ": ", name,
                                   " must be finite and >= 0, got ", v);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Validate(const SgdParams& p) {
  return CheckFinite("SGD", "learning_rate", p.learning_rate);
}

absl::Status Validate(const AdagradParams& p) {
  RETURN_IF_ERROR(CheckFinite("Adagrad", "learning_rate", p.learning_rate));
  return CheckNonNegative("Adagrad", "epsilon", p.epsilon);
}

absl::Status Validate(const AdamParams& p) {
  RETURN_IF_ERROR(CheckFinite("Adam", "learning_rate", p.learning_rate));
  RETURN_IF_ERROR(CheckUnit("Adam", "beta1", p.beta1));
  RETURN_IF_ERROR(CheckUnit("Adam", "beta2", p.beta2));
  RETURN_IF_ERROR(CheckUnit("Adam", "beta1_power", p.beta1_power));
  RETURN_IF_ERROR(CheckUnit("Adam", "beta2_power", p.beta2_power));
  return CheckNonNegative("Adam", "epsilon", p.epsilon);
}

absl::Status Validate(const FtrlParams& p) {
  if (!(p.learning_rate > 0.0f) || !std::isfinite(p.learning_rate)) {
    return errors::InvalidArgument(
        "FTRL: learning_rate must be finite and > 0, got ", p.learning_rate);
  }
  RETURN_IF_ERROR(CheckNonNegative("FTRL", "l1", p.l1));
  RETURN_IF_ERROR(CheckNonNegative("FTRL", "l2", p.l2));
  RETURN_IF_ERROR(CheckNonNegative("FTRL", "l2_shrinkage", p.l2_shrinkage));
  if (!(p.lr_power <= 0.0f) || !std::isfinite(p.lr_power)) {
    return errors::InvalidArgument(
        "FTRL: lr_power must be finite and <= 0, "
        "got ",
        p.lr_power);
  }
  return absl::OkStatus();
}

void SgdUpdateRow(const SgdParams& p, int64_t dim, const float* g, float* w) {
  const float lr = p.learning_rate;
  for (int64_t i = 0; i < dim; ++i) w[i] -= lr * g[i];
}

void AdagradUpdateRow(const AdagradParams& p, int64_t dim, const float* g,
                      float* w, float* accum) {
  const float lr = p.learning_rate;
  const float eps = p.epsilon;
  for (int64_t i = 0; i < dim; ++i) {
    const float a = accum[i] + g[i] * g[i];
    accum[i] = a;
    w[i] -= lr * g[i] / (std::sqrt(a) + eps);
  }
}

float AdamLearningRate(const AdamParams& p) {
  return p.learning_rate * std::sqrt(1.0f - p.beta2_power) /
         (1.0f - p.beta1_power);
}

void AdamUpdateRow(const AdamParams& p, float lr_t, int64_t dim, const float* g,
                   float* w, float* m, float* v) {
  const float one_minus_beta1 = 1.0f - p.beta1;
  const float one_minus_beta2 = 1.0f - p.beta2;
  const float eps = p.epsilon;
  for (int64_t i = 0; i < dim; ++i) {
    const float gi = g[i];
    const float mi = m[i] + (gi - m[i]) * one_minus_beta1;
    const float vi = v[i] + (gi * gi - v[i]) * one_minus_beta2;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr_t * mi / (std::sqrt(vi) + eps);
  }
}

void FtrlUpdateRow(const FtrlParams& p, int64_t dim, const float* g, float* w,
                   float* accum, float* linear) {
  const float lr = p.learning_rate;
  const float l1 = p.l1;
  const float two_l2 = 2.0f * p.l2;
  const float two_shrinkage = 2.0f * p.l2_shrinkage;
  const bool sqrt_power = p.lr_power == -0.5f;
  const float neg_power = -p.lr_power;
  for (int64_t i = 0; i < dim; ++i) {
    const float gi = g[i];
    const float wi = w[i];
    const float a = accum[i];
    const float g_shrunk = gi + two_shrinkage * wi;
    const float new_a = a + gi * gi;
    const float p_new =
        sqrt_power ? std::sqrt(new_a) : std::pow(new_a, neg_power);
    const float p_old = sqrt_power ? std::sqrt(a) : std::pow(a, neg_power);
    const float lin = linear[i] + g_shrunk - (p_new - p_old) / lr * wi;
    linear[i] = lin;
    const float quadratic = p_new / lr + two_l2;
    const float sign = lin > 0.0f ? 1.0f : (lin < 0.0f ? -1.0f : 0.0f);
    w[i] = std::fabs(lin) > l1 ? (sign * l1 - lin) / quadratic : 0.0f;
    accum[i] = new_a;
  }
}

}  // namespace recflow::embedding
