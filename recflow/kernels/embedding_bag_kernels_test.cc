// Kernel tests for the dense embedding ops: EmbeddingBag (every combiner,
// weighted or not, empty rows, every index dtype, one and two threads)
// and EmbeddingBagGrad against plain references on random data;
// ResourceEmbeddingBag, ResourceGather and VariableShape on a resource
// variable; StringToHashBucketFast against TensorFlow's values; bad input.
#include <cmath>
#include <map>

#include "recflow/core/fingerprint.h"
#include "recflow/kernels/testing/array_kernels_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/embedding_ops.h"
#include "recflow/ops/state_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using array_test::RunGraph;
using array_test::RunOne;
using testing::HasSubstr;

Tensor RandomDoubles(const TensorShape& shape, std::mt19937* rng,
                     double lo = -2, double hi = 2) {
  Tensor t(DT_DOUBLE, shape);
  std::uniform_real_distribution<double> d(lo, hi);
  for (double& v : t.flat<double>()) v = d(*rng);
  return t;
}

Tensor IndexTensor(const std::vector<int64_t>& v, DataType dt) {
  Tensor t(dt, TensorShape({static_cast<int64_t>(v.size())}));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DT_INT32) {
      t.flat<int32_t>()[i] = static_cast<int32_t>(v[i]);
    } else {
      t.flat<int64_t>()[i] = v[i];
    }
  }
  return t;
}

struct Bag {
  std::vector<int64_t> ids, splits;
  std::vector<double> weights;  // empty: unweighted
};

// B rows of 0..max_len ids in [0, vocab), some empty, with duplicates.
Bag RandomBag(std::mt19937* rng, int64_t batch, int64_t vocab, int64_t max_len,
              bool weighted) {
  Bag bag;
  bag.splits.push_back(0);
  std::uniform_real_distribution<double> w(0.1, 2.0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = (*rng)() % 5 == 0 ? 0 : (*rng)() % (max_len + 1);
    for (int64_t j = 0; j < len; ++j) {
      bag.ids.push_back((*rng)() % vocab);
      if (weighted) bag.weights.push_back(w(*rng));
    }
    bag.splits.push_back(static_cast<int64_t>(bag.ids.size()));
  }
  return bag;
}

double Weight(const Bag& bag, int64_t j) {
  return bag.weights.empty() ? 1.0 : bag.weights[j];
}

double RowScale(const std::string& combiner, const Bag& bag, int64_t b) {
  double sum = 0, sq = 0;
  for (int64_t j = bag.splits[b]; j < bag.splits[b + 1]; ++j) {
    sum += Weight(bag, j);
    sq += Weight(bag, j) * Weight(bag, j);
  }
  if (combiner == "sum") return 1;
  const double d = combiner == "mean" ? sum : std::sqrt(sq);
  return d == 0 ? 0 : 1 / d;
}

Tensor ReferenceBag(const std::string& combiner, const Tensor& params,
                    const Bag& bag) {
  const int64_t batch = static_cast<int64_t>(bag.splits.size()) - 1,
                dim = params.dim_size(1);
  Tensor out(DT_DOUBLE, TensorShape({batch, dim}));
  for (int64_t b = 0; b < batch; ++b) {
    const double scale = RowScale(combiner, bag, b);
    for (int64_t k = 0; k < dim; ++k) {
      double acc = 0;
      for (int64_t j = bag.splits[b]; j < bag.splits[b + 1]; ++j) {
        acc += Weight(bag, j) * params.flat<double>()[bag.ids[j] * dim + k];
      }
      out.flat<double>()[b * dim + k] = acc * scale;
    }
  }
  return out;
}

Tensor WeightsTensor(const Bag& bag) {
  return Tensor::FromVector<double>(absl::MakeConstSpan(bag.weights));
}

void ExpectNear(const Tensor& got, const Tensor& want, const std::string& what,
                double tol = 1e-10) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    ASSERT_NEAR(got.flat<double>()[i], want.flat<double>()[i], tol)
        << what << " at " << i;
  }
}

TEST(EmbeddingBagKernelsTest, MatchesReference) {
  std::mt19937 rng(41);
  const std::string combiners[] = {"sum", "mean", "sqrtn"};
  for (int k = 0; k < 24; ++k) {
    const std::string combiner = combiners[k % 3];
    const bool weighted = (k / 3) % 2;
    const DataType tidx = (k / 6) % 2 ? DT_INT32 : DT_INT64;
    const DataType tsplits = (k / 12) % 2 ? DT_INT32 : DT_INT64;
    const bool big = k == 23;
    const int64_t vocab = big ? 3000 : 1 + rng() % 20,
                  dim = big ? 32 : 1 + rng() % 6;
    const int64_t batch = big ? 2000 : rng() % 8;
    const Tensor params = RandomDoubles({vocab, dim}, &rng);
    const Bag bag = RandomBag(&rng, batch, vocab, big ? 12 : 5, weighted);
    const Tensor want = ReferenceBag(combiner, params, bag);
    for (int threads : {1, 2}) {
      std::vector<Tensor> inputs = {params, IndexTensor(bag.ids, tidx),
                                    IndexTensor(bag.splits, tsplits)};
      if (weighted) inputs.push_back(WeightsTensor(bag));
      auto got = RunOne(
          inputs,
          [&](const Scope& s, std::vector<Output> in) {
            return ops::EmbeddingBag(s, in[0], in[1], in[2],
                                     weighted ? in[3] : Output(),
                                     {.combiner = combiner});
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectNear(*got, want,
                 combiner + (weighted ? " weighted" : "") + " case " +
                     std::to_string(k));
    }
  }
}

TEST(EmbeddingBagKernelsTest, FloatEmptyRowsAndZeroWeights) {
  const Tensor params =
      Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2}));
  auto got =
      RunOne({params, array_test::I64({2, 0, 2}), array_test::I64({0, 0, 3, 3}),
              Tensor::FromVector<float>({1.f, 2.f, -3.f})},
             [](const Scope& s, std::vector<Output> in) {
               return ops::EmbeddingBag(s, in[0], in[1], in[2], in[3],
                                        {.combiner = "mean"});
             });
  ASSERT_TRUE(got.ok()) << got.status();
  // Row 1: (5 + 2*1 - 3*5, 6 + 2*2 - 3*6) / (1 + 2 - 3) has denominator 0:
  // zeros, as are the empty rows 0 and 2.
  EXPECT_THAT(got->flat<float>(), testing::ElementsAre(0, 0, 0, 0, 0, 0));
  got = RunOne(
      {params, array_test::I64({2, 0, 2}), array_test::I64({0, 0, 3, 3})},
      [](const Scope& s, std::vector<Output> in) {
        return ops::EmbeddingBag(s, in[0], in[1], in[2], Output(),
                                 {.combiner = "sum"});
      });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->flat<float>(), testing::ElementsAre(0, 0, 11, 14, 0, 0));
}

TEST(EmbeddingBagKernelsTest, BadInputsAreClearErrors) {
  std::mt19937 rng(42);
  const Tensor params = RandomDoubles({5, 3}, &rng);
  auto run = [&](std::vector<int64_t> ids, std::vector<int64_t> splits,
                 int threads = 1) {
    return RunOne(
        {params, array_test::I64(ids), array_test::I64(splits)},
        [](const Scope& s, std::vector<Output> in) {
          return ops::EmbeddingBag(s, in[0], in[1], in[2]);
        },
        threads);
  };
  EXPECT_THAT(run({0, 1, 7, 2}, {0, 2, 4}).status().message(),
              HasSubstr("ids[2] = 7 (row 1) is out of range [0, 5)"));
  EXPECT_THAT(run({0, -3}, {0, 1, 2}).status().message(),
              HasSubstr("ids[1] = -3 (row 1) is out of range [0, 5)"));
  EXPECT_THAT(run({0, 1}, {0, 2, 1}).status().message(),
              HasSubstr("non-decreasing"));
  EXPECT_THAT(run({0, 1}, {0, 1}).status().message(),
              HasSubstr("must equal the number of ids (2)"));
  EXPECT_THAT(run({0, 1}, {1, 2}).status().message(),
              HasSubstr("row_splits[0] = 1"));
  // Many bad ids across threads: the first one is reported.
  std::vector<int64_t> ids(40000, 1), splits = {0};
  ids[12345] = 99;
  ids[30000] = -1;
  for (int b = 1; b <= 400; ++b) splits.push_back(b * 100);
  EXPECT_THAT(run(ids, splits, 2).status().message(),
              HasSubstr("ids[12345] = 99 (row 123) is out of range"));
}

TEST(EmbeddingBagKernelsTest, GradMatchesReference) {
  std::mt19937 rng(43);
  const std::string combiners[] = {"sum", "mean", "sqrtn"};
  // Cases 18-20 have more than 2^18 gradient elements: with 2 threads the
  // kernel groups positions by slot and sums slots in parallel, with 1 it
  // sums in one pass; both must give the same bits.
  for (int k = 0; k < 21; ++k) {
    const std::string combiner = combiners[k % 3];
    const bool weighted = (k / 3) % 2;
    const DataType tidx = (k / 6) % 2 ? DT_INT32 : DT_INT64;
    const bool big = k == 17, huge = k >= 18;
    const int64_t vocab = huge ? 3000 : big ? 500 : 1 + rng() % 10,
                  dim = huge ? 16 : big ? 16 : 1 + rng() % 4;
    const int64_t batch = huge ? 12000 : big ? 1000 : rng() % 7;
    const Bag bag = RandomBag(&rng, batch, vocab, 6, weighted);
    const Tensor grad = RandomDoubles({batch, dim}, &rng);
    // Reference: unique ids in first-occurrence order, summed rows.
    std::vector<int64_t> unique;
    std::map<int64_t, int64_t> slot;
    std::vector<std::vector<double>> rows;
    for (int64_t b = 0; b < batch; ++b) {
      const double scale = RowScale(combiner, bag, b);
      for (int64_t j = bag.splits[b]; j < bag.splits[b + 1]; ++j) {
        auto [it, inserted] =
            slot.emplace(bag.ids[j], static_cast<int64_t>(unique.size()));
        if (inserted) {
          unique.push_back(bag.ids[j]);
          rows.emplace_back(dim, 0.0);
        }
        for (int64_t m = 0; m < dim; ++m) {
          rows[it->second][m] +=
              scale * Weight(bag, j) * grad.flat<double>()[b * dim + m];
        }
      }
    }
    Tensor want_rows(DT_DOUBLE,
                     TensorShape({static_cast<int64_t>(unique.size()), dim}));
    for (size_t u = 0; u < unique.size(); ++u) {
      for (int64_t m = 0; m < dim; ++m)
        want_rows.flat<double>()[u * dim + m] = rows[u][m];
    }
    std::vector<Tensor> by_threads;
    for (int threads : {1, 2}) {
      std::vector<Tensor> inputs = {grad, IndexTensor(bag.ids, tidx),
                                    array_test::I64(bag.splits)};
      if (weighted) inputs.push_back(WeightsTensor(bag));
      auto got = RunGraph(
          inputs,
          [&](const Scope& s, std::vector<Output> in) {
            auto g = ops::EmbeddingBagGrad(s, in[0], in[1], in[2],
                                           weighted ? in[3] : Output(),
                                           {.combiner = combiner});
            return std::vector<Output>{g.unique_ids, g.grad_rows};
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(TensorsEqual((*got)[0], IndexTensor(unique, tidx)))
          << "case " << k;
      ExpectNear((*got)[1], want_rows, "grad case " + std::to_string(k));
      by_threads.push_back((*got)[1]);
    }
    EXPECT_TRUE(TensorsEqual(by_threads[0], by_threads[1])) << "case " << k;
  }
}

// A session holding the resource variable "table" = `value`.
std::unique_ptr<Session> SessionWithTable(const Scope& root,
                                          const Output& handle,
                                          const Tensor& value) {
  ops::AssignVariableOp(root.WithOpName("init"), handle,
                                        ops::Const(root, value));
  EXPECT_TRUE(root.ok()) << root.status();
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  auto session = Session::Create(SessionOptions{2, 2}, *def);
  EXPECT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> out;
  EXPECT_TRUE((*session)->Run({}, {}, {"init"}, &out).ok());
  return *std::move(session);
}

TEST(EmbeddingBagKernelsTest, ResourceFormsReadTheVariable) {
  std::mt19937 rng(44);
  const Tensor table = RandomDoubles({20, 4}, &rng);
  const Bag bag = RandomBag(&rng, 6, 20, 4, /*weighted=*/true);
  Scope root = Scope::NewRootScope();
  Output handle = ops::VarHandleOp(root.WithOpName("table"), DT_DOUBLE,
                                   PartialShape({20, 4}));
  Output ids = ops::Const(root, IndexTensor(bag.ids, DT_INT64));
  ops::ResourceEmbeddingBag(
      root.WithOpName("bag"), handle, ids,
      ops::Const(root, array_test::I64(bag.splits)), DT_DOUBLE,
      ops::Const(root, WeightsTensor(bag)), {.combiner = "sqrtn"});
  ops::ResourceGather(
      root.WithOpName("gather"), handle,
      ops::Const(root, array_test::I32({3, 0, 3, 19})), DT_DOUBLE);
  ops::VariableShape(root.WithOpName("shape"), handle, DT_INT64);
  ops::ResourceGather(root.WithOpName("bad"), handle,
                                   ops::Const(root, array_test::I64({1, 20})),
                                   DT_DOUBLE);
  auto session = SessionWithTable(root, handle, table);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"bag", "gather", "shape"}, {}, &out).ok());
  ExpectNear(out[0], ReferenceBag("sqrtn", table, bag), "ResourceEmbeddingBag");
  ASSERT_EQ(out[1].shape(), TensorShape({4, 4}));
  const int rows[] = {3, 0, 3, 19};
  for (int i = 0; i < 4; ++i) {
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(out[1].flat<double>()[i * 4 + k],
                table.flat<double>()[rows[i] * 4 + k]);
    }
  }
  EXPECT_THAT(out[2].flat<int64_t>(), testing::ElementsAre(20, 4));
  absl::Status s = session->Run({}, {"bad"}, {}, &out);
  EXPECT_THAT(
      s.message(),
      HasSubstr("indices[1] = 20 is out of range [0, 20) for variable"));
}

// Every empty bag gets the fill id, the others keep theirs in order; with
// no empty bag the outputs are the inputs; bad row_splits are clear errors.
TEST(FillEmptyBagsKernelTest, FillsOnlyTheEmptyBags) {
  auto run = [](std::vector<int64_t> ids, std::vector<int64_t> splits, DataType dt) {
    return RunGraph({IndexTensor(ids, dt), IndexTensor(splits, dt)},
                    [dt](const Scope& s, std::vector<Output> in) {
                      Output fill = dt == DT_INT32 ? ops::Const(s, int32_t{-7})
                                                   : ops::Const(s, int64_t{-7});
                      ops::FillEmptyBagsOutputs out = ops::FillEmptyBags(s, in[0], in[1], fill);
                      return std::vector<Output>{out.ids, out.row_splits};
                    });
  };
  for (DataType dt : {DT_INT32, DT_INT64}) {
    auto got = run({5, 6, 7, 8}, {0, 0, 2, 2, 3, 4, 4}, dt);
    ASSERT_TRUE(got.ok()) << got.status();
    auto ids = (*got)[0], splits = (*got)[1];
    std::vector<int64_t> want_ids = {-7, 5, 6, -7, 7, 8, -7};
    std::vector<int64_t> want_splits = {0, 1, 3, 4, 5, 6, 7};
    ASSERT_EQ(ids.NumElements(), 7);
    for (int i = 0; i < 7; ++i) {
      EXPECT_EQ(dt == DT_INT32 ? ids.flat<int32_t>()[i] : ids.flat<int64_t>()[i], want_ids[i]);
      EXPECT_EQ(dt == DT_INT32 ? splits.flat<int32_t>()[i] : splits.flat<int64_t>()[i],
                want_splits[i]);
    }
    got = run({1, 2}, {0, 1, 2}, dt);  // nothing to fill
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].NumElements(), 2);
    got = run({}, {0, 0, 0}, dt);  // every bag empty
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].NumElements(), 2);
    got = run({}, {0}, dt);  // no examples
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].NumElements(), 0);
  }
  EXPECT_THAT(run({1, 2}, {0, 2, 1}, DT_INT64).status().message(), HasSubstr("non-decreasing"));
  EXPECT_THAT(run({1, 2}, {0, 1}, DT_INT64).status().message(),
              HasSubstr("must equal the number of ids (2)"));
  EXPECT_THAT(run({1}, {1, 1}, DT_INT64).status().message(), HasSubstr("row_splits[0] = 1"));
}

TEST(StringHashKernelsTest, MatchesTensorFlow) {
  Tensor s(DT_STRING, TensorShape({2, 2}));
  const char* words[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; ++i) s.flat<std::string>()[i] = words[i];
  auto got = RunOne({s}, [](const Scope& sc, std::vector<Output> in) {
    return ops::StringToHashBucketFast(sc, in[0], 10);
  });
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->shape(), TensorShape({2, 2}));
  // TensorFlow: tf.strings.to_hash_bucket_fast(['a','b','c','d'], 10).
  EXPECT_EQ(got->flat<int64_t>()[0], 9);
  EXPECT_EQ(got->flat<int64_t>()[1], 2);
  EXPECT_EQ(got->flat<int64_t>()[2], 2);
  EXPECT_EQ(got->flat<int64_t>()[3], 5);
  // Big input, two threads, other bucket counts.
  Tensor many(DT_STRING, TensorShape({5000}));
  for (int i = 0; i < 5000; ++i)
    many.flat<std::string>()[i] = "id" + std::to_string(i * 7);
  got = RunOne(
      {many},
      [](const Scope& sc, std::vector<Output> in) {
        return ops::StringToHashBucketFast(sc, in[0], 1000003);
      },
      2);
  ASSERT_TRUE(got.ok()) << got.status();
  for (int i = 0; i < 5000; ++i) {
    ASSERT_EQ(got->flat<int64_t>()[i],
              static_cast<int64_t>(Fingerprint64("id" + std::to_string(i * 7)) %
                                   1000003));
  }
}

}  // namespace
}  // namespace recflow
