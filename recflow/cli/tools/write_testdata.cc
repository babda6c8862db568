// write_testdata: writes recflow's stand-ins for the TensorFlow-written test
// fixtures, for the shell tests of a clone without ../shared/testdata.
//
//   write_testdata half_plus_two DIR   # TF Serving's half_plus_two, recflow-written
//
// Test-only; not installed.
#include <cstdio>
#include <string>

#include "recflow/checkpoint/testing/half_plus_two.h"
#include "recflow/core/env.h"

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) != "half_plus_two") {
    std::fprintf(stderr, "usage: %s half_plus_two DIR\n", argv[0]);
    return 2;
  }
  absl::Status s = recflow::checkpoint::testutil::WriteHalfPlusTwo(
      recflow::Env::Default(), argv[2]);
  if (!s.ok()) {
    std::fprintf(stderr, "write_testdata: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
