// The libFuzzer entry of a fuzz executable. Each executable is built from
// this file and one target file (tests/fuzz/CMakeLists.txt), which may hold
// several targets; the one to fuzz is, in order:
//   - $RECFLOW_FUZZ_TARGET;
//   - the executable's name: scripts/fuzz.sh links build-fuzz/fuzz/<target>
//     to the executable holding it, so `build-fuzz/fuzz/tfrecord CRASH`
//     reproduces a crash;
//   - the only target of the executable.
// With RECFLOW_FUZZ_LIST=1 the executable prints its targets and exits.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/fuzz/fuzz_target.h"

namespace {

recflow::fuzz::FuzzFn the_target = nullptr;

recflow::fuzz::FuzzFn Find(const std::string& name) {
  for (const recflow::fuzz::Target& t : recflow::fuzz::Targets()) {
    if (t.fn != nullptr && name == t.name) return t.fn;
  }
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  recflow::fuzz::InitOnce();
  const char* list = std::getenv("RECFLOW_FUZZ_LIST");
  if (list != nullptr && std::strcmp(list, "1") == 0) {
    for (const recflow::fuzz::Target& t : recflow::fuzz::Targets()) {
      if (t.fn != nullptr) std::printf("%s\n", t.name);
    }
    std::exit(0);
  }
  std::string names;
  int count = 0;
  recflow::fuzz::FuzzFn only = nullptr;
  for (const recflow::fuzz::Target& t : recflow::fuzz::Targets()) {
    if (t.fn == nullptr) continue;
    names += std::string(names.empty() ? "" : ", ") + t.name;
    only = t.fn;
    ++count;
  }
  const char* env = std::getenv("RECFLOW_FUZZ_TARGET");
  if (env != nullptr && *env != '\0') {
    the_target = Find(env);
    if (the_target == nullptr) {
      std::fprintf(stderr, "RECFLOW_FUZZ_TARGET=%s: this executable holds %s\n", env,
                   names.c_str());
      std::exit(1);
    }
    return 0;
  }
  std::string self = (*argc > 0) ? (*argv)[0] : "";
  self = self.substr(self.find_last_of('/') + 1);
  the_target = Find(self);
  if (the_target == nullptr && count == 1) the_target = only;
  if (the_target == nullptr) {
    std::fprintf(stderr,
                 "%s holds several fuzz targets (%s): name one with RECFLOW_FUZZ_TARGET, or "
                 "run it through a link named after it (scripts/fuzz.sh makes them)\n",
                 self.c_str(), names.c_str());
    std::exit(1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return the_target(data, size);
}
