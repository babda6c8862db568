// Builder helpers for the reduction op family (definitions in
// reduction_ops.cc): Sum, Mean, Max, Min, Prod over a set of axes, and
// ArgMax / ArgMin along one axis. Names and attrs are TensorFlow's.
//
//   Output total = ops::Sum(scope, x, {0, -1});                 // axes as ints
//   Output mean = ops::Mean(scope, x, axes, {.keep_dims = true});  // axes an Output
//
// Axes may be negative (counted from the end, as in NumPy); an empty axes
// list reduces nothing. Each helper returns an invalid Output and records
// the error in the scope when the scope has failed or the op cannot be
// built.
#ifndef RECFLOW_OPS_REDUCTION_OPS_H_
#define RECFLOW_OPS_REDUCTION_OPS_H_

#include <initializer_list>
#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

struct ReductionAttrs {
  // Keep each reduced dimension with size 1 instead of dropping it.
  bool keep_dims = false;
};
using SumAttrs = ReductionAttrs;
using MeanAttrs = ReductionAttrs;
using MaxAttrs = ReductionAttrs;
using MinAttrs = ReductionAttrs;
using ProdAttrs = ReductionAttrs;

// `axes` is an int32 or int64 scalar or vector; the overloads taking ints
// make an int32 Const of them. (The initializer_list overloads keep a call
// such as Sum(s, x, {0}) unambiguous.)
#define RECFLOW_DECLARE_REDUCTION_(OP)                                                        \
  Output OP(const Scope& scope, Output input, Output axes, const ReductionAttrs& attrs = {}); \
  Output OP(const Scope& scope, Output input, const std::vector<int>& axes,                  \
            const ReductionAttrs& attrs = {});                                               \
  Output OP(const Scope& scope, Output input, std::initializer_list<int> axes,               \
            const ReductionAttrs& attrs = {})

// The sum of the elements along `axes`.
RECFLOW_DECLARE_REDUCTION_(Sum);
// The mean (integer types: sum / count, truncated).
RECFLOW_DECLARE_REDUCTION_(Mean);
// The maximum; -inf (or the type's lowest value) over an empty axis.
RECFLOW_DECLARE_REDUCTION_(Max);
// The minimum; +inf (or the type's highest value) over an empty axis.
RECFLOW_DECLARE_REDUCTION_(Min);
// The product.
RECFLOW_DECLARE_REDUCTION_(Prod);

#undef RECFLOW_DECLARE_REDUCTION_

struct ArgMaxAttrs {
  // DT_INT32 or DT_INT64.
  DataType output_type = DT_INT64;
};
using ArgMinAttrs = ArgMaxAttrs;

// The index of the largest value along `dimension` (a scalar int32/int64;
// negative counts from the end); the first one among ties.
Output ArgMax(const Scope& scope, Output input, Output dimension, const ArgMaxAttrs& attrs = {});
Output ArgMax(const Scope& scope, Output input, int dimension, const ArgMaxAttrs& attrs = {});
// As ArgMax, for the smallest value.
Output ArgMin(const Scope& scope, Output input, Output dimension, const ArgMinAttrs& attrs = {});
Output ArgMin(const Scope& scope, Output input, int dimension, const ArgMinAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_REDUCTION_OPS_H_
