// The long kill test of the Saver: 30 SIGKILLs at random moments (seeded
// delays), with full checkpoints every save, every 3rd or every 5th save
// drawn per child life. See testing/saver_kill_util.h.
#include "recflow/train/testing/saver_kill_util.h"

namespace recflow::train::testing {
namespace {

TEST(SaverKillSlowChild, Run) { MaybeRunKillChild(); }

TEST(SaverKillSlowTest, ThirtyKillsWithFullAndDeltaCheckpoints) {
  const std::string dir = KillTestDir("saver_kill_slow_test");
  const KillRunResult r = RunKillTest(dir, "SaverKillSlowChild.Run", /*kills=*/30,
                                      /*min_ms=*/20, /*max_ms=*/700,
                                      /*full_every=*/{1, 3, 5}, /*seed=*/2026);
  EXPECT_EQ(r.kills, 30);
  EXPECT_GE(r.checked, 25);
  EXPECT_GE(r.deltas_seen, 5);
  std::printf("kills %d, restored %d (%d deltas), last step %lld\n", r.kills, r.checked,
              r.deltas_seen, static_cast<long long>(r.last_step));
}

}  // namespace
}  // namespace recflow::train::testing
