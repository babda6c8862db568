// The optimizers' update rules, once: each function below updates `n`
// contiguous elements of a variable and its slots in place from `n` gradient
// elements. The three places that train weights call them:
//   - the dense apply kernels (kernels/training_kernels.cc: Apply* and
//     ResourceApply*), on each thread's slice of the variable;
//   - the sparse apply kernels (kernels/sparse_training_kernels.cc:
//     SparseApply* and ResourceSparseApply*), on each row named in indices;
//   - the hash embedding tables (HashEmbeddingTable::Apply*), on each row.
// The formulas are TensorFlow's (training_ops' functors), evaluated in the
// order TensorFlow's kernels evaluate them; every path has kept its results
// bit for bit through the move here (Note [Update rule bits]).
//
// Template parameters pick what the op type fixes (ApplyAdam vs ApplyAdamW,
// ApplyFtrl vs ApplyFtrlV2, ...); the coefficient structs carry what the
// attrs and hyperparameter values decide at run time (use_nesterov,
// update_slots, multiply_linear_by_lr, lr_power = -0.5), tested once per
// call, outside the element loop, so that no loop tests a flag per element.
//
// Vectorization: the loops vectorize at -O2 only in translation units
// compiled with -fno-math-errno -fno-trapping-math -fvect-cost-model=dynamic
// (sqrt then needs no errno path, selects no trap semantics, and the loop
// may be versioned for aliasing). Those options do not change any value;
// CMake sets them on every file that includes this header
// (RECFLOW_UPDATE_RULES_COPTS in the top-level CMakeLists.txt). Elsewhere
// the same code runs, scalar.
//
// Preconditions, unchecked: the arrays hold `n` elements each (they are not
// assumed disjoint: the vectorized loops check). Hyperparameters are the
// callers' to validate (the kernels and HashEmbeddingTable do, with their
// own messages).
//
// Plain inline functions; thread-compatible (callers split the elements or
// rows between threads).
//
// Note [Update rule bits]: the order of evaluation below is part of the
// contract: tests compare the paths with each other and with references bit
// for bit, and a model trained again must give the same weights. Two quirks
// are kept on purpose:
//   - ApplyAdagrad (dense, no epsilon input) divides by sqrt(accum) + 0,
//     SparseApplyAdagrad by sqrt(accum); they differ only when accum is -0
//     and update_slots is false (the sign of an infinity). AdagradUpdate's
//     kEpsilon = true with epsilon 0 is the former.
//   - The hash table's FTRL adds the gradient into `linear` as
//     (linear + g') - sigma * w, TensorFlow's kernels as
//     linear + (g' - sigma * w) (FtrlSumOrder); the last bit can differ.
#ifndef RECFLOW_EMBEDDING_UPDATE_RULES_H_
#define RECFLOW_EMBEDDING_UPDATE_RULES_H_

#include <cmath>
#include <cstdint>

namespace recflow::embedding {

// --- Gradient descent --------------------------------------------------------

// w -= g * lr
template <typename T>
inline void GradientDescentUpdate(T lr, int64_t n, const T* g, T* w) {
  for (int64_t i = 0; i < n; ++i) w[i] -= g[i] * lr;
}

// --- Momentum ----------------------------------------------------------------

template <typename T>
struct MomentumCoefficients {
  T lr;
  T momentum;
  bool nesterov = false;
};

namespace update_rules_internal {

template <bool kNesterov, typename T>
inline void MomentumLoop(T lr, T momentum, int64_t n, const T* g, T* w,
                         T* accum) {
  for (int64_t i = 0; i < n; ++i) {
    const T a = accum[i] * momentum + g[i];
    accum[i] = a;
    if constexpr (kNesterov) {
      w[i] -= g[i] * lr + a * momentum * lr;
    } else {
      w[i] -= a * lr;
    }
  }
}

}  // namespace update_rules_internal

// accum = accum * momentum + g;
// w -= accum * lr, or with nesterov w -= g * lr + accum * momentum * lr.
template <typename T>
inline void MomentumUpdate(const MomentumCoefficients<T>& c, int64_t n,
                           const T* g, T* w, T* accum) {
  if (c.nesterov) {
    update_rules_internal::MomentumLoop<true>(c.lr, c.momentum, n, g, w, accum);
  } else {
    update_rules_internal::MomentumLoop<false>(c.lr, c.momentum, n, g, w,
                                               accum);
  }
}

// --- Adagrad -----------------------------------------------------------------

template <typename T>
struct AdagradCoefficients {
  T lr;
  T epsilon = T(0);  // read only when kEpsilon
  bool update_slots = true;
};

namespace update_rules_internal {

template <bool kEpsilon, bool kUpdateSlots, typename T>
inline void AdagradLoop(T lr, T epsilon, int64_t n, const T* g, T* w,
                        T* accum) {
  for (int64_t i = 0; i < n; ++i) {
    T a = accum[i];
    if constexpr (kUpdateSlots) {
      a += g[i] * g[i];
      accum[i] = a;
    }
    if constexpr (kEpsilon) {
      w[i] -= g[i] * lr / (std::sqrt(a) + epsilon);
    } else {
      w[i] -= g[i] * lr / std::sqrt(a);
    }
  }
}

}  // namespace update_rules_internal

// accum += g^2 (when update_slots);
// w -= g * lr / sqrt(accum)                (kEpsilon false: ApplyAdagrad)
// w -= g * lr / (sqrt(accum) + epsilon)    (kEpsilon true: ApplyAdagradV2)
template <bool kEpsilon, typename T>
inline void AdagradUpdate(const AdagradCoefficients<T>& c, int64_t n,
                          const T* g, T* w, T* accum) {
  if (c.update_slots) {
    update_rules_internal::AdagradLoop<kEpsilon, true>(c.lr, c.epsilon, n, g, w,
                                                       accum);
  } else {
    update_rules_internal::AdagradLoop<kEpsilon, false>(c.lr, c.epsilon, n, g,
                                                        w, accum);
  }
}

// --- Adam --------------------------------------------------------------------

template <typename T>
struct AdamCoefficients {
  T alpha;  // lr * sqrt(1 - beta2_power) / (1 - beta1_power)
  T beta1;
  T one_minus_beta1;
  T one_minus_beta2;
  T epsilon;
  T decay = T(0);  // lr * weight_decay; read only when kWeightDecay
  bool nesterov = false;
};

// The coefficients of one step. beta1_power and beta2_power are beta1^t and
// beta2^t for the 1-based step t (TensorFlow's bias correction).
template <typename T>
inline AdamCoefficients<T> MakeAdamCoefficients(T lr, T beta1, T beta2,
                                                T epsilon, T beta1_power,
                                                T beta2_power) {
  AdamCoefficients<T> c;
  c.alpha = lr * std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
  c.beta1 = beta1;
  c.one_minus_beta1 = T(1) - beta1;
  c.one_minus_beta2 = T(1) - beta2;
  c.epsilon = epsilon;
  return c;
}

namespace update_rules_internal {

template <bool kWeightDecay, bool kNesterov, typename T>
inline void AdamLoop(const AdamCoefficients<T>& c, int64_t n, const T* g, T* w,
                     T* m, T* v) {
  const T alpha = c.alpha, beta1 = c.beta1, one_minus_beta1 = c.one_minus_beta1,
          one_minus_beta2 = c.one_minus_beta2, epsilon = c.epsilon,
          decay = c.decay;
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    const T mi = m[i] + (gi - m[i]) * one_minus_beta1;
    const T vi = v[i] + (gi * gi - v[i]) * one_minus_beta2;
    m[i] = mi;
    v[i] = vi;
    T x = w[i];
    if constexpr (kWeightDecay) x -= x * decay;
    if constexpr (kNesterov) {
      x -= ((gi * one_minus_beta1 + beta1 * mi) * alpha) /
           (std::sqrt(vi) + epsilon);
    } else {
      x -= (mi * alpha) / (std::sqrt(vi) + epsilon);
    }
    w[i] = x;
  }
}

}  // namespace update_rules_internal

// m += (g - m) * (1 - beta1);  v += (g^2 - v) * (1 - beta2);
// w -= w * decay first when kWeightDecay (AdamW: decoupled weight decay);
// w -= m * alpha / (sqrt(v) + epsilon), or with nesterov
// w -= (g * (1 - beta1) + beta1 * m) * alpha / (sqrt(v) + epsilon).
template <bool kWeightDecay = false, typename T>
inline void AdamUpdate(const AdamCoefficients<T>& c, int64_t n, const T* g,
                       T* w, T* m, T* v) {
  if (c.nesterov) {
    update_rules_internal::AdamLoop<kWeightDecay, true>(c, n, g, w, m, v);
  } else {
    update_rules_internal::AdamLoop<kWeightDecay, false>(c, n, g, w, m, v);
  }
}

// --- FTRL-proximal -----------------------------------------------------------

template <typename T>
struct FtrlCoefficients {
  T lr;
  T l1;          // l1 * lr with multiply_linear_by_lr, else l1
  T two_l2;      // 2 * l2 * lr with multiply_linear_by_lr, else 2 * l2
  T shrinkage2;  // 2 * l2_shrinkage; read only when kShrinkage
  T neg_power;   // -lr_power
  bool sqrt_power = true;  // lr_power == -0.5: sqrt instead of pow
  // TensorFlow's variant: `linear` holds lr * linear.
  bool multiply_linear_by_lr = false;
};

// From the op's hyperparameters (REQUIRES: validated by the caller).
template <typename T>
inline FtrlCoefficients<T> MakeFtrlCoefficients(T lr, T l1, T l2,
                                                T l2_shrinkage, T lr_power,
                                                bool multiply_linear_by_lr) {
  FtrlCoefficients<T> c;
  c.lr = lr;
  c.l1 = multiply_linear_by_lr ? l1 * lr : l1;
  c.two_l2 = multiply_linear_by_lr ? T(2) * l2 * lr : T(2) * l2;
  c.shrinkage2 = T(2) * l2_shrinkage;
  c.neg_power = -lr_power;
  c.sqrt_power = lr_power == T(-0.5);
  c.multiply_linear_by_lr = multiply_linear_by_lr;
  return c;
}

// How `linear` takes the gradient (Note [Update rule bits]).
enum class FtrlSumOrder {
  kTensorFlow,  // linear + (g' - sigma * w)
  kHashTable,   // (linear + g') - sigma * w
};

namespace update_rules_internal {

template <bool kShrinkage, FtrlSumOrder kOrder, bool kSqrtPower, bool kByLr,
          typename T>
inline void FtrlLoop(const FtrlCoefficients<T>& c, int64_t n, const T* g, T* w,
                     T* accum, T* linear) {
  const T lr = c.lr, l1 = c.l1, two_l2 = c.two_l2, shrinkage2 = c.shrinkage2,
          neg_power = c.neg_power;
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    const T wi = w[i];
    const T a = accum[i];
    T g_shrunk = gi;
    if constexpr (kShrinkage) g_shrunk = gi + shrinkage2 * wi;
    const T new_a = a + gi * gi;
    T p_new, p_old;
    if constexpr (kSqrtPower) {
      p_new = std::sqrt(new_a);
      p_old = std::sqrt(a);
    } else {
      p_new = std::pow(new_a, neg_power);
      p_old = std::pow(a, neg_power);
    }
    // g' and sigma * w in the units of `linear`.
    T lin = linear[i];
    T g_term, sigma_w, quadratic;
    if constexpr (kByLr) {
      g_term = g_shrunk * lr;
      sigma_w = (p_new - p_old) * wi;
      quadratic = p_new + two_l2;
    } else {
      g_term = g_shrunk;
      sigma_w = (p_new - p_old) / lr * wi;
      quadratic = p_new / lr + two_l2;
    }
    if constexpr (kOrder == FtrlSumOrder::kTensorFlow) {
      lin += g_term - sigma_w;
    } else {
      lin = lin + g_term - sigma_w;
    }
    linear[i] = lin;
    const T sign = lin > T(0) ? T(1) : (lin < T(0) ? T(-1) : T(0));
    w[i] = std::abs(lin) > l1 ? (sign * l1 - lin) / quadratic : T(0);
    accum[i] = new_a;
  }
}

template <bool kShrinkage, FtrlSumOrder kOrder, bool kSqrtPower, typename T>
inline void FtrlDispatchByLr(const FtrlCoefficients<T>& c, int64_t n,
                             const T* g, T* w, T* accum, T* linear) {
  if (c.multiply_linear_by_lr) {
    FtrlLoop<kShrinkage, kOrder, kSqrtPower, true>(c, n, g, w, accum, linear);
  } else {
    FtrlLoop<kShrinkage, kOrder, kSqrtPower, false>(c, n, g, w, accum, linear);
  }
}

}  // namespace update_rules_internal

// g' = g + 2 * l2_shrinkage * w when kShrinkage (ApplyFtrlV2), else g;
// p(x) = x^(-lr_power);  new_accum = accum + g^2;
// linear += g' - (p(new_accum) - p(accum)) / lr * w;
// w = |linear| > l1 ? (sign(linear) * l1 - linear) / (p(new_accum) / lr + 2 l2)
//                   : 0;
// accum = new_accum. With multiply_linear_by_lr, linear is kept times lr:
// linear += g' * lr - (p(new_accum) - p(accum)) * w and the denominator is
// p(new_accum) + 2 * l2 * lr (coefficients scaled by MakeFtrlCoefficients).
template <bool kShrinkage, FtrlSumOrder kOrder = FtrlSumOrder::kTensorFlow,
          typename T>
inline void FtrlUpdate(const FtrlCoefficients<T>& c, int64_t n, const T* g,
                       T* w, T* accum, T* linear) {
  if (c.sqrt_power) {
    update_rules_internal::FtrlDispatchByLr<kShrinkage, kOrder, true>(
        c, n, g, w, accum, linear);
  } else {
    update_rules_internal::FtrlDispatchByLr<kShrinkage, kOrder, false>(
        c, n, g, w, accum, linear);
  }
}

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_UPDATE_RULES_H_
