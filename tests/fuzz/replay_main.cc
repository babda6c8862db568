// recflow_fuzz_replay: runs fuzz targets on saved inputs, without libFuzzer
// (docs/fuzzing.md). `make test` runs it over every committed corpus, so an
// input that once crashed a parser stays fixed.
//
//   recflow_fuzz_replay --list
//   recflow_fuzz_replay TARGET PATH...       PATH: a file, or a folder of them
//   recflow_fuzz_replay --write_seeds DIR [TARGET...]
//                                            DIR/<target>/<seed> for every target
//                                            (or the named ones)
//
// Exit status: 0 when every input ran; 1 for a usage error, an unknown
// target, a missing path or no input at all (an empty corpus tests
// nothing). A crashing input aborts the process with the sanitizer's or the
// FUZZ_CHECK's message after "running PATH".
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

namespace fs = std::filesystem;
using recflow::fuzz::Target;
using recflow::fuzz::Targets;

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: recflow_fuzz_replay --list\n"
               "       recflow_fuzz_replay TARGET PATH...\n"
               "       recflow_fuzz_replay --write_seeds DIR [TARGET...]\n");
  return 1;
}

const Target* Find(const std::string& name) {
  for (const Target& t : Targets()) {
    if (name == t.name && t.fn != nullptr) return &t;
  }
  return nullptr;
}

bool ReadFile(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

// Seeds are made by recflow's writers, some of which stamp times or draw
// random bytes, so writing a target's seeds again may change its files: name
// the targets whose seeds you changed (none: every target).
int WriteSeeds(const fs::path& dir, const std::vector<std::string>& only) {
  for (const std::string& name : only) {
    if (Find(name) == nullptr) {
      std::fprintf(stderr, "no fuzz target '%s' (--list shows them)\n", name.c_str());
      return 1;
    }
  }
  int written = 0;
  for (const Target& t : Targets()) {
    if (t.fn == nullptr) {
      std::fprintf(stderr, "seeds for '%s', which is not a target\n", t.name);
      return 1;
    }
    if (t.seeds == nullptr) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), t.name) == only.end()) continue;
    const fs::path out = dir / t.name;
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) {
      std::fprintf(stderr, "cannot create %s: %s\n", out.c_str(), ec.message().c_str());
      return 1;
    }
    for (const auto& [name, bytes] : t.seeds()) {
      // Every seed must run cleanly before it is written.
      t.fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      std::ofstream f(out / name, std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!f) {
        std::fprintf(stderr, "cannot write %s\n", (out / name).c_str());
        return 1;
      }
      ++written;
    }
  }
  std::printf("wrote %d seeds under %s\n", written, dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  recflow::fuzz::InitOnce();
  if (argc < 2) return Usage();
  const std::string first = argv[1];
  if (first == "--list") {
    for (const Target& t : Targets()) {
      if (t.fn != nullptr) std::printf("%s\n", t.name);
    }
    return 0;
  }
  if (first == "--write_seeds") {
    if (argc < 3) return Usage();
    return WriteSeeds(argv[2], std::vector<std::string>(argv + 3, argv + argc));
  }
  if (argc < 3) return Usage();
  const Target* target = Find(first);
  if (target == nullptr) {
    std::fprintf(stderr, "no fuzz target '%s' (--list shows them)\n", first.c_str());
    return 1;
  }
  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; ++i) {
    const fs::path path = argv[i];
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      for (const auto& entry : fs::recursive_directory_iterator(path, ec)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else if (fs::is_regular_file(path, ec)) {
      inputs.push_back(path);
    } else {
      std::fprintf(stderr, "%s: no such file or folder\n", path.c_str());
      return 1;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "no inputs for '%s' under the given paths\n", target->name);
    return 1;
  }
  std::sort(inputs.begin(), inputs.end());
  std::string bytes;
  for (const fs::path& path : inputs) {
    if (!ReadFile(path, &bytes)) {
      std::fprintf(stderr, "cannot read %s\n", path.c_str());
      return 1;
    }
    std::fprintf(stderr, "running %s (%zu bytes)\n", path.c_str(), bytes.size());
    // A copy the exact size of the input, so a read past its end is a read
    // past an allocation (ASan sees it, as under libFuzzer).
    std::vector<uint8_t> copy(bytes.begin(), bytes.end());
    target->fn(copy.data(), copy.size());
  }
  std::printf("%s: %zu inputs ran\n", target->name, inputs.size());
  return 0;
}
