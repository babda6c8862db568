#include "recflow/kernels/onednn_conv.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/mutex.h"
#include "recflow/core/status.h"
#include "recflow/kernels/onednn_util.h"
#include "recflow/core/threadpool.h"

// Note [oneDNN convolutions]
// PyTorch runs a float batch's convolutions on CPU through oneDNN, and so
// does recflow where that is faster than im2col + OpenBLAS (Note
// [Convolution as GEMM]): oneDNN's direct JIT kernels read NHWC in place,
// block over channels and never build the im2col matrix, which for 3x3
// filters is 9x the input. Measured per op with `bench/run conv` (2
// threads, AVX-512 EPYC, batch 32, a shared and loaded machine;
// bench/README.md has the table), oneDNN over im2col + OpenBLAS: ResNet
// 3x3 layers 1.1-1.6x per pass; the RGB stems' forward and filter gradient
// 1.5-2.6x; the depthwise 3x3 5-6x (over the vectorized loops of
// depthwise_conv_kernels.cc); a 1x1 within noise of OpenBLAS (both run one
// GEMM). The one loss: the input gradient of a stem (3 input channels),
// where oneDNN's jit kernel was 2x slower than im2col + col2im, so the
// kernels (conv_kernels.cc) keep that case, as they keep double and a batch
// smaller than the intra-op pool (below).
//
// Threads. Debian's libdnnl runs on OpenMP: a primitive executed on a
// thread uses that thread's omp_get_max_threads() threads. recflow's rule
// is that kernels split work over the intra-op pool themselves and no
// library starts threads of its own (three convolutions of one training
// step often run at once on the inter-op threads; each starting an OpenMP
// team would put 3T threads on T cores, and libgomp's idle threads spin).
// So every thread that calls oneDNN here is set to one OpenMP thread, and
// the batch is cut into one chunk per intra-op thread: each chunk runs its
// own primitive (made for the chunk's batch size) on one thread, the filter
// gradient of each chunk goes to a partial sum (conv::SumOverTasks). A
// batch smaller than the pool uses fewer threads.
//
// Layouts. Input and output are NHWC as recflow holds them. The filter is
// declared to oneDNN as "any", so it picks its blocked layout (e.g.
// OIhw16i16o); the HWIO filter is reordered into it once per call (for the
// filter gradient: out of it, per chunk). Filters are small next to the
// activations, so this costs little, and oneDNN's kernels for a plain HWIO
// filter are its slow ones.
//
// Caching. Making a primitive costs 0.1-1 ms (JIT code generation), so
// primitives are cached process-wide by pass and shape, behind a mutex held
// only for the lookup; executing one is thread-safe, given each thread its
// own scratchpad (user-managed, thread_local here) and stream. The cache is
// emptied when it passes kMaxCached entries, so a stream of new shapes
// cannot grow it without bound. A shape for which oneDNN offers only its
// reference implementation ("ref:any") is remembered as such and left to
// recflow's own loops.

namespace recflow::onednn {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

constexpr size_t kMaxCached = 512;

// One pass of one convolution at one batch size.
using Key = std::array<int64_t, 17>;

Key MakeKey(ConvPass pass, const ConvSpec& s, int64_t batch) {
  const conv::FilterWindow& w = s.window;
  return {static_cast<int64_t>(pass), batch, w.in_h, w.in_w, w.in_c, w.out_h, w.out_w, s.out_c,
          w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, w.pad_t, w.pad_l, s.depthwise ? 1 : 0};
}

// A made primitive, or why there is none (usable == false).
struct Prim {
  bool usable = false;
  std::string impl;  // oneDNN's implementation name, or the error
  dnnl::primitive primitive;
  dnnl::memory::desc a_md, b_md, c_md;  // the primitive's, for a, b and c of ConvPass
  dnnl::memory::desc user_filter_md;    // the filter (or its gradient) as recflow holds it
  dnnl::memory::desc filter_md;         // the primitive's filter (or filter gradient)
  bool reorder = false;                 // filter_md != user_filter_md
  dnnl::reorder filter_reorder;         // user -> primitive (primitive -> user for weights)
  size_t scratchpad_bytes = 0;
};

std::shared_ptr<const Prim> MakePrim(ConvPass pass, const ConvSpec& s, int64_t batch) {
  auto p = std::make_shared<Prim>();
  const conv::FilterWindow& w = s.window;
  const int64_t ic = w.in_c, oc = s.out_c;
  // padding_r: what makes oneDNN's output size formula give out_h / out_w
  // (never negative: VALID drops the rows that do not fill a window).
  const int64_t pad_b = std::max<int64_t>(0, (w.out_h - 1) * w.sh + (w.kh - 1) * w.dh + 1 -
                                                 w.in_h - w.pad_t);
  const int64_t pad_r = std::max<int64_t>(0, (w.out_w - 1) * w.sw + (w.kw - 1) * w.dw + 1 -
                                                 w.in_w - w.pad_l);
  try {
    const dnnl::engine& engine = Engine();
    const dnnl::memory::desc src({batch, ic, w.in_h, w.in_w}, dt::f32, tag::nhwc);
    const dnnl::memory::desc dst({batch, oc, w.out_h, w.out_w}, dt::f32, tag::nhwc);
    dnnl::memory::dims wdims;
    if (s.depthwise) {
      // [kh, kw, C, mult] as (groups C, out mult, in 1, kh, kw).
      const int64_t mult = oc / ic;
      wdims = {ic, mult, 1, w.kh, w.kw};
      p->user_filter_md = dnnl::memory::desc(
          wdims, dt::f32, dnnl::memory::dims{mult, 1, 1, w.kw * ic * mult, ic * mult});
    } else {
      wdims = {oc, ic, w.kh, w.kw};
      p->user_filter_md = dnnl::memory::desc(wdims, dt::f32, tag::hwio);
    }
    const dnnl::memory::desc any_filter(wdims, dt::f32, tag::any);
    const dnnl::memory::dims strides = {w.sh, w.sw}, dilates = {w.dh - 1, w.dw - 1},
                             pad_l = {w.pad_t, w.pad_l}, pad_rr = {pad_b, pad_r};
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto algo = dnnl::algorithm::convolution_direct;
    const dnnl::convolution_forward::primitive_desc fwd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, src, any_filter,
                                        dst, strides, dilates, pad_l, pad_rr),
        attr, engine);
    dnnl::primitive_desc_base pd = fwd;
    switch (pass) {
      case ConvPass::kForward:
        p->primitive = dnnl::convolution_forward(fwd);
        p->a_md = fwd.src_desc();
        p->b_md = p->filter_md = fwd.weights_desc();
        p->c_md = fwd.dst_desc();
        break;
      case ConvPass::kBackwardData: {
        const dnnl::convolution_backward_data::primitive_desc bd(
            dnnl::convolution_backward_data::desc(algo, src, any_filter, dst, strides, dilates,
                                                  pad_l, pad_rr),
            attr, engine, fwd);
        p->primitive = dnnl::convolution_backward_data(bd);
        p->a_md = bd.diff_dst_desc();
        p->b_md = p->filter_md = bd.weights_desc();
        p->c_md = bd.diff_src_desc();
        pd = bd;
        break;
      }
      case ConvPass::kBackwardWeights: {
        const dnnl::convolution_backward_weights::primitive_desc bw(
            dnnl::convolution_backward_weights::desc(algo, src, any_filter, dst, strides, dilates,
                                                     pad_l, pad_rr),
            attr, engine, fwd);
        p->primitive = dnnl::convolution_backward_weights(bw);
        p->a_md = bw.src_desc();
        p->b_md = bw.diff_dst_desc();
        p->c_md = p->filter_md = bw.diff_weights_desc();
        pd = bw;
        break;
      }
    }
    p->impl = pd.impl_info_str();
    p->scratchpad_bytes = pd.scratchpad_desc().get_size();
    p->reorder = p->filter_md != p->user_filter_md;
    if (p->reorder) {
      const bool to_user = pass == ConvPass::kBackwardWeights;
      p->filter_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(
          engine, to_user ? p->filter_md : p->user_filter_md, engine,
          to_user ? p->user_filter_md : p->filter_md));
    }
    p->usable = !absl::StartsWith(p->impl, "ref");
  } catch (const dnnl::error& e) {
    p->usable = false;
    p->impl = absl::StrCat("error: ", e.what());
  }
  return p;
}

// The cached primitive of pass/spec at `batch` (made on a miss).
std::shared_ptr<const Prim> GetPrim(ConvPass pass, const ConvSpec& s, int64_t batch) {
  static Mutex mu;  // recflow's: TSan sees it (core/mutex.h)
  static auto* cache = new absl::flat_hash_map<Key, std::shared_ptr<const Prim>>();
  const Key key = MakeKey(pass, s, batch);
  {
    MutexLock lock(&mu);
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  OneThreadHere();
  std::shared_ptr<const Prim> made = MakePrim(pass, s, batch);  // outside the lock
  MutexLock lock(&mu);
  if (cache->size() >= kMaxCached) cache->clear();
  return cache->emplace(key, std::move(made)).first->second;
}

// Per-thread execution state: a stream and scratch space.
struct ThreadState {
  std::unique_ptr<dnnl::stream> stream;
  std::vector<char> scratchpad;
  std::vector<char> filter;  // a filter in a primitive's layout
};

ThreadState& Here() {
  thread_local ThreadState state;
  OneThreadHere();
  if (state.stream == nullptr) state.stream = std::make_unique<dnnl::stream>(Engine());
  return state;
}

char* Grow(std::vector<char>& v, size_t bytes) {
  if (v.size() < bytes) v.resize(bytes);
  return v.data();
}

// Runs prim over one chunk. a, b, c as ConvPass says, already offset to the
// chunk; `filter` is the filter in prim's layout when the caller reordered it
// (forward and data passes), else null. For the weights pass c is the chunk's
// own HWIO partial sum.
void RunChunk(ConvPass pass, const Prim& prim, const float* a, const float* b, float* c,
              const void* filter) {
  ThreadState& st = Here();
  const dnnl::engine& engine = Engine();
  dnnl::memory ma(prim.a_md, engine, const_cast<float*>(a));
  dnnl::memory mb, mc;
  if (pass == ConvPass::kBackwardWeights) {
    mb = dnnl::memory(prim.b_md, engine, const_cast<float*>(b));
    mc = dnnl::memory(prim.c_md, engine,
                      prim.reorder ? Grow(st.filter, prim.filter_md.get_size())
                                   : static_cast<void*>(c));
  } else {
    void* w = const_cast<float*>(b);
    if (prim.reorder) {
      if (filter == nullptr) {  // not reordered by the caller for this layout
        w = Grow(st.filter, prim.filter_md.get_size());
        dnnl::memory from(prim.user_filter_md, engine, const_cast<float*>(b));
        dnnl::memory to(prim.filter_md, engine, w);
        prim.filter_reorder.execute(*st.stream, from, to);
      } else {
        w = const_cast<void*>(filter);
      }
    }
    mb = dnnl::memory(prim.b_md, engine, w);
    mc = dnnl::memory(prim.c_md, engine, c);
  }
  dnnl::memory ms(dnnl::memory::desc({static_cast<int64_t>(prim.scratchpad_bytes)}, dt::u8,
                                     tag::a),
                  engine, Grow(st.scratchpad, std::max<size_t>(prim.scratchpad_bytes, 1)));
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SCRATCHPAD, ms}};
  switch (pass) {
    case ConvPass::kForward:
      args.insert({{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
      break;
    case ConvPass::kBackwardData:
      args.insert({{DNNL_ARG_DIFF_DST, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DIFF_SRC, mc}});
      break;
    case ConvPass::kBackwardWeights:
      args.insert({{DNNL_ARG_SRC, ma}, {DNNL_ARG_DIFF_DST, mb}, {DNNL_ARG_DIFF_WEIGHTS, mc}});
      break;
  }
  prim.primitive.execute(*st.stream, args);
  if (pass == ConvPass::kBackwardWeights && prim.reorder) {
    dnnl::memory to(prim.user_filter_md, engine, c);
    prim.filter_reorder.execute(*st.stream, mc, to);
  }
  st.stream->wait();
}

absl::Status FromDnnl(const dnnl::error& e, const Prim& prim) {
  return errors::Internal("oneDNN convolution (", prim.impl, ") failed: ", e.what(), " (status ",
                          static_cast<int>(e.status), ")");
}

// The batch chunks for `threads` threads: `tasks` chunks of `per` images
// (the last one possibly fewer).
struct Chunks {
  int64_t tasks = 1, per = 0;
};
Chunks Split(int64_t batch, int threads) {
  Chunks c;
  c.tasks = std::clamp<int64_t>(threads, 1, std::max<int64_t>(batch, 1));
  c.per = (batch + c.tasks - 1) / c.tasks;
  c.tasks = (batch + c.per - 1) / c.per;
  return c;
}

}  // namespace

bool RunConv(OpKernelContext* ctx, ConvPass pass, const ConvSpec& s, const float* a,
             const float* b, float* c) {
  const conv::FilterWindow& w = s.window;
  if (w.batch <= 0) return false;
  ThreadPool* pool = ctx->intra_op_pool();
  const Chunks ch = Split(w.batch, pool == nullptr ? 1 : pool->NumThreads());
  const int64_t last = w.batch - (ch.tasks - 1) * ch.per;
  std::shared_ptr<const Prim> full = GetPrim(pass, s, ch.per);
  if (!full->usable) return false;
  std::shared_ptr<const Prim> tail = last == ch.per ? full : GetPrim(pass, s, last);
  if (!tail->usable) return false;

  // Per-image strides of a and c (b is the filter, or for the weights pass
  // the output gradient).
  const int64_t in_image = w.in_h * w.in_w * w.in_c, out_image = w.out_h * w.out_w * s.out_c;
  int64_t a_image = 0, b_image = 0, c_image = 0;
  switch (pass) {
    case ConvPass::kForward: a_image = in_image, c_image = out_image; break;
    case ConvPass::kBackwardData: a_image = out_image, c_image = in_image; break;
    case ConvPass::kBackwardWeights: a_image = in_image, b_image = out_image; break;
  }
  try {
    // The filter in the primitives' layout, once for all chunks.
    const void* filter = nullptr;
    std::vector<char> filter_buf;
    if (pass != ConvPass::kBackwardWeights && full->reorder) {
      filter_buf.resize(full->filter_md.get_size());
      ThreadState& st = Here();
      dnnl::memory from(full->user_filter_md, Engine(), const_cast<float*>(b));
      dnnl::memory to(full->filter_md, Engine(), filter_buf.data());
      full->filter_reorder.execute(*st.stream, from, to);
      st.stream->wait();
      filter = filter_buf.data();
    }
    // A pool thread must not throw: the first error is kept for ctx.
    std::mutex mu;
    absl::Status error;
    auto chunk = [&](int64_t t, float* dst) {
      const Prim& prim = t + 1 == ch.tasks ? *tail : *full;
      const void* f = prim.filter_md == full->filter_md ? filter : nullptr;
      const int64_t n0 = t * ch.per;
      try {
        RunChunk(pass, prim, a + n0 * a_image, b + n0 * b_image, dst, f);
      } catch (const dnnl::error& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (error.ok()) error = FromDnnl(e, prim);
      }
    };
    if (pass == ConvPass::kBackwardWeights) {
      const int64_t size = w.kh * w.kw * w.in_c * (s.depthwise ? s.out_c / w.in_c : s.out_c);
      conv::SumOverTasks(pool, ch.tasks, size, c, chunk);
    } else if (ch.tasks == 1) {
      chunk(0, c);
    } else {
      pool->ParallelFor(ch.tasks, /*cost_per_unit=*/1'000'000, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) chunk(t, c + t * ch.per * c_image);
      });
    }
    if (!error.ok()) ctx->SetStatus(error);
  } catch (const dnnl::error& e) {
    ctx->SetStatus(FromDnnl(e, *full));
  }
  return true;
}

std::string ConvImplementation(ConvPass pass, const ConvSpec& spec, int threads) {
  const Chunks ch = Split(spec.window.batch, threads);
  return GetPrim(pass, spec, ch.per)->impl;
}

}  // namespace recflow::onednn
