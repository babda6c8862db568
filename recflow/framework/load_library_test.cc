// Tests LoadOpLibrary with the custom-op example of docs/adding_an_op.md
// (examples/custom_op/zero_out.cc, built as RECFLOW_BINARY_DIR/lib/zero_out.so
// before this binary), then the ZeroOut op it adds: its registration, shape
// function, kernels for every allowed type, single- and multi-threaded, and
// its errors.
#include "recflow/framework/load_library.h"

#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/scope.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using ::testing::HasSubstr;

constexpr char kZeroOutLibrary[] = RECFLOW_BINARY_DIR "/lib/zero_out.so";

// A directory under the test temp dir, removed with everything in it.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string pattern = (std::filesystem::path(::testing::TempDir()) /
                           "recflow_load_library.XXXXXX")
                              .string();
    if (const char* made = ::mkdtemp(pattern.data()); made != nullptr)
      path_ = made;
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }  // empty if mkdtemp failed

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------
// Loading.

TEST(LoadLibraryTest, ReturnsTheOpsTheLibraryRegistered) {
  auto ops = LoadOpLibrary(kZeroOutLibrary);
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->op_size(), 1);
  const tensorflow::OpDef& op = ops->op(0);
  EXPECT_EQ(op.name(), "ZeroOut");
  ASSERT_EQ(op.input_arg_size(), 1);
  EXPECT_EQ(op.input_arg(0).name(), "to_zero");
  EXPECT_EQ(op.input_arg(0).type_attr(), "T");
  ASSERT_EQ(op.output_arg_size(), 1);
  EXPECT_EQ(op.output_arg(0).name(), "zeroed");
  EXPECT_EQ(op.output_arg(0).type_attr(), "T");
}

TEST(LoadLibraryTest, LoadingAgainReturnsTheSameList) {
  auto first = LoadOpLibrary(kZeroOutLibrary);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = LoadOpLibrary(kZeroOutLibrary);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->SerializeAsString(), second->SerializeAsString());
  ASSERT_EQ(second->op_size(), 1);
  EXPECT_EQ(second->op(0).name(), "ZeroOut");
}

TEST(LoadLibraryTest, OpIsInTheGlobalRegistryWithItsShapeFunction) {
  ASSERT_TRUE(LoadOpLibrary(kZeroOutLibrary).ok());
  const OpRegistrationData* reg = OpRegistry::Global()->Find("ZeroOut");
  ASSERT_NE(reg, nullptr);
  EXPECT_TRUE(static_cast<bool>(reg->shape_fn));
  EXPECT_THAT(OpRegistry::Global()->RegistrationErrors(), ::testing::IsEmpty());

  // The attrs as declared: T restricted to four types, preserve_index an
  // int with a minimum of 0 and a default of 0.
  const tensorflow::OpDef& op = reg->op_def;
  const tensorflow::OpDef::AttrDef* t = nullptr;
  const tensorflow::OpDef::AttrDef* preserve_index = nullptr;
  for (const auto& a : op.attr()) {
    if (a.name() == "T") t = &a;
    if (a.name() == "preserve_index") preserve_index = &a;
  }
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type(), "type");
  std::vector<int> allowed(t->allowed_values().list().type().begin(),
                           t->allowed_values().list().type().end());
  EXPECT_THAT(allowed, ::testing::UnorderedElementsAre(
                           tensorflow::DT_INT32, tensorflow::DT_INT64,
                           tensorflow::DT_FLOAT, tensorflow::DT_DOUBLE));
  ASSERT_NE(preserve_index, nullptr);
  EXPECT_EQ(preserve_index->type(), "int");
  EXPECT_TRUE(preserve_index->has_minimum());
  EXPECT_EQ(preserve_index->minimum(), 0);
  EXPECT_EQ(preserve_index->default_value().i(), 0);
}

TEST(LoadLibraryTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = "/nonexistent/recflow/no_such_op_library.so";
  auto ops = LoadOpLibrary(path);
  ASSERT_FALSE(ops.ok());
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ops.status().message(), HasSubstr(path));
}

TEST(LoadLibraryTest, FileThatIsNotASharedLibraryIsAClearError) {
  ScopedTempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.path() + "/not_a_library.so";
  {
    std::ofstream f(path);
    f << "This is a text file, not an ELF shared object. It is long enough "
         "that\n"
         "the loader reads a whole header from it before giving up.\n";
  }
  auto ops = LoadOpLibrary(path);
  ASSERT_FALSE(ops.ok());
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ops.status().message(), HasSubstr("cannot load op library"));
  EXPECT_THAT(ops.status().message(), HasSubstr(path));
}

TEST(LoadLibraryTest, AnotherSpellingOfThePathGivesTheSameOps) {
  const std::string lib = RECFLOW_BINARY_DIR "/lib/zero_out.so";
  auto first = LoadOpLibrary(lib);
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = LoadOpLibrary(RECFLOW_BINARY_DIR "/lib/../lib/zero_out.so");
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->op_size(), 1);
  EXPECT_EQ(again->op(0).name(), "ZeroOut");
  EXPECT_THAT(KernelRegistry::Global()->RegistrationErrors(), ::testing::IsEmpty());
}

// ---------------------------------------------------------------------------
// The ZeroOut op.

// x (a Placeholder of `dtype` and `shape`) -> zero (ZeroOut). Fails with
// the scope's first error.
absl::StatusOr<tensorflow::GraphDef> BuildGraph(
    DataType dtype, const PartialShape& shape,
    std::optional<int64_t> preserve_index = {}) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), dtype, shape);
  NodeBuilder b("zero", "ZeroOut");
  b.Input(x);
  if (preserve_index.has_value()) b.Attr("preserve_index", *preserve_index);
  root.AddNode(b);
  return root.ToGraphDef();
}

// Feeds `x` and fetches zero:0 in a new session.
absl::StatusOr<Tensor> RunZeroOut(const tensorflow::GraphDef& graph,
                                  const Tensor& x, int intra_op_threads = 1) {
  SessionOptions options;
  options.inter_op_threads = 1;
  options.intra_op_threads = intra_op_threads;
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                   Session::Create(options, graph));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({{"x", x}}, {"zero:0"}, {}, &out));
  return out[0];
}

// Every ZeroOut test starts with the library loaded (once per process).
class ZeroOutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ops = LoadOpLibrary(kZeroOutLibrary);
    ASSERT_TRUE(ops.ok()) << ops.status();
  }
};

// Random nonzero values, not all equal, from a fixed seed.
template <typename T>
std::vector<T> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<T> v(n);
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int64_t> dist(1, 1000000);
    for (T& x : v) x = static_cast<T>(dist(gen) * (gen() % 2 ? 1 : -1));
  } else {
    std::uniform_real_distribution<double> dist(0.5, 100.0);
    for (T& x : v) x = static_cast<T>(dist(gen) * (gen() % 2 ? 1 : -1));
  }
  return v;
}

// What ZeroOut should return for `values`.
template <typename T>
std::vector<T> Expected(const std::vector<T>& values, int64_t preserve_index) {
  std::vector<T> out(values.size(), T(0));
  out[preserve_index] = values[preserve_index];
  return out;
}

template <typename T>
std::vector<T> ToVector(const Tensor& t) {
  auto flat = t.flat<T>();
  return std::vector<T>(flat.begin(), flat.end());
}

TEST_F(ZeroOutTest, ShapeFunction) {
  ShapeTestOp op("ZeroOut");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[7]", "[7]");
  INFER_OK(op, "[3,?,2]", "[3,?,2]");
  INFER_OK(op, "[?]", "[?]");
  INFER_OK(op, "?", "?");
  INFER_ERROR("at least rank 1 but is rank 0", op, "[]");
  op.Attr("preserve_index", int64_t{-1});
  INFER_ERROR("less than the minimum 0", op, "[3]");
}

TEST_F(ZeroOutTest, Int32VectorKeepsFirstElementByDefault) {
  auto graph = BuildGraph(DT_INT32, PartialShape({kUnknownDim}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::vector<int32_t> values = RandomValues<int32_t>(17, 301);
  ASSERT_NE(*std::min_element(values.begin(), values.end()),
            *std::max_element(values.begin(), values.end()));
  auto out = RunZeroOut(*graph, Tensor::FromVector<int32_t>(values));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype(), DT_INT32);
  EXPECT_EQ(out->shape(), TensorShape({17}));
  EXPECT_EQ(ToVector<int32_t>(*out), Expected(values, 0));
}

TEST_F(ZeroOutTest, FloatVector) {
  auto graph = BuildGraph(DT_FLOAT, PartialShape({kUnknownDim}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::vector<float> values = RandomValues<float>(33, 302);
  auto out = RunZeroOut(*graph, Tensor::FromVector<float>(values));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype(), DT_FLOAT);
  EXPECT_EQ(ToVector<float>(*out), Expected(values, 0));
}

TEST_F(ZeroOutTest, PreserveIndexKeepsThatElementOfTheFlattenedInput) {
  auto graph = BuildGraph(DT_FLOAT, PartialShape({kUnknownDim, 4}),
                          /*preserve_index=*/9);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::vector<float> values = RandomValues<float>(12, 303);
  auto out = RunZeroOut(*graph,
                        Tensor::FromVector<float>(values, TensorShape({3, 4})));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape(), TensorShape({3, 4}));
  EXPECT_EQ(ToVector<float>(*out), Expected(values, 9));
  EXPECT_NE(out->flat<float>()[9], 0.0f);
}

template <typename T>
void CheckType(DataType dtype, uint32_t seed) {
  SCOPED_TRACE(DataTypeString(dtype));
  auto graph = BuildGraph(dtype, PartialShape({kUnknownDim}), 4);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::vector<T> values = RandomValues<T>(10, seed);
  auto out = RunZeroOut(*graph, Tensor::FromVector<T>(values));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype(), dtype);
  EXPECT_EQ(ToVector<T>(*out), Expected(values, 4));
}

TEST_F(ZeroOutTest, EveryAllowedTypeHasAKernel) {
  CheckType<int32_t>(DT_INT32, 311);
  CheckType<int64_t>(DT_INT64, 312);
  CheckType<float>(DT_FLOAT, 313);
  CheckType<double>(DT_DOUBLE, 314);
}

TEST_F(ZeroOutTest, DisallowedTypeFailsAtGraphConstruction) {
  auto graph = BuildGraph(DT_BOOL, PartialShape({kUnknownDim}));
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("'zero'"));
  EXPECT_THAT(graph.status().message(), HasSubstr("attr 'T'"));
}

TEST_F(ZeroOutTest, ScalarInputFailsInTheShapeFunctionNamingTheNode) {
  auto graph = BuildGraph(DT_FLOAT, PartialShape({}));
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(graph.status().message(), HasSubstr("node 'zero' (ZeroOut)"));
  EXPECT_THAT(graph.status().message(), HasSubstr("is rank 0"));
}

TEST_F(ZeroOutTest, NegativePreserveIndexFailsAtGraphConstruction) {
  auto graph = BuildGraph(DT_FLOAT, PartialShape({kUnknownDim}), -1);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("'zero'"));
  EXPECT_THAT(graph.status().message(), HasSubstr("preserve_index"));
  EXPECT_THAT(graph.status().message(), HasSubstr("less than the minimum 0"));
}

TEST_F(ZeroOutTest, PreserveIndexOutOfRangeFailsAtRunTime) {
  auto graph =
      BuildGraph(DT_INT32, PartialShape({kUnknownDim}), /*preserve_index=*/5);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto out = RunZeroOut(
      *graph, Tensor::FromVector<int32_t>(RandomValues<int32_t>(5, 304)));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("node 'zero' (ZeroOut)"));
  EXPECT_THAT(
      out.status().message(),
      HasSubstr("preserve_index is 5 but the input has only 5 elements"));
}

TEST_F(ZeroOutTest, EmptyInputFailsAtRunTime) {
  auto graph = BuildGraph(DT_FLOAT, PartialShape({kUnknownDim}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto out = RunZeroOut(*graph, Tensor(DT_FLOAT, TensorShape({0})));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("node 'zero' (ZeroOut)"));
  EXPECT_THAT(out.status().message(),
              HasSubstr("input must not be empty, got shape [0]"));
}

TEST_F(ZeroOutTest, ScalarFedThroughUnknownRankFailsAtRunTime) {
  // The shape function cannot see the rank here, so the kernel checks it.
  auto graph = BuildGraph(DT_FLOAT, PartialShape::Unknown());
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto out = RunZeroOut(*graph, Tensor::Scalar<float>(2.5f));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("node 'zero' (ZeroOut)"));
  EXPECT_THAT(out.status().message(),
              HasSubstr("input must have rank >= 1, got rank 0"));
}

// While alive, makes glibc's malloc fill new allocations with a nonzero
// byte, so a kernel that leaves part of its output unwritten is caught
// instead of passing on freshly mapped, zeroed pages. No-op elsewhere.
class ScopedDirtyAllocations {
 public:
  ScopedDirtyAllocations() {
#if defined(__GLIBC__)
    mallopt(M_PERTURB, 0x5a);
#endif
  }
  ~ScopedDirtyAllocations() {
#if defined(__GLIBC__)
    mallopt(M_PERTURB, 0);
#endif
  }
};

TEST_F(ZeroOutTest, LargeInputOnTheIntraOpPool) {
  constexpr int64_t kSize = int64_t{1} << 20;
  constexpr int64_t kPreserve = kSize - 12345;
  auto graph = BuildGraph(DT_FLOAT, PartialShape({kUnknownDim}), kPreserve);
  ASSERT_TRUE(graph.ok()) << graph.status();
  SessionOptions options;
  options.inter_op_threads = 1;
  options.intra_op_threads = 2;
  auto session = Session::Create(options, *graph);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_NE((*session)->device()->intra_op_pool(), nullptr);
  ScopedDirtyAllocations dirty;
  for (uint32_t seed : {401u, 402u}) {
    SCOPED_TRACE(seed);
    const std::vector<float> values = RandomValues<float>(kSize, seed);
    std::vector<Tensor> out;
    absl::Status s = (*session)->Run({{"x", Tensor::FromVector<float>(values)}},
                                     {"zero:0"}, {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].NumElements(), kSize);
    auto flat = out[0].flat<float>();
    int64_t nonzero = 0;
    for (int64_t i = 0; i < kSize; ++i) nonzero += flat[i] != 0.0f;
    EXPECT_EQ(nonzero, 1);
    EXPECT_EQ(flat[kPreserve], values[kPreserve]);
  }
}

}  // namespace
}  // namespace recflow
