// The README's ten-line example, kept compiling by the build.
#include <iostream>

#include "recflow/core/logging.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/session.h"

int main() {
  using namespace recflow;
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 2}));
  Output w = ops::Const(root, {1.f, 2.f, 3.f, 4.f}, TensorShape({2, 2}));
  ops::MatMul(root.WithOpName("y"), x, w);  // shapes are checked here
  auto session = Session::Create({}, root.ToGraphDef().value()).value();
  std::vector<Tensor> out;
  CHECK_OK(session->Run({{"x", Tensor::FromVector<float>({1, 1}, TensorShape({1, 2}))}},
                        {"y"}, {}, &out));  // out[0] = [[4, 6]]
  std::cout << out[0].DebugString() << "\n";
  return 0;
}
