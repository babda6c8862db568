// CPU kernels for joining and splitting: ConcatV2, ConcatOffset, Pack,
// Split, SplitV, Unpack, Tile.
//
// Concatenation views every input as [outer, inner_i] rows (outer = the
// product of the dimensions before the axis) and moves contiguous runs with
// memcpy, sharded over the output so even a single long row is split across
// the pool. Splitting is the reverse; when nothing precedes the axis (outer
// == 1) each output is a view of the input's buffer (no copy).
#include <functional>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/array_copy.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

using array_kernels::CanonicalAxis;
using array_kernels::CheckCopyType;
using array_kernels::CopyTypes;
using array_kernels::DispatchCopyType;
using array_kernels::IndexScalar;
using array_kernels::IndexTypes;
using array_kernels::IndexVector;
using kernels::ParallelRange;
using array_kernels::VecString;

// out[r, :] = concat(inputs[k][r, :] for k) where input k is [outer, inner[k]].
void ConcatRows(OpKernelContext* ctx, const std::vector<const Tensor*>& inputs,
                int64_t outer, const std::vector<int64_t>& inner, Tensor* out) {
  std::vector<int64_t> prefix(inputs.size() + 1, 0);
  for (size_t k = 0; k < inputs.size(); ++k)
    prefix[k + 1] = prefix[k] + inner[k];
  const int64_t row = prefix.back();
  const int64_t n = outer * row;
  if (n == 0) return;
  DispatchCopyType(out->dtype(), [&]<typename U>() {
    U* dst = reinterpret_cast<U*>(out->raw_data());
    if (outer >= 64) {
      // Many output rows (a batch): whole rows per shard, each input's
      // piece at its fixed column, no search per piece.
      ParallelRange(ctx, outer, array_kernels::CopyCost<U>(row) + 1,
                    [&](int64_t begin, int64_t end) {
                      for (int64_t r = begin; r < end; ++r) {
                        U* d = dst + r * row;
                        for (size_t k = 0; k < inputs.size(); ++k) {
                          const U* src = reinterpret_cast<const U*>(inputs[k]->raw_data());
                          array_kernels::CopyRow(src + r * inner[k], inner[k], d + prefix[k]);
                        }
                      }
                    });
      return;
    }
    ParallelRange(
        ctx, n, array_kernels::CopyCost<U>(1), [&](int64_t begin, int64_t end) {
          int64_t pos = begin;
          while (pos < end) {
            const int64_t r = pos / row, col = pos % row;
            const size_t k =
                std::upper_bound(prefix.begin(), prefix.end(), col) -
                prefix.begin() - 1;
            const int64_t off = col - prefix[k];
            const int64_t count = std::min(inner[k] - off, end - pos);
            const U* src = reinterpret_cast<const U*>(inputs[k]->raw_data());
            std::copy_n(src + r * inner[k] + off, count, dst + pos);
            pos += count;
          }
        });
  });
}

class ConcatV2Op : public OpKernel {
 public:
  explicit ConcatV2Op(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(CheckCopyType("ConcatV2", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs() - 1;
    auto axis_value = IndexScalar(ctx->input(n), "axis");
    OP_REQUIRES_OK(ctx, axis_value.status());
    const Tensor& first = ctx->input(0);
    OP_REQUIRES(ctx, first.dims() > 0,
                errors::InvalidArgument(
                    "cannot concatenate scalars (value 0 has shape ",
                    first.shape().DebugString(), "); use Pack"));
    auto axis = CanonicalAxis(*axis_value, first.dims(), "axis");
    OP_REQUIRES_OK(ctx, axis.status());
    TensorShape out_shape = first.shape();
    int64_t total = 0;
    std::vector<const Tensor*> inputs;
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx->input(i);
      bool ok = t.dims() == first.dims();
      for (int d = 0; ok && d < t.dims(); ++d)
        ok = d == *axis || t.dim_size(d) == first.dim_size(d);
      OP_REQUIRES(ctx, ok,
                  errors::InvalidArgument(
                      "value ", i, " has shape ", t.shape().DebugString(),
                      " but value 0 has shape ", first.shape().DebugString(),
                      "; all dimensions except axis ", *axis, " must match"));
      total += t.dim_size(*axis);
      inputs.push_back(&t);
    }
    out_shape.set_dim(*axis, total);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    int64_t outer = 1;
    for (int d = 0; d < *axis; ++d) outer *= first.dim_size(d);
    std::vector<int64_t> inner;
    for (const Tensor* t : inputs)
      inner.push_back(outer == 0 ? 0 : t->NumElements() / outer);
    ConcatRows(ctx, inputs, outer, inner, out);
  }
};

class PackOp : public OpKernel {
 public:
  explicit PackOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("axis", &axis_));
    c->SetStatus(CheckCopyType("Pack", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs();
    const Tensor& first = ctx->input(0);
    auto axis = CanonicalAxis(axis_, first.dims() + 1, "axis");
    OP_REQUIRES_OK(ctx, axis.status());
    std::vector<const Tensor*> inputs;
    for (int i = 0; i < n; ++i) {
      OP_REQUIRES(
          ctx, ctx->input(i).shape() == first.shape(),
          errors::InvalidArgument(
              "value ", i, " has shape ", ctx->input(i).shape().DebugString(),
              " but value 0 has shape ", first.shape().DebugString(),
              "; all values must have the same shape"));
      inputs.push_back(&ctx->input(i));
    }
    TensorShape out_shape = first.shape();
    out_shape.InsertDim(*axis, n);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    int64_t outer = 1;
    for (int d = 0; d < *axis; ++d) outer *= first.dim_size(d);
    const int64_t inner = outer == 0 ? 0 : first.NumElements() / outer;
    ConcatRows(ctx, inputs, outer, std::vector<int64_t>(n, inner), out);
  }

 private:
  int64_t axis_ = 0;
};

// Splits `value` along `axis` into parts of `sizes`; output i gets
// out_shapes[i] (the part's shape, or that with the axis dropped for
// Unpack).
void SplitInto(OpKernelContext* ctx, const Tensor& value, int axis,
               const std::vector<int64_t>& sizes,
               const std::vector<TensorShape>& out_shapes) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= value.dim_size(d);
  for (int d = axis + 1; d < value.dims(); ++d) inner *= value.dim_size(d);
  const int64_t dim = value.dim_size(axis);
  if (outer >= 64 && sizes.size() > 1) {
    // Many rows (a batch): allocate every output, then one pass over the
    // input's rows, each shard moving its rows' pieces to all outputs.
    std::vector<char*> outs(sizes.size());
    std::vector<int64_t> starts(sizes.size());
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(static_cast<int>(i), out_shapes[i], &out));
      outs[i] = out->raw_data();
      starts[i] = start;
      start += sizes[i];
    }
    DispatchCopyType(value.dtype(), [&]<typename U>() {
      const U* src = reinterpret_cast<const U*>(value.raw_data());
      ParallelRange(ctx, outer, array_kernels::CopyCost<U>(dim * inner) + 1,
                    [&](int64_t begin, int64_t end) {
                      for (int64_t r = begin; r < end; ++r) {
                        const U* row = src + r * dim * inner;
                        for (size_t i = 0; i < sizes.size(); ++i) {
                          const int64_t n = sizes[i] * inner;
                          array_kernels::CopyRow(row + starts[i] * inner, n,
                                                 reinterpret_cast<U*>(outs[i]) + r * n);
                        }
                      }
                    });
    });
    return;
  }
  int64_t start = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t size = sizes[i];
    if (outer == 1 && size * inner > 0) {
      // Contiguous in the input: share its buffer.
      const Tensor rows = value.Reshaped(TensorShape({dim, inner})).value();
      ctx->set_output(
          static_cast<int>(i),
          rows.Slice(start, start + size).Reshaped(out_shapes[i]).value());
    } else {
      Tensor* out = nullptr;
      OP_REQUIRES_OK(
          ctx, ctx->allocate_output(static_cast<int>(i), out_shapes[i], &out));
      const int64_t dims[] = {outer, size * inner};
      const int64_t src_strides[] = {dim * inner, 1},
                    dst_strides[] = {size * inner, 1};
      const auto plan =
          array_kernels::MakeCopyPlan(dims, src_strides, dst_strides);
      DispatchCopyType(value.dtype(), [&]<typename U>() {
        array_kernels::StridedCopy<U>(
            ctx, plan,
            reinterpret_cast<const U*>(value.raw_data()) + start * inner,
            reinterpret_cast<U*>(out->raw_data()));
      });
    }
    start += size;
  }
}

class SplitOp : public OpKernel {
 public:
  explicit SplitOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(CheckCopyType("Split", input_type(1)));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(1);
    auto axis_value = IndexScalar(ctx->input(0), "split_dim");
    OP_REQUIRES_OK(ctx, axis_value.status());
    auto axis = CanonicalAxis(*axis_value, value.dims(), "split_dim");
    OP_REQUIRES_OK(ctx, axis.status());
    const int n = num_outputs();
    const int64_t dim = value.dim_size(*axis);
    OP_REQUIRES(
        ctx, dim % n == 0,
        errors::InvalidArgument("cannot split dimension ", *axis, " of shape ",
                                value.shape().DebugString(), " (size ", dim,
                                ") into ", n, " equal parts"));
    TensorShape shape = value.shape();
    shape.set_dim(*axis, dim / n);
    SplitInto(ctx, value, *axis, std::vector<int64_t>(n, dim / n),
              std::vector<TensorShape>(n, shape));
  }
};

class SplitVOp : public OpKernel {
 public:
  explicit SplitVOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(CheckCopyType("SplitV", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(0);
    auto sizes = IndexVector(ctx->input(1), "size_splits");
    OP_REQUIRES_OK(ctx, sizes.status());
    auto axis_value = IndexScalar(ctx->input(2), "split_dim");
    OP_REQUIRES_OK(ctx, axis_value.status());
    auto axis = CanonicalAxis(*axis_value, value.dims(), "split_dim");
    OP_REQUIRES_OK(ctx, axis.status());
    const int n = num_outputs();
    OP_REQUIRES(ctx, static_cast<int>(sizes->size()) == n,
                errors::InvalidArgument("size_splits ", VecString(*sizes),
                                        " has ", sizes->size(),
                                        " entries but num_split is ", n));
    const int64_t dim = value.dim_size(*axis);
    int infer = -1;
    int64_t sum = 0;
    for (int i = 0; i < n; ++i) {
      const int64_t s = (*sizes)[i];
      OP_REQUIRES(
          ctx, s >= -1 && !(s == -1 && infer >= 0),
          errors::InvalidArgument("size_splits ", VecString(*sizes),
                                  ": sizes must be >= 0 with at most one -1"));
      if (s == -1) {
        infer = i;
      } else {
        sum += s;
      }
    }
    OP_REQUIRES(
        ctx, infer >= 0 ? sum <= dim : sum == dim,
        errors::InvalidArgument(
            "size_splits ", VecString(*sizes), " do not add up to dimension ",
            *axis, " of shape ", value.shape().DebugString(), " (", dim, ")"));
    if (infer >= 0) (*sizes)[infer] = dim - sum;
    std::vector<TensorShape> shapes(n, value.shape());
    for (int i = 0; i < n; ++i) shapes[i].set_dim(*axis, (*sizes)[i]);
    SplitInto(ctx, value, *axis, *sizes, shapes);
  }
};

class UnpackOp : public OpKernel {
 public:
  explicit UnpackOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("axis", &axis_));
    c->SetStatus(CheckCopyType("Unpack", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(0);
    auto axis = CanonicalAxis(axis_, value.dims(), "axis");
    OP_REQUIRES_OK(ctx, axis.status());
    const int n = num_outputs();
    OP_REQUIRES(
        ctx, value.dim_size(*axis) == n,
        errors::InvalidArgument("cannot unpack dimension ", *axis, " of shape ",
                                value.shape().DebugString(), " into num = ", n,
                                " tensors"));
    TensorShape shape = value.shape();
    shape.RemoveDim(*axis);
    SplitInto(ctx, value, *axis, std::vector<int64_t>(n, 1),
              std::vector<TensorShape>(n, shape));
  }

 private:
  int64_t axis_ = 0;
};

class TileOp : public OpKernel {
 public:
  explicit TileOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(CheckCopyType("Tile", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    auto multiples = IndexVector(ctx->input(1), "multiples");
    OP_REQUIRES_OK(ctx, multiples.status());
    const int rank = in.dims();
    OP_REQUIRES(ctx, static_cast<int>(multiples->size()) == rank,
                errors::InvalidArgument("multiples ", VecString(*multiples),
                                        " has ", multiples->size(),
                                        " entries but the input has shape ",
                                        in.shape().DebugString()));
    std::vector<int64_t> out_dims(rank);
    bool identity = true;
    for (int i = 0; i < rank; ++i) {
      const int64_t m = (*multiples)[i];
      OP_REQUIRES(ctx, m >= 0,
                  errors::InvalidArgument("multiples ", VecString(*multiples),
                                          " has a negative entry"));
      identity = identity && m == 1;
      out_dims[i] = in.dim_size(i) * m;
    }
    if (identity) {
      ctx->set_output(0, in);
      return;
    }
    auto out_shape = TensorShape::Build(out_dims);
    OP_REQUIRES_OK(ctx, out_shape.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *out_shape, &out));
    if (out->NumElements() == 0) return;
    DispatchCopyType(in.dtype(), [&]<typename U>() {
      TileInto<U>(ctx, reinterpret_cast<const U*>(in.raw_data()),
                  in.shape().dim_sizes(), *multiples,
                  reinterpret_cast<U*>(out->raw_data()));
    });
  }

 private:
  // Writes the tiled output block by block, innermost dimension first: an
  // input row becomes m contiguous copies of itself, then each finished
  // block of dimension k is copied m_k - 1 more times after itself. Every
  // output element is written once, by contiguous copies (a broadcast such
  // as [B, 1, 1] -> [B, 27, 16] is a fill and 26 short copies per row,
  // where an element-wise strided copy was 6x slower). Sharded over the
  // outermost input dimension.
  template <typename U>
  static void TileInto(OpKernelContext* ctx, const U* in,
                       absl::Span<const int64_t> dims,
                       const std::vector<int64_t>& multiples, U* out) {
    const int rank = static_cast<int>(dims.size());
    // block[k]: output elements per index of dimension k - 1 (the size of
    // the tiled dims k..rank-1); in_stride[k]: input elements per index of k.
    std::vector<int64_t> block(rank + 1, 1), in_stride(rank + 1, 1);
    for (int k = rank - 1; k >= 0; --k) {
      block[k] = block[k + 1] * dims[k] * multiples[k];
      in_stride[k] = in_stride[k + 1] * dims[k];
    }
    // Fills the output block of dims k.. for the input block at `src`.
    std::function<void(int, const U*, U*)> fill = [&](int k, const U* src, U* dst) {
      const int64_t d = dims[k], m = multiples[k];
      if (k == rank - 1) {
        if (d == 1) {
          std::fill_n(dst, m, *src);
        } else {
          for (int64_t t = 0; t < m; ++t) array_kernels::CopyRow(src, d, dst + t * d);
        }
        return;
      }
      for (int64_t i = 0; i < d; ++i) fill(k + 1, src + i * in_stride[k + 1], dst + i * block[k + 1]);
      const int64_t tile = d * block[k + 1];
      for (int64_t t = 1; t < m; ++t) array_kernels::CopyRow(dst, tile, dst + t * tile);
    };
    const int64_t d0 = dims[0], m0 = multiples[0];
    if (rank == 1) {
      fill(0, in, out);
      return;
    }
    // Each index of dimension 0 owns out[i * block[1], (i + 1) * block[1]).
    kernels::ParallelRange(
        ctx, d0, array_kernels::CopyCost<U>(block[1]), [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) fill(1, in + i * in_stride[1], out + i * block[1]);
        });
    // Then the whole first tile of dimension 0 repeats m0 - 1 times.
    const int64_t tile = d0 * block[1];
    kernels::ParallelRange(
        ctx, m0 - 1, array_kernels::CopyCost<U>(tile),
        [&](int64_t b, int64_t e) {
          for (int64_t t = b + 1; t < e + 1; ++t) array_kernels::CopyRow(out, tile, out + t * tile);
        });
  }
};

template <typename T>
class ConcatOffsetOp : public OpKernel {
 public:
  explicit ConcatOffsetOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    auto axis_value = IndexScalar(ctx->input(0), "concat_dim");
    OP_REQUIRES_OK(ctx, axis_value.status());
    const int n = ctx->num_inputs() - 1;
    auto first = IndexVector(ctx->input(1), "shape 0");
    OP_REQUIRES_OK(ctx, first.status());
    auto axis = CanonicalAxis(*axis_value, static_cast<int>(first->size()),
                              "concat_dim");
    OP_REQUIRES_OK(ctx, axis.status());
    int64_t offset = 0;
    for (int i = 0; i < n; ++i) {
      auto shape = IndexVector(ctx->input(i + 1), "shape");
      OP_REQUIRES_OK(ctx, shape.status());
      bool ok = shape->size() == first->size();
      for (size_t d = 0; ok && d < shape->size(); ++d) {
        ok = static_cast<int>(d) == *axis || (*shape)[d] == (*first)[d];
      }
      OP_REQUIRES(
          ctx, ok,
          errors::InvalidArgument("shape ", i, " ", VecString(*shape),
                                  " does not match shape 0 ", VecString(*first),
                                  " outside concat_dim ", *axis));
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx,
                     ctx->allocate_output(i, ctx->input(i + 1).shape(), &out));
      T* o = out->data<T>();
      std::fill_n(o, shape->size(), T(0));
      o[*axis] = static_cast<T>(offset);
      offset += (*shape)[*axis];
    }
  }
};

#define RECFLOW_REGISTER_COPY_KERNEL_(OP, CLS) \
  REGISTER_KERNEL_BUILDER(                     \
      Name(OP).Device(DEVICE_CPU).TypeConstraint("T", CopyTypes()), CLS)
RECFLOW_REGISTER_COPY_KERNEL_("Pack", PackOp);
RECFLOW_REGISTER_COPY_KERNEL_("Split", SplitOp);
RECFLOW_REGISTER_COPY_KERNEL_("Unpack", UnpackOp);
#undef RECFLOW_REGISTER_COPY_KERNEL_
REGISTER_KERNEL_BUILDER(Name("ConcatV2")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("T", CopyTypes())
                            .TypeConstraint("Tidx", IndexTypes()),
                        ConcatV2Op);
REGISTER_KERNEL_BUILDER(Name("SplitV")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("T", CopyTypes())
                            .TypeConstraint("Tlen", IndexTypes()),
                        SplitVOp);
REGISTER_KERNEL_BUILDER(Name("Tile")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("T", CopyTypes())
                            .TypeConstraint("Tmultiples", IndexTypes()),
                        TileOp);
REGISTER_KERNEL_BUILDER(Name("ConcatOffset")
                            .Device(DEVICE_CPU)
                            .TypeConstraint<int32_t>("shape_type"),
                        ConcatOffsetOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("ConcatOffset")
                            .Device(DEVICE_CPU)
                            .TypeConstraint<int64_t>("shape_type"),
                        ConcatOffsetOp<int64_t>);

}  // namespace
}  // namespace recflow
