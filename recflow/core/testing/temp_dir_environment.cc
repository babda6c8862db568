// Gives each test process a temporary directory of its own.
//
// Tests put their files under testing::TempDir(), which is $TEST_TMPDIR, or
// /tmp/ when that is unset. ctest runs many test processes at once, and
// people run the suites of several checkouts on one machine, so fixed names
// under a shared /tmp collide (a hot-swap test's version directory renamed
// by another process's copy of the same test). Before any test runs, this
// points TEST_TMPDIR at a fresh mkdtemp directory, and removes it when the
// process exits. A child process that a test starts inherits the variable
// and shares its parent's directory; a TEST_TMPDIR set by the caller is
// left alone. RECFLOW_KEEP_TEST_TMPDIR=1 keeps the directory for a post-mortem.
//
// Linked into the test binaries only (CMakeLists.txt).
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "recflow/core/env.h"

namespace recflow {
namespace {

class TempDirEnvironment : public ::testing::Environment {
 public:
  TempDirEnvironment() {
    const char* set = std::getenv("TEST_TMPDIR");
    if (set != nullptr && set[0] != '\0') return;
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && base[0] != '\0' ? base : "/tmp") +
                          "/recflow_tests.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("recflow tests: mkdtemp");  // Tests fall back to /tmp.
      return;
    }
    dir_ = pattern;
    owner_ = getpid();
    setenv("TEST_TMPDIR", dir_.c_str(), /*overwrite=*/1);
  }
  ~TempDirEnvironment() override {
    // Not in a forked child (a death test's, say): the parent still uses it.
    if (!dir_.empty() && getpid() == owner_ &&
        std::getenv("RECFLOW_KEEP_TEST_TMPDIR") == nullptr) {
      DeleteRecursively(Env::Default(), dir_).IgnoreError();
    }
  }

 private:
  std::string dir_;  // Made here; empty when inherited or unset.
  pid_t owner_ = 0;  // The process that made dir_.
};

// gtest owns (and deletes) registered environments at exit.
[[maybe_unused]] ::testing::Environment* const kTempDirEnvironment =
    ::testing::AddGlobalTestEnvironment(new TempDirEnvironment);

}  // namespace
}  // namespace recflow
