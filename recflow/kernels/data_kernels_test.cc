// The input pipeline's graph face: IteratorV2 / IteratorGetNext /
// IteratorSaveState / IteratorRestoreState over an iterator registered with
// data::RegisterIterator.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/data/dataset.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/framework/scope.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/data_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

Tensor Int64Range(int64_t n) {
  Tensor t(DT_INT64, TensorShape({n}));
  for (int64_t i = 0; i < n; ++i) t.flat<int64_t>()[i] = 100 + i;
  return t;
}

std::vector<int64_t> Values(const Tensor& t) {
  auto f = t.flat<int64_t>();
  return std::vector<int64_t>(f.begin(), f.end());
}

// A session whose graph pulls batches of 2 from the registered "input"
// iterator: fetch "next:0"; "save:0" gives the position; feeding "state"
// and running "restore" moves it back.
std::unique_ptr<Session> MakeSession(const std::vector<DataType>& types,
                                     const std::vector<PartialShape>& shapes,
                                     const std::string& name = "input") {
  Scope root = Scope::NewRootScope();
  Output h = ops::IteratorV2(root.WithOpName("it"), name, types, shapes);
  ops::IteratorGetNext(root.WithOpName("next"), h, types, shapes);
  ops::IteratorSaveState(root.WithOpName("save"), h);
  Output state = ops::Placeholder(root.WithOpName("state"), DT_STRING);
  ops::IteratorRestoreState(root.WithOpName("restore"), h, state);
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  auto session = Session::Create(SessionOptions{1, 1}, *def);
  EXPECT_TRUE(session.ok()) << session.status();
  return *std::move(session);
}

TEST(DataKernelsTest, GetNextYieldsBatchesThenEndOfSequence) {
  data::Dataset ds = data::Dataset::FromTensorSlices({Int64Range(5)}).Batch(2);
  const std::vector<DataType> types = {DT_INT64};
  const std::vector<PartialShape> shapes = {PartialShape({-1})};
  auto session = MakeSession(types, shapes);
  ASSERT_TRUE(data::RegisterIterator(session->device()->resource_manager(), "",
                                     "input", ds)
                  .ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"next:0"}, {}, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<int64_t>{100, 101}));

  // Save after the first batch, read on, then go back.
  ASSERT_TRUE(session->Run({}, {"save:0"}, {}, &out).ok());
  const Tensor saved = out[0];
  ASSERT_TRUE(session->Run({}, {"next:0"}, {}, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<int64_t>{102, 103}));
  ASSERT_TRUE(session->Run({{"state", saved}}, {}, {"restore"}, &out).ok());
  ASSERT_TRUE(session->Run({}, {"next:0"}, {}, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<int64_t>{102, 103}));
  ASSERT_TRUE(session->Run({}, {"next:0"}, {}, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<int64_t>{104}));

  absl::Status end = session->Run({}, {"next:0"}, {}, &out);
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
  EXPECT_THAT(end.message(), HasSubstr("End of sequence"));
}

TEST(DataKernelsTest, UnregisteredIteratorIsNamed) {
  auto session = MakeSession({DT_INT64}, {PartialShape({-1})}, "missing_input");
  std::vector<Tensor> out;
  absl::Status s = session->Run({}, {"next:0"}, {}, &out);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("not been initialized"));
  EXPECT_THAT(s.message(), HasSubstr("missing_input"));
  EXPECT_THAT(s.message(), HasSubstr("RegisterIterator"));
}

TEST(DataKernelsTest, DeclaredTypesMustMatchThePipeline) {
  data::Dataset ds = data::Dataset::FromTensorSlices({Int64Range(3)});
  auto session = MakeSession({DT_FLOAT}, {PartialShape({})});
  ASSERT_TRUE(data::RegisterIterator(session->device()->resource_manager(), "",
                                     "input", ds)
                  .ok());
  std::vector<Tensor> out;
  absl::Status s = session->Run({}, {"next:0"}, {}, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("yields (int64)"));
  EXPECT_THAT(s.message(), HasSubstr("declares (float)"));
}

TEST(DataKernelsTest, CorruptedStateIsAnErrorNotACrash) {
  data::Dataset ds = data::Dataset::FromTensorSlices({Int64Range(3)});
  auto session = MakeSession({DT_INT64}, {PartialShape({})});
  ASSERT_TRUE(data::RegisterIterator(session->device()->resource_manager(), "",
                                     "input", ds)
                  .ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"save:0"}, {}, &out).ok());
  std::string bytes = out[0].scalar<std::string>();
  for (std::string bad : {std::string(), bytes.substr(0, bytes.size() / 2),
                          std::string(bytes.size(), 'x')}) {
    Tensor state(DT_STRING, TensorShape({}));
    state.scalar<std::string>() = bad;
    absl::Status s = session->Run({{"state", state}}, {}, {"restore"}, &out);
    EXPECT_FALSE(s.ok()) << "restored from " << bad.size() << " bad bytes";
  }
  // The iterator still works from where it was.
  ASSERT_TRUE(session->Run({}, {"next:0"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<int64_t>(), 100);
}

TEST(DataOpsShapeTest, IteratorOps) {
  ShapeTestOp it("IteratorV2");
  it.Attr("shared_name", "x").Attr("container", "")
      .Attr("output_types", std::vector<DataType>{DT_FLOAT, DT_INT64})
      .Attr("output_shapes",
            std::vector<PartialShape>{PartialShape({-1, 13}), PartialShape({-1})});
  INFER_OK(it, "", "[]");

  ShapeTestOp next("IteratorGetNext");
  next.Attr("output_types", std::vector<DataType>{DT_FLOAT, DT_INT64})
      .Attr("output_shapes",
            std::vector<PartialShape>{PartialShape({-1, 13}), PartialShape({-1})});
  INFER_OK(next, "[]", "[?,13];[?]");
  INFER_ERROR("scalar handle", next, "[2]");
  next.Attr("output_shapes", std::vector<PartialShape>{PartialShape({-1})});
  INFER_ERROR("output_shapes has 1", next, "[]");

  ShapeTestOp restore("IteratorRestoreState");
  INFER_OK(restore, "[];[]", "");
  INFER_ERROR("scalar string", restore, "[];[3]");
}

}  // namespace
}  // namespace recflow
