#include "recflow/serving/admission.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

#include "recflow/core/logging.h"
#include "recflow/core/status.h"

namespace recflow::serving {

absl::Status AdmissionGate::Validate(const AdmissionOptions& options) {
  if (options.max_running < 1) {
    return errors::InvalidArgument("admission control for ", options.what,
                                   ": max_running must be >= 1, got ", options.max_running);
  }
  if (options.max_queued < 0) {
    return errors::InvalidArgument("admission control for ", options.what,
                                   ": max_queued must be >= 0, got ", options.max_queued);
  }
  if (options.max_queue_wait_ms <= 0) {
    return errors::InvalidArgument("admission control for ", options.what,
                                   ": max_queue_wait_ms must be > 0, got ",
                                   options.max_queue_wait_ms);
  }
  return absl::OkStatus();
}

AdmissionGate::AdmissionGate(AdmissionOptions options) : options_(std::move(options)) {
  CHECK(Validate(options_).ok()) << Validate(options_);
}

AdmissionGate::~AdmissionGate() {
  MutexLock lock(&mu_);
  CHECK_EQ(running_, 0) << "an AdmissionGate destroyed with tickets alive";
  CHECK(queue_.empty()) << "an AdmissionGate destroyed with calls queued";
}

AdmissionGate::Ticket& AdmissionGate::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    gate_ = other.gate_;
    other.gate_ = nullptr;
  }
  return *this;
}

void AdmissionGate::Ticket::Release() {
  if (gate_ != nullptr) gate_->Release();
  gate_ = nullptr;
}

absl::StatusOr<AdmissionGate::Ticket> AdmissionGate::Enter(absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_.native());
  if (running_ < options_.max_running && queue_.empty()) {
    ++running_;
    ++admitted_;
    return Ticket(this);
  }
  if (static_cast<int64_t>(queue_.size()) >= options_.max_queued) {
    ++shed_;
    return errors::Unavailable("server overloaded: ", options_.max_running, " ", options_.what,
                               " running and ", queue_.size(),
                               " queued (the most it queues); retry later");
  }
  Waiter waiter;
  queue_.push_back(&waiter);
  const absl::Time now = absl::Now();
  const absl::Time give_up = now + absl::Milliseconds(options_.max_queue_wait_ms);
  const bool caller_first = deadline < give_up;
  const auto until = std::chrono::system_clock::now() +
                     absl::ToChronoMicroseconds(std::max(
                         absl::ZeroDuration(), (caller_first ? deadline : give_up) - now));
  waiter.cv.wait_until(lock, until, [&waiter] { return waiter.admitted; });
  if (waiter.admitted) {  // Release() moved its slot to us (running_ unchanged)
    ++admitted_;
    return Ticket(this);
  }
  queue_.erase(std::find(queue_.begin(), queue_.end(), &waiter));
  if (caller_first) {
    ++expired_;
    return errors::DeadlineExceeded("the call's deadline passed while it waited for one of the ",
                                    options_.max_running, " ", options_.what,
                                    " running to finish");
  }
  ++shed_;
  return errors::Unavailable("server overloaded: the call waited ", options_.max_queue_wait_ms,
                             " ms for one of the ", options_.max_running, " ", options_.what,
                             " running to finish; retry later");
}

void AdmissionGate::Release() {
  std::lock_guard<std::mutex> lock(mu_.native());
  if (queue_.empty()) {
    --running_;
    return;
  }
  // Hand the slot over: the waiter wakes admitted even if its wait timed
  // out at the same moment, so a slot is never lost or counted twice.
  Waiter* next = queue_.front();
  queue_.pop_front();
  next->admitted = true;
  next->cv.notify_one();
}

int AdmissionGate::running() {
  MutexLock lock(&mu_);
  return running_;
}

int AdmissionGate::queued() {
  MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

int64_t AdmissionGate::admitted_total() {
  MutexLock lock(&mu_);
  return admitted_;
}

int64_t AdmissionGate::shed_total() {
  MutexLock lock(&mu_);
  return shed_;
}

int64_t AdmissionGate::expired_total() {
  MutexLock lock(&mu_);
  return expired_;
}

}  // namespace recflow::serving
