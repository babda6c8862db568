// The libFuzzer entry of a fuzz executable: each one is built from this
// file and exactly one target file (tests/fuzz/CMakeLists.txt).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/fuzz_target.h"

namespace {

recflow::fuzz::FuzzFn TheTarget() {
  recflow::fuzz::InitOnce();
  recflow::fuzz::FuzzFn fn = nullptr;
  int count = 0;
  for (const recflow::fuzz::Target& t : recflow::fuzz::Targets()) {
    if (t.fn == nullptr) continue;
    fn = t.fn;
    ++count;
  }
  if (count != 1) {
    std::fprintf(stderr, "a fuzz executable holds exactly one target, this one %d\n", count);
    std::abort();
  }
  return fn;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const recflow::fuzz::FuzzFn fn = TheTarget();
  return fn(data, size);
}
