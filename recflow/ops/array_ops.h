// Builder helpers for the array op family (definitions in array_ops.cc and
// array_index_ops.cc). Op names, inputs and attrs are TensorFlow's. Each
// helper returns an invalid Output (helpers with several outputs: a vector
// of invalid Outputs of the promised length) and records the error in the
// scope when the scope has failed or the op cannot be built.
//
// Integer inputs (shapes, axes, begin/size, multiples, ...) may be int32 or
// int64 tensors; when they come from a Const the shape function uses their
// values, so the result's static shape stays known:
//
//   Output flat = ops::Reshape(s, x, ops::Const(s, {-1, 64},
//   TensorShape({2})));  // [?,64] Output y = ops::Transpose(s, flat,
//   ops::Const(s, {1, 0}, TensorShape({2})));
//
// Reshape, ExpandDims, Squeeze and Identity never copy: the output shares
// the input's buffer.
#ifndef RECFLOW_OPS_ARRAY_OPS_H_
#define RECFLOW_OPS_ARRAY_OPS_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "recflow/core/tensor.h"
#include "recflow/framework/scope.h"

namespace recflow::ops {

// A constant holding `value`.
Output Const(const Scope& scope, const Tensor& value);
template <typename T>
Output Const(const Scope& scope, T scalar) {
  return Const(scope, Tensor::Scalar<T>(scalar));
}
template <typename T>
Output Const(const Scope& scope, std::initializer_list<T> values,
             const TensorShape& shape) {
  return Const(scope, Tensor::FromVector<T>(values, shape));
}

// A value that must be fed. `shape` may be partial (the default: unknown).
Output Placeholder(const Scope& scope, DataType dtype,
                   const PartialShape& shape = {});
// `input` unless fed.
Output PlaceholderWithDefault(const Scope& scope, Output input,
                              const PartialShape& shape);
Output Identity(const Scope& scope, Output input);
// Zeros / ones with x's shape and dtype.
Output ZerosLike(const Scope& scope, Output x);
Output OnesLike(const Scope& scope, Output x);
// Does nothing; a target that groups control dependencies.
Output NoOp(const Scope& scope);

// --- Shapes and reshaping.

// The shape of `input` as a vector; out_type DT_INT32 or DT_INT64.
Output Shape(const Scope& scope, Output input, DataType out_type = DT_INT32);
// The element count of `input` as a scalar; out_type DT_INT32 or DT_INT64.
Output Size(const Scope& scope, Output input, DataType out_type = DT_INT32);
// The rank of `input` as an int32 scalar.
Output Rank(const Scope& scope, Output input);
// `tensor` viewed with `shape` (a vector; one entry may be -1 and is
// inferred). Fails, naming both shapes, when the element counts differ.
Output Reshape(const Scope& scope, Output tensor, Output shape);
// Inserts a dimension of size 1 at `dim` (a scalar; negative counts from the
// end: -1 appends).
Output ExpandDims(const Scope& scope, Output input, Output dim);
// Removes the size-1 dimensions listed in `squeeze_dims` (TF attr name;
// negative counts from the end), or all size-1 dimensions when it is empty.
Output Squeeze(const Scope& scope, Output input,
               std::vector<int64_t> squeeze_dims = {});
// Permutes dimensions: y.shape[i] = x.shape[perm[i]].
Output Transpose(const Scope& scope, Output x, Output perm);
// y[x[i]] = i for a permutation x (int32 or int64 vector).
Output InvertPermutation(const Scope& scope, Output x);

// --- Joining and splitting.

// Concatenates two or more `values` along `axis` (scalar; negative counts
// from the end).
Output ConcatV2(const Scope& scope, std::vector<Output> values, Output axis);
// For each shape vector in `shapes`, the offset where that input starts in a
// concatenation along `concat_dim` (int32 scalar). Used by ConcatV2's
// gradient.
std::vector<Output> ConcatOffset(const Scope& scope, Output concat_dim,
                                 std::vector<Output> shapes);
// Splits `value` into `num_split` equal parts along `axis` (an int32
// scalar; TF's argument order: axis first).
std::vector<Output> Split(const Scope& scope, Output axis, Output value,
                          int64_t num_split);
// Splits `value` along `axis` (int32 scalar) into parts of the sizes in
// `size_splits` (one may be -1: the rest).
std::vector<Output> SplitV(const Scope& scope, Output value, Output size_splits,
                           Output axis, int64_t num_split);
// Stacks same-shaped `values` along a new dimension `axis`.
Output Pack(const Scope& scope, std::vector<Output> values, int64_t axis = 0);
// Unstacks `value` along `axis` into `num` tensors.
std::vector<Output> Unpack(const Scope& scope, Output value, int64_t num,
                           int64_t axis = 0);
// Repeats `input` multiples[i] times along each dimension i.
Output Tile(const Scope& scope, Output input, Output multiples);
// Pads with zeros; `paddings` is [rank, 2]: before and after each dimension.
Output Pad(const Scope& scope, Output input, Output paddings);

// --- Slicing.

// input[begin[i] : begin[i] + size[i]] along each dimension; size -1 means
// to the end.
Output Slice(const Scope& scope, Output input, Output begin, Output size);

// Masks of StridedSlice (TF's): bit i refers to entry i of begin/end/strides.
struct StridedSliceAttrs {
  int64_t begin_mask =
      0;  // ignore begin[i]: start at the first (last, stride < 0)
  int64_t end_mask = 0;  // ignore end[i]: run to the end (start, stride < 0)
  int64_t ellipsis_mask = 0;  // entry i is `...` (at most one bit)
  int64_t new_axis_mask = 0;  // entry i inserts a dimension of size 1
  int64_t shrink_axis_mask =
      0;  // entry i indexes begin[i] and drops the dimension
};
// NumPy-style input[b0:e0:s0, ...]; negative begin/end count from the end;
// strides may be negative (but not zero).
Output StridedSlice(const Scope& scope, Output input, Output begin, Output end,
                    Output strides, const StridedSliceAttrs& attrs = {});
// Zeros of `shape` with dy written where StridedSlice(x of that shape, ...)
// read from.
Output StridedSliceGrad(const Scope& scope, Output shape, Output begin,
                        Output end, Output strides, Output dy,
                        const StridedSliceAttrs& attrs = {});

// --- Creating.

// A tensor of shape `dims` (a vector) filled with the scalar `value`.
Output Fill(const Scope& scope, Output dims, Output value);
// start, start + delta, ... up to (not including) limit; scalars of one
// dtype (int32, int64, float, double).
Output Range(const Scope& scope, Output start, Output limit, Output delta);
// One-hot encoding of `indices` with a new dimension of size `depth` (int32
// scalar) at `axis` (-1: last). Out-of-range indices give all off_value.
Output OneHot(const Scope& scope, Output indices, Output depth, Output on_value,
              Output off_value, int64_t axis = -1);

// --- Gathering and scattering.

// Slices of `params` at `indices` along `axis` (scalar): output shape is
// params.shape[:axis] + indices.shape + params.shape[axis+1:]. batch_dims is
// always 0. An index outside [0, params.shape[axis]) is an error.
Output GatherV2(const Scope& scope, Output params, Output indices, Output axis);
// Slices of `params` addressed by the last dimension of `indices`: output
// shape is indices.shape[:-1] + params.shape[indices.shape[-1]:].
Output GatherNd(const Scope& scope, Output params, Output indices);
// Zeros of `shape` with `updates` added at `indices` (duplicates summed);
// the inverse of GatherNd.
Output ScatterNd(const Scope& scope, Output indices, Output updates,
                 Output shape);
// output[i, ...] = sum of data[j..., ...] over the positions j... where
// segment_ids[j...] == i; output shape [num_segments] +
// data.shape[segment_ids.rank:]. Negative ids are dropped; ids >=
// num_segments are an error.
Output UnsortedSegmentSum(const Scope& scope, Output data, Output segment_ids,
                          Output num_segments);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_ARRAY_OPS_H_
