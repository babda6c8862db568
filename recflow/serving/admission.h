// AdmissionGate: admission control for calls served on threads of their own
// (the gRPC server's; the REST server does the same inside its event loop,
// Note [Admission] in http_server.cc). At most `max_running` calls run at
// once; a call arriving while all run waits in a FIFO queue of at most
// `max_queued`, and is refused with Unavailable at once when the queue is
// full, or once it has waited `max_queue_wait_ms`. So under any load a
// caller learns quickly whether it is served, a served call waits at most a
// few call times, and the server holds at most max_running + max_queued
// calls' work instead of piling up threads and memory until it falls over.
//
//   AdmissionGate gate({.max_running = 4, .max_queued = 16,
//                       .max_queue_wait_ms = 500});
//   ASSIGN_OR_RETURN(AdmissionGate::Ticket ticket,
//                    gate.Enter(caller_deadline));
//   ... run the call; the ticket's destructor hands its slot on ...
//
// A freed slot goes straight to the call queued longest (no barging: a new
// arrival never overtakes a queued call). Thread-safe.
#ifndef RECFLOW_SERVING_ADMISSION_H_
#define RECFLOW_SERVING_ADMISSION_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "recflow/core/mutex.h"

namespace recflow::serving {

struct AdmissionOptions {
  // Calls running at once; >= 1.
  int max_running = 4;
  // Calls waiting for a running one to finish; >= 0 (0: refuse whenever all
  // max_running run).
  int max_queued = 16;
  // A queued call not started within this long is refused; > 0.
  int64_t max_queue_wait_ms = 500;
  // Names what is admitted in the errors ("gRPC calls").
  std::string what = "calls";
};

class AdmissionGate {
 public:
  // InvalidArgument naming a bad option.
  static absl::Status Validate(const AdmissionOptions& options);
  // `options` must be valid (Validate).
  explicit AdmissionGate(AdmissionOptions options);
  ~AdmissionGate();  // no ticket may be alive
  AdmissionGate(const AdmissionGate&) = delete;
  AdmissionGate& operator=(const AdmissionGate&) = delete;

  // A running slot, given back when the ticket is destroyed. Move-only.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Release(); }

   private:
    friend class AdmissionGate;
    explicit Ticket(AdmissionGate* gate) : gate_(gate) {}
    void Release();
    AdmissionGate* gate_;
  };

  // A slot, at once or after a wait in the queue. Unavailable (a retryable
  // overload, saying which limit) when the queue is full or the call waited
  // max_queue_wait_ms; DeadlineExceeded when `deadline` (the caller's) passes
  // first while queued. A deadline already past still gets a free slot: the
  // caller decides what a late call is worth.
  absl::StatusOr<Ticket> Enter(absl::Time deadline = absl::InfiniteFuture());

  // For metrics and tests.
  int running();
  int queued();
  int64_t admitted_total();  // tickets given
  int64_t shed_total();      // Unavailable answers (either reason)
  int64_t expired_total();   // DeadlineExceeded answers

  const AdmissionOptions& options() const { return options_; }

 private:
  struct Waiter {
    std::condition_variable cv;
    bool admitted = false;
  };
  void Release();

  const AdmissionOptions options_;
  Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Waiter*> queue_ ABSL_GUARDED_BY(mu_);
  int64_t admitted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t shed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t expired_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_ADMISSION_H_
