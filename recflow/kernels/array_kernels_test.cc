// Kernel tests for the array ops: each kernel against a plain reference on
// random shapes and values (fixed seeds), single- and multi-threaded, over
// element types of every size the copy kernels move (1, 2, 4, 8, 16 bytes
// and strings); bad inputs give clear errors. Slicing and gathering kernels
// are tested in array_index_kernels_test.cc.
#include "recflow/kernels/testing/array_kernels_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace array_test {

// Runs build(scope, placeholders for `inputs`) and fetches its outputs.
// `extra_feeds` feed placeholders the build made itself (by node name).
absl::StatusOr<std::vector<Tensor>> RunGraph(
    const std::vector<Tensor>& inputs, const BuildFn& build, int threads,
    const std::vector<std::pair<std::string, Tensor>>& extra_feeds) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> phs;
  std::vector<std::pair<std::string, Tensor>> feeds = extra_feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    phs.push_back(ops::Placeholder(root.WithOpName(name), inputs[i].dtype()));
    feeds.emplace_back(name, inputs[i]);
  }
  const std::vector<Output> outs = build(root, phs);
  RETURN_IF_ERROR(root.status());
  std::vector<std::string> fetches;
  for (const Output& o : outs) fetches.push_back(o.name());
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session,
                   Session::Create(SessionOptions{threads, threads}, def));
  std::vector<Tensor> outputs;
  RETURN_IF_ERROR(session->Run(feeds, fetches, {}, &outputs));
  return outputs;
}

absl::StatusOr<Tensor> RunOne(
    const std::vector<Tensor>& inputs,
    const std::function<Output(const Scope&, std::vector<Output>)>& build,
    int threads) {
  ASSIGN_OR_RETURN(std::vector<Tensor> out,
                   RunGraph(
                       inputs,
                       [&](const Scope& s, std::vector<Output> in) {
                         return std::vector<Output>{build(s, std::move(in))};
                       },
                       threads));
  return out[0];
}

}  // namespace array_test

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
                           DT_HALF,  DT_COMPLEX128, DT_STRING, DT_BOOL};

TEST(ArrayKernelsTest, ShapeSizeRank) {
  std::mt19937 rng(1);
  const Tensor x = Random(DT_FLOAT, {2, 3, 4}, &rng);
  auto out = RunGraph({x}, [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{
        ops::Shape(s, in[0]), ops::Shape(s, in[0], DT_INT64),
        ops::Size(s, in[0]), ops::Size(s, in[0], DT_INT64),
        ops::Rank(s, in[0])};
  });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorsEqual((*out)[0], I32({2, 3, 4})));
  EXPECT_TRUE(TensorsEqual((*out)[1], I64({2, 3, 4})));
  EXPECT_TRUE(TensorsEqual((*out)[2], Tensor::Scalar<int32_t>(24)));
  EXPECT_TRUE(TensorsEqual((*out)[3], Tensor::Scalar<int64_t>(24)));
  EXPECT_TRUE(TensorsEqual((*out)[4], Tensor::Scalar<int32_t>(3)));
}

TEST(ArrayKernelsTest, ReshapeFamilySharesTheBuffer) {
  std::mt19937 rng(2);
  for (DataType dt : kTypes) {
    const Tensor x = Random(dt, {2, 1, 6}, &rng);
    auto out = RunGraph({x, I32({3, -1})}, [](const Scope& s,
                                              std::vector<Output> in) {
      return std::vector<Output>{
          ops::Reshape(s, in[0], in[1]),
          ops::ExpandDims(s, in[0], ops::Const(s, -1)), ops::Squeeze(s, in[0]),
          ops::Squeeze(s, in[0], {-2}), ops::Identity(s, in[0])};
    });
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<TensorShape> want = {
        {3, 4}, {2, 1, 6, 1}, {2, 6}, {2, 6}, {2, 1, 6}};
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ((*out)[i].shape(), want[i]) << i;
      EXPECT_TRUE(TensorsEqual((*out)[i], x.Reshaped(want[i]).value())) << i;
      EXPECT_TRUE((*out)[i].SharesBufferWith(x)) << "output " << i << " copied";
    }
  }
}

TEST(ArrayKernelsTest, ReshapeErrorsNameBothShapes) {
  std::mt19937 rng(3);
  const Tensor x = Random(DT_FLOAT, {2, 3}, &rng);
  auto reshape = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::Reshape(s, in[0], in[1])};
  };
  EXPECT_THAT(RunGraph({x, I32({4, 2})}, reshape).status().message(),
              HasSubstr("cannot reshape a tensor of shape [2,3] (6 elements) "
                        "into shape [4,2] "
                        "(8 elements)"));
  EXPECT_THAT(RunGraph({x, I32({4, -1})}, reshape).status().message(),
              HasSubstr("cannot reshape a tensor of shape [2,3] (6 elements) "
                        "into shape [4,-1]"));
  EXPECT_THAT(RunGraph({x, I32({-1, -1})}, reshape).status().message(),
              HasSubstr("more than one -1"));
  EXPECT_THAT(RunGraph({x, I32({-2, 3})}, reshape).status().message(),
              HasSubstr("sizes must be >= -1"));
  auto squeeze = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::Squeeze(s, in[0], {0})};
  };
  EXPECT_THAT(
      RunGraph({x}, squeeze).status().message(),
      HasSubstr(
          "cannot squeeze dimension 0 of shape [2,3]: its size is 2, not 1"));
  auto expand = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::ExpandDims(s, in[0], in[1])};
  };
  EXPECT_THAT(
      RunGraph({x, Tensor::Scalar<int32_t>(4)}, expand).status().message(),
      HasSubstr("dim 4 is out of range for a tensor of rank 3"));
}

Tensor ReferenceTranspose(const Tensor& x, const std::vector<int64_t>& perm) {
  TensorShape out_shape;
  for (int64_t p : perm) out_shape.AddDim(x.dim_size(static_cast<int>(p)));
  const auto xs = Strides(x.shape());
  std::vector<int64_t> src;
  ForEachIndex(out_shape, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t i = 0; i < perm.size(); ++i) off += idx[i] * xs[perm[i]];
    src.push_back(off);
  });
  return FromSourceIndex(x, src, out_shape);
}

TEST(ArrayKernelsTest, TransposeMatchesReference) {
  std::mt19937 rng(4);
  struct Case {
    TensorShape shape;
    std::vector<int64_t> perm;
  };
  std::vector<Case> cases = {{{3, 5}, {1, 0}},
                             {{300, 500}, {1, 0}},
                             {{2, 3, 4}, {0, 2, 1}},
                             {{2, 3, 4}, {2, 0, 1}},
                             {{20, 30, 40, 5}, {3, 1, 0, 2}},
                             {{64, 64, 33}, {1, 0, 2}},
                             {{1, 7, 1, 9}, {3, 2, 1, 0}},
                             {{4, 5}, {0, 1}},
                             {{0, 5}, {1, 0}},
                             {{}, {}},
                             {{7, 1000}, {1, 0}}};
  for (int k = 0; k < 12; ++k) {  // random ranks, shapes and permutations
    const TensorShape shape = RandomShape(&rng, 1 + k % 5, 6);
    std::vector<int64_t> perm(shape.dims());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    cases.push_back({shape, perm});
  }
  for (int threads : {1, 2}) {
    for (const Case& c : cases) {
      for (DataType dt : kTypes) {
        if (c.shape.num_elements() > 10000 && dt != DT_FLOAT && dt != DT_DOUBLE)
          continue;
        const Tensor x = Random(dt, c.shape, &rng);
        auto got = RunOne(
            {x, I64(c.perm)},
            [](const Scope& s, std::vector<Output> in) {
              return ops::Transpose(s, in[0], in[1]);
            },
            threads);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_TRUE(TensorsEqual(*got, ReferenceTranspose(x, c.perm)))
            << DataTypeString(dt) << " " << c.shape.DebugString() << " perm "
            << absl::StrJoin(c.perm, ",") << " threads " << threads;
      }
    }
  }
}

TEST(ArrayKernelsTest, TransposeAndInvertPermutationErrors) {
  std::mt19937 rng(5);
  const Tensor x = Random(DT_FLOAT, {2, 3}, &rng);
  auto tr = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::Transpose(s, in[0], in[1])};
  };
  EXPECT_THAT(RunGraph({x, I32({0, 0})}, tr).status().message(),
              HasSubstr("perm [0,0] is not a permutation of [0, 2)"));
  EXPECT_THAT(RunGraph({x, I32({0, 1, 2})}, tr).status().message(),
              HasSubstr("perm [0,1,2] has 3 entries but x has shape [2,3]"));
  auto inv = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::InvertPermutation(s, in[0])};
  };
  auto ok = RunGraph({I32({2, 0, 3, 1})}, inv);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(TensorsEqual((*ok)[0], I32({1, 3, 0, 2})));
  auto ok64 = RunGraph({I64({1, 0})}, inv);
  ASSERT_TRUE(ok64.ok()) << ok64.status();
  EXPECT_TRUE(TensorsEqual((*ok64)[0], I64({1, 0})));
  EXPECT_THAT(RunGraph({I32({2, 0, 2})}, inv).status().message(),
              HasSubstr("x[2] = 2 repeats"));
  EXPECT_THAT(RunGraph({I32({0, 5})}, inv).status().message(),
              HasSubstr("x[1] = 5 is out of range"));
}

// Concatenation along `axis` by index arithmetic.
Tensor ReferenceConcat(const std::vector<Tensor>& xs, int axis) {
  TensorShape out_shape = xs[0].shape();
  int64_t total = 0;
  for (const Tensor& x : xs) total += x.dim_size(axis);
  out_shape.set_dim(axis, total);
  // Build the output one element at a time from the input that holds it.
  Tensor out(xs[0].dtype(), out_shape);
  ForEachIndex(out_shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> i = idx;
    size_t k = 0;
    while (i[axis] >= xs[k].dim_size(axis)) i[axis] -= xs[k++].dim_size(axis);
    array_test::CopyElement(xs[k], array_test::FlatIndex(i, xs[k].shape()),
                            &out, array_test::FlatIndex(idx, out_shape));
  });
  return out;
}

TEST(ArrayKernelsTest, ConcatV2AndPackMatchReference) {
  std::mt19937 rng(6);
  for (int threads : {1, 2}) {
    for (int k = 0; k < 30; ++k) {
      const DataType dt = kTypes[k % std::size(kTypes)];
      const bool big = k % 10 == 9 && (dt == DT_FLOAT || dt == DT_DOUBLE);
      TensorShape base =
          big ? TensorShape({60, 200, 7}) : RandomShape(&rng, 1 + k % 4, 5);
      const int axis = static_cast<int>(rng() % base.dims());
      const int n = 2 + static_cast<int>(rng() % 3);
      std::vector<Tensor> xs;
      for (int i = 0; i < n; ++i) {
        TensorShape s = base;
        s.set_dim(axis, big ? 50 + i : static_cast<int64_t>(rng() % 4));
        xs.push_back(Random(dt, s, &rng));
      }
      const int64_t axis_arg =
          (k % 2 == 0) ? axis : axis - base.dims();  // negative axes too
      std::vector<Tensor> inputs = xs;
      inputs.push_back(Tensor::Scalar<int64_t>(axis_arg));
      auto got = RunOne(
          inputs,
          [n](const Scope& s, std::vector<Output> in) {
            return ops::ConcatV2(
                s, std::vector<Output>(in.begin(), in.begin() + n), in[n]);
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(TensorsEqual(*got, ReferenceConcat(xs, axis)))
          << DataTypeString(dt) << " axis " << axis_arg << " base "
          << base.DebugString();
      // Pack = concat of the inputs with a size-1 dimension inserted.
      std::vector<Tensor> same, expanded;
      for (int i = 0; i < n; ++i) {
        same.push_back(Random(dt, base, &rng));
        TensorShape e = base;
        e.InsertDim(axis, 1);
        expanded.push_back(same.back().Reshaped(e).value());
      }
      auto packed = RunOne(
          same,
          [n, axis](const Scope& s, std::vector<Output> in) {
            return ops::Pack(s, in, axis);
          },
          threads);
      ASSERT_TRUE(packed.ok()) << packed.status();
      EXPECT_TRUE(TensorsEqual(*packed, ReferenceConcat(expanded, axis)))
          << "Pack " << DataTypeString(dt) << " axis " << axis;
    }
  }
}

TEST(ArrayKernelsTest, ConcatErrors) {
  std::mt19937 rng(7);
  auto concat = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::ConcatV2(s, {in[0], in[1]}, in[2])};
  };
  const Tensor a = Random(DT_FLOAT, {2, 3}, &rng),
               b = Random(DT_FLOAT, {3, 3}, &rng);
  EXPECT_THAT(
      RunGraph({a, b, Tensor::Scalar<int32_t>(1)}, concat).status().message(),
      HasSubstr(
          "value 1 has shape [3,3] but value 0 has shape [2,3]; all dimensions "
          "except axis 1 must match"));
  EXPECT_THAT(
      RunGraph({a, b, Tensor::Scalar<int32_t>(2)}, concat).status().message(),
      HasSubstr("axis 2 is out of range"));
  auto pack = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::Pack(s, {in[0], in[1]})};
  };
  EXPECT_THAT(RunGraph({a, b}, pack).status().message(),
              HasSubstr("value 1 has shape [3,3]"));
  // ConcatOffset.
  auto offs = RunGraph({I32({2, 3, 5}), I32({2, 4, 5}), I32({2, 1, 5})},
                       [](const Scope& s, std::vector<Output> in) {
                         return ops::ConcatOffset(s, ops::Const(s, -2), in);
                       });
  ASSERT_TRUE(offs.ok()) << offs.status();
  EXPECT_TRUE(TensorsEqual((*offs)[0], I32({0, 0, 0})));
  EXPECT_TRUE(TensorsEqual((*offs)[1], I32({0, 3, 0})));
  EXPECT_TRUE(TensorsEqual((*offs)[2], I32({0, 7, 0})));
}

TEST(ArrayKernelsTest, SplitSplitVUnpackMatchReference) {
  std::mt19937 rng(8);
  for (int threads : {1, 2}) {
    for (int k = 0; k < 24; ++k) {
      const DataType dt = kTypes[k % std::size(kTypes)];
      const bool big = k % 8 == 7 && (dt == DT_FLOAT || dt == DT_DOUBLE);
      const int n = 1 + static_cast<int>(rng() % 3);
      TensorShape shape = big ? TensorShape({100, 3 * n * 40, 3})
                              : RandomShape(&rng, 1 + k % 4, 4);
      const int axis = static_cast<int>(rng() % shape.dims());
      shape.set_dim(axis, shape.dim_size(axis) * n);
      const Tensor x = Random(dt, shape, &rng);
      // Split into n equal parts, SplitV into random sizes (one -1), Unpack.
      std::vector<int64_t> sizes(n, shape.dim_size(axis) / n);
      std::vector<int64_t> vsizes;
      int64_t left = shape.dim_size(axis);
      for (int i = 0; i < n - 1; ++i) {
        vsizes.push_back(static_cast<int64_t>(rng() % (left + 1)));
        left -= vsizes.back();
      }
      vsizes.push_back(-1);
      std::shuffle(vsizes.begin(), vsizes.end(), rng);
      auto got = RunGraph(
          {x, Tensor::Scalar<int32_t>(axis - (k % 2) * shape.dims()),
           I64(vsizes)},
          [n](const Scope& s, std::vector<Output> in) {
            std::vector<Output> out = ops::Split(s, in[1], in[0], n);
            for (Output o : ops::SplitV(s, in[0], in[2], in[1], n))
              out.push_back(o);
            return out;
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      // Reference: concatenating the parts gives x back, and each part has its
      // size.
      std::vector<Tensor> parts(got->begin(), got->begin() + n);
      std::vector<Tensor> vparts(got->begin() + n, got->end());
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(parts[i].dim_size(axis), sizes[i]);
        if (vsizes[i] >= 0) {
          EXPECT_EQ(vparts[i].dim_size(axis), vsizes[i]);
        }
      }
      EXPECT_TRUE(TensorsEqual(ReferenceConcat(parts, axis), x))
          << DataTypeString(dt);
      EXPECT_TRUE(TensorsEqual(ReferenceConcat(vparts, axis), x))
          << DataTypeString(dt);
      // Unpack along the axis: n = dim parts with the axis dropped.
      const int64_t num = shape.dim_size(axis);
      if (num > 16 || num == 0) continue;
      auto un = RunGraph(
          {x},
          [num, axis](const Scope& s, std::vector<Output> in) {
            return ops::Unpack(s, in[0], num, axis);
          },
          threads);
      ASSERT_TRUE(un.ok()) << un.status();
      std::vector<Tensor> expanded;
      TensorShape one = shape;
      one.set_dim(axis, 1);
      for (const Tensor& t : *un) expanded.push_back(t.Reshaped(one).value());
      if (num > 0) {
        EXPECT_TRUE(TensorsEqual(ReferenceConcat(expanded, axis), x));
      }
    }
  }
}

TEST(ArrayKernelsTest, SplitErrors) {
  std::mt19937 rng(9);
  const Tensor x = Random(DT_FLOAT, {5, 4}, &rng);
  auto split = [](const Scope& s, std::vector<Output> in) {
    return ops::Split(s, in[0], in[1], 2);
  };
  EXPECT_THAT(
      RunGraph({Tensor::Scalar<int32_t>(0), x}, split).status().message(),
      HasSubstr("cannot split dimension 0 of shape [5,4] (size 5) into 2 equal "
                "parts"));
  auto splitv = [](const Scope& s, std::vector<Output> in) {
    return ops::SplitV(s, in[0], in[1], ops::Const(s, 1), 2);
  };
  EXPECT_THAT(
      RunGraph({x, I64({1, 2})}, splitv).status().message(),
      HasSubstr(
          "size_splits [1,2] do not add up to dimension 1 of shape [5,4] (4)"));
  EXPECT_THAT(RunGraph({x, I64({-1, -1})}, splitv).status().message(),
              HasSubstr("at most one -1"));
  auto unpack = [](const Scope& s, std::vector<Output> in) {
    return ops::Unpack(s, in[0], 3);
  };
  EXPECT_THAT(
      RunGraph({x}, unpack).status().message(),
      HasSubstr(
          "cannot unpack dimension 0 of shape [5,4] into num = 3 tensors"));
}

Tensor ReferenceTile(const Tensor& x, const std::vector<int64_t>& m) {
  TensorShape out_shape;
  for (int d = 0; d < x.dims(); ++d) out_shape.AddDim(x.dim_size(d) * m[d]);
  const auto xs = Strides(x.shape());
  std::vector<int64_t> src;
  ForEachIndex(out_shape, [&](const std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (int d = 0; d < x.dims(); ++d) off += (idx[d] % x.dim_size(d)) * xs[d];
    src.push_back(off);
  });
  return FromSourceIndex(x, src, out_shape);
}

// The broadcasts reduction gradients tile with (ops/reduction_grad.cc), big
// enough to be sharded, and a tiled leading dimension.
TEST(ArrayKernelsTest, TileBroadcastShapesMatchReference) {
  std::mt19937 rng(11);
  const std::vector<std::pair<TensorShape, std::vector<int64_t>>> cases = {
      {{4096, 1, 1}, {1, 27, 16}}, {{700, 1, 16}, {1, 27, 1}},
      {{3, 500}, {40, 1}},         {{2, 1, 3, 1}, {5, 4, 1, 7}},
      {{1}, {70000}},
  };
  for (int threads : {1, 2}) {
    for (const auto& [shape, m] : cases) {
      const Tensor x = Random(DT_FLOAT, shape, &rng);
      auto got = RunOne(
          {x, I64(m)},
          [](const Scope& s, std::vector<Output> in) { return ops::Tile(s, in[0], in[1]); },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(TensorsEqual(*got, ReferenceTile(x, m)))
          << shape.DebugString() << " x " << absl::StrJoin(m, ",");
    }
  }
}

TEST(ArrayKernelsTest, TileMatchesReference) {
  std::mt19937 rng(10);
  for (int threads : {1, 2}) {
    for (int k = 0; k < 24; ++k) {
      const DataType dt = kTypes[k % std::size(kTypes)];
      const bool big = k % 8 == 0 && (dt == DT_FLOAT || dt == DT_DOUBLE);
      const TensorShape shape =
          big ? TensorShape({50, 1, 300}) : RandomShape(&rng, k % 4, 4);
      std::vector<int64_t> m;
      for (int d = 0; d < shape.dims(); ++d) m.push_back(big ? 3 : rng() % 4);
      const Tensor x = Random(dt, shape, &rng);
      auto got = RunOne(
          {x, I64(m)},
          [](const Scope& s, std::vector<Output> in) {
            return ops::Tile(s, in[0], in[1]);
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(TensorsEqual(*got, ReferenceTile(x, m)))
          << DataTypeString(dt) << " " << shape.DebugString() << " x "
          << absl::StrJoin(m, ",");
    }
  }
  const Tensor x = Random(DT_FLOAT, {2, 3}, &rng);
  auto tile = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::Tile(s, in[0], in[1])};
  };
  EXPECT_THAT(
      RunGraph({x, I32({2})}, tile).status().message(),
      HasSubstr("multiples [2] has 1 entries but the input has shape [2,3]"));
  EXPECT_THAT(RunGraph({x, I32({2, -1})}, tile).status().message(),
              HasSubstr("negative entry"));
}

TEST(ArrayKernelsTest, FillRangeOneHot) {
  std::mt19937 rng(11);
  for (DataType dt : kTypes) {
    const Tensor v = Random(dt, {}, &rng);
    auto got = RunOne(
        {I32({3, 70000}), v},
        [](const Scope& s, std::vector<Output> in) {
          return ops::Fill(s, in[0], in[1]);
        },
        2);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(TensorsEqual(
        *got, FromSourceIndex(v, std::vector<int64_t>(3 * 70000, 0),
                              TensorShape({3, 70000}))));
  }
  auto range = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::Range(s, in[0], in[1], in[2])};
  };
  auto r = RunGraph({Tensor::Scalar<int32_t>(3), Tensor::Scalar<int32_t>(-4),
                     Tensor::Scalar<int32_t>(-3)},
                    range);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(TensorsEqual((*r)[0], I32({3, 0, -3})));
  auto rf = RunGraph({Tensor::Scalar<double>(0.5), Tensor::Scalar<double>(1.6),
                      Tensor::Scalar<double>(0.5)},
                     range);
  ASSERT_TRUE(rf.ok()) << rf.status();
  EXPECT_TRUE(TensorsEqual(
      (*rf)[0], Tensor::FromVector<double>({0.5, 1.0, 1.5}, TensorShape({3}))));
  EXPECT_THAT(RunGraph({Tensor::Scalar<int64_t>(0), Tensor::Scalar<int64_t>(4),
                        Tensor::Scalar<int64_t>(0)},
                       range)
                  .status()
                  .message(),
              HasSubstr("delta must not be 0"));
  EXPECT_THAT(RunGraph({Tensor::Scalar<int64_t>(5), Tensor::Scalar<int64_t>(4),
                        Tensor::Scalar<int64_t>(1)},
                       range)
                  .status()
                  .message(),
              HasSubstr("requires start <= limit when delta is positive"));

  // OneHot on every axis against a direct reference.
  const Tensor idx =
      Tensor::FromVector<int64_t>({0, 3, -1, 2, 5, 1}, TensorShape({2, 3}));
  for (int axis : {-1, 0, 1, 2}) {
    auto oh = RunOne(
        {idx, Tensor::Scalar<float>(7.f), Tensor::Scalar<float>(-1.f)},
        [axis](const Scope& s, std::vector<Output> in) {
          return ops::OneHot(s, in[0], ops::Const(s, 4), in[1], in[2], axis);
        },
        1);
    ASSERT_TRUE(oh.ok()) << oh.status();
    const int a = axis == -1 ? 2 : axis;
    TensorShape want_shape({2, 3});
    want_shape.InsertDim(a, 4);
    ASSERT_EQ(oh->shape(), want_shape);
    ForEachIndex(want_shape, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> pos = i;
      const int64_t d = pos[a];
      pos.erase(pos.begin() + a);
      const bool on = idx.flat<int64_t>()[pos[0] * 3 + pos[1]] == d;
      EXPECT_EQ(oh->flat<float>()[array_test::FlatIndex(i, want_shape)],
                on ? 7.f : -1.f);
    });
  }
  auto bad = RunGraph(
      {idx},
      [](const Scope& s, std::vector<Output> in) {
        return std::vector<Output>{ops::OneHot(
            s, in[0], ops::Placeholder(s.WithOpName("depth"), DT_INT32),
            ops::Const(s, 1.f), ops::Const(s, 0.f))};
      },
      1, {{"depth", Tensor::Scalar<int32_t>(-3)}});
  EXPECT_THAT(bad.status().message(),
              HasSubstr("depth must be >= 0, but is -3"));
}

}  // namespace
}  // namespace recflow
