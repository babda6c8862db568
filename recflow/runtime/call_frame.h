// FunctionCallFrame: the CallFrame a Session hands its executors: feeds in
// (read by _Arg nodes), fetched values out (written by _Retval nodes).
// Thread-safe for distinct indices, as executors use it.
#ifndef RECFLOW_RUNTIME_CALL_FRAME_H_
#define RECFLOW_RUNTIME_CALL_FRAME_H_

#include <vector>

#include "recflow/core/status.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {

class FunctionCallFrame : public CallFrame {
 public:
  FunctionCallFrame(std::vector<Tensor> args, int num_retvals)
      : args_(std::move(args)), retvals_(num_retvals), set_(num_retvals, 0) {}

  absl::Status GetArg(int index, Tensor* value) const override {
    if (index < 0 || index >= static_cast<int>(args_.size())) {
      return errors::Internal("argument index ", index, " out of range [0, ", args_.size(), ")");
    }
    *value = args_[index];
    return absl::OkStatus();
  }

  absl::Status SetRetval(int index, const Tensor& value) override {
    if (index < 0 || index >= static_cast<int>(retvals_.size())) {
      return errors::Internal("result index ", index, " out of range [0, ", retvals_.size(), ")");
    }
    retvals_[index] = value;
    set_[index] = 1;
    return absl::OkStatus();
  }

  // Moves the results out. Internal error if one was never set.
  absl::Status ConsumeRetvals(std::vector<Tensor>* out) {
    for (size_t i = 0; i < retvals_.size(); ++i) {
      if (!set_[i]) return errors::Internal("result ", i, " was not produced");
    }
    *out = std::move(retvals_);
    return absl::OkStatus();
  }

 private:
  std::vector<Tensor> args_;
  std::vector<Tensor> retvals_;
  // One byte per result, not std::vector<bool>: _Retval nodes on different
  // threads set neighbouring flags at once, and vector<bool> packs them into
  // shared words (a data race that lost results).
  std::vector<char> set_;
};

}  // namespace recflow

#endif  // RECFLOW_RUNTIME_CALL_FRAME_H_
