#include "recflow/runtime/executor.h"

#include <atomic>
#include <chrono>
#include <exception>

#include "recflow/core/logging.h"
#include "recflow/core/mutex.h"

namespace recflow {

// Note [Executor step state]
// Each node of the graph owns a contiguous range of input slots in one flat
// array (NodeItem::input_start). A producer writes each output into its
// consumers' slots (moving it into the last consumer, so a single-consumer
// output keeps a use count of one and the consumer may reuse its buffer) and
// then decrements the consumer's pending count; the decrement that reaches
// zero makes the consumer ready. `outstanding` counts nodes that are ready
// or running: a finishing node adds (newly ready - 1), and the step is done
// when it reaches zero. After an error no node propagates, so the count
// drains to zero without starting new work.

// Note [Executor inline decisions]
// Whether a ready node runs inline (on the thread that made it ready, in its
// local queue) or goes to the inter-op pool is decided by its cost. Before
// a node has run, the kernel's IsExpensive() stands in for the cost; after,
// the executor measures it (every run of a few first steps, then one step in
// kSampleEvery) and a node is expensive when it took more than
// kExpensiveNs. This is TensorFlow's executor's cost-model idea: an op type
// says little about one node's cost (a "cheap" elementwise Mul over 7 MB
// takes a millisecond; an "expensive" optimizer update of a [1] bias takes
// a microsecond). A costly node kept in a local queue would wait there while
// another thread idles; a tiny node sent to the pool pays a thread handoff
// worth more than itself.
constexpr int64_t kExpensiveNs = 25'000;
constexpr int64_t kMeasuredRuns = 4;
constexpr int64_t kSampleEvery = 16;

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Executor::NodeItem {
  const Node* node = nullptr;
  std::unique_ptr<OpKernel> kernel;
  bool expensive = true;
  int input_start = 0;
  int num_inputs = 0;
  int initial_pending = 0;
  std::vector<bool> wants_ref;  // per input: declared Ref(T)
  struct Out {
    int dst;        // item index
    int dst_slot;   // absolute slot, or -1 for a control edge
    int src_output;
    bool last_use;  // the last data edge of src_output: move, don't copy
  };
  std::vector<Out> outs;
};

struct Executor::StepState {
  explicit StepState(int num_items, int num_slots)
      : slots(num_slots), pending(new std::atomic<int>[num_items]) {}

  std::vector<TensorValue> slots;
  std::unique_ptr<std::atomic<int>[]> pending;
  std::atomic<int> outstanding{0};
  std::atomic<bool> cancelled{false};
  bool measure = false;  // time kernels into cost_ns_ (Note [Executor inline decisions])
  Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);
  Notification done;
  const Args* args = nullptr;
};

Executor::~Executor() = default;

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const Options& options,
                                                           std::unique_ptr<Graph> graph) {
  if (options.device == nullptr) return errors::InvalidArgument("Executor needs a device");
  auto ex = std::unique_ptr<Executor>(new Executor);
  ex->options_ = options;
  ASSIGN_OR_RETURN(std::vector<Node*> order, graph->TopologicalOrder());
  ex->items_.resize(graph->num_nodes());
  int slot = 0;
  for (const auto& n : graph->nodes()) {
    NodeItem& item = ex->items_[n->id()];
    item.node = n.get();
    if (!n->IsOpRegistered()) {
      return errors::NotFound("node '", n->name(), "' uses op '", n->op(),
                              "', which is not registered in this binary; load the library "
                              "that defines it (LoadOpLibrary / --load_op_library)");
    }
    ASSIGN_OR_RETURN(item.kernel, KernelRegistry::Global()->CreateKernel(
                                      options.device, n->def(), n->op_reg()->op_def,
                                      n->input_types(), n->output_types(),
                                      options.function_library));
    item.expensive = item.kernel->IsExpensive();
    item.input_start = slot;
    item.num_inputs = n->num_inputs();
    slot += item.num_inputs;
    item.initial_pending = static_cast<int>(n->in_edges().size());
    for (DataType t : n->input_types()) item.wants_ref.push_back(IsRefType(t));
    if (item.initial_pending == 0) ex->roots_.push_back(n->id());
  }
  ex->total_inputs_ = slot;
  ex->cost_ns_.reset(new std::atomic<int64_t>[ex->items_.size()]);
  for (size_t i = 0; i < ex->items_.size(); ++i) ex->cost_ns_[i].store(-1);
  for (const auto& n : graph->nodes()) {
    NodeItem& item = ex->items_[n->id()];
    std::vector<int> last_edge(n->num_outputs(), -1);
    for (const Edge* e : n->out_edges()) {
      const int dst_slot =
          e->IsControlEdge() ? -1 : ex->items_[e->dst->id()].input_start + e->dst_input;
      if (!e->IsControlEdge()) last_edge[e->src_output] = static_cast<int>(item.outs.size());
      item.outs.push_back({e->dst->id(), dst_slot, e->src_output, false});
    }
    for (int idx : last_edge) {
      if (idx >= 0) item.outs[idx].last_use = true;
    }
  }
  ex->graph_ = std::move(graph);
  return ex;
}

absl::Status Executor::Run(const Args& args) const {
  if (items_.empty()) return absl::OkStatus();
  StepState step(static_cast<int>(items_.size()), total_inputs_);
  step.args = &args;
  const int64_t run = runs_.fetch_add(1, std::memory_order_relaxed);
  step.measure = run < kMeasuredRuns || run % kSampleEvery == 0;
  for (size_t i = 0; i < items_.size(); ++i) {
    step.pending[i].store(items_[i].initial_pending, std::memory_order_relaxed);
  }
  step.outstanding.store(static_cast<int>(roots_.size()), std::memory_order_relaxed);
  // Roots: expensive ones to the pool, the rest inline on this thread.
  std::vector<int> inline_roots;
  for (int r : roots_) {
    if (IsExpensive(r) && options_.inter_op_pool != nullptr) {
      options_.inter_op_pool->Schedule([this, &step, r] { Process(&step, r); });
    } else {
      inline_roots.push_back(r);
    }
  }
  // One local queue for all of them (in order): while roots remain, an
  // expensive node they make ready goes to the pool instead of running here
  // and holding back the roots after it (52 embedding lookups, each made
  // ready by its own VarHandleOp root, ran one after another on this thread).
  if (!inline_roots.empty()) {
    ProcessQueue(&step, std::vector<int>(inline_roots.rbegin(), inline_roots.rend()));
  }
  step.done.WaitForNotification();
  MutexLock lock(&step.mu);
  return step.status;
}

void Executor::Fail(StepState* step, int item, const absl::Status& s) const {
  const Node* n = items_[item].node;
  MutexLock lock(&step->mu);
  if (step->status.ok()) {
    step->status = absl::Status(
        s.code(), absl::StrCat("node '", n->name(), "' (", n->op(), "): ", s.message()));
  }
  step->cancelled.store(true, std::memory_order_release);
}

void Executor::Process(StepState* step, int first) const { ProcessQueue(step, {first}); }

void Executor::ProcessQueue(StepState* step, std::vector<int> queue) const {
  // Cheap nodes made ready here run on this thread (the queue is a stack:
  // its back runs next).
  std::vector<int> ready;
  while (!queue.empty()) {
    const int id = queue.back();
    queue.pop_back();
    const NodeItem& item = items_[id];
    TensorValue* inputs = step->slots.data() + item.input_start;
    bool ok = !step->cancelled.load(std::memory_order_acquire);
    // Values read from ref edges (a consumer of a TF1 variable reads it).
    for (int i = 0; ok && i < item.num_inputs; ++i) {
      if (inputs[i].is_ref() && !item.wants_ref[i]) {
        auto value = inputs[i].ref->Read();
        if (!value.ok()) {
          Fail(step, id, value.status());
          ok = false;
          break;
        }
        inputs[i].tensor = *std::move(value);
        inputs[i].ref.reset();
      }
    }
    ready.clear();
    if (ok) {
      OpKernelContext::Params params;
      params.op_kernel = item.kernel.get();
      params.device = options_.device;
      params.inputs = absl::MakeSpan(inputs, item.num_inputs);
      params.call_frame = step->args->call_frame;
      params.function_library = options_.function_library;
      params.step_id = step->args->step_id;
      OpKernelContext ctx(&params);
      StepStatsCollector* stats = step->args->stats;
      const int64_t start_us = stats != nullptr ? NowMicrosForStats() : 0;
      const int64_t start_ns = step->measure ? NowNanos() : 0;
      try {
        item.kernel->Compute(&ctx);
      } catch (const std::exception& e) {
        ctx.SetStatus(errors::Internal("kernel threw an exception: ", e.what()));
      }
      if (step->measure) cost_ns_[id].store(NowNanos() - start_ns, std::memory_order_relaxed);
      if (stats != nullptr) {
        stats->Record({item.node->name(), item.node->op(), start_us,
                       NowMicrosForStats(), CurrentThreadIdForStats(),
                       CurrentThreadNameForStats()});
      }
      for (int i = 0; i < item.num_inputs; ++i) inputs[i] = TensorValue();  // free early
      if (!ctx.status().ok()) {
        Fail(step, id, ctx.status());
      } else {
        // Propagate outputs.
        for (const NodeItem::Out& out : item.outs) {
          if (out.dst_slot >= 0) {
            TensorValue& dst = step->slots[out.dst_slot];
            if (out.last_use) {
              dst = ctx.release_output(out.src_output);
            } else {
              dst = ctx.output_value(out.src_output);
            }
          }
          if (step->pending[out.dst].fetch_sub(1, std::memory_order_acq_rel) == 1) {
            ready.push_back(out.dst);
          }
        }
        if (step->cancelled.load(std::memory_order_acquire)) ready.clear();
      }
    } else {
      for (int i = 0; i < item.num_inputs; ++i) inputs[i] = TensorValue();
    }
    NodeDone(step, id, &ready);
    // Schedule what became ready: cheap ones inline; expensive ones to the
    // pool, except one kept here when there is nothing else to do.
    int keep_expensive = -1;
    for (int r : ready) {
      if (options_.inter_op_pool == nullptr || !IsExpensive(r)) {
        queue.push_back(r);
      } else if (keep_expensive < 0) {
        keep_expensive = r;
      } else {
        options_.inter_op_pool->Schedule([this, step, r] { Process(step, r); });
      }
    }
    if (keep_expensive >= 0) {
      if (queue.empty()) {
        queue.push_back(keep_expensive);
      } else {
        options_.inter_op_pool->Schedule(
            [this, step, keep_expensive] { Process(step, keep_expensive); });
      }
    }
  }
}

bool Executor::IsExpensive(int item) const {
  const int64_t cost = cost_ns_[item].load(std::memory_order_relaxed);
  return cost < 0 ? items_[item].expensive : cost > kExpensiveNs;
}

void Executor::NodeDone(StepState* step, int item, std::vector<int>* ready) const {
  const int delta = static_cast<int>(ready->size()) - 1;
  if (delta == 0) return;
  if (step->outstanding.fetch_add(delta, std::memory_order_acq_rel) + delta == 0) {
    step->done.Notify();
  }
}

}  // namespace recflow
