// Test-only: where the TensorFlow-written fixtures are, and skipping the
// tests that need them when they are absent.
//
// The fixtures (SavedModels and checkpoints written by TensorFlow itself)
// live outside the repository. One setting finds them: the environment
// variable RECFLOW_TESTDATA, defaulting to ../shared/testdata beside the
// source tree. A clone of the repository alone has none: the tests that
// read them are skipped with the reason, and recflow-written fixtures cover
// the same formats elsewhere.
//
//   TEST(BundleTest, ReadsTensorFlowBundle) {
//     RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
//     auto reader = BundleReader::Open(env, TfTestDataPath(kHalfPlusTwoTf) + "/variables/variables");
//
// Header-only; needs RECFLOW_SOURCE_DIR, which the test binaries define.
#ifndef RECFLOW_CORE_TESTING_TF_TESTDATA_H_
#define RECFLOW_CORE_TESTING_TF_TESTDATA_H_

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace recflow {

// TF Serving's test model y = 0.5x + 2 (see ../shared/README.md), written by
// TensorFlow 1, relative to TfTestDataDir().
inline constexpr char kHalfPlusTwoTf[] =
    "tf_serving/saved_model_half_plus_two_cpu/00000123";
// The same model written by TensorFlow 2 (tf.saved_model.save).
inline constexpr char kHalfPlusTwoTf2[] =
    "tf_serving/saved_model_half_plus_two_tf2_cpu/00000123";

// $RECFLOW_TESTDATA if set and non-empty, else <source>/../shared/testdata.
inline std::string TfTestDataDir() {
  const char* env = std::getenv("RECFLOW_TESTDATA");
  if (env != nullptr && env[0] != '\0') return env;
  return std::string(RECFLOW_SOURCE_DIR) + "/../shared/testdata";
}

// The fixture `rel` (e.g. kHalfPlusTwoTf) under TfTestDataDir().
inline std::string TfTestDataPath(const std::string& rel) {
  return TfTestDataDir() + "/" + rel;
}

inline bool HaveTfTestData(const std::string& rel) {
  struct stat st;
  return stat(TfTestDataPath(rel).c_str(), &st) == 0;
}

}  // namespace recflow

// Skips the current test (GTEST_SKIP, with the reason) unless the fixture
// `rel` exists. Use it first in a TEST body or in a fixture's SetUp.
#define RECFLOW_REQUIRE_TF_TESTDATA(rel)                                      \
  do {                                                                        \
    if (!::recflow::HaveTfTestData(rel)) {                                    \
      GTEST_SKIP() << "TensorFlow-written fixture " << (rel)                  \
                   << " is absent from " << ::recflow::TfTestDataDir()        \
                   << " (set RECFLOW_TESTDATA to the directory that holds "   \
                      "tf_serving/)";                                         \
    }                                                                         \
  } while (0)

#endif  // RECFLOW_CORE_TESTING_TF_TESTDATA_H_
