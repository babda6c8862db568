// The epilogue of a fused matmul: bias + activation over rows of a product,
// shared by _FusedMatMul (fused_matmul_kernels.cc, where it is defined) and
// _DynamicQuantizedMatMul (quantized_matmul_kernels.cc), so that the two
// agree on what fused_ops means and compute it with the same functions.
#ifndef RECFLOW_KERNELS_FUSED_MATMUL_EPILOGUE_H_
#define RECFLOW_KERNELS_FUSED_MATMUL_EPILOGUE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace recflow::fused_matmul {

enum class Activation { kNone, kRelu, kRelu6, kElu, kLeakyRelu, kSigmoid, kTanh };

// What a _FusedMatMul fused_ops list means: [BiasAdd] or [BiasAdd, ACT]
// (`op` names the op in errors).
absl::StatusOr<Activation> ParseFusedOps(const std::vector<std::string>& fused_ops,
                                         const char* op = "_FusedMatMul");

// c[j] = act(c[j] + bias[j]) for j in [0, n): one row segment of a product.
using EpilogueFn = void (*)(const void* bias, double alpha, void* c, int64_t n);

// The epilogue for T = float or double.
template <typename T>
EpilogueFn EpilogueFor(Activation act);

}  // namespace recflow::fused_matmul

#endif  // RECFLOW_KERNELS_FUSED_MATMUL_EPILOGUE_H_
