// Weight initializers (initializers.h): random ops scaled and shifted by
// constants, or Fill.
#include "recflow/ops/initializers.h"

#include <cmath>
#include <complex>
#include <vector>

#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/random_ops.h"

namespace recflow::ops {
namespace {

// The stddev of a standard normal truncated to (-2, 2).
constexpr double kTruncatedNormalStddev = 0.87962566103423978;

// A scalar of `dtype` holding `value`; DT_INVALID tensor when the dtype is
// not numeric.
Tensor ScalarOf(DataType dtype, double value) {
  Tensor t;
  DispatchPodType(dtype, [&]<typename T>() {
    t = Tensor(dtype, TensorShape());
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
      t.scalar<T>() = T(static_cast<float>(value));
    } else if constexpr (std::is_same_v<T, bool>) {
      t.scalar<T>() = value != 0;
    } else {
      t.scalar<T>() = static_cast<T>(value);
    }
  });
  return t;
}

Output ShapeConst(const Scope& scope, const TensorShape& shape) {
  const auto dims = shape.dim_sizes();
  return Const(scope, Tensor::FromVector<int64_t>(std::vector<int64_t>(dims.begin(), dims.end())));
}

bool CheckFloating(const Scope& scope, const char* what, DataType dtype) {
  if (!scope.ok()) return false;
  if (dtype != DT_HALF && dtype != DT_BFLOAT16 && dtype != DT_FLOAT && dtype != DT_DOUBLE) {
    scope.UpdateStatus(errors::InvalidArgument(what, ": dtype must be half, bfloat16, float or ",
                                               "double, got ", DataTypeString(dtype)));
    return false;
  }
  return true;
}

// a * r + b, skipping the identity steps. Constants and intermediate
// nodes go through `inner`; the result through `outer`, so that the
// caller's WithOpName name lands on it.
Output Affine(const Scope& outer, const Scope& inner, Output r, double a, double b,
              DataType dtype) {
  if (a != 1 && b != 0) {
    return AddV2(outer, Mul(inner, r, Const(inner, ScalarOf(dtype, a))),
                 Const(inner, ScalarOf(dtype, b)));
  }
  if (a != 1) return Mul(outer, r, Const(inner, ScalarOf(dtype, a)));
  if (b != 0) return AddV2(outer, r, Const(inner, ScalarOf(dtype, b)));
  return Identity(outer, r);
}

RandomAttrs Seeds(const InitializerOptions& options) { return {options.seed, options.seed2}; }

}  // namespace

Fans ComputeFans(const TensorShape& shape) {
  Fans f;
  const int rank = shape.dims();
  if (rank == 1) {
    f.fan_in = f.fan_out = static_cast<double>(shape.dim_size(0));
  } else if (rank == 2) {
    f.fan_in = static_cast<double>(shape.dim_size(0));
    f.fan_out = static_cast<double>(shape.dim_size(1));
  } else if (rank > 2) {
    double receptive_field = 1;
    for (int i = 0; i < rank - 2; ++i) receptive_field *= static_cast<double>(shape.dim_size(i));
    f.fan_in = static_cast<double>(shape.dim_size(rank - 2)) * receptive_field;
    f.fan_out = static_cast<double>(shape.dim_size(rank - 1)) * receptive_field;
  }
  return f;
}

Output VarianceScaling(const Scope& scope, const TensorShape& shape, double scale, FanMode mode,
                       InitDistribution distribution, const InitializerOptions& options) {
  if (!CheckFloating(scope, "VarianceScaling", options.dtype)) return Output();
  if (!(scale > 0)) {
    scope.UpdateStatus(errors::InvalidArgument("VarianceScaling: scale must be > 0, got ", scale));
    return Output();
  }
  const Fans fans = ComputeFans(shape);
  double n = fans.fan_in;
  if (mode == FanMode::kFanOut) n = fans.fan_out;
  if (mode == FanMode::kFanAvg) n = (fans.fan_in + fans.fan_out) / 2;
  const double variance = scale / std::max(1.0, n);
  const Scope s = scope.NewSubScope("variance_scaling");
  const Output dims = ShapeConst(s, shape);
  switch (distribution) {
    case InitDistribution::kUniform: {
      const double limit = std::sqrt(3.0 * variance);
      return Affine(scope, s, RandomUniform(s, dims, options.dtype, Seeds(options)), 2 * limit,
                    -limit, options.dtype);
    }
    case InitDistribution::kTruncatedNormal:
      return Affine(scope, s, TruncatedNormal(s, dims, options.dtype, Seeds(options)),
                    std::sqrt(variance) / kTruncatedNormalStddev, 0, options.dtype);
    case InitDistribution::kUntruncatedNormal:
      return Affine(scope, s, RandomStandardNormal(s, dims, options.dtype, Seeds(options)),
                    std::sqrt(variance), 0, options.dtype);
  }
  return Output();
}

Output GlorotUniform(const Scope& scope, const TensorShape& shape,
                     const InitializerOptions& options) {
  return VarianceScaling(scope, shape, 1.0, FanMode::kFanAvg, InitDistribution::kUniform, options);
}

Output GlorotNormal(const Scope& scope, const TensorShape& shape,
                    const InitializerOptions& options) {
  return VarianceScaling(scope, shape, 1.0, FanMode::kFanAvg, InitDistribution::kTruncatedNormal,
                         options);
}

Output HeNormal(const Scope& scope, const TensorShape& shape, const InitializerOptions& options) {
  return VarianceScaling(scope, shape, 2.0, FanMode::kFanIn, InitDistribution::kTruncatedNormal,
                         options);
}

Output HeUniform(const Scope& scope, const TensorShape& shape, const InitializerOptions& options) {
  return VarianceScaling(scope, shape, 2.0, FanMode::kFanIn, InitDistribution::kUniform, options);
}

Output LecunNormal(const Scope& scope, const TensorShape& shape,
                   const InitializerOptions& options) {
  return VarianceScaling(scope, shape, 1.0, FanMode::kFanIn, InitDistribution::kTruncatedNormal,
                         options);
}

Output LecunUniform(const Scope& scope, const TensorShape& shape,
                    const InitializerOptions& options) {
  return VarianceScaling(scope, shape, 1.0, FanMode::kFanIn, InitDistribution::kUniform, options);
}

Output UniformInitializer(const Scope& scope, const TensorShape& shape, double minval,
                          double maxval, const InitializerOptions& options) {
  if (!CheckFloating(scope, "UniformInitializer", options.dtype)) return Output();
  if (!(minval < maxval)) {
    scope.UpdateStatus(errors::InvalidArgument("UniformInitializer: need minval < maxval, got ",
                                               minval, " and ", maxval));
    return Output();
  }
  const Scope s = scope.NewSubScope("uniform_initializer");
  return Affine(scope, s, RandomUniform(s, ShapeConst(s, shape), options.dtype, Seeds(options)),
                maxval - minval, minval, options.dtype);
}

Output NormalInitializer(const Scope& scope, const TensorShape& shape, double mean, double stddev,
                         const InitializerOptions& options) {
  if (!CheckFloating(scope, "NormalInitializer", options.dtype)) return Output();
  const Scope s = scope.NewSubScope("normal_initializer");
  return Affine(scope, s,
                RandomStandardNormal(s, ShapeConst(s, shape), options.dtype, Seeds(options)),
                stddev, mean, options.dtype);
}

Output TruncatedNormalInitializer(const Scope& scope, const TensorShape& shape, double mean,
                                  double stddev, const InitializerOptions& options) {
  if (!CheckFloating(scope, "TruncatedNormalInitializer", options.dtype)) return Output();
  const Scope s = scope.NewSubScope("truncated_normal_initializer");
  return Affine(scope, s, TruncatedNormal(s, ShapeConst(s, shape), options.dtype, Seeds(options)),
                stddev, mean, options.dtype);
}

Output Constant(const Scope& scope, const TensorShape& shape, double value, DataType dtype) {
  if (!scope.ok()) return Output();
  const Tensor v = ScalarOf(dtype, value);
  if (v.dtype() == DT_INVALID) {
    scope.UpdateStatus(errors::InvalidArgument("Constant: dtype must be numeric or bool, got ",
                                               DataTypeString(dtype)));
    return Output();
  }
  const Scope s = scope.NewSubScope("constant");
  return Fill(scope, ShapeConst(s, shape), Const(s, v));
}

Output Zeros(const Scope& scope, const TensorShape& shape, DataType dtype) {
  return Constant(scope, shape, 0, dtype);
}

Output Ones(const Scope& scope, const TensorShape& shape, DataType dtype) {
  return Constant(scope, shape, 1, dtype);
}

}  // namespace recflow::ops
