// tf.data's graph ops (ops/dataset_ops.cc): shape functions, and the
// kernels run one by one with a fake FunctionLibraryRuntime standing in for
// the session's (functions are C++ lambdas here), so each dataset op's
// output feeds the next op as a DT_VARIANT tensor, the way a graph does.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/record_io.h"
#include "recflow/core/variant.h"
#include "recflow/data/dataset.h"
#include "recflow/data/dataset_variant.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/device.h"
#include "recflow/framework/function.h"
#include "recflow/framework/node_def_util.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

using testing::HasSubstr;

// Functions by name; Instantiate gives one handle per name.
class FakeFunctionLibrary : public FunctionLibraryRuntime {
 public:
  using Fn = std::function<absl::Status(std::vector<Tensor>, std::vector<Tensor>*)>;
  void Add(const std::string& name, Fn fn) { fns_[name] = std::move(fn); }

  const tensorflow::FunctionDef* Find(absl::string_view) const override { return nullptr; }
  absl::StatusOr<Handle> Instantiate(const tensorflow::NameAttrList& func) override {
    auto it = fns_.find(func.name());
    if (it == fns_.end()) return errors::NotFound("no function ", func.name());
    names_.push_back(func.name());
    return static_cast<Handle>(names_.size() - 1);
  }
  const std::vector<DataType>& ArgTypes(Handle) const override { return none_; }
  const std::vector<DataType>& RetTypes(Handle) const override { return none_; }
  absl::Status Run(Handle h, std::vector<Tensor> args, std::vector<Tensor>* rets) override {
    return fns_.at(names_[h])(std::move(args), rets);
  }

 private:
  std::map<std::string, Fn> fns_;
  std::vector<std::string> names_;
  std::vector<DataType> none_;
};

// Runs single ops on one device, as a graph's executor would.
class DatasetOpsTest : public testing::Test {
 protected:
  DatasetOpsTest() : device_(Device::Options{}) {}

  struct Op {
    tensorflow::NodeDef def;
    std::vector<Tensor> inputs;
    template <typename T>
    Op& Attr(const std::string& name, const T& value) {
      SetAttrValue(value, &(*def.mutable_attr())[name]);
      return *this;
    }
    Op& Func(const std::string& attr, const std::string& name) {
      (*def.mutable_attr())[attr].mutable_func()->set_name(name);
      return *this;
    }
    Op& Types(std::vector<DataType> types, std::vector<PartialShape> shapes,
              const std::string& attr = "output_types") {
      Attr(attr, absl::Span<const DataType>(types));
      return Attr("output_shapes", absl::Span<const PartialShape>(shapes));
    }
    Op& In(Tensor t) {
      def.add_input(absl::StrCat("in", inputs.size()));
      inputs.push_back(std::move(t));
      return *this;
    }
  };

  static Op MakeOp(const std::string& op) {
    Op o;
    o.def.set_name(absl::StrCat("node_", op));
    o.def.set_op(op);
    return o;
  }

  absl::StatusOr<std::vector<Tensor>> Run(Op op) {
    ASSIGN_OR_RETURN(const OpRegistrationData* reg, OpRegistry::Global()->LookUp(op.def.op()));
    AddDefaultsToNodeDef(reg->op_def, &op.def);
    RETURN_IF_ERROR(ValidateNodeDef(op.def, reg->op_def));
    std::vector<DataType> in_types, out_types;
    RETURN_IF_ERROR(InOutTypesForNode(op.def, reg->op_def, &in_types, &out_types));
    ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel,
                     KernelRegistry::Global()->CreateKernel(&device_, op.def, reg->op_def,
                                                            in_types, out_types, &flr_));
    std::vector<TensorValue> values;
    for (Tensor& t : op.inputs) values.push_back(TensorValue{std::move(t), nullptr});
    OpKernelContext::Params params;
    params.op_kernel = kernel.get();
    params.device = &device_;
    params.inputs = absl::MakeSpan(values);
    params.function_library = &flr_;
    OpKernelContext ctx(&params);
    kernel->Compute(&ctx);
    RETURN_IF_ERROR(ctx.status());
    std::vector<Tensor> outs;
    for (int i = 0; i < ctx.num_outputs(); ++i) outs.push_back(ctx.release_output(i).tensor);
    kernels_.push_back(std::move(kernel));  // Iterators may keep using them.
    return outs;
  }

  Tensor RunOne(Op op) {
    auto out = Run(std::move(op));
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() && !out->empty() ? (*out)[0] : Tensor();
  }

  // A fresh iterator (IteratorV2 named `name`) initialized from `dataset`.
  Tensor IteratorOver(const Tensor& dataset, std::vector<DataType> types,
                      std::vector<PartialShape> shapes, const std::string& name = "it") {
    Tensor it = RunOne(MakeOp("IteratorV2")
                           .Attr("shared_name", name)
                           .Attr("container", "")
                           .Types(types, shapes));
    EXPECT_TRUE(Run(MakeOp("MakeIterator").In(dataset).In(it)).ok());
    return it;
  }

  // Every element until "End of sequence" (checked), or the first error.
  absl::StatusOr<std::vector<std::vector<Tensor>>> Drain(const Tensor& it,
                                                         std::vector<DataType> types,
                                                         std::vector<PartialShape> shapes) {
    std::vector<std::vector<Tensor>> out;
    for (;;) {
      auto next = Run(MakeOp("IteratorGetNext").In(it).Types(types, shapes));
      if (absl::IsOutOfRange(next.status())) {
        EXPECT_THAT(next.status().message(), HasSubstr("End of sequence"));
        return out;
      }
      RETURN_IF_ERROR(next.status());
      out.push_back(*next);
    }
  }

  static std::vector<int64_t> Ints(const Tensor& t) {
    return std::vector<int64_t>(t.flat<int64_t>().begin(), t.flat<int64_t>().end());
  }
  static Tensor I64(std::vector<int64_t> v) {
    return Tensor::FromVector<int64_t>(absl::MakeConstSpan(v));
  }
  static Tensor Str(const std::string& s) { return Tensor::Scalar<std::string>(s); }

  Tensor Slices(std::vector<int64_t> v) {
    return RunOne(MakeOp("TensorSliceDataset").In(I64(v)).Types({DT_INT64}, {PartialShape({})},
                                                              "Toutput_types"));
  }

  // Destroyed in reverse: kernels, then the device and its iterators (whose
  // map functions may still call the library), then the library.
  FakeFunctionLibrary flr_;
  Device device_;
  std::vector<std::unique_ptr<OpKernel>> kernels_;
};

const std::vector<DataType> kI64 = {DT_INT64};
const std::vector<PartialShape> kScalar = {PartialShape({})};
const std::vector<PartialShape> kVector = {PartialShape({-1})};

TEST_F(DatasetOpsTest, SliceShuffleBatchRepeatIsTheSameMultisetEachEpoch) {
  Tensor ds = Slices({0, 1, 2, 3, 4, 5, 6});
  ds = RunOne(MakeOp("ShuffleDataset").In(ds).In(Tensor::Scalar<int64_t>(4))
                  .In(Tensor::Scalar<int64_t>(7)).In(Tensor::Scalar<int64_t>(3))
                  .Types(kI64, kScalar));
  ds = RunOne(MakeOp("BatchDatasetV2").In(ds).In(Tensor::Scalar<int64_t>(3))
                  .In(Tensor::Scalar<bool>(false)).Types(kI64, kVector));
  ds = RunOne(MakeOp("RepeatDataset").In(ds).In(Tensor::Scalar<int64_t>(2)).Types(kI64, kVector));
  ASSERT_EQ(ds.dtype(), DT_VARIANT);
  Tensor it = IteratorOver(ds, kI64, kVector);
  auto all = Drain(it, kI64, kVector);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 6u);  // 3 + 3 + 1 per epoch
  std::vector<int64_t> epoch[2];
  for (size_t b = 0; b < all->size(); ++b) {
    const std::vector<int64_t> v = Ints((*all)[b][0]);
    EXPECT_EQ(v.size(), b % 3 == 2 ? 1u : 3u);
    epoch[b / 3].insert(epoch[b / 3].end(), v.begin(), v.end());
  }
  EXPECT_NE(epoch[0], epoch[1]);  // reshuffled
  for (auto& e : epoch) {
    std::sort(e.begin(), e.end());
    EXPECT_EQ(e, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  }
  // MakeIterator again starts over.
  ASSERT_TRUE(Run(MakeOp("MakeIterator").In(ds).In(it)).ok());
  auto again = Drain(it, kI64, kVector);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 6u);
}

TEST_F(DatasetOpsTest, TensorDatasetIsOneElementAndRangeFollowsStep) {
  Tensor ds = RunOne(MakeOp("TensorDataset").In(I64({4, 5})).Types(kI64, kVector,
                                                                   "Toutput_types"));
  auto one = Drain(IteratorOver(ds, kI64, kVector, "a"), kI64, kVector);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(Ints((*one)[0][0]), (std::vector<int64_t>{4, 5}));

  Tensor range = RunOne(MakeOp("RangeDataset").In(Tensor::Scalar<int64_t>(10))
                            .In(Tensor::Scalar<int64_t>(2)).In(Tensor::Scalar<int64_t>(-3))
                            .Types(kI64, kScalar));
  auto r = Drain(IteratorOver(range, kI64, kScalar, "b"), kI64, kScalar);
  ASSERT_TRUE(r.ok());
  std::vector<int64_t> got;
  for (auto& e : *r) got.push_back(e[0].scalar<int64_t>());
  EXPECT_EQ(got, (std::vector<int64_t>{10, 7, 4}));

  auto zero = Run(MakeOp("RangeDataset").In(Tensor::Scalar<int64_t>(0))
                      .In(Tensor::Scalar<int64_t>(2)).In(Tensor::Scalar<int64_t>(0))
                      .Types(kI64, kScalar));
  EXPECT_THAT(zero.status().message(), HasSubstr("step must be a non-zero integer"));
}

TEST_F(DatasetOpsTest, TakeSkipShardAndNegativeCountsFollowTensorFlow) {
  auto values = [&](Tensor ds) {
    auto all = Drain(IteratorOver(ds, kI64, kScalar, absl::StrCat("it", kernels_.size())),
                     kI64, kScalar);
    EXPECT_TRUE(all.ok()) << all.status();
    std::vector<int64_t> v;
    for (auto& e : *all) v.push_back(e[0].scalar<int64_t>());
    return v;
  };
  auto count_op = [&](const char* op, int64_t n) {
    return RunOne(MakeOp(op).In(Slices({1, 2, 3, 4})).In(Tensor::Scalar<int64_t>(n))
                      .Types(kI64, kScalar));
  };
  EXPECT_EQ(values(count_op("TakeDataset", 2)), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(values(count_op("TakeDataset", -5)), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(values(count_op("SkipDataset", 3)), (std::vector<int64_t>{4}));
  EXPECT_EQ(values(count_op("SkipDataset", -1)), (std::vector<int64_t>{}));
  Tensor shard = RunOne(MakeOp("ShardDataset").In(Slices({1, 2, 3, 4, 5}))
                            .In(Tensor::Scalar<int64_t>(2)).In(Tensor::Scalar<int64_t>(1))
                            .Types(kI64, kScalar));
  EXPECT_EQ(values(shard), (std::vector<int64_t>{2, 4}));
  auto bad_index = Run(MakeOp("ShardDataset").In(Slices({1})).In(Tensor::Scalar<int64_t>(2))
                           .In(Tensor::Scalar<int64_t>(2)).Types(kI64, kScalar));
  EXPECT_TRUE(absl::IsInvalidArgument(bad_index.status()));
  EXPECT_THAT(bad_index.status().message(), HasSubstr("currently index = 2"));
  auto no_shards = Run(MakeOp("ShardDataset").In(Slices({1})).In(Tensor::Scalar<int64_t>(0))
                           .In(Tensor::Scalar<int64_t>(0)).Types(kI64, kScalar));
  EXPECT_THAT(no_shards.status().message(), HasSubstr("num_shards = 0"));
  // Cache, Prefetch and the pass-throughs keep the elements.
  Tensor cached = RunOne(MakeOp("CacheDataset").In(Slices({7, 8})).In(Str(""))
                             .Types(kI64, kScalar));
  Tensor rep = RunOne(MakeOp("RepeatDataset").In(cached).In(Tensor::Scalar<int64_t>(2))
                          .Types(kI64, kScalar));
  Tensor pre = RunOne(MakeOp("PrefetchDataset").In(rep).In(Tensor::Scalar<int64_t>(-1))
                          .Types(kI64, kScalar));
  Tensor model = RunOne(MakeOp("ModelDataset").In(pre).Types(kI64, kScalar));
  Tensor opt = RunOne(MakeOp("OptimizeDataset").In(model).In(Tensor(DT_STRING, TensorShape({0})))
                          .Types(kI64, kScalar));
  EXPECT_EQ(values(opt), (std::vector<int64_t>{7, 8, 7, 8}));
  auto file_cache = Run(MakeOp("CacheDataset").In(Slices({1})).In(Str("/tmp/c"))
                            .Types(kI64, kScalar));
  EXPECT_TRUE(absl::IsUnimplemented(file_cache.status()));
}

TEST_F(DatasetOpsTest, ZipEndsWithTheShortestInputAndSavesItsPosition) {
  const std::vector<DataType> two = {DT_INT64, DT_INT64};
  const std::vector<PartialShape> scalars = {PartialShape({}), PartialShape({})};
  Tensor zip = RunOne(MakeOp("ZipDataset").In(Slices({1, 2, 3})).In(Slices({10, 20}))
                          .Attr("N", 2).Types(two, scalars));
  Tensor it = IteratorOver(zip, two, scalars);
  auto first = Run(MakeOp("IteratorGetNext").In(it).Types(two, scalars));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)[0].scalar<int64_t>(), 1);
  EXPECT_EQ((*first)[1].scalar<int64_t>(), 10);
  Tensor saved = RunOne(MakeOp("IteratorSaveState").In(it));
  auto rest = Drain(it, two, scalars);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0][1].scalar<int64_t>(), 20);
  ASSERT_TRUE(Run(MakeOp("IteratorRestoreState").In(it).In(saved)).ok());
  auto again = Drain(it, two, scalars);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 1u);
  auto not_ds = Run(MakeOp("ZipDataset").In(Slices({1})).In(Tensor::Scalar<int64_t>(1))
                        .Attr("N", 2).Types(two, scalars));
  EXPECT_THAT(not_ds.status().message(), HasSubstr("input_datasets[1]"));
}

TEST_F(DatasetOpsTest, BadArgumentsAreInvalidArgument) {
  auto batch0 = Run(MakeOp("BatchDataset").In(Slices({1})).In(Tensor::Scalar<int64_t>(0))
                        .Types(kI64, kVector));
  EXPECT_TRUE(absl::IsInvalidArgument(batch0.status()));
  EXPECT_THAT(batch0.status().message(), HasSubstr("Batch size must be greater than zero"));
  auto shuffle0 = Run(MakeOp("ShuffleDataset").In(Slices({1})).In(Tensor::Scalar<int64_t>(0))
                          .In(Tensor::Scalar<int64_t>(0)).In(Tensor::Scalar<int64_t>(0))
                          .Types(kI64, kScalar));
  EXPECT_THAT(shuffle0.status().message(), HasSubstr("buffer_size must be greater than zero"));
  // A tensor that is not a dataset where a dataset belongs.
  auto not_ds = Run(MakeOp("TakeDataset").In(Tensor::Scalar<int64_t>(1))
                        .In(Tensor::Scalar<int64_t>(1)).Types(kI64, kScalar));
  EXPECT_FALSE(not_ds.ok());
  auto empty_variant = Run(MakeOp("TakeDataset").In(Tensor(DT_VARIANT, TensorShape()))
                               .In(Tensor::Scalar<int64_t>(1)).Types(kI64, kScalar));
  EXPECT_TRUE(absl::IsInvalidArgument(empty_variant.status()));
  EXPECT_THAT(empty_variant.status().message(), HasSubstr("must hold a dataset"));
  // Declared types that are not the dataset's.
  auto wrong = Run(MakeOp("TakeDataset").In(Slices({1})).In(Tensor::Scalar<int64_t>(1))
                       .Types({DT_FLOAT}, kScalar));
  EXPECT_THAT(wrong.status().message(), HasSubstr("declares elements of (float)"));
  // Slices of components with different lengths.
  auto ragged = Run(MakeOp("TensorSliceDataset").In(I64({1, 2})).In(I64({1}))
                        .Types({DT_INT64, DT_INT64}, {PartialShape({}), PartialShape({})},
                               "Toutput_types"));
  EXPECT_TRUE(absl::IsInvalidArgument(ragged.status()));
  // An iterator initialized from a dataset of other element types.
  Tensor it = RunOne(MakeOp("IteratorV2").Attr("shared_name", "f").Attr("container", "")
                         .Types({DT_FLOAT}, kScalar));
  auto mismatch = Run(MakeOp("MakeIterator").In(Slices({1})).In(it));
  EXPECT_TRUE(absl::IsInvalidArgument(mismatch.status()));
  EXPECT_THAT(mismatch.status().message(), HasSubstr("(int64)"));
  // GetNext before MakeIterator.
  auto early = Run(MakeOp("IteratorGetNext").In(it).Types({DT_FLOAT}, kScalar));
  EXPECT_TRUE(absl::IsFailedPrecondition(early.status())) << early.status();
}

TEST_F(DatasetOpsTest, BatchStacksDenselyAndRejectsMismatchedShapes) {
  // f(x) = [x, x, ...] of length x: shapes differ between elements.
  flr_.Add("repeat_x", [](std::vector<Tensor> args, std::vector<Tensor>* rets) {
    const int64_t x = args[0].scalar<int64_t>();
    Tensor t(DT_INT64, TensorShape({x}));
    for (auto& v : t.flat<int64_t>()) v = x;
    rets->assign({t});
    return absl::OkStatus();
  });
  Tensor mapped = RunOne(MakeOp("MapDataset").In(Slices({2, 2, 3})).Func("f", "repeat_x")
                             .Attr("Targuments", absl::Span<const DataType>())
                             .Types(kI64, kVector));
  Tensor batched = RunOne(MakeOp("BatchDataset").In(mapped).In(Tensor::Scalar<int64_t>(2))
                              .Types(kI64, {PartialShape({-1, -1})}));
  Tensor it = IteratorOver(batched, kI64, {PartialShape({-1, -1})});
  auto first = Run(MakeOp("IteratorGetNext").In(it).Types(kI64, {PartialShape({-1, -1})}));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)[0].shape(), TensorShape({2, 2}));
  EXPECT_EQ(Ints((*first)[0]), (std::vector<int64_t>{2, 2, 2, 2}));
  // [3] alone is a dense batch of one; now [2],[3] in one batch must fail.
  Tensor b2 = RunOne(MakeOp("BatchDataset")
                         .In(RunOne(MakeOp("SkipDataset").In(mapped)
                                        .In(Tensor::Scalar<int64_t>(1)).Types(kI64, kVector)))
                         .In(Tensor::Scalar<int64_t>(2)).Types(kI64, {PartialShape({-1, -1})}));
  Tensor it2 = IteratorOver(b2, kI64, {PartialShape({-1, -1})}, "it2");
  auto bad = Run(MakeOp("IteratorGetNext").In(it2).Types(kI64, {PartialShape({-1, -1})}));
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_THAT(bad.status().message(),
              HasSubstr("Cannot batch tensors with different shapes in component 0"));
}

TEST_F(DatasetOpsTest, MapPassesCapturedArgumentsAndParallelMapKeepsOrder) {
  flr_.Add("add", [](std::vector<Tensor> args, std::vector<Tensor>* rets) {
    if (args.size() != 2) return errors::InvalidArgument("want 2 args");
    rets->assign({Tensor::Scalar<int64_t>(args[0].scalar<int64_t>() + args[1].scalar<int64_t>())});
    return absl::OkStatus();
  });
  std::vector<int64_t> in(50);
  std::iota(in.begin(), in.end(), 0);
  const std::vector<DataType> targs = {DT_INT64};
  Tensor ds = RunOne(MakeOp("ParallelMapDatasetV2").In(Slices(in)).In(Tensor::Scalar<int64_t>(100))
                         .In(Tensor::Scalar<int64_t>(4)).Func("f", "add")
                         .Attr("Targuments", absl::Span<const DataType>(targs))
                         .Types(kI64, kScalar));
  auto all = Drain(IteratorOver(ds, kI64, kScalar), kI64, kScalar);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ((*all)[i][0].scalar<int64_t>(), 100 + i);

  auto no_fn = Run(MakeOp("MapDataset").In(Slices({1})).Func("f", "missing")
                       .Attr("Targuments", absl::Span<const DataType>()).Types(kI64, kScalar));
  EXPECT_TRUE(absl::IsNotFound(no_fn.status())) << no_fn.status();
}

TEST_F(DatasetOpsTest, InterleaveFlatMapAndFilterCallDatasetFunctions) {
  // f(n) = the dataset [n*10, n*10+1, n*10+2].
  flr_.Add("three", [](std::vector<Tensor> args, std::vector<Tensor>* rets) {
    const int64_t n = args[0].scalar<int64_t>();
    rets->assign({data::DatasetToTensor(data::Dataset::FromTensorSlices(
        {Tensor::FromVector<int64_t>({n * 10, n * 10 + 1, n * 10 + 2}, TensorShape({3}))}))});
    return absl::OkStatus();
  });
  flr_.Add("is_even", [](std::vector<Tensor> args, std::vector<Tensor>* rets) {
    rets->assign({Tensor::Scalar<bool>(args[0].scalar<int64_t>() % 2 == 0)});
    return absl::OkStatus();
  });
  flr_.Add("not_bool", [](std::vector<Tensor> args, std::vector<Tensor>* rets) {
    rets->assign({args[0]});
    return absl::OkStatus();
  });
  auto values = [&](Tensor ds) {
    auto all = Drain(IteratorOver(ds, kI64, kScalar, absl::StrCat("it", kernels_.size())),
                     kI64, kScalar);
    std::vector<int64_t> v;
    if (!all.ok()) return std::vector<int64_t>{-1};
    for (auto& e : *all) v.push_back(e[0].scalar<int64_t>());
    return v;
  };
  const auto none = absl::Span<const DataType>();
  Tensor inter = RunOne(MakeOp("InterleaveDataset").In(Slices({1, 2})).In(Tensor::Scalar<int64_t>(2))
                            .In(Tensor::Scalar<int64_t>(2)).Func("f", "three")
                            .Attr("Targuments", none).Types(kI64, kScalar));
  EXPECT_EQ(values(inter), (std::vector<int64_t>{10, 11, 20, 21, 12, 22}));
  Tensor par = RunOne(MakeOp("ParallelInterleaveDatasetV2").In(Slices({1, 2}))
                          .In(Tensor::Scalar<int64_t>(2)).In(Tensor::Scalar<int64_t>(1))
                          .In(Tensor::Scalar<int64_t>(2)).Func("f", "three")
                          .Attr("Targuments", none).Types(kI64, kScalar));
  EXPECT_EQ(values(par), (std::vector<int64_t>{10, 20, 11, 21, 12, 22}));
  Tensor flat = RunOne(MakeOp("FlatMapDataset").In(Slices({1, 2})).Func("f", "three")
                           .Attr("Targuments", none).Types(kI64, kScalar));
  EXPECT_EQ(values(flat), (std::vector<int64_t>{10, 11, 12, 20, 21, 22}));
  Tensor filtered = RunOne(MakeOp("FilterDataset").In(flat).Func("predicate", "is_even")
                               .Attr("Targuments", none).Types(kI64, kScalar));
  EXPECT_EQ(values(filtered), (std::vector<int64_t>{10, 12, 20, 22}));
  Tensor bad = RunOne(MakeOp("FilterDataset").In(Slices({1})).Func("predicate", "not_bool")
                          .Attr("Targuments", none).Types(kI64, kScalar));
  auto err = Drain(IteratorOver(bad, kI64, kScalar, "bad"), kI64, kScalar);
  EXPECT_THAT(err.status().message(), HasSubstr("must return a scalar bool"));
  auto cycle0 = Run(MakeOp("InterleaveDataset").In(Slices({1})).In(Tensor::Scalar<int64_t>(0))
                        .In(Tensor::Scalar<int64_t>(1)).Func("f", "three")
                        .Attr("Targuments", none).Types(kI64, kScalar));
  EXPECT_THAT(cycle0.status().message(), HasSubstr("cycle_length must be greater than zero"));
}

TEST_F(DatasetOpsTest, OneShotIteratorRunsTheFactoryOnce) {
  int calls = 0;
  flr_.Add("factory", [&calls](std::vector<Tensor> args, std::vector<Tensor>* rets) {
    ++calls;
    if (!args.empty()) return errors::InvalidArgument("no args expected");
    rets->assign({data::DatasetToTensor(
        data::Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({5, 6}, TensorShape({2}))}))});
    return absl::OkStatus();
  });
  Op op = MakeOp("OneShotIterator").Func("dataset_factory", "factory").Types(kI64, kScalar);
  ASSERT_TRUE(Run(op).ok());
  auto it = Run(op);  // a second kernel for the same node finds the same iterator
  ASSERT_TRUE(it.ok()) << it.status();
  auto all = Drain((*it)[0], kI64, kScalar);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(calls, 1);
}

TEST_F(DatasetOpsTest, StringHandlesAnonymousIteratorsAndDelete) {
  auto anon = Run(MakeOp("AnonymousIteratorV2").Types(kI64, kScalar));
  ASSERT_TRUE(anon.ok()) << anon.status();
  ASSERT_EQ(anon->size(), 2u);
  const Tensor handle = (*anon)[0];
  ASSERT_TRUE(Run(MakeOp("MakeIterator").In(Slices({3, 4})).In(handle)).ok());
  Tensor str = RunOne(MakeOp("IteratorToStringHandle").In(handle));
  Tensor back = RunOne(MakeOp("IteratorFromStringHandleV2").In(str).Types(kI64, kScalar));
  auto all = Drain(back, kI64, kScalar);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  auto wrong = Run(MakeOp("IteratorFromStringHandleV2").In(str).Types({DT_FLOAT}, kScalar));
  EXPECT_TRUE(absl::IsInvalidArgument(wrong.status()));
  auto garbage = Run(MakeOp("IteratorFromStringHandleV2").In(Str("\xff\xff"))
                         .Types(kI64, kScalar));
  EXPECT_FALSE(garbage.ok());
  ASSERT_TRUE(Run(MakeOp("DeleteIterator").In(handle).In((*anon)[1])).ok());
  EXPECT_FALSE(Run(MakeOp("IteratorFromStringHandleV2").In(str).Types(kI64, kScalar)).ok());
}

TEST_F(DatasetOpsTest, TextLineAndTFRecordReadFilesAndNameMissingOnes) {
  const std::string dir = testing::TempDir();
  const std::string a = dir + "/dataset_kernels_a.txt", b = dir + "/dataset_kernels_b.txt";
  std::ofstream(a) << "x,1\ny,2\n";
  std::ofstream(b) << "z,3";
  Tensor files = Tensor::FromVector<std::string>({a, b}, TensorShape({2}));
  const std::vector<DataType> str = {DT_STRING};
  Tensor ds = RunOne(MakeOp("TextLineDataset").In(files).In(Str("")).In(Tensor::Scalar<int64_t>(0)));
  auto lines = Drain(IteratorOver(ds, str, kScalar, "lines"), str, kScalar);
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->size(), 3u);
  EXPECT_EQ((*lines)[2][0].scalar<std::string>(), "z,3");

  const std::string rec = dir + "/dataset_kernels.tfrecord";
  ASSERT_TRUE(WriteRecordsToFile(Env::Default(), rec, {"r0", "r1"}).ok());
  Tensor tr = RunOne(MakeOp("TFRecordDataset").In(Str(rec)).In(Str("")).In(Tensor::Scalar<int64_t>(0)));
  auto records = Drain(IteratorOver(tr, str, kScalar, "records"), str, kScalar);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[1][0].scalar<std::string>(), "r1");

  const std::string missing = dir + "/no_such_file.txt";
  Tensor gone = RunOne(MakeOp("TextLineDataset").In(Str(missing)).In(Str(""))
                           .In(Tensor::Scalar<int64_t>(0)));
  auto err = Drain(IteratorOver(gone, str, kScalar, "gone"), str, kScalar);
  EXPECT_TRUE(absl::IsNotFound(err.status())) << err.status();
  EXPECT_THAT(err.status().message(), HasSubstr(missing));
  auto gzip = Run(MakeOp("TFRecordDataset").In(Str(rec)).In(Str("GZIP"))
                      .In(Tensor::Scalar<int64_t>(0)));
  EXPECT_TRUE(absl::IsUnimplemented(gzip.status()));
  EXPECT_THAT(gzip.status().message(), HasSubstr("GZIP"));
  std::remove(a.c_str());
  std::remove(b.c_str());
  std::remove(rec.c_str());
}

TEST(DatasetOpsShapeTest, ScalarArgumentsAndSignatures) {
  ShapeTestOp batch("BatchDatasetV2");
  batch.Attr("output_types", std::vector<DataType>{DT_FLOAT})
      .Attr("output_shapes", std::vector<PartialShape>{PartialShape({-1, 3})});
  INFER_OK(batch, "[];[];[]", "[]");
  INFER_ERROR("must be rank 0", batch, "[];[2];[]");
  INFER_ERROR("must be rank 0", batch, "[];[];[1]");
  batch.Attr("output_shapes", std::vector<PartialShape>{PartialShape({}), PartialShape({})});
  INFER_ERROR("output_shapes has 2", batch, "[];[];[]");

  ShapeTestOp text("TextLineDataset");
  INFER_OK(text, "[3];[];[]", "[]");
  INFER_OK(text, "[];[];[]", "[]");
  INFER_ERROR("scalar or a vector", text, "[2,2];[];[]");
  INFER_ERROR("must be rank 0", text, "[2];[1];[]");

  ShapeTestOp shuffle("ShuffleDataset");
  shuffle.Attr("output_types", std::vector<DataType>{DT_INT64})
      .Attr("output_shapes", std::vector<PartialShape>{PartialShape({})});
  INFER_OK(shuffle, "[];[];[];[]", "[]");
  INFER_ERROR("must be rank 0", shuffle, "[];[];[];[2]");

  ShapeTestOp make("MakeIterator");
  INFER_OK(make, "[];[]", "");
  ShapeTestOp next("IteratorGetNextSync");
  next.Attr("output_types", std::vector<DataType>{DT_INT64})
      .Attr("output_shapes", std::vector<PartialShape>{PartialShape({-1, 2})});
  INFER_OK(next, "[]", "[?,2]");
}

}  // namespace
}  // namespace recflow
