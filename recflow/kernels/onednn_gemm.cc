#include "recflow/kernels/onednn_gemm.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/kernels/onednn_util.h"

namespace recflow::onednn {
namespace {

using dt = dnnl::memory::data_type;

absl::Status FromDnnl(const dnnl::error& e, const char* what) {
  return errors::Internal("oneDNN ", what, " failed: ", e.what(), " (status ",
                          static_cast<int>(e.status), ")");
}

}  // namespace

struct U8S8Gemm::Impl {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
  size_t scratchpad_bytes = 0;
};

absl::StatusOr<std::unique_ptr<U8S8Gemm>> U8S8Gemm::Create(int64_t k, int64_t n) {
  if (k <= 0 || n <= 0) {
    return errors::InvalidArgument("an int8 GEMM needs k > 0 and n > 0, got k=", k, " n=", n);
  }
  OneThreadHere();
  try {
    const dnnl::memory::desc a({DNNL_RUNTIME_DIM_VAL, k}, dt::u8, {k, 1});
    const dnnl::memory::desc b({k, n}, dt::s8, {n, 1});
    const dnnl::memory::desc c({DNNL_RUNTIME_DIM_VAL, n}, dt::s32, {DNNL_RUNTIME_DIM_VAL, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto impl = std::make_unique<Impl>();
    impl->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, Engine());
    impl->primitive = dnnl::matmul(impl->pd);
    impl->scratchpad_bytes = impl->pd.scratchpad_desc().get_size();
    std::string name = impl->pd.impl_info_str();
    return std::unique_ptr<U8S8Gemm>(new U8S8Gemm(k, n, std::move(impl), std::move(name)));
  } catch (const dnnl::error& e) {
    return FromDnnl(e, absl::StrCat("u8 x s8 matmul [?, ", k, "] x [", k, ", ", n, "]").c_str());
  }
}

U8S8Gemm::U8S8Gemm(int64_t k, int64_t n, std::unique_ptr<Impl> impl, std::string implementation)
    : k_(k), n_(n), impl_(std::move(impl)), implementation_(std::move(implementation)) {}

U8S8Gemm::~U8S8Gemm() = default;

absl::Status U8S8Gemm::Run(int64_t m, const uint8_t* a, int64_t lda, const int8_t* b, int32_t* c,
                           int64_t ldc) const {
  if (m <= 0) return absl::OkStatus();
  OneThreadHere();
  thread_local std::vector<uint8_t> scratchpad;
  thread_local std::unique_ptr<dnnl::stream> stream;
  try {
    if (stream == nullptr) stream = std::make_unique<dnnl::stream>(Engine());
    if (scratchpad.size() < impl_->scratchpad_bytes) scratchpad.resize(impl_->scratchpad_bytes);
    const dnnl::engine& engine = Engine();
    dnnl::memory ma({{m, k_}, dt::u8, {lda, 1}}, engine, const_cast<uint8_t*>(a));
    dnnl::memory mb({{k_, n_}, dt::s8, {n_, 1}}, engine, const_cast<int8_t*>(b));
    dnnl::memory mc({{m, n_}, dt::s32, {ldc, 1}}, engine, c);
    dnnl::memory ms(impl_->pd.scratchpad_desc(), engine, scratchpad.data());
    impl_->primitive.execute(*stream, {{DNNL_ARG_SRC, ma},
                                       {DNNL_ARG_WEIGHTS, mb},
                                       {DNNL_ARG_DST, mc},
                                       {DNNL_ARG_SCRATCHPAD, ms}});
    stream->wait();
  } catch (const dnnl::error& e) {
    return FromDnnl(e, absl::StrCat("u8 x s8 matmul [", m, ", ", k_, "] x [", k_, ", ", n_, "]")
                           .c_str());
  }
  return absl::OkStatus();
}

std::string Describe() {
  const dnnl_version_t* v = dnnl_version();
  const char* isa = "unknown";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: isa = "SSE4.1"; break;
    case dnnl::cpu_isa::avx: isa = "AVX"; break;
    case dnnl::cpu_isa::avx2: isa = "AVX2"; break;
    case dnnl::cpu_isa::avx2_vnni: isa = "AVX2 VNNI"; break;
    case dnnl::cpu_isa::avx512_core: isa = "AVX-512"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "AVX-512 VNNI"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "AVX-512 BF16"; break;
    case dnnl::cpu_isa::avx512_core_amx: isa = "AMX"; break;
    default: break;
  }
  return absl::StrCat("oneDNN ", v->major, ".", v->minor, ".", v->patch, ", isa ", isa);
}

}  // namespace recflow::onednn
