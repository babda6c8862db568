// One GEMM entry point for recflow's CPU kernels: c[m,n] = op(a) op(b),
// row-major with leading dimensions. float and double go to OpenBLAS, which
// recflow keeps single-threaded (the process-wide setting is made once when
// this library loads) so that all parallelism is recflow's own: kernels
// split the output into blocks over the intra-op pool and call Gemm per
// block. Integer types use a plain i-p-j loop.
#ifndef RECFLOW_KERNELS_BLAS_GEMM_H_
#define RECFLOW_KERNELS_BLAS_GEMM_H_

#include <cblas.h>

#include <cstdint>
#include <type_traits>

namespace recflow::blas {

template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
  } else {
    for (int64_t i = 0; i < m; ++i) {
      T* ci = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) ci[j] = T(0);
      for (int64_t p = 0; p < k; ++p) {
        const T av = ta ? a[p * lda + i] : a[i * lda + p];
        for (int64_t j = 0; j < n; ++j) ci[j] += av * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      }
    }
  }
}

}  // namespace recflow::blas

#endif  // RECFLOW_KERNELS_BLAS_GEMM_H_
