// A SavedModel's hash embedding table restores in serving through the same
// table <-> bundle bridge (embedding/table_bundle.h) as a training
// checkpoint restores it: the same rows, frequencies and versions, read in
// lanes or mapped in place; damage in any lane's range of any tensor
// serving reads is DataLoss naming the tensor. (Export, lookups and the missing-bundle errors are in
// train/saved_model_export_tables_test.cc.)
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/env.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/serving/saved_model_bundle.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/server_core_util.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/saved_model_export.h"
#include "recflow/train/variables.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kDim = 2;
// Four chunks of the bridge's 65536 rows: four lanes on four threads.
constexpr int64_t kRows = 3 * 65536 + 123;

struct Model {
  Scope root = Scope::NewRootScope();
  Output ids, splits, pooled;
  tensorflow::GraphDef def;

  Model() {
    ops::HashEmbeddingTableAttrs attrs;
    attrs.dim = kDim;
    attrs.optimizer = "adagrad";
    Output table = train::HashEmbeddingTable(root, "emb", attrs);
    ids = ops::Placeholder(root.WithOpName("ids"), DT_INT64);
    splits = ops::Placeholder(root.WithOpName("row_splits"), DT_INT64);
    ops::HashEmbeddingBagAttrs bag;
    bag.mode = "serve";
    pooled = ops::HashEmbeddingBag(root.WithOpName("pooled"), table, ids, splits, Output(), bag);
    auto d = root.ToGraphDef();
    EXPECT_TRUE(d.ok()) << d.status();
    def = *d;
  }

  std::map<std::string, train::ExportSignature> Signatures() const {
    return {{"serving_default",
             {.inputs = {{"ids", ids}, {"row_splits", splits}}, .outputs = {{"pooled", pooled}}}}};
  }
};

embedding::HashEmbeddingTable* TableOf(Session* session) {
  ResourceMgr* rm = session->device()->resource_manager();
  auto res = embedding::EmbeddingTableResource::Lookup(*rm, rm->default_container(), "emb");
  EXPECT_TRUE(res.ok()) << res.status();
  return res.ok() ? (*res)->table() : nullptr;
}

// Fills `table` with kRows rows of random ids, weights, slots, frequencies
// and versions; returns the ids.
std::vector<int64_t> Fill(embedding::HashEmbeddingTable* table) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<int64_t> ids;
  std::vector<int64_t> freqs, versions;
  std::vector<float> values, slots;
  for (int64_t i = 0; i < kRows; ++i) {
    ids.push_back(static_cast<int64_t>(rng() >> 2) - (int64_t{1} << 60));
    freqs.push_back(static_cast<int64_t>(rng() % 1000));
    versions.push_back(1 + static_cast<int64_t>(rng() % 5000));
    for (int64_t d = 0; d < kDim; ++d) {
      values.push_back(u(rng));
      slots.push_back(1 + u(rng));
    }
  }
  embedding::TableChunk c;
  c.keys = Tensor::FromVector<int64_t>(ids, {kRows});
  c.values = Tensor::FromVector<float>(values, {kRows, kDim});
  c.slots = Tensor::FromVector<float>(slots, {kRows, 1, kDim});
  c.frequencies = Tensor::FromVector<int64_t>(freqs, {kRows});
  c.versions = Tensor::FromVector<int64_t>(versions, {kRows});
  EXPECT_TRUE(table->Import(c).ok());
  EXPECT_EQ(table->size(), kRows);
  return ids;
}

LoadOptions FourThreads() {
  LoadOptions o;
  o.session.intra_op_threads = 4;
  return o;
}

class SavedModelTablesRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/saved_model_tables_restore_test";
    DeleteRecursively(Env::Default(), dir_).IgnoreError();
    auto session = Session::Create({}, model_.def);
    ASSERT_TRUE(session.ok()) << session.status();
    trained_ = *std::move(session);
    ASSERT_TRUE(train::CreateHashTables(trained_.get()).ok());
    ids_ = Fill(TableOf(trained_.get()));
    // A training checkpoint and a SavedModel of the same table.
    auto saveables = train::GraphSaveables(trained_.get());
    ASSERT_TRUE(saveables.ok()) << saveables.status();
    checkpoint::SaverOptions so;
    so.directory = dir_ + "/train";
    so.writer.sync = false;
    auto saver = checkpoint::Saver::Create(so, *std::move(saveables));
    ASSERT_TRUE(saver.ok()) << saver.status();
    auto prefix = (*saver)->Save(7);
    ASSERT_TRUE(prefix.ok()) << prefix.status();
    checkpoint_ = *prefix;
    export_dir_ = dir_ + "/export/1";
    absl::Status s = train::ExportSavedModel(trained_.get(), model_.Signatures(), export_dir_);
    ASSERT_TRUE(s.ok()) << s;
  }

  std::string DataFile() const {
    return checkpoint::VariablesPrefix(export_dir_) + ".data-00000-of-00001";
  }

  Model model_;
  std::string dir_, checkpoint_, export_dir_;
  std::unique_ptr<Session> trained_;
  std::vector<int64_t> ids_;
};

TEST_F(SavedModelTablesRestoreTest, ServingRestoresTheRowsTrainingRestores) {
  // Training: a fresh session restored from the checkpoint.
  auto session = Session::Create({}, model_.def);
  ASSERT_TRUE(session.ok());
  absl::Status s = train::RestoreModel(session->get(), dir_ + "/train", checkpoint_);
  ASSERT_TRUE(s.ok()) << s;
  // Serving: the SavedModel loaded, its table read in four lanes.
  auto bundle = LoadSavedModel(FourThreads(), export_dir_, {"serve"});
  ASSERT_TRUE(bundle.ok()) << bundle.status();

  embedding::HashEmbeddingTable* original = TableOf(trained_.get());
  embedding::HashEmbeddingTable* in_training = TableOf(session->get());
  embedding::HashEmbeddingTable* in_serving = TableOf(bundle->session.get());
  ASSERT_NE(in_training, nullptr);
  ASSERT_NE(in_serving, nullptr);
  EXPECT_EQ(in_training->size(), kRows);
  EXPECT_EQ(in_serving->size(), kRows);
  int64_t differ = 0;
  for (int64_t id : ids_) {
    const auto want = original->GetRow(id), train = in_training->GetRow(id),
               serve = in_serving->GetRow(id);
    ASSERT_TRUE(want.has_value() && train.has_value() && serve.has_value()) << id;
    // Rows, frequencies and versions: the same in both restores.
    differ += serve->weights != train->weights || serve->frequency != train->frequency ||
              serve->version != train->version;
    differ += train->weights != want->weights || train->frequency != want->frequency ||
              train->version != want->version || train->slots != want->slots;
    // Serving loads no optimizer slot: Adagrad's accumulator starts at 0.1.
    differ += serve->slots != std::vector<std::vector<float>>{std::vector<float>(kDim, 0.1f)};
  }
  EXPECT_EQ(differ, 0);
}

// The export carries the table's hash index: serving maps the table (in
// place) and, by default, waits for its read-and-checksum pass; with
// tables_available_before_checked it answers at once, and damage found by
// the pass fails the lookups instead of the load.
TEST_F(SavedModelTablesRestoreTest, TablesAreOpenedInPlaceAndCheckedInTheBackground) {
  auto bundle = LoadSavedModel(FourThreads(), export_dir_, {"serve"});
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_TRUE(TableOf(bundle->session.get())->has_base());
  EXPECT_EQ(TableOf(bundle->session.get())->size(), kRows);

  std::string clean;
  ASSERT_TRUE(ReadFileToString(Env::Default(), DataFile(), &clean).ok());
  auto reader = checkpoint::BundleReader::Open(Env::Default(),
                                               checkpoint::VariablesPrefix(export_dir_));
  ASSERT_TRUE(reader.ok());
  auto info = (*reader)->GetInfo("emb/values");
  ASSERT_TRUE(info.ok());
  std::string data = clean;
  data[info->offset + info->size - 1] ^= 0x20;
  ASSERT_TRUE(WriteStringToFile(Env::Default(), DataFile(), data).ok());
  LoadOptions at_once = FourThreads();
  at_once.tables_available_before_checked = true;
  auto damaged = LoadSavedModel(at_once, export_dir_, {"serve"});
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  embedding::HashEmbeddingTable* table = TableOf(damaged->session.get());
  ASSERT_TRUE(table->has_base());
  EXPECT_TRUE(absl::IsDataLoss(table->WaitForBase()));
  std::vector<float> out(kDim);
  const absl::Status s =
      table->Lookup({&ids_[0], 1}, absl::MakeSpan(out), embedding::LookupMode::kReadOnly);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("'emb/values'"));
  ASSERT_TRUE(WriteStringToFile(Env::Default(), DataFile(), clean).ok());
}

// A server answers from the first version of a model as soon as its tables
// are mapped; a damaged version 2 then fails its load (its tables are
// checked before it may replace version 1) and version 1 serves on.
TEST_F(SavedModelTablesRestoreTest, ADamagedNewVersionFailsItsLoadAndTheOldOneServesOn) {
  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig("m", dir_ + "/export");
  options.file_system_poll_wait_seconds = 0.02;
  options.max_num_load_retries = 0;
  auto core = ServerCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();
  auto state = [&](int64_t version) {
    StatusRequest request;
    request.model_spec.name = "m";
    request.model_spec.version = version;
    StatusResponse response;
    if (!(*core)->GetModelStatus(request, &response).ok()) return ModelVersionState::kUnknown;
    return response.versions.at(0).state;
  };
  ASSERT_TRUE(testutil::Eventually([&] { return state(1) == ModelVersionState::kAvailable; }));
  auto predict = [&](PredictResponse* response) {
    PredictRequest request;
    request.model_spec.name = "m";
    request.inputs["ids"] = Tensor::FromVector<int64_t>({ids_[5]}, {1});
    request.inputs["row_splits"] = Tensor::FromVector<int64_t>({0, 1}, {2});
    return (*core)->Predict(request, response);
  };
  PredictResponse before;
  ASSERT_TRUE(predict(&before).ok());
  const std::vector<float> want = TableOf(trained_.get())->GetRow(ids_[5])->weights;
  EXPECT_EQ(before.outputs.at("pooled").flat<float>()[0], want[0]);

  const std::string stage = dir_ + "/stage";
  std::filesystem::copy(export_dir_, stage, std::filesystem::copy_options::recursive);
  const std::string data = checkpoint::VariablesPrefix(stage) + ".data-00000-of-00001";
  auto reader = checkpoint::BundleReader::Open(Env::Default(), checkpoint::VariablesPrefix(stage));
  ASSERT_TRUE(reader.ok());
  auto info = (*reader)->GetInfo("emb/values");
  ASSERT_TRUE(info.ok());
  std::string bytes;
  ASSERT_TRUE(ReadFileToString(Env::Default(), data, &bytes).ok());
  bytes[info->offset + 3] ^= 0x20;
  ASSERT_TRUE(WriteStringToFile(Env::Default(), data, bytes).ok());
  ASSERT_TRUE(Env::Default()->RenameFile(stage, dir_ + "/export/2").ok());
  ASSERT_TRUE(testutil::Eventually([&] {
    return absl::StrContains((*core)->MetricsText(),
                             "recflow_serving_load_failures{model=\"m\",stage=\"load\"} 1");
  }));
  EXPECT_NE(state(2), ModelVersionState::kAvailable);
  EXPECT_EQ(state(1), ModelVersionState::kAvailable);
  PredictResponse after;
  ASSERT_TRUE(predict(&after).ok());
  EXPECT_EQ(*after.model_spec.version, 1);
  EXPECT_EQ(after.outputs.at("pooled").flat<float>()[0], want[0]);
}

TEST_F(SavedModelTablesRestoreTest, DamageInAnyLaneIsDataLossNamingTheTensor) {
  std::string clean;
  ASSERT_TRUE(ReadFileToString(Env::Default(), DataFile(), &clean).ok());
  auto reader = checkpoint::BundleReader::Open(Env::Default(),
                                               checkpoint::VariablesPrefix(export_dir_));
  ASSERT_TRUE(reader.ok());
  for (const char* tensor : {"emb/keys", "emb/values", "emb/frequencies", "emb/versions"}) {
    auto info = (*reader)->GetInfo(tensor);
    ASSERT_TRUE(info.ok()) << tensor;
    const uint64_t row_bytes = info->size / kRows;
    for (int64_t row : {int64_t{100}, int64_t{65536 + 7}, int64_t{2 * 65536 + 999}, kRows - 1}) {
      std::string data = clean;
      data[info->offset + row * row_bytes + row_bytes - 1] ^= 0x20;
      ASSERT_TRUE(WriteStringToFile(Env::Default(), DataFile(), data).ok());
      auto bundle = LoadSavedModel(FourThreads(), export_dir_, {"serve"});
      ASSERT_FALSE(bundle.ok()) << tensor << " row " << row;
      EXPECT_TRUE(absl::IsDataLoss(bundle.status())) << bundle.status();
      EXPECT_THAT(bundle.status().message(), HasSubstr(absl::StrCat("'", tensor, "'")));
      EXPECT_THAT(bundle.status().message(), HasSubstr("hash embedding table 'emb'"));
    }
  }
  // Serving does not read the optimizer slots: damage there goes unnoticed,
  // as before the bridge was shared.
  auto slots = (*reader)->GetInfo("emb/slots");
  ASSERT_TRUE(slots.ok());
  std::string data = clean;
  data[slots->offset + slots->size / 2] ^= 0x20;
  ASSERT_TRUE(WriteStringToFile(Env::Default(), DataFile(), data).ok());
  auto bundle = LoadSavedModel(FourThreads(), export_dir_, {"serve"});
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ(TableOf(bundle->session.get())->size(), kRows);
  ASSERT_TRUE(WriteStringToFile(Env::Default(), DataFile(), clean).ok());
}

}  // namespace
}  // namespace recflow::serving
