// Timing of table checkpoints (slow label): a 1M-row, dim-32 Adagrad table
// saved full and as a 1% delta to the real file system, and restored.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "recflow/train/table_saveable.h"
#include "recflow/train/testing/checkpoint_model.h"

namespace recflow::train {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

TEST(TableSaveableBench, MillionRowsFullAndDelta) {
  constexpr int64_t kRows = 1 << 20, kDim = 32;
  testing::TestModelOptions mo;
  mo.dim = kDim;
  auto res = embedding::EmbeddingTableResource::Create(testing::TableOptions(mo));
  ASSERT_TRUE(res.ok());
  embedding::HashEmbeddingTable* t = (*res)->table();
  std::vector<int64_t> ids(kRows);
  for (int64_t i = 0; i < kRows; ++i) ids[i] = i * 2654435761 % 1000000007;
  std::vector<float> buf(ids.size() * kDim, 0.5f);
  ASSERT_TRUE(t->Lookup(ids, absl::MakeSpan(buf), embedding::LookupMode::kTrain).ok());
  ASSERT_TRUE(t->ApplyAdagrad(ids, buf, {}, 1).ok());
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/table_saveable_bench_", getpid());
  checkpoint::SaverOptions so;
  so.directory = dir;
  so.max_to_keep = 0;
  so.full_every_n_saves = 10;
  so.writer.sync = false;
  auto saver = checkpoint::Saver::Create(so, {TableSaveable(*res, "emb")});
  ASSERT_TRUE(saver.ok());
  auto start = std::chrono::steady_clock::now();
  auto full = (*saver)->Save(1);
  ASSERT_TRUE(full.ok()) << full.status();
  const double full_s = Seconds(start);
  std::vector<int64_t> some(ids.begin(), ids.begin() + kRows / 100);
  ASSERT_TRUE(t->ApplyAdagrad(some, absl::MakeSpan(buf.data(), some.size() * kDim), {}, 2).ok());
  start = std::chrono::steady_clock::now();
  auto delta = (*saver)->Save(2);
  ASSERT_TRUE(delta.ok());
  const double delta_s = Seconds(start);
  start = std::chrono::steady_clock::now();
  ASSERT_TRUE((*saver)->Restore(*delta).ok());
  const double restore_s = Seconds(start);
  EXPECT_EQ(t->size(), kRows);
  const double mib = kRows * kDim * 4 * 2 / 1048576.0;
  EXPECT_TRUE(DeleteRecursively(Env::Default(), dir).ok());
  std::printf("1M rows x dim 32 (adagrad, %.0f MiB of floats): full save %.2f s (%.0f MiB/s), "
              "1%% delta save %.3f s, restore base+delta %.2f s (%.0f MiB/s)\n",
              mib, full_s, mib / full_s, delta_s, restore_s, mib / restore_s);
}

}  // namespace
}  // namespace recflow::train
