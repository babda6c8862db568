// Kernel tests for the indexing array ops: Slice, StridedSlice(+Grad), Pad,
// GatherV2, GatherNd, ScatterNd, UnsortedSegmentSum, each against a plain
// reference on random shapes, values and specs (fixed seeds), single- and
// multi-threaded, plus bad-input errors. StridedSlice's random specs also
// check that the shape function (ops/) and the kernel agree on the output
// shape.
#include "recflow/kernels/testing/array_kernels_util.h"
#include "recflow/ops/array_ops.h"

namespace recflow {
namespace {

using array_test::ForEachIndex;
using array_test::FromSourceIndex;
using array_test::I32;
using array_test::I64;
using array_test::Random;
using array_test::RandomShape;
using array_test::RunGraph;
using array_test::RunOne;
using array_test::Strides;
using testing::HasSubstr;

const DataType kTypes[] = {DT_FLOAT, DT_DOUBLE,     DT_INT64,  DT_UINT8,
                           DT_HALF,  DT_COMPLEX128, DT_STRING, DT_INT32};

TEST(ArrayIndexKernelsTest, SliceMatchesReference) {
  std::mt19937 rng(21);
  for (int threads : {1, 2}) {
    for (int k = 0; k < 40; ++k) {
      const DataType dt = kTypes[k % std::size(kTypes)];
      const bool big = k % 10 == 0 && dt == DT_FLOAT;
      const TensorShape shape =
          big ? TensorShape({400, 300}) : RandomShape(&rng, k % 5, 6);
      std::vector<int64_t> begin, size;
      for (int d = 0; d < shape.dims(); ++d) {
        const int64_t dim = shape.dim_size(d);
        begin.push_back(static_cast<int64_t>(rng() % (dim + 1)));
        const int64_t s =
            static_cast<int64_t>(rng() % (dim - begin.back() + 1));
        size.push_back(rng() % 4 == 0 ? -1 : s);
      }
      const Tensor x = Random(dt, shape, &rng);
      auto got = RunOne(
          {x, I64(begin), I64(size)},
          [](const Scope& s, std::vector<Output> in) {
            return ops::Slice(s, in[0], in[1], in[2]);
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      TensorShape out_shape;
      for (int d = 0; d < shape.dims(); ++d) {
        out_shape.AddDim(size[d] == -1 ? shape.dim_size(d) - begin[d]
                                       : size[d]);
      }
      const auto xs = Strides(shape);
      std::vector<int64_t> src;
      ForEachIndex(out_shape, [&](const std::vector<int64_t>& i) {
        int64_t off = 0;
        for (int d = 0; d < shape.dims(); ++d) off += (begin[d] + i[d]) * xs[d];
        src.push_back(off);
      });
      EXPECT_TRUE(TensorsEqual(*got, FromSourceIndex(x, src, out_shape)))
          << DataTypeString(dt) << " " << shape.DebugString() << " begin "
          << absl::StrJoin(begin, ",") << " size " << absl::StrJoin(size, ",");
    }
  }
}

TEST(ArrayIndexKernelsTest, ContiguousSliceSharesTheBuffer) {
  std::mt19937 rng(22);
  const Tensor x = Random(DT_FLOAT, {6, 4, 3}, &rng);
  auto out = RunGraph({x}, [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{
        ops::Slice(s, in[0], ops::Const(s, {2, 0, 0}, TensorShape({3})),
                   ops::Const(s, {3, -1, -1}, TensorShape({3}))),
        ops::StridedSlice(s, in[0], ops::Const(s, {4, 1}, TensorShape({2})),
                          ops::Const(s, {0, 3}, TensorShape({2})),
                          ops::Const(s, {1, 1}, TensorShape({2})),
                          {.shrink_axis_mask = 1}),
        ops::Slice(s, in[0], ops::Const(s, {0, 1, 0}, TensorShape({3})),
                   ops::Const(s, {-1, 1, -1}, TensorShape({3})))};
  });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].SharesBufferWith(x));
  EXPECT_EQ((*out)[0].shape(), TensorShape({3, 4, 3}));
  EXPECT_EQ((*out)[0].flat<float>()[0], x.flat<float>()[24]);
  EXPECT_TRUE((*out)[1].SharesBufferWith(x));
  EXPECT_EQ((*out)[1].shape(), TensorShape({2, 3}));
  EXPECT_EQ((*out)[1].flat<float>()[5], x.flat<float>()[4 * 12 + 2 * 3 + 2]);
  EXPECT_FALSE((*out)[2].SharesBufferWith(x));  // not contiguous: copied
}

TEST(ArrayIndexKernelsTest, SliceErrors) {
  std::mt19937 rng(23);
  const Tensor x = Random(DT_FLOAT, {4, 5}, &rng);
  auto slice = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::Slice(s, in[0], in[1], in[2])};
  };
  EXPECT_THAT(
      RunGraph({x, I32({1, 2}), I32({4, 1})}, slice).status().message(),
      HasSubstr(
          "slice begin [1,2] size [4,1] is out of range for shape [4,5] at "
          "dimension 0"));
  EXPECT_THAT(
      RunGraph({x, I32({1}), I32({1})}, slice).status().message(),
      HasSubstr("must have one entry per dimension of the input [4,5]"));
}

// One entry of a NumPy-style index: a slice, an index, newaxis or `...`.
struct Entry {
  enum Kind { kSlice, kIndex, kNewAxis, kEllipsis } kind = kSlice;
  int64_t begin = 0, end = 0, stride = 1;
  bool begin_masked = false, end_masked = false;
};

// Python's slice(begin, end, stride).indices(dim), spelled out.
std::vector<int64_t> PySlice(int64_t dim, const Entry& e) {
  const int64_t s = e.stride;
  int64_t start, stop;
  if (s > 0) {
    start = e.begin_masked ? 0
                           : std::clamp(e.begin < 0 ? e.begin + dim : e.begin,
                                        int64_t{0}, dim);
    stop = e.end_masked
               ? dim
               : std::clamp(e.end < 0 ? e.end + dim : e.end, int64_t{0}, dim);
  } else {
    start = e.begin_masked ? dim - 1
                           : std::clamp(e.begin < 0 ? e.begin + dim : e.begin,
                                        int64_t{-1}, dim - 1);
    stop = e.end_masked ? -1
                        : std::clamp(e.end < 0 ? e.end + dim : e.end,
                                     int64_t{-1}, dim - 1);
  }
  std::vector<int64_t> out;
  for (int64_t i = start; s > 0 ? i < stop : i > stop; i += s) out.push_back(i);
  return out;
}

struct SliceCase {
  std::vector<Entry> entries;
  // Reference result: the selected input positions per input dimension and
  // the output shape.
  std::vector<std::vector<int64_t>> picks;
  TensorShape out_shape;
};

SliceCase RandomSliceCase(const TensorShape& shape, std::mt19937* rng) {
  SliceCase c;
  const int rank = shape.dims();
  const bool ellipsis = (*rng)() % 3 == 0;
  const int consumed = static_cast<int>((*rng)() % (rank + 1));
  std::vector<Entry> dims_entries(consumed);
  for (int i = 0; i < consumed; ++i) {
    Entry& e = dims_entries[i];
    const int64_t dim = 0;  // filled below once we know which dim it maps to
    (void)dim;
    if ((*rng)() % 4 == 0) {
      e.kind = Entry::kIndex;
    } else {
      const int64_t strides[] = {-3, -2, -1, 1, 1, 2, 3};
      e.stride = strides[(*rng)() % 7];
      e.begin_masked = (*rng)() % 4 == 0;
      e.end_masked = (*rng)() % 4 == 0;
    }
  }
  // Which input dimension each consumed entry maps to: without an ellipsis
  // the leading ones; with one, a split point decides how many go first.
  const int before =
      ellipsis ? static_cast<int>((*rng)() % (consumed + 1)) : consumed;
  std::vector<int> dim_of(consumed);
  for (int i = 0; i < consumed; ++i)
    dim_of[i] = i < before ? i : rank - (consumed - i);
  for (int i = 0; i < consumed; ++i) {
    Entry& e = dims_entries[i];
    const int64_t dim = shape.dim_size(dim_of[i]);
    if (e.kind == Entry::kIndex) {
      if (dim == 0) {  // cannot index an empty dimension
        e.kind = Entry::kSlice;
      } else {
        e.begin =
            static_cast<int64_t>((*rng)() % (2 * dim)) - dim;  // [-dim, dim)
        e.end = e.begin + 1;
        continue;
      }
    }
    e.begin = static_cast<int64_t>((*rng)() % (2 * dim + 5)) - dim - 2;
    e.end = static_cast<int64_t>((*rng)() % (2 * dim + 5)) - dim - 2;
  }
  // Assemble: entries before the ellipsis, the ellipsis, the rest; then
  // sprinkle new axes.
  for (int i = 0; i < consumed; ++i) {
    if (ellipsis && i == before) c.entries.push_back({Entry::kEllipsis});
    c.entries.push_back(dims_entries[i]);
  }
  if (ellipsis && before == consumed) c.entries.push_back({Entry::kEllipsis});
  const int new_axes = static_cast<int>((*rng)() % 3);
  for (int i = 0; i < new_axes; ++i) {
    c.entries.insert(c.entries.begin() + (*rng)() % (c.entries.size() + 1),
                     {Entry::kNewAxis});
  }
  // Reference picks and output shape, walking entries in order.
  c.picks.resize(rank);
  int next_dim = 0;
  auto whole = [&](int d) {
    c.picks[d].resize(shape.dim_size(d));
    std::iota(c.picks[d].begin(), c.picks[d].end(), 0);
    c.out_shape.AddDim(shape.dim_size(d));
  };
  for (const Entry& e : c.entries) {
    switch (e.kind) {
      case Entry::kNewAxis:
        c.out_shape.AddDim(1);
        break;
      case Entry::kEllipsis:
        while (next_dim < rank - (consumed - before)) whole(next_dim++);
        break;
      case Entry::kIndex: {
        const int64_t dim = shape.dim_size(next_dim);
        c.picks[next_dim++] = {e.begin < 0 ? e.begin + dim : e.begin};
        break;
      }
      case Entry::kSlice:
        c.picks[next_dim] = PySlice(shape.dim_size(next_dim), e);
        c.out_shape.AddDim(static_cast<int64_t>(c.picks[next_dim].size()));
        ++next_dim;
        break;
    }
  }
  while (next_dim < rank) whole(next_dim++);  // implicit trailing ellipsis
  return c;
}

// Source positions of the slice, in output order.
std::vector<int64_t> SliceSources(const TensorShape& shape,
                                  const SliceCase& c) {
  const auto xs = Strides(shape);
  TensorShape pick_shape;
  for (const auto& p : c.picks)
    pick_shape.AddDim(static_cast<int64_t>(p.size()));
  std::vector<int64_t> src;
  ForEachIndex(pick_shape, [&](const std::vector<int64_t>& i) {
    int64_t off = 0;
    for (int d = 0; d < shape.dims(); ++d) off += c.picks[d][i[d]] * xs[d];
    src.push_back(off);
  });
  return src;
}

void SpecOf(const SliceCase& c, std::vector<int64_t>* b,
            std::vector<int64_t>* e, std::vector<int64_t>* s,
            ops::StridedSliceAttrs* a) {
  for (size_t i = 0; i < c.entries.size(); ++i) {
    const Entry& x = c.entries[i];
    const int64_t bit = int64_t{1} << i;
    b->push_back(x.begin);
    e->push_back(x.end);
    s->push_back(x.stride);
    if (x.kind == Entry::kSlice) {
      if (x.begin_masked) a->begin_mask |= bit;
      if (x.end_masked) a->end_mask |= bit;
    }
    if (x.kind == Entry::kIndex) a->shrink_axis_mask |= bit;
    if (x.kind == Entry::kNewAxis) a->new_axis_mask |= bit;
    if (x.kind == Entry::kEllipsis) a->ellipsis_mask |= bit;
  }
}

TEST(ArrayIndexKernelsTest, StridedSliceAndGradMatchReference) {
  std::mt19937 rng(24);
  for (int k = 0; k < 300; ++k) {
    const int threads = 1 + k % 2;
    const DataType dt = kTypes[k % std::size(kTypes)];
    const bool big = k % 50 == 0 && dt == DT_FLOAT;
    const TensorShape shape =
        big ? TensorShape({300, 400}) : RandomShape(&rng, k % 5, 6);
    const SliceCase c = RandomSliceCase(shape, &rng);
    std::vector<int64_t> b, e, s;
    ops::StridedSliceAttrs attrs;
    SpecOf(c, &b, &e, &s, &attrs);
    const Tensor x = Random(dt, shape, &rng);
    const std::vector<int64_t> src = SliceSources(shape, c);
    const Tensor want = FromSourceIndex(x, src, c.out_shape);
    std::string what =
        DataTypeString(dt) + " " + shape.DebugString() + " begin " +
        absl::StrJoin(b, ",") + " end " + absl::StrJoin(e, ",") + " strides " +
        absl::StrJoin(s, ",") + " masks b" + std::to_string(attrs.begin_mask) +
        " e" + std::to_string(attrs.end_mask) + " ell" +
        std::to_string(attrs.ellipsis_mask) + " new" +
        std::to_string(attrs.new_axis_mask) + " shr" +
        std::to_string(attrs.shrink_axis_mask);
    // Fed spec: the kernel alone decides; Const spec: the shape function
    // must predict the kernel's shape.
    PartialShape inferred;
    auto got = RunGraph(
        {x, I64(b), I64(e), I64(s)},
        [&](const Scope& sc, std::vector<Output> in) {
          Output fed = ops::StridedSlice(sc, in[0], in[1], in[2], in[3], attrs);
          Output known =
              ops::Placeholder(sc.WithOpName("known"), dt, PartialShape(shape));
          Output fixed = ops::StridedSlice(sc, known, ops::Const(sc, I64(b)),
                                           ops::Const(sc, I64(e)),
                                           ops::Const(sc, I64(s)), attrs);
          inferred = fixed.shape();
          // The gradient scatters dy back: with dy = the slice itself, every
          // picked position holds x's value and the rest are zero.
          Output grad =
              ops::StridedSliceGrad(sc, ops::Shape(sc, in[0], DT_INT64), in[1],
                                    in[2], in[3], fed, attrs);
          return std::vector<Output>{fed, fixed, grad};
        },
        threads, {{"known", x}});
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << what;
    EXPECT_TRUE(TensorsEqual((*got)[0], want)) << what;
    EXPECT_TRUE(TensorsEqual((*got)[1], want)) << what;
    EXPECT_EQ(inferred.DebugString(), want.shape().DebugString()) << what;
    std::vector<int64_t> back(shape.num_elements(), -1);
    for (size_t i = 0; i < src.size(); ++i) back[src[i]] = src[i];
    EXPECT_TRUE(TensorsEqual((*got)[2], FromSourceIndex(x, back, shape)))
        << "grad " << what;
  }
}

TEST(ArrayIndexKernelsTest, StridedSliceErrors) {
  std::mt19937 rng(25);
  const Tensor x = Random(DT_FLOAT, {4, 5}, &rng);
  auto ss = [](ops::StridedSliceAttrs a) {
    return [a](const Scope& s, std::vector<Output> in) {
      return std::vector<Output>{
          ops::StridedSlice(s, in[0], in[1], in[2], in[3], a)};
    };
  };
  EXPECT_THAT(RunGraph({x, I32({0, 0}), I32({1, 1}), I32({1, 0})}, ss({}))
                  .status()
                  .message(),
              HasSubstr("strides [1,0] has a 0"));
  EXPECT_THAT(
      RunGraph({x, I32({7}), I32({8}), I32({1})}, ss({.shrink_axis_mask = 1}))
          .status()
          .message(),
      HasSubstr(
          "slice index 7 of dimension 0 is out of bounds for shape [4,5]"));
  EXPECT_THAT(RunGraph({x, I32({0, 0}), I32({1, 1}), I32({1, 1})},
                       ss({.ellipsis_mask = 3}))
                  .status()
                  .message(),
              HasSubstr("more than one ellipsis"));
  EXPECT_THAT(
      RunGraph({x, I32({0, 0, 0}), I32({1, 1, 1}), I32({1, 1, 1})}, ss({}))
          .status()
          .message(),
      HasSubstr("indexes 3 dimensions but the input [4,5] has rank 2"));
  EXPECT_THAT(
      RunGraph({x, I32({0}), I32({1, 2}), I32({1})}, ss({})).status().message(),
      HasSubstr("must have the same length"));
  auto grad = RunGraph({I32({4, 5}), Random(DT_FLOAT, {2, 2}, &rng)},
                       [](const Scope& s, std::vector<Output> in) {
                         return std::vector<Output>{ops::StridedSliceGrad(
                             s, in[0], ops::Const(s, {0, 0}, TensorShape({2})),
                             ops::Const(s, {3, 3}, TensorShape({2})),
                             ops::Const(s, {1, 1}, TensorShape({2})), in[1])};
                       });
  EXPECT_THAT(
      grad.status().message(),
      HasSubstr("dy has shape [2,2] but the slice of [4,5] has shape [3,3]"));
}

TEST(ArrayIndexKernelsTest, PadMatchesReference) {
  std::mt19937 rng(26);
  for (int threads : {1, 2}) {
    for (int k = 0; k < 24; ++k) {
      const DataType dt = kTypes[k % std::size(kTypes)];
      const bool big = k % 8 == 0 && dt == DT_FLOAT;
      const TensorShape shape =
          big ? TensorShape({200, 300}) : RandomShape(&rng, k % 4, 5);
      std::vector<int64_t> pads;
      TensorShape out_shape;
      for (int d = 0; d < shape.dims(); ++d) {
        pads.push_back(rng() % 3);
        pads.push_back(rng() % 3);
        out_shape.AddDim(shape.dim_size(d) + pads[2 * d] + pads[2 * d + 1]);
      }
      const Tensor x = Random(dt, shape, &rng);
      const Tensor paddings = Tensor::FromVector<int64_t>(
          absl::MakeConstSpan(pads), TensorShape({shape.dims(), 2}));
      auto got = RunOne(
          {x, paddings},
          [](const Scope& s, std::vector<Output> in) {
            return ops::Pad(s, in[0], in[1]);
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      const auto xs = Strides(shape);
      std::vector<int64_t> src;
      ForEachIndex(out_shape, [&](const std::vector<int64_t>& i) {
        int64_t off = 0;
        for (int d = 0; d < shape.dims(); ++d) {
          const int64_t j = i[d] - pads[2 * d];
          if (j < 0 || j >= shape.dim_size(d)) {
            off = -1;
            break;
          }
          off += j * xs[d];
        }
        src.push_back(off);
      });
      EXPECT_TRUE(TensorsEqual(*got, FromSourceIndex(x, src, out_shape)))
          << DataTypeString(dt) << " " << shape.DebugString() << " pads "
          << absl::StrJoin(pads, ",");
    }
  }
  const Tensor x = Random(DT_FLOAT, {2, 3}, &rng);
  auto pad = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::Pad(s, in[0], in[1])};
  };
  EXPECT_THAT(
      RunGraph({x, Tensor::FromVector<int32_t>({1, 1}, TensorShape({1, 2}))},
               pad)
          .status()
          .message(),
      HasSubstr("paddings must have shape [2, 2] for an input of shape [2,3]"));
  EXPECT_THAT(RunGraph({x, Tensor::FromVector<int32_t>({1, -1, 0, 0},
                                                       TensorShape({2, 2}))},
                       pad)
                  .status()
                  .message(),
              HasSubstr("must be non-negative"));
}

// Element gathers along the last axis (DLRM's pair selection, big enough to
// be sharded) against a plain loop.
TEST(ArrayIndexKernelsTest, GatherV2LastAxisColumnsMatchAPlainLoop) {
  std::mt19937 rng(28);
  for (int threads : {1, 2}) {
    for (const DataType dt : {DT_FLOAT, DT_INT64, DT_STRING}) {
      const int64_t rows = dt == DT_STRING ? 50 : 2000, cols = 729;
      const Tensor params = Random(dt, TensorShape({rows, cols}), &rng);
      std::vector<int32_t> idx(351);
      for (int32_t& v : idx) v = static_cast<int32_t>(rng() % cols);
      auto got = RunOne(
          {params, Tensor::FromVector<int32_t>(absl::MakeConstSpan(idx)),
           Tensor::Scalar<int32_t>(1)},
          [](const Scope& s, std::vector<Output> in) {
            return ops::GatherV2(s, in[0], in[1], in[2]);
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->shape(), TensorShape({rows, 351}));
      Tensor want(dt, TensorShape({rows, 351}));
      DispatchPodType(dt, [&]<typename T>() {
        for (int64_t r = 0; r < rows; ++r)
          for (size_t i = 0; i < idx.size(); ++i)
            want.flat<T>()[r * 351 + i] = params.flat<T>()[r * cols + idx[i]];
      });
      if (dt == DT_STRING) {
        for (int64_t r = 0; r < rows; ++r)
          for (size_t i = 0; i < idx.size(); ++i)
            want.flat<std::string>()[r * 351 + i] = params.flat<std::string>()[r * cols + idx[i]];
      }
      EXPECT_TRUE(TensorsEqual(*got, want)) << DataTypeString(dt) << " threads " << threads;
    }
  }
}

TEST(ArrayIndexKernelsTest, GatherV2MatchesReference) {
  std::mt19937 rng(27);
  for (int threads : {1, 2}) {
    for (int k = 0; k < 32; ++k) {
      const DataType dt = kTypes[k % std::size(kTypes)];
      const bool big = k % 8 == 0 && dt == DT_FLOAT;
      const TensorShape params_shape =
          big ? TensorShape({1000, 64}) : RandomShape(&rng, 1 + k % 3, 5);
      const int axis = static_cast<int>(rng() % params_shape.dims());
      const int64_t dim = params_shape.dim_size(axis);
      const TensorShape idx_shape =
          big ? TensorShape({4000}) : RandomShape(&rng, k % 3, 4);
      Tensor indices(k % 2 ? DT_INT32 : DT_INT64, idx_shape);
      std::vector<int64_t> idx(idx_shape.num_elements());
      for (int64_t& v : idx)
        v = dim == 0 ? 0 : static_cast<int64_t>(rng() % dim);
      if (dim == 0 && !idx.empty()) continue;  // nothing valid to gather
      for (size_t i = 0; i < idx.size(); ++i) {
        if (k % 2) {
          indices.flat<int32_t>()[i] = static_cast<int32_t>(idx[i]);
        } else {
          indices.flat<int64_t>()[i] = idx[i];
        }
      }
      const Tensor params = Random(dt, params_shape, &rng);
      const int64_t axis_arg = k % 3 == 0 ? axis - params_shape.dims() : axis;
      auto got = RunOne(
          {params, indices,
           Tensor::Scalar<int32_t>(static_cast<int32_t>(axis_arg))},
          [](const Scope& s, std::vector<Output> in) {
            return ops::GatherV2(s, in[0], in[1], in[2]);
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      TensorShape out_shape;
      for (int d = 0; d < axis; ++d) out_shape.AddDim(params_shape.dim_size(d));
      for (int d = 0; d < idx_shape.dims(); ++d)
        out_shape.AddDim(idx_shape.dim_size(d));
      for (int d = axis + 1; d < params_shape.dims(); ++d)
        out_shape.AddDim(params_shape.dim_size(d));
      const auto ps = Strides(params_shape);
      std::vector<int64_t> src;
      ForEachIndex(out_shape, [&](const std::vector<int64_t>& i) {
        int64_t off = 0, flat_idx = 0;
        for (int d = 0; d < idx_shape.dims(); ++d) {
          flat_idx = flat_idx * idx_shape.dim_size(d) + i[axis + d];
        }
        for (int d = 0; d < params_shape.dims(); ++d) {
          const int64_t v = d < axis    ? i[d]
                            : d == axis ? idx[flat_idx]
                                        : i[d - 1 + idx_shape.dims()];
          off += v * ps[d];
        }
        src.push_back(off);
      });
      EXPECT_TRUE(TensorsEqual(*got, FromSourceIndex(params, src, out_shape)))
          << DataTypeString(dt) << " params " << params_shape.DebugString()
          << " indices " << idx_shape.DebugString() << " axis " << axis_arg;
    }
  }
  auto gather = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{
        ops::GatherV2(s, in[0], in[1], ops::Const(s, 1))};
  };
  EXPECT_THAT(
      RunGraph({Random(DT_FLOAT, {3, 5}, &rng), I32({0, 4, 5, 1})}, gather)
          .status()
          .message(),
      HasSubstr("indices[2] = 5 is not in [0, 5)"));
  EXPECT_THAT(RunGraph({Random(DT_FLOAT, {3, 5}, &rng), I64({-1})}, gather)
                  .status()
                  .message(),
              HasSubstr("indices[0] = -1 is not in [0, 5)"));
}

TEST(ArrayIndexKernelsTest, GatherNdAndScatterNdMatchReference) {
  std::mt19937 rng(28);
  for (int k = 0; k < 30; ++k) {
    const TensorShape shape = RandomShape(&rng, 1 + k % 4, 5);
    const int64_t depth = static_cast<int64_t>(rng() % (shape.dims() + 1));
    bool empty = false;
    for (int d = 0; d < depth; ++d) empty = empty || shape.dim_size(d) == 0;
    if (empty) continue;
    const int64_t n = 1 + static_cast<int64_t>(rng() % 6);
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < n * depth; ++i)
      idx.push_back(rng() % shape.dim_size(i % depth));
    const Tensor indices = Tensor::FromVector<int64_t>(absl::MakeConstSpan(idx),
                                                       TensorShape({n, depth}));
    const Tensor params = Random(DT_DOUBLE, shape, &rng);
    int64_t slice = 1;
    TensorShape out_shape({n});
    for (int d = static_cast<int>(depth); d < shape.dims(); ++d) {
      slice *= shape.dim_size(d);
      out_shape.AddDim(shape.dim_size(d));
    }
    const auto ps = Strides(shape);
    std::vector<int64_t> src;
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0;
      for (int64_t j = 0; j < depth; ++j) off += idx[i * depth + j] * ps[j];
      for (int64_t t = 0; t < slice; ++t) src.push_back(off + t);
    }
    const Tensor updates = Random(DT_DOUBLE, out_shape, &rng);
    auto got = RunGraph(
        {params, indices, updates},
        [&](const Scope& s, std::vector<Output> in) {
          return std::vector<Output>{
              ops::GatherNd(s, in[0], in[1]),
              ops::ScatterNd(s, in[1], in[2], ops::Shape(s, in[0], DT_INT64))};
        },
        1 + k % 2);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(
        TensorsEqual((*got)[0], FromSourceIndex(params, src, out_shape)))
        << shape.DebugString() << " depth " << depth;
    Tensor want(DT_DOUBLE, shape);
    std::fill_n(want.flat<double>().data(), want.NumElements(), 0.0);
    for (size_t i = 0; i < src.size(); ++i)
      want.flat<double>()[src[i]] += updates.flat<double>()[i];
    EXPECT_TRUE(TensorsEqual((*got)[1], want))
        << "ScatterNd " << shape.DebugString();
  }
  auto gnd = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::GatherNd(s, in[0], in[1])};
  };
  EXPECT_THAT(
      RunGraph({Random(DT_FLOAT, {3, 4}, &rng),
                Tensor::FromVector<int32_t>({0, 1, 2, 4}, TensorShape({2, 2}))},
               gnd)
          .status()
          .message(),
      HasSubstr("index 1 of indices is [2,4], which does not address params of "
                "shape [3,4]"));
  auto snd = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::ScatterNd(
        s, in[0], in[1], ops::Const(s, {3, 4}, TensorShape({2})))};
  };
  EXPECT_THAT(
      RunGraph({Tensor::FromVector<int32_t>({0, 1}, TensorShape({2, 1})),
                Random(DT_FLOAT, {2, 5}, &rng)},
               snd)
          .status()
          .message(),
      HasSubstr("updates has shape [2,5] but must have [2,4]"));
}

TEST(ArrayIndexKernelsTest, UnsortedSegmentSumMatchesReference) {
  std::mt19937 rng(29);
  struct Case {
    TensorShape data, ids;
    int64_t num;
  };
  const std::vector<Case> cases = {{{7}, {7}, 3},
                                   {{6, 4}, {6}, 5},
                                   {{2, 3, 5}, {2, 3}, 4},
                                   {{9, 300}, {9}, 2},
                                   {{20000, 2}, {20000}, 1000},
                                   {{0, 3}, {0}, 2},
                                   {{5, 3}, {5}, 0 + 1}};
  for (int threads : {1, 2}) {
    for (const Case& c : cases) {
      const Tensor data = Random(DT_DOUBLE, c.data, &rng);
      Tensor ids(DT_INT32, c.ids);
      for (int32_t& v : ids.flat<int32_t>())
        v = static_cast<int32_t>(rng() % (c.num + 1)) - 1;  // -1 dropped
      auto got = RunOne(
          {data, ids, Tensor::Scalar<int64_t>(c.num)},
          [](const Scope& s, std::vector<Output> in) {
            return ops::UnsortedSegmentSum(s, in[0], in[1], in[2]);
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      const int64_t inner = c.ids.num_elements() == 0
                                ? 0
                                : c.data.num_elements() / c.ids.num_elements();
      TensorShape out_shape({c.num});
      for (int d = c.ids.dims(); d < c.data.dims(); ++d)
        out_shape.AddDim(c.data.dim_size(d));
      Tensor want(DT_DOUBLE, out_shape);
      std::fill_n(want.flat<double>().data(), want.NumElements(), 0.0);
      for (int64_t i = 0; i < c.ids.num_elements(); ++i) {
        const int32_t id = ids.flat<int32_t>()[i];
        if (id < 0) continue;
        for (int64_t j = 0; j < inner; ++j) {
          want.flat<double>()[id * inner + j] +=
              data.flat<double>()[i * inner + j];
        }
      }
      ASSERT_EQ(got->shape(), out_shape);
      for (int64_t i = 0; i < want.NumElements(); ++i) {
        EXPECT_NEAR(got->flat<double>()[i], want.flat<double>()[i], 1e-9) << i;
      }
    }
  }
  auto uss = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{
        ops::UnsortedSegmentSum(s, in[0], in[1], ops::Const(s, 3))};
  };
  EXPECT_THAT(RunGraph({Random(DT_FLOAT, {4, 2}, &rng), I32({0, 1, 3, 2})}, uss)
                  .status()
                  .message(),
              HasSubstr("segment_ids[2] = 3 is out of range [0, 3)"));
  EXPECT_THAT(RunGraph({Random(DT_FLOAT, {4, 2}, &rng), I32({0, 1, 2})}, uss)
                  .status()
                  .message(),
              HasSubstr("must be a prefix of the data shape [4,2]"));
}

}  // namespace
}  // namespace recflow
