// The short kill test of the Saver (a handful of SIGKILLs, part of `make
// test`); saver_kill_slow_test.cc runs the long one. See
// testing/saver_kill_util.h.
#include "recflow/train/testing/saver_kill_util.h"

namespace recflow::train::testing {
namespace {

TEST(SaverKillChild, Run) { MaybeRunKillChild(); }

// Six lives killed 20-450 ms after their first new checkpoint.
void SixKills(const std::string& name, const std::vector<int>& full_every, uint32_t seed,
              bool open_in_place, bool tiered = false) {
  const KillRunResult r = RunKillTest(KillTestDir(name), "SaverKillChild.Run", /*kills=*/6,
                                      /*min_ms=*/20, /*max_ms=*/450, full_every, seed,
                                      open_in_place, tiered);
  EXPECT_EQ(r.kills, 6);
  EXPECT_GE(r.checked, 4);
  EXPECT_GT(r.last_step, 5);
  std::printf("kills %d, restored %d (%d deltas), last step %lld\n", r.kills, r.checked,
              r.deltas_seen, static_cast<long long>(r.last_step));
}

TEST(SaverKillTest, LatestCheckpointAlwaysRestoresExactly) {
  SixKills("saver_kill_test", /*full_every=*/{3}, /*seed=*/17, /*open_in_place=*/false);
}

// The same with the table opened in place from each checkpoint it resumes
// from (a mapped base that later saves read and retention unlinks).
TEST(SaverKillTest, LatestCheckpointAlwaysRestoresExactlyWithTablesOpenedInPlace) {
  SixKills("saver_kill_test_in_place", /*full_every=*/{1, 3}, /*seed=*/23,
           /*open_in_place=*/true);
}

// Tiered tables (Note [Tiers]) under a budget of a few dozen rows a shard:
// kills land while rows are written back to the cold tier, while a restore
// moves rows out as it imports, and while a save exports memory and cold
// tier; the latest checkpoint still restores exactly (into a tiered table
// again).
TEST(SaverKillTest, LatestCheckpointAlwaysRestoresExactlyWithTieredTables) {
  SixKills("saver_kill_test_tiered", /*full_every=*/{1, 3}, /*seed=*/29,
           /*open_in_place=*/false, /*tiered=*/true);
}

}  // namespace
}  // namespace recflow::train::testing
