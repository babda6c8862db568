// The update rules against the formulas written out again in double
// (independently of update_rules.h), for every rule, flag and variant, in
// float and double; and the contract the kernels rely on: a span updated at
// once equals the same span updated in pieces, bit for bit (threads split
// dense variables at arbitrary points).
#include "recflow/embedding/update_rules.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace recflow::embedding {
namespace {

using Vec = std::vector<double>;

constexpr int64_t kN = 23;  // not a multiple of any vector width

// var, slots and gradient of kN elements; slots that feed a sqrt or a pow
// are positive.
struct State {
  Vec w, s0, s1, g;
};

State RandomState(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> signed_d(-1, 1), positive(0.05, 1);
  State s;
  for (int64_t i = 0; i < kN; ++i) {
    s.w.push_back(signed_d(rng));
    s.s0.push_back(positive(rng));
    s.s1.push_back(positive(rng));
    s.g.push_back(signed_d(rng));
  }
  return s;
}

template <typename T>
std::vector<T> To(const Vec& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <typename T>
Vec Back(const std::vector<T>& v) {
  return Vec(v.begin(), v.end());
}

// Rounds every value through T, so that the reference starts from exactly
// what the rule sees.
template <typename T>
State RoundTo(State s) {
  for (Vec* v : {&s.w, &s.s0, &s.s1, &s.g}) *v = Back(To<T>(*v));
  return s;
}

template <typename T>
void ExpectNear(const Vec& got, const Vec& want, const char* what) {
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i])))
        << what << "[" << i << "]";
  }
}

// Runs `rule` on the state in T (w, s0, s1 updated in place) and compares
// with `ref` run in double on the same rounded state.
template <typename T>
void Check(uint32_t seed,
           const std::function<void(int64_t, const T*, T*, T*, T*)>& rule,
           const std::function<void(State*)>& ref) {
  const State start = RoundTo<T>(RandomState(seed));
  std::vector<T> w = To<T>(start.w), s0 = To<T>(start.s0), s1 = To<T>(start.s1),
                 g = To<T>(start.g);
  rule(kN, g.data(), w.data(), s0.data(), s1.data());
  State want = start;
  ref(&want);
  ExpectNear<T>(Back(w), want.w, "w");
  ExpectNear<T>(Back(s0), want.s0, "slot 0");
  ExpectNear<T>(Back(s1), want.s1, "slot 1");

  // In pieces of every size from 1 to kN: the same bits.
  for (int64_t piece = 1; piece < kN; piece += 3) {
    std::vector<T> w2 = To<T>(start.w), a2 = To<T>(start.s0),
                   b2 = To<T>(start.s1);
    for (int64_t b = 0; b < kN; b += piece) {
      const int64_t n = std::min(piece, kN - b);
      rule(n, g.data() + b, w2.data() + b, a2.data() + b, b2.data() + b);
    }
    EXPECT_EQ(0, std::memcmp(w2.data(), w.data(), kN * sizeof(T))) << piece;
    EXPECT_EQ(0, std::memcmp(a2.data(), s0.data(), kN * sizeof(T))) << piece;
    EXPECT_EQ(0, std::memcmp(b2.data(), s1.data(), kN * sizeof(T))) << piece;
  }
}

template <typename T>
class UpdateRulesTest : public testing::Test {};
using Types = testing::Types<float, double>;
TYPED_TEST_SUITE(UpdateRulesTest, Types);

TYPED_TEST(UpdateRulesTest, GradientDescent) {
  using T = TypeParam;
  const T lr = T(0.3);
  Check<T>(
      1,
      [&](int64_t n, const T* g, T* w, T*, T*) {
        GradientDescentUpdate(lr, n, g, w);
      },
      [&](State* s) {
        for (int64_t i = 0; i < kN; ++i) s->w[i] -= double{lr} * s->g[i];
      });
}

TYPED_TEST(UpdateRulesTest, Momentum) {
  using T = TypeParam;
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov);
    const MomentumCoefficients<T> c{
        .lr = T(0.2), .momentum = T(0.7), .nesterov = nesterov};
    Check<T>(
        2,
        [&](int64_t n, const T* g, T* w, T* accum, T*) {
          MomentumUpdate(c, n, g, w, accum);
        },
        [&](State* s) {
          const double lr = c.lr, mu = c.momentum;
          for (int64_t i = 0; i < kN; ++i) {
            s->s0[i] = s->s0[i] * mu + s->g[i];
            s->w[i] -=
                nesterov ? s->g[i] * lr + s->s0[i] * mu * lr : s->s0[i] * lr;
          }
        });
  }
}

template <typename T, bool kEpsilon>
void CheckAdagrad() {
  for (bool update_slots : {true, false}) {
    SCOPED_TRACE(update_slots);
    const AdagradCoefficients<T> c{
        .lr = T(0.25), .epsilon = T(0.01), .update_slots = update_slots};
    Check<T>(
        3,
        [&](int64_t n, const T* g, T* w, T* accum, T*) {
          AdagradUpdate<kEpsilon>(c, n, g, w, accum);
        },
        [&](State* s) {
          const double eps = kEpsilon ? double{c.epsilon} : 0.0;
          for (int64_t i = 0; i < kN; ++i) {
            if (update_slots) s->s0[i] += s->g[i] * s->g[i];
            s->w[i] -= c.lr * s->g[i] / (std::sqrt(s->s0[i]) + eps);
          }
        });
  }
}

TYPED_TEST(UpdateRulesTest, Adagrad) { CheckAdagrad<TypeParam, false>(); }
TYPED_TEST(UpdateRulesTest, AdagradWithEpsilon) {
  CheckAdagrad<TypeParam, true>();
}

template <typename T, bool kWeightDecay>
void CheckAdam() {
  const double lr = 0.05, beta1 = 0.8, beta2 = 0.95, eps = 1e-3,
               b1p = std::pow(0.8, 3), b2p = std::pow(0.95, 3), wd = 0.1;
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov);
    AdamCoefficients<T> c = MakeAdamCoefficients<T>(T(lr), T(beta1), T(beta2),
                                                    T(eps), T(b1p), T(b2p));
    c.nesterov = nesterov;
    c.decay = T(lr) * T(wd);
    Check<T>(
        4,
        [&](int64_t n, const T* g, T* w, T* m, T* v) {
          AdamUpdate<kWeightDecay>(c, n, g, w, m, v);
        },
        [&](State* s) {
          // The hyperparameters as T holds them.
          const double l = T(lr), b1 = T(beta1), b2 = T(beta2), e = T(eps);
          const double alpha =
              l * std::sqrt(1 - double{T(b2p)}) / (1 - double{T(b1p)});
          for (int64_t i = 0; i < kN; ++i) {
            const double g = s->g[i];
            s->s0[i] = b1 * s->s0[i] + (1 - b1) * g;
            s->s1[i] = b2 * s->s1[i] + (1 - b2) * g * g;
            if (kWeightDecay) s->w[i] -= l * double{T(wd)} * s->w[i];
            const double m = nesterov ? (1 - b1) * g + b1 * s->s0[i] : s->s0[i];
            s->w[i] -= alpha * m / (std::sqrt(s->s1[i]) + e);
          }
        });
  }
}

TYPED_TEST(UpdateRulesTest, Adam) { CheckAdam<TypeParam, false>(); }
TYPED_TEST(UpdateRulesTest, AdamWithWeightDecay) {
  CheckAdam<TypeParam, true>();
}

template <typename T, bool kShrinkage, FtrlSumOrder kOrder>
void CheckFtrl() {
  const double lr = 0.3, l1 = 0.05, l2 = 0.1, shrinkage = 0.02;
  for (double lr_power : {-0.5, -0.3}) {
    for (bool by_lr : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "lr_power " << lr_power << " by_lr " << by_lr);
      const FtrlCoefficients<T> c = MakeFtrlCoefficients<T>(
          T(lr), T(l1), T(l2), kShrinkage ? T(shrinkage) : T(0), T(lr_power),
          by_lr);
      EXPECT_EQ(c.sqrt_power, lr_power == -0.5);
      Check<T>(
          5,
          [&](int64_t n, const T* g, T* w, T* accum, T* linear) {
            FtrlUpdate<kShrinkage, kOrder>(c, n, g, w, accum, linear);
          },
          [&](State* s) {
            const double r = T(lr), a1 = T(l1), a2 = T(l2),
                         sh = kShrinkage ? double{T(shrinkage)} : 0.0,
                         p = -double{T(lr_power)};
            for (int64_t i = 0; i < kN; ++i) {
              double& w = s->w[i];
              double& n = s->s0[i];
              double& z = s->s1[i];
              const double g = s->g[i], gs = g + 2 * sh * w;
              const double n_new = n + g * g;
              const double sigma = (std::pow(n_new, p) - std::pow(n, p)) / r;
              // With by_lr, z is kept times lr.
              z += by_lr ? r * (gs - sigma * w) : gs - sigma * w;
              const double zz = by_lr ? z / r : z;
              w = std::abs(zz) <= a1 ? 0
                                     : ((zz > 0 ? a1 : -a1) - zz) /
                                           (std::pow(n_new, p) / r + 2 * a2);
              n = n_new;
            }
          });
    }
  }
}

TYPED_TEST(UpdateRulesTest, Ftrl) {
  CheckFtrl<TypeParam, false, FtrlSumOrder::kTensorFlow>();
}
TYPED_TEST(UpdateRulesTest, FtrlWithShrinkage) {
  CheckFtrl<TypeParam, true, FtrlSumOrder::kTensorFlow>();
}
TYPED_TEST(UpdateRulesTest, FtrlInTheHashTablesOrder) {
  CheckFtrl<TypeParam, true, FtrlSumOrder::kHashTable>();
}

// The two orders of Note [Update rule bits], exactly as documented.
TEST(UpdateRulesTest, FtrlSumOrders) {
  const FtrlCoefficients<float> c =
      MakeFtrlCoefficients(0.3f, 0.0f, 0.0f, 0.0f, -0.5f, false);
  const float g = 0.37f, w0 = 0.71f, a0 = 0.29f, z0 = 1e4f;
  const float a_new = a0 + g * g;
  const float sigma_w = (std::sqrt(a_new) - std::sqrt(a0)) / c.lr * w0;
  float w = w0, a = a0, z = z0;
  FtrlUpdate<false, FtrlSumOrder::kTensorFlow>(c, 1, &g, &w, &a, &z);
  EXPECT_EQ(z, z0 + (g - sigma_w));
  w = w0, a = a0, z = z0;
  FtrlUpdate<false, FtrlSumOrder::kHashTable>(c, 1, &g, &w, &a, &z);
  EXPECT_EQ(z, (z0 + g) - sigma_w);
}

}  // namespace
}  // namespace recflow::embedding
