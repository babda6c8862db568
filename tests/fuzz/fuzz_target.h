// Fuzz targets: one function per parser or decoder, fed arbitrary bytes.
//
// A target is written once and runs two ways (docs/fuzzing.md):
//   - under libFuzzer (`make fuzz`, clang with ASan and UBSan): one
//     executable per target, coverage-guided, growing its corpus;
//   - as a regression test (`make test`): recflow_fuzz_replay feeds every
//     file of tests/fuzz/corpus/<target>/ to it in the ordinary build.
//
//   RECFLOW_FUZZ_TARGET(snappy) {
//     FuzzInput in(data, size);
//     ...
//     return 0;
//   }
//
// A target must not crash, leak or hang on any input: a bad input is an
// error Status, never an abort. Where a decoder has an invariant that holds
// for every input it accepts (a round trip, a count that matches a shape),
// the target checks it with FUZZ_CHECK, which aborts with a message so the
// fuzzer keeps the input as a crash.
#ifndef RECFLOW_TESTS_FUZZ_FUZZ_TARGET_H_
#define RECFLOW_TESTS_FUZZ_FUZZ_TARGET_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace recflow::fuzz {

using FuzzFn = int (*)(const uint8_t* data, size_t size);

// Seeds: named inputs a target's corpus starts from, made with recflow's
// own writers (`recflow_fuzz_replay --write_seeds DIR`).
using Seeds = std::vector<std::pair<std::string, std::string>>;
using SeedFn = Seeds (*)();

struct Target {
  const char* name;
  FuzzFn fn;
  SeedFn seeds = nullptr;
};

// Adds a target (or a target's seeds) to the process's list; returns true
// (for a static initializer). Names are unique.
bool RegisterTarget(const char* name, FuzzFn fn);
bool RegisterSeeds(const char* name, SeedFn fn);
const std::vector<Target>& Targets();

// Once per process before the first input: quiet logging, so that a
// fuzzer's output is its own.
void InitOnce();

// With RECFLOW_FUZZ_VERBOSE=1 in the environment, prints what a target did
// with an input (to see that a seed reaches the code it is meant for);
// otherwise does nothing.
void Note(const std::string& what);

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              const std::string& detail);

// Splits one input into parts, so that a target can fuzz an input made of
// several pieces (a bundle's index and data file, a header and a body).
// Every Consume* takes what is left when the input runs short: the split
// never fails, so every byte string is a valid input.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data)), size_(size) {}

  size_t remaining() const { return size_ - pos_; }

  // The next byte (0 when none is left).
  uint8_t ConsumeByte() { return pos_ < size_ ? static_cast<uint8_t>(data_[pos_++]) : 0; }
  bool ConsumeBool() { return ConsumeByte() & 1; }
  // A little-endian integer of `bytes` bytes (at most 8), then reduced into
  // [lo, hi].
  int64_t ConsumeIntInRange(int64_t lo, int64_t hi, int bytes = 2);
  // The next n bytes, or all that is left.
  absl::string_view ConsumeBytes(size_t n);
  // A part written as a little-endian length of `length_bytes` bytes (1 to
  // 4) and its bytes.
  absl::string_view ConsumeLengthPrefixed(int length_bytes = 2);
  absl::string_view ConsumeRest() { return ConsumeBytes(remaining()); }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Encodes a part the way ConsumeLengthPrefixed reads it (for seeds).
std::string LengthPrefixed(absl::string_view part, int length_bytes = 2);

}  // namespace recflow::fuzz

#define FUZZ_CHECK(condition, detail)                                           \
  do {                                                                          \
    if (!(condition)) {                                                         \
      ::recflow::fuzz::CheckFailed(__FILE__, __LINE__, #condition, (detail));   \
    }                                                                           \
  } while (0)

#define RECFLOW_FUZZ_TARGET(name)                                               \
  static int RecflowFuzzTarget_##name(const uint8_t* data, size_t size);       \
  [[maybe_unused]] static const bool recflow_fuzz_registered_##name =          \
      ::recflow::fuzz::RegisterTarget(#name, &RecflowFuzzTarget_##name);      \
  static int RecflowFuzzTarget_##name(const uint8_t* data, size_t size)

// The seeds of target `name` (defined once, in the target's file):
//   RECFLOW_FUZZ_SEEDS(snappy) { return {{"short", Compress("abc")}}; }
#define RECFLOW_FUZZ_SEEDS(name)                                                \
  static ::recflow::fuzz::Seeds RecflowFuzzSeeds_##name();                     \
  [[maybe_unused]] static const bool recflow_fuzz_seeds_##name =               \
      ::recflow::fuzz::RegisterSeeds(#name, &RecflowFuzzSeeds_##name);        \
  static ::recflow::fuzz::Seeds RecflowFuzzSeeds_##name()

#endif  // RECFLOW_TESTS_FUZZ_FUZZ_TARGET_H_
