#include "recflow/framework/tensor_util.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/partial_shape.h"

namespace recflow {
namespace {

using testing::HasSubstr;

TEST(TensorUtilTest, RoundTripsEveryStorableType) {
  std::mt19937 rng(11);
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_INT8, DT_INT16,
                      DT_UINT16, DT_UINT32, DT_UINT64, DT_BOOL, DT_HALF, DT_BFLOAT16,
                      DT_COMPLEX64, DT_COMPLEX128}) {
    Tensor t(dt, TensorShape({3, 5}));
    auto* bytes = reinterpret_cast<uint8_t*>(t.raw_data());
    for (size_t i = 0; i < t.TotalBytes(); ++i) bytes[i] = rng() & (dt == DT_BOOL ? 1 : 0xff);
    tensorflow::TensorProto proto;
    TensorToProto(t, &proto);
    auto back = TensorFromProto(proto);
    ASSERT_TRUE(back.ok()) << DataTypeString(dt) << ": " << back.status();
    EXPECT_TRUE(TensorsEqual(t, *back)) << DataTypeString(dt);
  }
  Tensor s(DT_STRING, TensorShape({2}));
  s.flat<std::string>()[0] = std::string("a\0b", 3);
  s.flat<std::string>()[1] = "xyz";
  tensorflow::TensorProto proto;
  TensorToProto(s, &proto);
  EXPECT_TRUE(TensorsEqual(s, *TensorFromProto(proto)));
}

TEST(TensorUtilTest, TypedFieldsRepeatTheLastValue) {
  tensorflow::TensorProto p;
  p.set_dtype(tensorflow::DT_FLOAT);
  p.mutable_tensor_shape()->add_dim()->set_size(4);
  p.add_float_val(1.5f);
  p.add_float_val(2.5f);
  auto t = TensorFromProto(p);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(std::vector<float>(t->flat<float>().begin(), t->flat<float>().end()),
              testing::ElementsAre(1.5f, 2.5f, 2.5f, 2.5f));
  p.clear_float_val();
  t = TensorFromProto(p);
  EXPECT_EQ(t->flat<float>()[3], 0.f);  // empty means zeros
  tensorflow::TensorProto h;
  h.set_dtype(tensorflow::DT_HALF);
  h.add_half_val(0x3c00);
  EXPECT_EQ(static_cast<float>(TensorFromProto(h)->scalar<half>()), 1.0f);
}

TEST(TensorUtilTest, RejectsBadProtos) {
  auto err = [](const tensorflow::TensorProto& p) {
    auto t = TensorFromProto(p);
    EXPECT_FALSE(t.ok());
    return std::string(t.status().message());
  };
  tensorflow::TensorProto p;
  p.set_dtype(static_cast<tensorflow::DataType>(77));
  EXPECT_THAT(err(p), HasSubstr("invalid dtype 77"));

  p.set_dtype(tensorflow::DT_FLOAT);
  p.mutable_tensor_shape()->add_dim()->set_size(-1);
  EXPECT_THAT(err(p), HasSubstr("must be fully defined"));

  p.mutable_tensor_shape()->mutable_dim(0)->set_size(2);
  p.set_tensor_content("12345");  // 5 bytes, 8 expected (truncated)
  EXPECT_THAT(err(p), HasSubstr("5 bytes of tensor_content, expected 8"));

  p.clear_tensor_content();
  for (int i = 0; i < 3; ++i) p.add_float_val(1);
  EXPECT_THAT(err(p), HasSubstr("at most 2 fit"));

  tensorflow::TensorProto s;
  s.set_dtype(tensorflow::DT_STRING);
  s.set_tensor_content("abc");
  EXPECT_THAT(err(s), HasSubstr("cannot use tensor_content"));

  tensorflow::TensorProto huge;
  huge.set_dtype(tensorflow::DT_FLOAT);
  huge.mutable_tensor_shape()->add_dim()->set_size(1ll << 40);
  huge.mutable_tensor_shape()->add_dim()->set_size(1ll << 40);
  EXPECT_THAT(err(huge), HasSubstr("int64"));

  tensorflow::TensorProto oom;
  oom.set_dtype(tensorflow::DT_DOUBLE);
  oom.mutable_tensor_shape()->add_dim()->set_size(1ll << 58);
  auto t = TensorFromProto(oom);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);

  tensorflow::TensorProto rank;
  rank.set_dtype(tensorflow::DT_FLOAT);
  rank.mutable_tensor_shape()->set_unknown_rank(true);
  EXPECT_THAT(err(rank), HasSubstr("fully defined"));
}

TEST(PartialShapeTest, ParseMergeAndProto) {
  auto s = PartialShape::Parse("[2,?,3]");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank(), 3);
  EXPECT_FALSE(s->IsFullyDefined());
  EXPECT_EQ(s->DebugString(), "[2,?,3]");
  EXPECT_EQ(PartialShape::Parse("?")->rank(), -1);
  EXPECT_EQ(PartialShape::Parse("[]")->rank(), 0);
  EXPECT_FALSE(PartialShape::Parse("[2,x]").ok());
  EXPECT_FALSE(PartialShape::Parse("2,3").ok());
  EXPECT_EQ(s->Merge(PartialShape({2, 7, -1}))->DebugString(), "[2,7,3]");
  EXPECT_THAT(s->Merge(PartialShape({2, 7, 4})).status().message(), HasSubstr("dimension 2"));
  EXPECT_FALSE(s->IsCompatibleWith(PartialShape({2, 3})));
  EXPECT_TRUE(s->IsCompatibleWith(PartialShape::Unknown()));
  tensorflow::TensorShapeProto proto;
  s->ToProto(&proto);
  EXPECT_EQ(*PartialShape::FromProto(proto), *s);
  proto.set_unknown_rank(true);
  EXPECT_FALSE(PartialShape::FromProto(proto).ok());  // unknown rank with dims
}

TEST(AttrValueUtilTest, TypedGettersExplainMismatches) {
  tensorflow::NodeDef def;
  def.set_name("n");
  SetAttrValue(int64_t{5}, &(*def.mutable_attr())["i"]);
  SetAttrValue(std::vector<int64_t>{1, 2}, &(*def.mutable_attr())["li"]);
  SetAttrValue(int64_t{1} << 40, &(*def.mutable_attr())["big"]);
  AttrSlice attrs(def);
  int64_t i;
  EXPECT_TRUE(GetNodeAttr(attrs, "i", &i).ok());
  EXPECT_EQ(i, 5);
  float f;
  EXPECT_THAT(GetNodeAttr(attrs, "i", &f).message(), HasSubstr("holds int, expected float"));
  EXPECT_THAT(GetNodeAttr(attrs, "nope", &f).message(), HasSubstr("no attr named 'nope'"));
  EXPECT_THAT(GetNodeAttr(attrs, "nope", &f).message(), HasSubstr("node 'n'"));
  int32_t small;
  EXPECT_THAT(GetNodeAttr(attrs, "big", &small).message(), HasSubstr("does not fit"));
  std::vector<int64_t> li;
  EXPECT_TRUE(GetNodeAttr(attrs, "li", &li).ok());
  EXPECT_EQ(li.size(), 2u);
  EXPECT_EQ(SummarizeAttrValue(def.attr().at("li")), "[1, 2]");
  EXPECT_EQ(AttrValueKind(def.attr().at("li")), "list(int)");
}

}  // namespace
}  // namespace recflow
