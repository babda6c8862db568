#include "tests/fuzz/fuzz_target.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "recflow/core/logging.h"

namespace recflow::fuzz {

namespace {
std::vector<Target>& MutableTargets() {
  static auto* targets = new std::vector<Target>();
  return *targets;
}
}  // namespace

bool RegisterTarget(const char* name, FuzzFn fn) {
  for (Target& t : MutableTargets()) {
    if (std::strcmp(t.name, name) != 0) continue;
    if (t.fn != nullptr) {
      std::fprintf(stderr, "fuzz target '%s' is registered twice\n", name);
      std::abort();
    }
    t.fn = fn;
    return true;
  }
  MutableTargets().push_back({name, fn, nullptr});
  return true;
}

// Seeds register from the same file as their target, in either order.
bool RegisterSeeds(const char* name, SeedFn fn) {
  for (Target& t : MutableTargets()) {
    if (std::strcmp(t.name, name) == 0) {
      t.seeds = fn;
      return true;
    }
  }
  MutableTargets().push_back({name, nullptr, fn});
  return true;
}

const std::vector<Target>& Targets() { return MutableTargets(); }

void InitOnce() {
  static std::once_flag once;
  // Bad inputs are the point here; their warnings would drown the fuzzer's
  // own output. Errors still show.
  std::call_once(once, [] { SetMinLogLevel(LogSeverity::kError); });
}

void Note(const std::string& what) {
  static const bool verbose = [] {
    const char* v = std::getenv("RECFLOW_FUZZ_VERBOSE");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  if (verbose) std::fprintf(stderr, "  %s\n", what.c_str());
}

void CheckFailed(const char* file, int line, const char* condition, const std::string& detail) {
  std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", file, line, condition,
               detail.c_str());
  std::abort();
}

int64_t FuzzInput::ConsumeIntInRange(int64_t lo, int64_t hi, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes && i < 8; ++i) v |= static_cast<uint64_t>(ConsumeByte()) << (8 * i);
  if (hi <= lo) return lo;
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == UINT64_MAX) return static_cast<int64_t>(v);
  return lo + static_cast<int64_t>(v % (span + 1));
}

absl::string_view FuzzInput::ConsumeBytes(size_t n) {
  n = std::min(n, remaining());
  absl::string_view part(data_ + pos_, n);
  pos_ += n;
  return part;
}

absl::string_view FuzzInput::ConsumeLengthPrefixed(int length_bytes) {
  length_bytes = std::clamp(length_bytes, 1, 4);
  uint64_t n = 0;
  for (int i = 0; i < length_bytes; ++i) n |= static_cast<uint64_t>(ConsumeByte()) << (8 * i);
  return ConsumeBytes(static_cast<size_t>(n));
}

std::string LengthPrefixed(absl::string_view part, int length_bytes) {
  length_bytes = std::clamp(length_bytes, 1, 4);
  const uint64_t max = (uint64_t{1} << (8 * length_bytes)) - 1;
  if (part.size() > max) {
    std::fprintf(stderr, "a seed part of %zu bytes does not fit a %d-byte length\n", part.size(),
                 length_bytes);
    std::abort();
  }
  std::string out;
  for (int i = 0; i < length_bytes; ++i) out.push_back(static_cast<char>(part.size() >> (8 * i)));
  out.append(part.data(), part.size());
  return out;
}

}  // namespace recflow::fuzz
