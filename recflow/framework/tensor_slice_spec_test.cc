// ParseShapeAndSlice: TensorFlow's shape_and_slice syntax, and a clear
// InvalidArgument quoting the spec for every kind of bad spec.
#include "recflow/framework/tensor_slice_spec.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace recflow {
namespace {

using testing::HasSubstr;

TEST(TensorSliceSpecTest, Parses) {
  auto s = ParseShapeAndSlice("10 4 0,5:-");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->full_shape, TensorShape({10, 4}));
  EXPECT_EQ(s->slice, (std::vector<SliceExtent>{{0, 5}, {0, -1}}));
  EXPECT_EQ(s->slice_shape, TensorShape({5, 4}));
  // The estimator export's bias: a [1] tensor, its whole single row.
  s = ParseShapeAndSlice("1 0,1");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->slice, (std::vector<SliceExtent>{{0, 1}}));
  EXPECT_EQ(s->slice_shape, TensorShape({1}));
  // Explicit extents stay explicit (they are part of the slice key); "0,-1"
  // is TensorFlow's kFullExtent.
  s = ParseShapeAndSlice("7 3 5,2:0,-1");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->slice, (std::vector<SliceExtent>{{5, 2}, {0, -1}}));
  EXPECT_EQ(s->slice_shape, TensorShape({2, 3}));
  s = ParseShapeAndSlice("3 2 4 -:1,1:2,2");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->slice_shape, TensorShape({3, 1, 2}));
}

TEST(TensorSliceSpecTest, BadSpecs) {
  struct Case {
    const char* spec;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {"", "needs the full shape and a slice"},
           {"0,1", "needs the full shape and a slice"},
           {"x 0,1", "dimension 'x' is not a non-negative number"},
           {"-3 0,1", "dimension '-3' is not a non-negative number"},
           {"4 0;1", "expected a pair of numbers or '-' but got '0;1'"},
           {"4 1,2,3", "expected a pair of numbers or '-' but got '1,2,3'"},
           {"4 a,1", "expected a pair of numbers or '-'"},
           {"4 -1,2", "non-negative start and a positive length"},
           {"4 1,0", "non-negative start and a positive length"},
           {"4 2 0,1", "the slice has 1 dimensions but the shape [4,2] has 2"},
           {"4 0,1:-", "the slice has 2 dimensions but the shape [4] has 1"},
           {"4 3,2", "extent in dimension 0 out of bounds of shape [4]"},
           {"4 5,1", "extent in dimension 0 out of bounds"},
           {"4 9223372036854775807,9223372036854775807", "out of bounds"},
       }) {
    auto s = ParseShapeAndSlice(c.spec);
    ASSERT_FALSE(s.ok()) << c.spec;
    EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.error)) << c.spec;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(absl::StrCat("\"", c.spec, "\"")));
  }
}

}  // namespace
}  // namespace recflow
