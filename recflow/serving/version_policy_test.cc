#include "recflow/serving/version_policy.h"

#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"

namespace recflow::serving {
namespace {

ServableVersionPolicy Policy(const std::string& text) {
  ServableVersionPolicy policy;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &policy))
      << text;
  return policy;
}

struct Case {
  const char* name;
  const char* policy;  // text ServableVersionPolicy
  VersionPolicyInput input;
  VersionPolicyDecision want;
};

// Each case: the policy, {on_disk, loaded, loading, failed}, and the
// decision {aspired, load (newest first), unload (ascending)}.
const Case kCases[] = {
    // --- which versions are aspired ---
    {"no policy is latest 1", "", {{1, 2, 3}, {}, {}, {}}, {{3}, {3}, {}}},
    {"latest 0 is latest 1", "latest { num_versions: 0 }",
     {{1, 2, 3}, {}, {}, {}}, {{3}, {3}, {}}},
    {"latest 2 loads newest first", "latest { num_versions: 2 }",
     {{1, 2, 3}, {}, {}, {}}, {{2, 3}, {3, 2}, {}}},
    {"latest N above what is on disk", "latest { num_versions: 5 }",
     {{4, 9}, {}, {}, {}}, {{4, 9}, {9, 4}, {}}},
    {"all", "all {}", {{1, 2, 3}, {}, {}, {}}, {{1, 2, 3}, {3, 2, 1}, {}}},
    {"specific: only those on disk", "specific { versions: 2 versions: 5 }",
     {{1, 2, 3}, {}, {}, {}}, {{2}, {2}, {}}},
    {"specific: none on disk", "specific { versions: 7 }",
     {{1, 2, 3}, {}, {}, {}}, {{}, {}, {}}},
    {"nothing on disk", "", {{}, {}, {}, {}}, {{}, {}, {}}},

    // --- failed versions are left out ---
    {"latest 1: a failed newest leaves the previous aspired", "",
     {{1, 2, 3}, {2}, {}, {3}}, {{2}, {}, {}}},
    {"latest 2 skips the failed one", "latest { num_versions: 2 }",
     {{1, 2, 3}, {}, {}, {2}}, {{1, 3}, {3, 1}, {}}},
    {"all skips the failed one", "all {}", {{1, 2, 3}, {1, 3}, {}, {2}},
     {{1, 3}, {}, {}}},
    {"specific: a failed version is not aspired", "specific { versions: 2 }",
     {{1, 2}, {1}, {}, {2}}, {{}, {}, {1}}},
    {"a failed version that is gone from disk changes nothing", "",
     {{1}, {1}, {}, {5}}, {{1}, {}, {}}},

    // --- loads ---
    {"a version being loaded is not loaded again", "",
     {{1, 2}, {1}, {2}, {}}, {{2}, {}, {}}},
    {"a version waiting for a retry is not loaded again", "all {}",
     {{1, 2, 3}, {1}, {3}, {}}, {{1, 2, 3}, {2}, {}}},
    {"a loading version no longer aspired: the new one loads too", "",
     {{5, 6}, {4}, {5}, {}}, {{6}, {6}, {}}},

    // --- unloads wait for the aspired versions ---
    {"a new version: the old one stays while it loads", "",
     {{1, 2}, {1}, {}, {}}, {{2}, {2}, {}}},
    {"the new version is in: the old one goes", "", {{1, 2}, {1, 2}, {}, {}},
     {{2}, {}, {1}}},
    {"latest 2: both new ones in before the old ones go",
     "latest { num_versions: 2 }", {{1, 2, 3, 4}, {1, 2, 4}, {3}, {}},
     {{3, 4}, {}, {}}},
    {"latest 2: all in, the old ones go", "latest { num_versions: 2 }",
     {{1, 2, 3, 4}, {1, 2, 3, 4}, {}, {}}, {{3, 4}, {}, {1, 2}}},
    {"a loaded version gone from disk is unloaded", "",
     {{4}, {3, 4}, {}, {}}, {{4}, {}, {3}}},
    {"everything gone from disk: everything unloaded", "all {}",
     {{}, {1, 2}, {}, {}}, {{}, {}, {1, 2}}},
    {"served version gone while its successor loads: kept", "",
     {{4}, {3}, {4}, {}}, {{4}, {}, {}}},
    {"a loaded version left out of specific goes",
     "specific { versions: 3 }", {{1, 2, 3}, {1, 3}, {}, {}},
     {{3}, {}, {1}}},
    {"a published version that is no longer aspired goes", "",
     {{5, 6}, {4, 5, 6}, {}, {}}, {{6}, {}, {4, 5}}},
    {"a retrying aspired version keeps the old ones", "",
     {{1, 2}, {1}, {2}, {}}, {{2}, {}, {}}},
};

TEST(VersionPolicyTest, Table) {
  for (const Case& c : kCases) {
    const VersionPolicyDecision got = DecideVersions(Policy(c.policy), c.input);
    EXPECT_EQ(got, c.want) << c.name << "\n  got:  " << got.DebugString()
                           << "\n  want: " << c.want.DebugString();
  }
}

// A decision is stable: applying it (loads done, unloads done) and asking
// again asks for nothing more.
TEST(VersionPolicyTest, ApplyingADecisionSettles) {
  for (const Case& c : kCases) {
    VersionPolicyInput in = c.input;
    const ServableVersionPolicy policy = Policy(c.policy);
    for (int step = 0; step < 3; ++step) {
      const VersionPolicyDecision d = DecideVersions(policy, in);
      for (int64_t v : in.loading) in.loaded.insert(v);
      in.loading.clear();
      for (int64_t v : d.load) in.loaded.insert(v);
      for (int64_t v : d.unload) in.loaded.erase(v);
    }
    const VersionPolicyDecision last = DecideVersions(policy, in);
    EXPECT_TRUE(last.load.empty() && last.unload.empty())
        << c.name << ": " << last.DebugString();
    EXPECT_EQ(in.loaded, last.aspired) << c.name;
  }
}

}  // namespace
}  // namespace recflow::serving
