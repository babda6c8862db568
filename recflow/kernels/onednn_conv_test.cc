// The oneDNN convolution path (onednn_conv.cc): oneDNN has a real (not
// reference) implementation of every pass for ordinary shapes, and float
// Conv2D / DepthwiseConv2dNative with their backprops, run on it from many
// threads at once with a batch that splits unevenly over the pool, agree
// with the double kernels (recflow's own loops) and with each other.
// conv_kernels_test.cc checks the float kernels against reference loops for
// every attr combination as well.
#include "recflow/kernels/onednn_conv.h"

#include <cmath>
#include <random>
#include <string>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/conv_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

onednn::ConvSpec Spec(int64_t batch, int64_t h, int64_t c, int64_t out_c, int64_t k,
                      bool depthwise) {
  onednn::ConvSpec s;
  s.window.batch = batch;
  s.window.in_h = s.window.in_w = s.window.out_h = s.window.out_w = h;
  s.window.in_c = c;
  s.window.kh = s.window.kw = k;
  s.window.pad_t = s.window.pad_l = (k - 1) / 2;
  s.out_c = out_c;
  s.depthwise = depthwise;
  return s;
}

TEST(OnednnConvTest, OrdinaryShapesHaveRealImplementations) {
  for (const auto& spec : {Spec(8, 14, 32, 64, 3, false), Spec(8, 14, 64, 64, 1, false),
                           Spec(8, 14, 32, 32, 3, true)}) {
    for (auto pass : {onednn::ConvPass::kForward, onednn::ConvPass::kBackwardData,
                      onednn::ConvPass::kBackwardWeights}) {
      const std::string impl = onednn::ConvImplementation(pass, spec, 2);
      EXPECT_EQ(impl.rfind("ref", 0), std::string::npos) << impl;
      EXPECT_EQ(impl.rfind("error", 0), std::string::npos) << impl;
    }
  }
}

Tensor Random(DataType dtype, const TensorShape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const double v = dist(rng);
    if (dtype == DT_FLOAT) {
      t.data<float>()[i] = static_cast<float>(v);
    } else {
      t.data<double>()[i] = v;
    }
  }
  return t;
}

double At(const Tensor& t, int64_t i) {
  return t.dtype() == DT_FLOAT ? t.data<float>()[i] : t.data<double>()[i];
}

// y, dx, dw of a stride-2 SAME convolution (depthwise with multiplier 2, or
// Conv2D 12 -> 20) of a batch of 5 (chunks of 3 and 2 on 2 threads) on
// `threads` intra-op threads; one session, run from any thread.
class ConvGraph {
 public:
  ConvGraph(DataType dtype, bool depthwise, int threads) : dtype_(dtype) {
    Scope root = Scope::NewRootScope();
    const int64_t out_c = depthwise ? 24 : 20;
    x_shape_ = TensorShape({5, 11, 9, 12});
    w_shape_ = TensorShape({3, 3, 12, depthwise ? 2 : out_c});
    dy_shape_ = TensorShape({5, 6, 5, out_c});
    Output x = ops::Placeholder(root.WithOpName("x"), dtype);
    Output w = ops::Placeholder(root.WithOpName("w"), dtype);
    Output dy = ops::Placeholder(root.WithOpName("dy"), dtype);
    const ops::Conv2DAttrs attrs{.strides = {1, 2, 2, 1}};
    if (depthwise) {
      ops::DepthwiseConv2dNative(root.WithOpName("y"), x, w, attrs);
      ops::DepthwiseConv2dNativeBackpropInput(root.WithOpName("dx"), ops::Shape(root, x), w, dy,
                                              attrs);
      ops::DepthwiseConv2dNativeBackpropFilter(root.WithOpName("dw"), x, ops::Shape(root, w), dy,
                                               attrs);
    } else {
      ops::Conv2D(root.WithOpName("y"), x, w, attrs);
      ops::Conv2DBackpropInput(root.WithOpName("dx"), ops::Shape(root, x), w, dy, attrs);
      ops::Conv2DBackpropFilter(root.WithOpName("dw"), x, ops::Shape(root, w), dy, attrs);
    }
    EXPECT_TRUE(root.status().ok()) << root.status();
    auto def = root.ToGraphDef();
    EXPECT_TRUE(def.ok()) << def.status();
    SessionOptions options;
    options.inter_op_threads = threads;
    options.intra_op_threads = threads;
    auto session = Session::Create(options, *def);
    EXPECT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
  }

  std::vector<Tensor> Run(uint32_t seed) {
    std::vector<Tensor> out;
    const absl::Status s = session_->Run({{"x", Random(dtype_, x_shape_, seed)},
                                          {"w", Random(dtype_, w_shape_, seed + 1)},
                                          {"dy", Random(dtype_, dy_shape_, seed + 2)}},
                                         {"y", "dx", "dw"}, {}, &out);
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

 private:
  DataType dtype_;
  TensorShape x_shape_, w_shape_, dy_shape_;
  std::unique_ptr<Session> session_;
};

TEST(OnednnConvTest, FloatAgreesWithDoubleFromManyThreads) {
  for (bool depthwise : {false, true}) {
    SCOPED_TRACE(depthwise ? "depthwise" : "conv2d");
    ConvGraph reference(DT_DOUBLE, depthwise, 1);
    const std::vector<Tensor> want = reference.Run(7);
    ConvGraph graph(DT_FLOAT, depthwise, 2);
    const std::vector<Tensor> first = graph.Run(7);
    ASSERT_EQ(first.size(), 3u);
    const char* names[] = {"y", "dx", "dw"};
    for (int o = 0; o < 3; ++o) {
      ASSERT_EQ(first[o].shape(), want[o].shape()) << names[o];
      for (int64_t i = 0; i < want[o].NumElements(); ++i) {
        ASSERT_NEAR(At(first[o], i), At(want[o], i), 1e-4 * (1 + std::fabs(At(want[o], i))))
            << names[o] << "[" << i << "]";
      }
    }
    // The same session from 4 threads at once: every run gives the same bits.
    std::vector<std::thread> threads;
    std::vector<int> mismatches(4, 0);
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int r = 0; r < 5; ++r) {
          const std::vector<Tensor> got = graph.Run(7);
          for (int o = 0; o < 3; ++o) {
            for (int64_t i = 0; i < got[o].NumElements(); ++i) {
              mismatches[t] += got[o].data<float>()[i] != first[o].data<float>()[i];
            }
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  }
}

}  // namespace
}  // namespace recflow
