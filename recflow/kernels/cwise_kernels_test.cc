// Kernel tests for the elementwise math ops: every kernel against a plain
// double-precision reference on random shapes and values (fixed seeds),
// single- and multi-threaded, plus special values and bad inputs.
#include <array>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;
using Build1 = std::function<Output(const Scope&, Output)>;
using Build2 = std::function<Output(const Scope&, Output, Output)>;

template <typename T>
Tensor Random(const TensorShape& shape, std::mt19937* rng, double lo = -3, double hi = 3) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  for (T& v : t.flat<T>()) {
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(std::uniform_real_distribution<double>(lo, hi)(*rng));
    } else if constexpr (std::is_same_v<T, bool>) {
      v = (*rng)() & 1;
    } else {
      v = static_cast<T>(
          std::uniform_int_distribution<int>(static_cast<int>(lo), static_cast<int>(hi))(*rng));
    }
  }
  return t;
}

// Runs `build(scope, inputs)` with the inputs fed through placeholders and
// returns its value (fetched through an Identity named "out").
absl::StatusOr<Tensor> RunGraph(
    const std::vector<Tensor>& inputs,
    const std::function<Output(const Scope&, std::vector<Output>)>& build, int threads = 1) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> phs;
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    phs.push_back(ops::Placeholder(root.WithOpName("in" + std::to_string(i)), inputs[i].dtype()));
    feeds.emplace_back("in" + std::to_string(i), inputs[i]);
  }
  ops::Identity(root.WithOpName("out"), build(root, phs));
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions{threads, threads}, def));
  std::vector<Tensor> outputs;
  RETURN_IF_ERROR(session->Run(feeds, {"out"}, {}, &outputs));
  return outputs[0];
}

absl::StatusOr<Tensor> Run1(const Tensor& x, const Build1& build, int threads = 1) {
  return RunGraph(
      {x}, [&](const Scope& s, std::vector<Output> in) { return build(s, in[0]); }, threads);
}
absl::StatusOr<Tensor> Run2(const Tensor& x, const Tensor& y, const Build2& build,
                            int threads = 1) {
  return RunGraph(
      {x, y}, [&](const Scope& s, std::vector<Output> in) { return build(s, in[0], in[1]); },
      threads);
}

template <typename T>
double At(const Tensor& t, int64_t i) {
  return static_cast<double>(t.flat<T>()[i]);
}

double ValueAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_FLOAT:
      return At<float>(t, i);
    case DT_DOUBLE:
      return At<double>(t, i);
    case DT_INT32:
      return At<int32_t>(t, i);
    case DT_INT64:
      return At<int64_t>(t, i);
    case DT_BOOL:
      return t.flat<bool>()[i] ? 1 : 0;
    case DT_UINT8:
      return At<uint8_t>(t, i);
    case DT_INT8:
      return At<int8_t>(t, i);
    case DT_HALF:
      return static_cast<float>(t.flat<half>()[i]);
    case DT_BFLOAT16:
      return static_cast<float>(t.flat<bfloat16>()[i]);
    default:
      ADD_FAILURE() << "dtype " << DataTypeString(t.dtype());
      return 0;
  }
}

// Relative tolerance for results computed in `dtype`; integers are exact.
double Tolerance(DataType dtype) {
  switch (dtype) {
    case DT_FLOAT:
      return 3e-6;
    case DT_DOUBLE:
      return 1e-13;
    case DT_HALF:
      return 2e-3;
    case DT_BFLOAT16:
      return 1.6e-2;
    default:
      return 0;
  }
}

// Expects got == want elementwise up to the dtype's tolerance (NaN == NaN).
void ExpectClose(const Tensor& got, const std::vector<double>& want, const TensorShape& shape,
                 const std::string& what, double abs_tol = 0) {
  ASSERT_EQ(got.shape(), shape) << what;
  const double rtol = Tolerance(got.dtype());
  const double atol = got.dtype() == DT_FLOAT && abs_tol == 0 ? 2e-7 : abs_tol;
  for (int64_t i = 0; i < got.NumElements(); ++i) {
    const double g = ValueAt(got, i), w = want[i];
    if (std::isnan(w)) {
      ASSERT_TRUE(std::isnan(g)) << what << " at " << i << ": got " << g << ", want NaN";
      continue;
    }
    if (std::isinf(w)) {
      ASSERT_EQ(g, w) << what << " at " << i;
      continue;
    }
    ASSERT_LE(std::abs(g - w), rtol * std::abs(w) + atol)
        << what << " at " << i << ": got " << g << ", want " << w;
  }
}

// Reference broadcasting by index arithmetic per element, no tricks:
// out[i] = fn(a[...], b[...]) in double.
std::vector<double> ReferenceBinary(const Tensor& a, const Tensor& b,
                                    const std::function<double(double, double)>& fn,
                                    TensorShape* shape) {
  const int rank = std::max(a.dims(), b.dims());
  std::vector<int64_t> out_dims(rank);
  auto dim = [&](const Tensor& t, int i) {
    const int k = t.dims() - rank + i;
    return k >= 0 ? t.dim_size(k) : 1;
  };
  for (int i = 0; i < rank; ++i) out_dims[i] = dim(a, i) == 1 ? dim(b, i) : dim(a, i);
  *shape = TensorShape(absl::MakeConstSpan(out_dims));
  std::vector<double> out(shape->num_elements());
  std::vector<int64_t> idx(rank);
  for (int64_t flat = 0; flat < shape->num_elements(); ++flat) {
    int64_t rem = flat;
    for (int i = rank - 1; i >= 0; --i) {
      idx[i] = rem % out_dims[i];
      rem /= out_dims[i];
    }
    auto offset = [&](const Tensor& t) {
      int64_t off = 0;
      for (int i = 0; i < rank; ++i) off = off * dim(t, i) + (dim(t, i) == 1 ? 0 : idx[i]);
      return off;
    };
    out[flat] = fn(ValueAt(a, offset(a)), ValueAt(b, offset(b)));
  }
  return out;
}

const std::vector<std::pair<TensorShape, TensorShape>>& BroadcastShapes() {
  static const auto* shapes = new std::vector<std::pair<TensorShape, TensorShape>>{
      {{7}, {7}},
      {{3, 4}, {4}},
      {{3, 1}, {1, 5}},
      {{}, {2, 3}},
      {{2, 3}, {}},
      {{2, 3, 4}, {3, 1}},
      {{5, 1, 4, 1}, {6, 1, 3}},
      {{0, 3}, {3}},
      {{1}, {1}},
      {{3, 1}, {3, 4}},
      {{2, 1, 3}, {2, 4, 1}},
      {{4}, {3, 4}},
      {{1, 1}, {1}},
      {{2, 3, 4}, {2, 1, 4}},
      {{300, 500}, {500}},
      {{300, 500}, {300, 1}},
      {{400, 300}, {400, 300}},
      {{1}, {70000}},
  };
  return *shapes;
}

struct BinaryCase {
  const char* name;
  Build2 build;
  std::function<double(double, double)> ref;
  double lo, hi;  // input range
};

std::vector<BinaryCase> ArithmeticCases() {
  return {
      {"Sub", ops::Sub, [](double a, double b) { return a - b; }, -5, 5},
      {"Mul", ops::Mul, [](double a, double b) { return a * b; }, -5, 5},
      {"AddV2", ops::AddV2, [](double a, double b) { return a + b; }, -5, 5},
      {"Maximum", ops::Maximum, [](double a, double b) { return std::max(a, b); }, -5, 5},
      {"Minimum", ops::Minimum, [](double a, double b) { return std::min(a, b); }, -5, 5},
      {"SquaredDifference", ops::SquaredDifference,
       [](double a, double b) { return (a - b) * (a - b); }, -5, 5},
  };
}

template <typename T>
void CheckBinary(const BinaryCase& c, std::mt19937* rng, int threads) {
  for (const auto& [sa, sb] : BroadcastShapes()) {
    const Tensor a = Random<T>(sa, rng, c.lo, c.hi), b = Random<T>(sb, rng, c.lo, c.hi);
    auto got = Run2(a, b, c.build, threads);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
    TensorShape shape;
    const std::vector<double> want = ReferenceBinary(a, b, c.ref, &shape);
    ExpectClose(*got, want, shape,
                absl::StrCat(c.name, " ", DataTypeString(a.dtype()), " ", sa.DebugString(), " ",
                             sb.DebugString(), " threads=", threads));
  }
}

TEST(CwiseKernelsTest, ArithmeticMatchesReference) {
  std::mt19937 rng(42);
  for (int threads : {1, 2}) {
    for (const BinaryCase& c : ArithmeticCases()) {
      CheckBinary<float>(c, &rng, threads);
      CheckBinary<double>(c, &rng, threads);
      CheckBinary<int32_t>(c, &rng, threads);
      CheckBinary<int64_t>(c, &rng, threads);
    }
  }
}

TEST(CwiseKernelsTest, DivisionAndPowMatchReference) {
  std::mt19937 rng(43);
  const std::vector<BinaryCase> cases = {
      {"RealDiv", ops::RealDiv, [](double a, double b) { return a / b; }, 0.5, 4},
      {"DivNoNan", ops::DivNoNan, [](double a, double b) { return a / b; }, 0.5, 4},
      {"Pow", ops::Pow, [](double a, double b) { return std::pow(a, b); }, 0.1, 3},
  };
  for (int threads : {1, 2}) {
    for (const BinaryCase& c : cases) {
      CheckBinary<float>(c, &rng, threads);
      CheckBinary<double>(c, &rng, threads);
    }
  }
  // Integer Pow by squaring.
  const BinaryCase ipow = {"Pow", ops::Pow, [](double a, double b) { return std::pow(a, b); }, 0,
                           6};
  CheckBinary<int32_t>(ipow, &rng, 1);
  CheckBinary<int64_t>(ipow, &rng, 1);
}

TEST(CwiseKernelsTest, DivNoNanIsZeroWhereTheDivisorIs) {
  const Tensor x = Tensor::FromVector<double>({1, -2, 3, 0}, TensorShape({4}));
  const Tensor y = Tensor::FromVector<double>({0, 4, 0, 0}, TensorShape({4}));
  auto got = Run2(x, y, ops::DivNoNan);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose(*got, {0, -0.5, 0, 0}, TensorShape({4}), "DivNoNan");
}

TEST(CwiseKernelsTest, MaximumMinimumPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = Tensor::FromVector<float>({1, NAN, 3, NAN}, TensorShape({4}));
  const Tensor y = Tensor::FromVector<float>({NAN, 2, -1, NAN}, TensorShape({4}));
  auto mx = Run2(x, y, ops::Maximum);
  auto mn = Run2(x, y, ops::Minimum);
  ASSERT_TRUE(mx.ok() && mn.ok());
  ExpectClose(*mx, {nan, nan, 3, nan}, TensorShape({4}), "Maximum");
  ExpectClose(*mn, {nan, nan, -1, nan}, TensorShape({4}), "Minimum");
}

TEST(CwiseKernelsTest, IntegerOverflowWraps) {
  const int32_t big = std::numeric_limits<int32_t>::max(),
                small = std::numeric_limits<int32_t>::min();
  const Tensor x = Tensor::FromVector<int32_t>({big, small, small}, TensorShape({3}));
  const Tensor y = Tensor::FromVector<int32_t>({-1, 1, 2}, TensorShape({3}));
  auto sub = Run2(x, y, ops::Sub);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->flat<int32_t>()[0], small);
  EXPECT_EQ(sub->flat<int32_t>()[1], big);
  auto neg = Run1(x, ops::Neg);
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ(neg->flat<int32_t>()[1], small);  // -INT_MIN wraps, no UB
  auto abs = Run1(x, ops::Abs);
  ASSERT_TRUE(abs.ok());
  EXPECT_EQ(abs->flat<int32_t>()[0], big);
}

TEST(CwiseKernelsTest, HalfAndBfloat16ComputeInFloat) {
  std::mt19937 rng(3);
  for (DataType dt : {DT_HALF, DT_BFLOAT16}) {
    const Tensor xf = Random<float>({5, 7}, &rng, 0.5, 3), yf = Random<float>({7}, &rng, 0.5, 3);
    Tensor x(dt, xf.shape()), y(dt, yf.shape());
    for (int64_t i = 0; i < xf.NumElements(); ++i) {
      if (dt == DT_HALF) {
        x.flat<half>()[i] = half(xf.flat<float>()[i]);
      } else {
        x.flat<bfloat16>()[i] = bfloat16(xf.flat<float>()[i]);
      }
    }
    for (int64_t i = 0; i < yf.NumElements(); ++i) {
      if (dt == DT_HALF) {
        y.flat<half>()[i] = half(yf.flat<float>()[i]);
      } else {
        y.flat<bfloat16>()[i] = bfloat16(yf.flat<float>()[i]);
      }
    }
    auto div = Run2(x, y, ops::RealDiv);
    ASSERT_TRUE(div.ok()) << div.status();
    TensorShape shape;
    ExpectClose(*div,
                ReferenceBinary(
                    x, y, [](double a, double b) { return a / b; }, &shape),
                shape, "RealDiv " + DataTypeString(dt));
    auto tanh = Run1(x, ops::Tanh);
    ASSERT_TRUE(tanh.ok()) << tanh.status();
    std::vector<double> want(x.NumElements());
    for (int64_t i = 0; i < x.NumElements(); ++i) want[i] = std::tanh(ValueAt(x, i));
    ExpectClose(*tanh, want, x.shape(), "Tanh " + DataTypeString(dt));
  }
}

TEST(CwiseKernelsTest, ComparisonsMatchReference) {
  std::mt19937 rng(44);
  const std::vector<BinaryCase> cases = {
      {"Less", ops::Less, [](double a, double b) { return a < b; }, -3, 3},
      {"LessEqual", ops::LessEqual, [](double a, double b) { return a <= b; }, -3, 3},
      {"Greater", ops::Greater, [](double a, double b) { return a > b; }, -3, 3},
      {"GreaterEqual", ops::GreaterEqual, [](double a, double b) { return a >= b; }, -3, 3},
      {"Equal", [](const Scope& s, Output x, Output y) { return ops::Equal(s, x, y); },
       [](double a, double b) { return a == b; }, -3, 3},
      {"NotEqual", [](const Scope& s, Output x, Output y) { return ops::NotEqual(s, x, y); },
       [](double a, double b) { return a != b; }, -3, 3},
  };
  for (int threads : {1, 2}) {
    for (const BinaryCase& c : cases) {
      // Integers in [-3, 3] give plenty of ties; floats are rounded to
      // halves so ties occur there too.
      CheckBinary<int32_t>(c, &rng, threads);
      CheckBinary<int64_t>(c, &rng, threads);
      for (const auto& [sa, sb] : BroadcastShapes()) {
        Tensor a = Random<float>(sa, &rng), b = Random<float>(sb, &rng);
        for (float& v : a.flat<float>()) v = std::round(v * 2) / 2;
        for (float& v : b.flat<float>()) v = std::round(v * 2) / 2;
        auto got = Run2(a, b, c.build, threads);
        ASSERT_TRUE(got.ok()) << got.status();
        TensorShape shape;
        ExpectClose(*got, ReferenceBinary(a, b, c.ref, &shape), shape, c.name);
      }
    }
  }
}

TEST(CwiseKernelsTest, EqualityOnStringsAndBools) {
  Tensor s(DT_STRING, TensorShape({3}));
  s.flat<std::string>()[0] = "a";
  s.flat<std::string>()[1] = "bb";
  s.flat<std::string>()[2] = "a";
  auto eq = Run2(s, Tensor::Scalar<std::string>("a"),
                 [](const Scope& sc, Output x, Output y) { return ops::Equal(sc, x, y); });
  ASSERT_TRUE(eq.ok()) << eq.status();
  EXPECT_THAT(std::vector<bool>(eq->flat<bool>().begin(), eq->flat<bool>().end()),
              testing::ElementsAre(true, false, true));
  const Tensor b = Tensor::FromVector<bool>({true, false}, TensorShape({2}));
  auto ne = Run2(b, Tensor::FromVector<bool>({true, true}, TensorShape({2})),
                 [](const Scope& sc, Output x, Output y) { return ops::NotEqual(sc, x, y); });
  ASSERT_TRUE(ne.ok()) << ne.status();
  EXPECT_FALSE(ne->flat<bool>()[0]);
  EXPECT_TRUE(ne->flat<bool>()[1]);
}

TEST(CwiseKernelsTest, EqualityWithoutIncompatibleShapeErrorGivesAScalar) {
  std::mt19937 rng(4);
  const Tensor a = Random<int32_t>({2, 3}, &rng), b = Random<int32_t>({4, 3}, &rng);
  auto eq = Run2(a, b, [](const Scope& s, Output x, Output y) {
    return ops::Equal(s, x, y, {.incompatible_shape_error = false});
  });
  ASSERT_TRUE(eq.ok()) << eq.status();
  EXPECT_EQ(eq->dims(), 0);
  EXPECT_FALSE(eq->flat<bool>()[0]);
  auto ne = Run2(a, b, [](const Scope& s, Output x, Output y) {
    return ops::NotEqual(s, x, y, {.incompatible_shape_error = false});
  });
  ASSERT_TRUE(ne.ok()) << ne.status();
  EXPECT_TRUE(ne->flat<bool>()[0]);
  auto strict = Run2(a, b, [](const Scope& s, Output x, Output y) { return ops::Equal(s, x, y); });
  EXPECT_THAT(strict.status().message(), HasSubstr("incompatible shapes: [2,3] vs. [4,3]"));
}

TEST(CwiseKernelsTest, LogicalOps) {
  std::mt19937 rng(45);
  for (const auto& [sa, sb] : BroadcastShapes()) {
    const Tensor a = Random<bool>(sa, &rng), b = Random<bool>(sb, &rng);
    for (bool is_and : {true, false}) {
      auto got = Run2(a, b, is_and ? Build2(ops::LogicalAnd) : Build2(ops::LogicalOr));
      ASSERT_TRUE(got.ok()) << got.status();
      TensorShape shape;
      ExpectClose(
          *got,
          ReferenceBinary(
              a, b,
              [&](double x, double y) { return is_and ? (x != 0 && y != 0) : (x != 0 || y != 0); },
              &shape),
          shape, is_and ? "LogicalAnd" : "LogicalOr");
    }
  }
  const Tensor x = Tensor::FromVector<bool>({true, false, true}, TensorShape({3}));
  auto lnot = Run1(x, ops::LogicalNot);
  ASSERT_TRUE(lnot.ok());
  EXPECT_THAT(std::vector<bool>(lnot->flat<bool>().begin(), lnot->flat<bool>().end()),
              testing::ElementsAre(false, true, false));
}

TEST(CwiseKernelsTest, RuntimeErrorsNameTheShapesAndValues) {
  std::mt19937 rng(1);
  auto sub = Run2(Random<float>({2, 3}, &rng), Random<float>({4, 3}, &rng), ops::Sub);
  EXPECT_THAT(sub.status().message(), HasSubstr("incompatible shapes: [2,3] vs. [4,3]"));
  EXPECT_THAT(sub.status().message(), HasSubstr("(Sub)"));
  auto pow = Run2(Tensor::FromVector<int32_t>({2, 3}, TensorShape({2})),
                  Tensor::FromVector<int32_t>({1, -2}, TensorShape({2})), ops::Pow);
  EXPECT_THAT(pow.status().message(),
              HasSubstr("integers to negative integer powers are not allowed: y[1] = -2"));
  auto relu_grad = Run2(Random<float>({2, 3}, &rng), Random<float>({3}, &rng), ops::ReluGrad);
  EXPECT_THAT(relu_grad.status().message(),
              HasSubstr("inputs must have the same shape, but are [2,3] and [3]"));
}

// --- Unary ops -------------------------------------------------------------------

struct UnaryCase {
  const char* name;
  Build1 build;
  std::function<double(double)> ref;
  double lo, hi;
};

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
constexpr double kSeluScale = 1.0507009873554804934193349852946;
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;

std::vector<UnaryCase> UnaryCases() {
  return {
      {"Neg", ops::Neg, [](double x) { return -x; }, -5, 5},
      {"Abs", ops::Abs, [](double x) { return std::abs(x); }, -5, 5},
      {"Sign", ops::Sign, [](double x) { return double((x > 0) - (x < 0)); }, -5, 5},
      {"Square", ops::Square, [](double x) { return x * x; }, -5, 5},
      {"Relu", ops::Relu, [](double x) { return std::max(x, 0.0); }, -5, 5},
      {"Relu6", ops::Relu6, [](double x) { return std::min(std::max(x, 0.0), 6.0); }, -4, 10},
      {"Exp", ops::Exp, [](double x) { return std::exp(x); }, -20, 20},
      {"Log", ops::Log, [](double x) { return std::log(x); }, 1e-3, 50},
      {"Log1p", ops::Log1p, [](double x) { return std::log1p(x); }, -0.9, 5},
      {"Sqrt", ops::Sqrt, [](double x) { return std::sqrt(x); }, 0, 50},
      {"Rsqrt", ops::Rsqrt, [](double x) { return 1 / std::sqrt(x); }, 1e-3, 50},
      {"Sigmoid", ops::Sigmoid, Sigmoid, -20, 20},
      {"Tanh", ops::Tanh, [](double x) { return std::tanh(x); }, -6, 6},
      {"LeakyRelu", [](const Scope& s, Output x) { return ops::LeakyRelu(s, x, {0.3f}); },
       [](double x) { return x < 0 ? double{0.3f} * x : x; }, -5, 5},
      {"Elu", ops::Elu, [](double x) { return x < 0 ? std::expm1(x) : x; }, -5, 5},
      {"Selu", ops::Selu,
       [](double x) { return x < 0 ? kSeluScale * kSeluAlpha * std::expm1(x) : kSeluScale * x; },
       -5, 5},
      {"Softplus", ops::Softplus, [](double x) { return std::log1p(std::exp(x)); }, -30, 30},
  };
}

bool IsIntegerMeaningful(const std::string& name) {
  return name == "Neg" || name == "Abs" || name == "Sign" || name == "Square" || name == "Relu" ||
         name == "Relu6";
}

template <typename T>
void CheckUnary(const UnaryCase& c, const TensorShape& shape, std::mt19937* rng, int threads) {
  const Tensor x = Random<T>(shape, rng, c.lo, c.hi);
  auto got = Run1(x, c.build, threads);
  ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
  std::vector<double> want(x.NumElements());
  for (int64_t i = 0; i < x.NumElements(); ++i) want[i] = c.ref(ValueAt(x, i));
  // Elu / Selu compute e^x - 1 in float, as TensorFlow does: absolute
  // accuracy near 0.
  const std::string name = c.name;
  const double atol = (name == "Elu" || name == "Selu") && x.dtype() == DT_FLOAT ? 4e-7 : 0;
  ExpectClose(*got, want, shape,
              absl::StrCat(c.name, " ", DataTypeString(x.dtype()), " ", shape.DebugString(),
                           " threads=", threads),
              atol);
}

TEST(CwiseUnaryKernelsTest, MatchReference) {
  std::mt19937 rng(46);
  const std::vector<TensorShape> shapes = {{}, {1}, {7}, {3, 5}, {0, 4}, {2, 3, 17}, {300, 700}};
  for (int threads : {1, 2}) {
    for (const UnaryCase& c : UnaryCases()) {
      for (const TensorShape& shape : shapes) {
        CheckUnary<float>(c, shape, &rng, threads);
        CheckUnary<double>(c, shape, &rng, threads);
        if (IsIntegerMeaningful(c.name)) {
          CheckUnary<int32_t>(c, shape, &rng, threads);
          CheckUnary<int64_t>(c, shape, &rng, threads);
        }
      }
    }
  }
}

// The vectorized float transcendentals against double libm over a wide
// sweep of inputs, in ulps of the float result; on CPUs with AVX2 both the
// AVX2 and the SSE2 loops (Note [AVX2 dispatch] in cwise_ops_common.h).
struct AccuracyCase {
  Build1 build;
  std::function<double(double)> ref;
  double lo, hi, max_ulp;
  const char* name;
};

void CheckUlps(const AccuracyCase& c, std::mt19937* rng, const std::string& what) {
  Tensor x(DT_FLOAT, TensorShape({200000}));
  const bool log_scale = c.lo > 0;
  for (float& v : x.flat<float>()) {
    const double u =
        log_scale
            ? std::exp(std::uniform_real_distribution<double>(std::log(c.lo), std::log(c.hi))(*rng))
            : std::uniform_real_distribution<double>(c.lo, c.hi)(*rng);
    v = static_cast<float>(u);
  }
  x.flat<float>()[0] = 1e-4f;  // small arguments
  x.flat<float>()[1] = -1e-5f;
  auto got = Run1(x, c.build, 2);
  ASSERT_TRUE(got.ok()) << got.status();
  double worst = 0;
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    const double want = c.ref(x.flat<float>()[i]);
    const float wf = std::abs(static_cast<float>(want));
    const double ulp = std::nextafter(wf, std::numeric_limits<float>::infinity()) - wf;
    worst = std::max(worst, std::abs(got->flat<float>()[i] - want) /
                                std::max(ulp, double{std::numeric_limits<float>::denorm_min()}));
  }
  EXPECT_LE(worst, c.max_ulp) << c.name << " " << what;
}

TEST(CwiseUnaryKernelsTest, FloatTranscendentalsAreAccurate) {
  const std::vector<AccuracyCase> cases = {
      {ops::Exp, [](double x) { return std::exp(x); }, -103, 88.7, 2, "Exp"},
      {ops::Log, [](double x) { return std::log(x); }, 1e-30, 1e30, 2, "Log"},
      {ops::Log1p, [](double x) { return std::log1p(x); }, -0.999, 1e6, 3, "Log1p"},
      {ops::Tanh, [](double x) { return std::tanh(x); }, -12, 12, 2, "Tanh"},
      {ops::Sigmoid, Sigmoid, -80, 30, 3, "Sigmoid"},
      {ops::Softplus,
       [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }, -90, 90, 3,
       "Softplus"},
  };
  std::mt19937 rng(47);
  for (const AccuracyCase& c : cases) CheckUlps(c, &rng, "default loops");
  setenv("RECFLOW_NO_AVX2", "1", 1);
  for (const AccuracyCase& c : cases) CheckUlps(c, &rng, "SSE2 loops");
  unsetenv("RECFLOW_NO_AVX2");
}

TEST(CwiseUnaryKernelsTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const Tensor x = Tensor::FromVector<float>({inf, -inf, nan, 0.f, -0.f, 100.f, -200.f, 1e-40f},
                                             TensorShape({8}));
  auto expect = [&](const Build1& build, std::vector<double> want, const char* what) {
    for (int threads : {1, 2}) {
      auto got = Run1(x, build, threads);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectClose(*got, want, x.shape(), what);
    }
  };
  const double dinf = std::numeric_limits<double>::infinity(), dnan = std::nan("");
  expect(ops::Exp, {dinf, 0, dnan, 1, 1, dinf, 0, 1}, "Exp");
  expect(ops::Log, {dinf, dnan, dnan, -dinf, -dinf, std::log(100.0), dnan, std::log(1e-40f)},
         "Log");
  expect(ops::Tanh, {1, -1, dnan, 0, 0, 1, -1, 1e-40f}, "Tanh");
  expect(ops::Sigmoid, {1, 0, dnan, 0.5, 0.5, 1, 0, 0.5}, "Sigmoid");
  expect(ops::Relu, {dinf, 0, dnan, 0, 0, 100, 0, 1e-40f}, "Relu");
  expect(ops::Softplus, {dinf, 0, dnan, std::log(2.0), std::log(2.0), 100, 0, std::log(2.0)},
         "Softplus");
  expect(ops::Sqrt, {dinf, dnan, dnan, 0, 0, 10, dnan, std::sqrt(double{1e-40f})}, "Sqrt");
  expect(ops::Sign, {1, -1, dnan, 0, 0, 1, -1, 1}, "Sign");
}

// --- Gradient helpers --------------------------------------------------------------

TEST(CwiseGradHelperKernelsTest, MatchReference) {
  struct Case {
    const char* name;
    Build2 build;
    std::function<double(double, double)> ref;
    double lo1, hi1, lo2, hi2;
  };
  const std::vector<Case> cases = {
      {"ReluGrad", ops::ReluGrad, [](double g, double f) { return f > 0 ? g : 0; }, -2, 2, -3, 3},
      {"Relu6Grad", ops::Relu6Grad, [](double g, double f) { return f > 0 && f < 6 ? g : 0; }, -2,
       2, -3, 9},
      {"LeakyReluGrad",
       [](const Scope& s, Output g, Output f) { return ops::LeakyReluGrad(s, g, f, {0.1f}); },
       [](double g, double f) { return f > 0 ? g : double{0.1f} * g; }, -2, 2, -3, 3},
      {"EluGrad", ops::EluGrad, [](double g, double y) { return y < 0 ? g * (y + 1) : g; }, -2, 2,
       -1, 3},
      {"SeluGrad", ops::SeluGrad,
       [](double g, double y) {
         return y < 0 ? g * (y + kSeluScale * kSeluAlpha) : g * kSeluScale;
       },
       -2, 2, -1.7, 3},
      {"SoftplusGrad", ops::SoftplusGrad, [](double g, double f) { return g * Sigmoid(f); }, -2, 2,
       -10, 10},
      {"SigmoidGrad", ops::SigmoidGrad, [](double y, double dy) { return dy * y * (1 - y); }, 0, 1,
       -2, 2},
      {"TanhGrad", ops::TanhGrad, [](double y, double dy) { return dy * (1 - y * y); }, -1, 1, -2,
       2},
      {"SqrtGrad", ops::SqrtGrad, [](double y, double dy) { return 0.5 * dy / y; }, 0.1, 3, -2, 2},
      {"RsqrtGrad", ops::RsqrtGrad, [](double y, double dy) { return -0.5 * dy * y * y * y; }, 0.1,
       3, -2, 2},
  };
  std::mt19937 rng(48);
  for (int threads : {1, 2}) {
    for (const Case& c : cases) {
      for (const TensorShape& shape :
           {TensorShape({}), TensorShape({5, 3}), TensorShape({200, 300})}) {
        auto check = [&](auto zero) {
          using T = decltype(zero);
          const Tensor a = Random<T>(shape, &rng, c.lo1, c.hi1);
          const Tensor b = Random<T>(shape, &rng, c.lo2, c.hi2);
          auto got = Run2(a, b, c.build, threads);
          ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
          std::vector<double> want(a.NumElements());
          for (int64_t i = 0; i < a.NumElements(); ++i)
            want[i] = c.ref(ValueAt(a, i), ValueAt(b, i));
          ExpectClose(*got, want, shape, absl::StrCat(c.name, " ", DataTypeString(a.dtype())));
        };
        check(float{});
        check(double{});
      }
    }
  }
}

// --- Select ------------------------------------------------------------------------

TEST(SelectKernelTest, ScalarSameShapeAndVectorConditions) {
  std::mt19937 rng(49);
  const Tensor t = Random<float>({4, 3}, &rng), e = Random<float>({4, 3}, &rng);
  auto select = [&](const Tensor& c) {
    return RunGraph({c, t, e}, [](const Scope& s, std::vector<Output> in) {
      return ops::Select(s, in[0], in[1], in[2]);
    });
  };
  auto scalar = select(Tensor::Scalar<bool>(false));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(TensorsEqual(*scalar, e));
  const Tensor same = Random<bool>({4, 3}, &rng);
  auto got = select(same);
  ASSERT_TRUE(got.ok()) << got.status();
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(got->flat<float>()[i],
              same.flat<bool>()[i] ? t.flat<float>()[i] : e.flat<float>()[i]);
  }
  const Tensor rows = Tensor::FromVector<bool>({true, false, false, true}, TensorShape({4}));
  got = select(rows);
  ASSERT_TRUE(got.ok()) << got.status();
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(got->flat<float>()[i],
              rows.flat<bool>()[i / 3] ? t.flat<float>()[i] : e.flat<float>()[i]);
  }
  auto bad = select(Tensor::FromVector<bool>({true, false, true}, TensorShape({3})));
  EXPECT_THAT(bad.status().message(), HasSubstr("first dimension"));
}

TEST(SelectKernelTest, BadShapesAtRunTime) {
  std::mt19937 rng(50);
  auto got = RunGraph(
      {Random<bool>({2, 3}, &rng), Random<float>({2, 3}, &rng), Random<float>({2, 4}, &rng)},
      [](const Scope& s, std::vector<Output> in) { return ops::Select(s, in[0], in[1], in[2]); });
  EXPECT_THAT(got.status().message(),
              HasSubstr("t and e must have the same shape, but are [2,3] and [2,4]"));
  auto v2 = RunGraph(
      {Random<bool>({2}, &rng), Random<float>({3}, &rng), Random<float>({3}, &rng)},
      [](const Scope& s, std::vector<Output> in) { return ops::SelectV2(s, in[0], in[1], in[2]); });
  EXPECT_THAT(v2.status().message(), HasSubstr("must broadcast together"));
}

TEST(SelectKernelTest, SelectV2BroadcastsAllThree) {
  std::mt19937 rng(51);
  const std::vector<std::array<TensorShape, 3>> shapes = {
      {TensorShape({5, 4}), TensorShape({5, 4}), TensorShape({5, 4})},
      {TensorShape({}), TensorShape({5, 4}), TensorShape({5, 4})},
      {TensorShape({5, 1}), TensorShape({1, 4}), TensorShape({})},
      {TensorShape({4}), TensorShape({3, 1}), TensorShape({3, 4})},
      {TensorShape({2, 1, 3}), TensorShape({4, 1}), TensorShape({1, 1, 3})},
      {TensorShape({300, 400}), TensorShape({400}), TensorShape({300, 1})},
      {TensorShape({}), TensorShape({3}), TensorShape({2, 3})},
  };
  for (int threads : {1, 2}) {
    for (const auto& s : shapes) {
      const Tensor c = Random<bool>(s[0], &rng);
      const Tensor t = Random<int64_t>(s[1], &rng, -100, 100),
                   e = Random<int64_t>(s[2], &rng, -100, 100);
      auto got = RunGraph(
          {c, t, e},
          [](const Scope& sc, std::vector<Output> in) {
            return ops::SelectV2(sc, in[0], in[1], in[2]);
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      // Reference: broadcast c against (t where true, e where false).
      TensorShape te_shape, shape;
      const std::vector<double> te_t = ReferenceBinary(
          t, e, [](double a, double) { return a; }, &te_shape);
      const std::vector<double> te_e = ReferenceBinary(
          t, e, [](double, double b) { return b; }, &te_shape);
      Tensor tt(DT_DOUBLE, te_shape), ee(DT_DOUBLE, te_shape);
      std::copy(te_t.begin(), te_t.end(), tt.flat<double>().begin());
      std::copy(te_e.begin(), te_e.end(), ee.flat<double>().begin());
      Tensor cd(DT_DOUBLE, c.shape());
      for (int64_t i = 0; i < c.NumElements(); ++i) cd.flat<double>()[i] = c.flat<bool>()[i];
      const std::vector<double> pick_t = ReferenceBinary(
          cd, tt, [](double cv, double v) { return cv != 0 ? v : NAN; }, &shape);
      const std::vector<double> pick_e = ReferenceBinary(
          cd, ee, [](double cv, double v) { return cv != 0 ? NAN : v; }, &shape);
      std::vector<double> want(pick_t.size());
      for (size_t i = 0; i < want.size(); ++i)
        want[i] = std::isnan(pick_t[i]) ? pick_e[i] : pick_t[i];
      ExpectClose(*got, want, shape,
                  "SelectV2 " + s[0].DebugString() + s[1].DebugString() + s[2].DebugString());
    }
  }
}

// --- Cast ----------------------------------------------------------------------------

TEST(CastKernelTest, AllPairsOnRepresentativeValues) {
  const std::vector<DataType> types = {DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16, DT_INT32,
                                       DT_INT64, DT_UINT8,  DT_INT8, DT_BOOL};
  // Values every type holds exactly.
  const std::vector<double> values = {0, 1, 2, 3, 5, 7, 64, 100, 120};
  for (DataType src : types) {
    for (DataType dst : types) {
      // Build x of src from double values via a double -> src Cast graph,
      // then src -> dst.
      const Tensor xd =
          Tensor::FromVector<double>(values, TensorShape({static_cast<int64_t>(values.size())}));
      auto got = Run1(
          xd, [&](const Scope& s, Output x) { return ops::Cast(s, ops::Cast(s, x, src), dst); });
      ASSERT_TRUE(got.ok()) << DataTypeString(src) << "->" << DataTypeString(dst) << ": "
                            << got.status();
      ASSERT_EQ(got->dtype(), dst);
      for (size_t i = 0; i < values.size(); ++i) {
        const double want = (src == DT_BOOL || dst == DT_BOOL) ? (values[i] != 0) : values[i];
        EXPECT_EQ(ValueAt(*got, i), want)
            << DataTypeString(src) << "->" << DataTypeString(dst) << " of " << values[i];
      }
    }
  }
}

TEST(CastKernelTest, FloatToIntRoundsTowardZeroAndSaturates) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::FromVector<float>(
      {-3.7f, 2.5f, -0.5f, 300.f, -300.f, 3e9f, -3e9f, nan, inf, -inf}, TensorShape({10}));
  auto i32 = Run1(x, [](const Scope& s, Output v) { return ops::Cast(s, v, DT_INT32); });
  ASSERT_TRUE(i32.ok()) << i32.status();
  const int32_t mx = std::numeric_limits<int32_t>::max(), mn = std::numeric_limits<int32_t>::min();
  EXPECT_THAT(std::vector<int32_t>(i32->flat<int32_t>().begin(), i32->flat<int32_t>().end()),
              testing::ElementsAre(-3, 2, 0, 300, -300, mx, mn, 0, mx, mn));
  auto u8 = Run1(x, [](const Scope& s, Output v) { return ops::Cast(s, v, DT_UINT8); });
  ASSERT_TRUE(u8.ok()) << u8.status();
  EXPECT_THAT(std::vector<int>(u8->flat<uint8_t>().begin(), u8->flat<uint8_t>().end()),
              testing::ElementsAre(0, 2, 0, 255, 0, 255, 0, 0, 255, 0));
  auto i64 = Run1(Tensor::FromVector<double>({-1e300, 9.3e18, 123456789012.9}, TensorShape({3})),
                  [](const Scope& s, Output v) { return ops::Cast(s, v, DT_INT64); });
  ASSERT_TRUE(i64.ok()) << i64.status();
  EXPECT_EQ(i64->flat<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i64->flat<int64_t>()[1], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64->flat<int64_t>()[2], 123456789012);
  auto b = Run1(x, [](const Scope& s, Output v) { return ops::Cast(s, v, DT_BOOL); });
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->flat<bool>()[2]);  // -0.5 != 0
  EXPECT_TRUE(b->flat<bool>()[7]);  // NaN != 0
}

TEST(CastKernelTest, TruncateRoundsTowardZero) {
  // 1 + 2^-8 + 2^-9 is between two bfloat16 values; rounding goes up,
  // truncation down.
  const float v = 1.0f + 1.0f / 256 + 1.0f / 512;
  const Tensor x = Tensor::FromVector<float>({v, -v}, TensorShape({2}));
  auto rounded = Run1(x, [](const Scope& s, Output in) { return ops::Cast(s, in, DT_BFLOAT16); });
  auto truncated = Run1(x, [](const Scope& s, Output in) {
    return ops::Cast(s, in, DT_BFLOAT16, {.truncate = true});
  });
  ASSERT_TRUE(rounded.ok() && truncated.ok());
  EXPECT_EQ(static_cast<float>(rounded->flat<bfloat16>()[0]), 1.0f + 1.0f / 128);
  EXPECT_EQ(static_cast<float>(truncated->flat<bfloat16>()[0]), 1.0f);
  EXPECT_EQ(static_cast<float>(truncated->flat<bfloat16>()[1]), -1.0f);
  const Tensor d = Tensor::FromVector<double>({1.0 + std::ldexp(1.0, -24) + std::ldexp(1.0, -30)},
                                              TensorShape({1}));
  auto df = Run1(
      d, [](const Scope& s, Output in) { return ops::Cast(s, in, DT_FLOAT, {.truncate = true}); });
  ASSERT_TRUE(df.ok());
  EXPECT_EQ(df->flat<float>()[0], 1.0f);
}

TEST(CastKernelTest, LargeTensorsAndIdentity) {
  std::mt19937 rng(52);
  const Tensor x = Random<double>({300, 400}, &rng, -1000, 1000);
  auto got = Run1(
      x, [](const Scope& s, Output v) { return ops::Cast(s, v, DT_INT32); }, 2);
  ASSERT_TRUE(got.ok());
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    ASSERT_EQ(got->flat<int32_t>()[i], static_cast<int32_t>(x.flat<double>()[i]));
  }
  auto same = Run1(x, [](const Scope& s, Output v) { return ops::Cast(s, v, DT_DOUBLE); });
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(TensorsEqual(*same, x));
}

// --- Fusion of chains (buffer forwarding) ----------------------------------------------

TEST(CwiseKernelsTest, ChainsReuseBuffersCorrectly) {
  std::mt19937 rng(53);
  const Tensor x = Random<float>({100, 100}, &rng);
  auto got = Run1(x, [](const Scope& s, Output v) {
    return ops::Neg(s, ops::Sigmoid(s, ops::Sub(s, ops::Exp(s, v), v)));
  });
  ASSERT_TRUE(got.ok());
  std::vector<double> want(x.NumElements());
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    const double v = x.flat<float>()[i];
    want[i] = -Sigmoid(std::exp(v) - v);
  }
  ExpectClose(*got, want, x.shape(), "chain");
}

// --- Speed (run by hand: --gtest_also_run_disabled_tests) ---------------------------

TEST(CwiseKernelsBenchmark, DISABLED_NanosecondsPerElement) {
  std::mt19937 rng(54);
  // Cache-resident (256 KiB per tensor), so the kernels' arithmetic shows
  // rather than memory bandwidth; each timing is the best of 7 x 20 runs.
  const int64_t n = 1 << 16;
  constexpr int kRuns = 20;
  const Tensor x = Random<float>({n}, &rng, -5, 5), y = Random<float>({n}, &rng, 0.5, 5);
  const std::vector<std::pair<const char*, std::function<Output(const Scope&, Output, Output)>>>
      cases = {
          {"AddV2", ops::AddV2},
          {"Maximum", ops::Maximum},
          {"Less", ops::Less},
          {"Exp", [](const Scope& s, Output a, Output) { return ops::Exp(s, a); }},
          {"Log", [](const Scope& s, Output, Output b) { return ops::Log(s, b); }},
          {"Sigmoid", [](const Scope& s, Output a, Output) { return ops::Sigmoid(s, a); }},
          {"Tanh", [](const Scope& s, Output a, Output) { return ops::Tanh(s, a); }},
          {"Sqrt", [](const Scope& s, Output, Output b) { return ops::Sqrt(s, b); }},
          {"Relu", [](const Scope& s, Output a, Output) { return ops::Relu(s, a); }},
          {"Softplus", [](const Scope& s, Output a, Output) { return ops::Softplus(s, a); }},
          {"SigmoidGrad", ops::SigmoidGrad},
          {"Cast->int32",
           [](const Scope& s, Output a, Output) { return ops::Cast(s, a, DT_INT32); }},
      };
  for (int threads : {1, 2}) {
    for (const auto& [name, build] : cases) {
      Scope root = Scope::NewRootScope();
      Output a = ops::Placeholder(root.WithOpName("a"), DT_FLOAT);
      Output b = ops::Placeholder(root.WithOpName("b"), DT_FLOAT);
      build(root.WithOpName("out"), a, b);
      auto session = Session::Create(SessionOptions{1, threads}, root.ToGraphDef().value()).value();
      std::vector<Tensor> out;
      double best = 1e30;
      for (int rep = 0; rep < 7; ++rep) {
        const auto start = std::chrono::steady_clock::now();
        for (int run = 0; run < kRuns; ++run) {
          ASSERT_TRUE(session->Run({{"a", x}, {"b", y}}, {"out"}, {}, &out).ok());
        }
        best = std::min(
            best, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                          .count() /
                      kRuns);
      }
      printf("%-12s threads=%d %6.2f ns/element\n", name, threads, best / n);
    }
  }
  // Baselines: plain scalar libm loops over the same data, one thread.
  Tensor out(DT_FLOAT, x.shape());
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const std::vector<std::pair<const char*, std::function<void()>>> baselines = {
      {"std::exp",
       [&] {
         for (int64_t i = 0; i < n; ++i) po[i] = std::exp(px[i]);
       }},
      {"std::tanh",
       [&] {
         for (int64_t i = 0; i < n; ++i) po[i] = std::tanh(px[i]);
       }},
      {"std sigmoid",
       [&] {
         for (int64_t i = 0; i < n; ++i) po[i] = 1 / (1 + std::exp(-px[i]));
       }},
      {"std::log",
       [&] {
         for (int64_t i = 0; i < n; ++i) po[i] = std::log(y.data<float>()[i]);
       }},
  };
  for (const auto& [name, loop] : baselines) {
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      for (int run = 0; run < kRuns; ++run) loop();
      best = std::min(
          best, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                        .count() /
                    kRuns);
    }
    printf("%-12s baseline  %6.2f ns/element\n", name, best / n);
  }
}

}  // namespace
}  // namespace recflow
