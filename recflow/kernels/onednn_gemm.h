// Integer GEMM on oneDNN (Debian's libdnnl), for the int8 serving kernel
// (quantized_matmul_kernels.cc):
//
//   ASSIGN_OR_RETURN(auto gemm, onednn::U8S8Gemm::Create(k, n));
//   RETURN_IF_ERROR(gemm->Run(m, a_u8, lda, b_s8, c_s32, ldc));
//
// c[m, n] (int32) = a[m, k] (uint8) x b[k, n] (int8, row-major, ldb = n).
// One primitive per (k, n), made once with the row count left to run time,
// so any m reuses it. Run computes on the calling thread only: recflow's
// kernels split rows across their intra-op pool themselves (as MatMul does
// with OpenBLAS) and never let a library start threads of its own.
//
// a's values must be in [0, 127] (7 bits): on CPUs without VNNI the integer
// kernels add pairs of u8 x s8 products in saturating 16-bit lanes, and
// 2 x 127 x 127 is the largest sum that fits. Every thread may call Run on
// one U8S8Gemm at once.
#ifndef RECFLOW_KERNELS_ONEDNN_GEMM_H_
#define RECFLOW_KERNELS_ONEDNN_GEMM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace recflow::onednn {

class U8S8Gemm {
 public:
  static absl::StatusOr<std::unique_ptr<U8S8Gemm>> Create(int64_t k, int64_t n);
  ~U8S8Gemm();
  U8S8Gemm(const U8S8Gemm&) = delete;
  U8S8Gemm& operator=(const U8S8Gemm&) = delete;

  absl::Status Run(int64_t m, const uint8_t* a, int64_t lda, const int8_t* b, int32_t* c,
                   int64_t ldc) const;

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  // oneDNN's name for the implementation it chose ("gemm:jit").
  const std::string& implementation() const { return implementation_; }

 private:
  struct Impl;
  U8S8Gemm(int64_t k, int64_t n, std::unique_ptr<Impl> impl, std::string implementation);

  int64_t k_, n_;
  std::unique_ptr<Impl> impl_;
  std::string implementation_;
};

// oneDNN's version and the instruction set it dispatches to on this CPU,
// e.g. "oneDNN 2.6.3, isa Intel AVX2", for logs.
std::string Describe();

}  // namespace recflow::onednn

#endif  // RECFLOW_KERNELS_ONEDNN_GEMM_H_
