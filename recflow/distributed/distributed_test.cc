// Placement, the ps service and the worker's step, on in-process clusters
// over gRPC on 127.0.0.1: a cluster trains exactly what one process trains
// (async with one worker; sync with the batch split over two workers), and
// bad requests get clear errors.
#include <cmath>
#include <future>
#include <random>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/cli/testing/zoo_util.h"
#include "recflow/core/status.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/distributed/placement.h"
#include "recflow/distributed/ps_grpc.h"
#include "recflow/distributed/ps_server.h"
#include "recflow/distributed/wire.h"
#include "recflow/distributed/worker.h"
#include "recflow/distributed/worker_session.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/framework/resource_var.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/train/monitored_session.h"
#include "recflow/framework/scope.h"
#include "recflow/models/model.h"
#include "recflow/train/variables.h"

namespace recflow::distributed {
namespace {

using ::testing::HasSubstr;
using models::testing::Feeds;
using models::testing::FeedsFor;

models::ModelConfig Config() {
  models::ModelConfig c;
  c.type = "deepfm";
  c.dense_features = {"I1", "I2", "I3"};
  c.sparse_features = {{.name = "C1", .hash_table = true},
                       {.name = "C2", .hash_table = true},
                       {.name = "C3", .vocabulary_size = 50}};
  c.embedding_dim = 4;
  c.hidden_units = {16, 8};
  c.seed = 3;
  return c;
}

data::Batch Batch(const models::ModelConfig& c, int64_t b, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  data::Batch batch;
  batch.batch_size = b;
  const int64_t nd = static_cast<int64_t>(c.dense_features.size());
  batch.labels = Tensor(DT_FLOAT, TensorShape({b}));
  batch.dense = Tensor(DT_FLOAT, TensorShape({b, nd}));
  for (int64_t i = 0; i < b * nd; ++i) batch.dense.data<float>()[i] = u(rng);
  for (int64_t i = 0; i < b; ++i) {
    batch.labels.data<float>()[i] = batch.dense.data<float>()[i * nd] + 0.3f * u(rng) > 0 ? 1 : 0;
  }
  for (size_t f = 0; f < c.sparse_features.size(); ++f) {
    std::vector<int64_t> ids, splits = {0};
    for (int64_t i = 0; i < b; ++i) {
      const int k = static_cast<int>(rng() % 3);
      for (int j = 0; j < k; ++j) ids.push_back(static_cast<int64_t>(rng() % 200) - 20);
      splits.push_back(static_cast<int64_t>(ids.size()));
    }
    batch.sparse.push_back({Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids)),
                            Tensor::FromVector<int64_t>(absl::MakeConstSpan(splits))});
  }
  return batch;
}

// Examples [begin, begin + n) of `batch`.
data::Batch Slice(const data::Batch& batch, int64_t begin, int64_t n) {
  data::Batch out;
  out.batch_size = n;
  const int64_t nd = batch.dense.dim_size(1);
  out.labels = Tensor::FromVector<float>(
      absl::MakeConstSpan(batch.labels.data<float>() + begin, n));
  out.dense = Tensor::FromVector<float>(
      absl::MakeConstSpan(batch.dense.data<float>() + begin * nd, n * nd), TensorShape({n, nd}));
  for (const data::SparseBatch& s : batch.sparse) {
    const int64_t* sp = s.row_splits.data<int64_t>();
    std::vector<int64_t> ids(s.ids.data<int64_t>() + sp[begin], s.ids.data<int64_t>() + sp[begin + n]);
    std::vector<int64_t> splits;
    for (int64_t i = begin; i <= begin + n; ++i) splits.push_back(sp[i] - sp[begin]);
    out.sparse.push_back({Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids)),
                          Tensor::FromVector<int64_t>(absl::MakeConstSpan(splits))});
  }
  return out;
}

tensorflow::GraphDef TrainGraph(const models::ModelConfig& c) {
  Scope root = Scope::NewRootScope();
  auto m = models::BuildModel(root, c, models::Placeholders(root, c));
  EXPECT_TRUE(m.ok()) << m.status();
  train::GlobalVariablesInitializer(root);
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  return *def;
}

std::unique_ptr<Session> NewSession(const tensorflow::GraphDef& def) {
  SessionOptions o;
  o.inter_op_threads = o.intra_op_threads = 1;
  auto s = Session::Create(o, def);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

struct LocalCluster {
  std::vector<std::unique_ptr<PsServer>> ps;
  std::vector<std::unique_ptr<PsGrpcServer>> servers;
  std::vector<std::string> addresses;

  static LocalCluster Start(const tensorflow::GraphDef& def, int num_ps, PsOptions base = {}) {
    LocalCluster c;
    for (int i = 0; i < num_ps; ++i) {
      PsOptions o = base;
      o.task_index = i;
      o.num_ps = num_ps;
      o.session.inter_op_threads = o.session.intra_op_threads = 1;
      auto ps = PsServer::Create(def, o);
      EXPECT_TRUE(ps.ok()) << ps.status();
      auto server = PsGrpcServer::Start(ps->get(), "127.0.0.1:0");
      EXPECT_TRUE(server.ok()) << server.status();
      c.addresses.push_back(absl::StrCat("127.0.0.1:", (*server)->port()));
      c.ps.push_back(*std::move(ps));
      c.servers.push_back(*std::move(server));
    }
    return c;
  }
};

Tensor ReadVar(Session* s, const VariablePlacement& v) {
  ResourceMgr* rm = s->device()->resource_manager();
  auto var = rm->Lookup<Var>(v.container.empty() ? rm->default_container() : v.container,
                             v.shared_name);
  EXPECT_TRUE(var.ok()) << v.node << ": " << var.status();
  auto t = (*var)->Read();
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

embedding::HashEmbeddingTable* Table(Session* s, const TablePlacement& t) {
  ResourceMgr* rm = s->device()->resource_manager();
  auto res = embedding::EmbeddingTableResource::Lookup(*rm, rm->default_container(),
                                                       t.shared_name);
  EXPECT_TRUE(res.ok()) << res.status();
  return (*res)->table();
}

// Every primary variable and every row of `ids` agree between the cluster
// and the single-process session.
void ExpectSameModel(const LocalCluster& cluster, Session* single, const TrainPlan& plan,
                     const std::vector<int64_t>& ids, double tol) {
  for (const VariablePlacement& v : plan.variables) {
    if (v.ps == kReplicated) continue;  // replicated copies follow the steps
    Tensor a;
    if (v.ps == kPartitioned) {
      std::vector<Tensor> parts;
      for (const auto& ps : cluster.ps) parts.push_back(ReadVar(ps->session(), v));
      auto whole = ConcatRows(parts, v.node);
      ASSERT_TRUE(whole.ok()) << whole.status();
      a = *whole;
    } else {
      a = ReadVar(cluster.ps[v.ps]->session(), v);
    }
    const Tensor b = ReadVar(single, v);
    ASSERT_EQ(a.NumElements(), b.NumElements()) << v.node;
    double worst = 0;
    for (int64_t i = 0; i < a.NumElements(); ++i) {
      worst = std::max(worst, std::abs(double(a.data<float>()[i]) - b.data<float>()[i]));
    }
    EXPECT_LT(worst, tol) << v.node;
  }
  for (const TablePlacement& t : plan.tables) {
    embedding::HashEmbeddingTable* whole = Table(single, t);
    int64_t rows = 0;
    for (const auto& ps : cluster.ps) rows += Table(ps->session(), t)->size();
    EXPECT_EQ(rows, whole->size()) << t.node;
    for (int64_t id : ids) {
      auto want = whole->GetRow(id);
      if (!want.has_value()) continue;
      auto got = Table(cluster.ps[PsShardOf(id, plan.num_ps)]->session(), t)->GetRow(id);
      ASSERT_TRUE(got.has_value()) << t.node << " id " << id;
      for (size_t k = 0; k < want->weights.size(); ++k) {
        EXPECT_NEAR(got->weights[k], want->weights[k], tol) << t.node << " id " << id;
      }
      for (size_t s = 0; s < want->slots.size(); ++s) {
        for (size_t k = 0; k < want->slots[s].size(); ++k) {
          EXPECT_NEAR(got->slots[s][k], want->slots[s][k], tol) << t.node << " slot of " << id;
        }
      }
    }
  }
}

std::vector<int64_t> AllIds(const std::vector<data::Batch>& batches) {
  std::vector<int64_t> ids;
  for (const auto& b : batches) {
    for (const auto& s : b.sparse) {
      ids.insert(ids.end(), s.ids.data<int64_t>(), s.ids.data<int64_t>() + s.ids.NumElements());
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

TEST(PsShardTest, SpreadsIdsEvenlyAndIsStable) {
  std::vector<int> count(3, 0);
  for (int64_t id = 0; id < 30000; ++id) ++count[PsShardOf(id, 3)];
  for (int c : count) EXPECT_NEAR(c, 10000, 500);
  EXPECT_EQ(PsShardOf(12345, 1), 0);
  EXPECT_EQ(PsShardOf(-7, 4), PsShardOf(-7, 4));
}

TEST(PlacementTest, BalancesVariablesKeepsSlotsAndReplicatesBetaPowers) {
  const models::ModelConfig c = Config();
  auto single = NewSession(TrainGraph(c));
  auto plan = PlanTraining(*single->graph(), {.num_ps = 2});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Every primary variable has an owner; its slots sit with it.
  int primaries = 0;
  for (const VariablePlacement& v : plan->variables) {
    if (v.primary) {
      ++primaries;
      EXPECT_GE(v.ps, 0) << v.node;
    }
    if (!v.primary_of.empty()) {
      EXPECT_EQ(v.ps, plan->FindVariable(v.primary_of)->ps) << v.node;
    }
  }
  EXPECT_GT(primaries, 3);
  // Adam's beta powers and the global step are replicated.
  EXPECT_FALSE(plan->global_step.empty());
  EXPECT_EQ(plan->FindVariable(plan->global_step)->ps, -1);
  EXPECT_FALSE(plan->post_update_nodes.empty());
  // Balanced: neither ps holds more than the largest variable beyond the other.
  const std::vector<int64_t> bytes = plan->BytesPerPs();
  int64_t largest = 0;
  for (const VariablePlacement& v : plan->variables) largest = std::max(largest, v.bytes * 3);
  EXPECT_LE(std::abs(bytes[0] - bytes[1]), largest);
  // Per hash feature a weight table and an embedding table, each read
  // through its feature's ids placeholder.
  ASSERT_EQ(plan->tables.size(), 4u);
  for (const TablePlacement& t : plan->tables) {
    ASSERT_EQ(t.ids_endpoints.size(), 1u) << t.node;
    // The ids placeholder, or what fills its empty bags with the missing id.
    EXPECT_THAT(t.ids_endpoints[0],
                ::testing::AnyOf("C1/ids:0", "C2/ids:0", ::testing::EndsWith("/FillEmptyBags:0")))
        << t.node;
  }
  // Table updates take their gradient (ids + rows) from the batch.
  int table_updates = 0;
  for (const ApplyPlacement& a : plan->applies) {
    if (a.table) {
      ++table_updates;
      EXPECT_FALSE(a.indices.empty());
    }
  }
  EXPECT_EQ(table_updates, 4);
}

TEST(PlacementTest, PinnedDeviceIsHonouredAndUnknownDeviceNamed) {
  const models::ModelConfig c = Config();
  tensorflow::GraphDef def = TrainGraph(c);
  std::string pinned;
  {
    auto session = NewSession(def);
    auto plan = PlanTraining(*session->graph(), {.num_ps = 2});
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (const VariablePlacement& v : plan->variables) {
      if (v.primary && v.ps == 0) pinned = v.node;
    }
  }
  ASSERT_FALSE(pinned.empty());
  auto set_device = [&](const std::string& device) {
    for (auto& n : *def.mutable_node()) {
      if (n.name() == pinned) n.set_device(device);
    }
  };
  set_device("/job:ps/task:7");
  auto bad = NewSession(def);
  auto p2 = PlanTraining(*bad->graph(), {.num_ps = 2});
  ASSERT_FALSE(p2.ok());
  EXPECT_THAT(p2.status().message(), HasSubstr("/job:ps/task:7"));
  EXPECT_THAT(p2.status().message(), HasSubstr(pinned));
  EXPECT_THAT(p2.status().message(), HasSubstr("/job:ps/task:0, /job:ps/task:1"));
  set_device("/job:worker/task:0");
  auto worker_pinned = NewSession(def);
  EXPECT_THAT(PlanTraining(*worker_pinned->graph(), {.num_ps = 2}).status().message(),
              HasSubstr("variables live on ps tasks"));
  set_device("/job:ps/replica:0/task:1/device:CPU:0");
  auto good = NewSession(def);
  auto p3 = PlanTraining(*good->graph(), {.num_ps = 2});
  ASSERT_TRUE(p3.ok()) << p3.status();
  EXPECT_EQ(p3->FindVariable(pinned)->ps, 1);
}

TEST(PlacementTest, UnregisteredUpdateOpIsAnErrorNotACrash) {
  tensorflow::GraphDef def = TrainGraph(Config());
  std::string renamed;
  for (auto& n : *def.mutable_node()) {
    if (renamed.empty() && n.op() == "ResourceApplyAdam") {
      n.set_op("NoSuchApplyOp");
      renamed = n.name();
    }
  }
  ASSERT_FALSE(renamed.empty());
  auto ps = PsServer::Create(def, {});
  ASSERT_FALSE(ps.ok());
  EXPECT_THAT(ps.status().message(), HasSubstr("'NoSuchApplyOp', which is not registered"));
}

TEST(WireTest, BadTensorsAreRefusedWithTheirName) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2}));
  TensorBytes b;
  b.set_name("w");
  ToWire(t, &b);
  auto back = FromWire(b);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->data<float>()[3], 4);
  TensorBytes truncated = b;
  truncated.mutable_content()->resize(7);
  EXPECT_THAT(FromWire(truncated).status().message(), HasSubstr("'w'"));
  TensorBytes oversized = b;
  oversized.mutable_content()->append("x");
  EXPECT_FALSE(FromWire(oversized).ok());
  TensorBytes bad_shape = b;
  bad_shape.set_shape(0, -3);
  EXPECT_THAT(FromWire(bad_shape).status().message(), HasSubstr("bad shape"));
  TensorBytes bad_type = b;
  bad_type.set_dtype(DT_STRING);
  EXPECT_THAT(FromWire(bad_type).status().message(), HasSubstr("does not carry"));
  bad_type.set_dtype(12345);
  EXPECT_FALSE(FromWire(bad_type).ok());
  EXPECT_FALSE(IdsFromBytes("12345", "ids").ok());
  EXPECT_FALSE(RowsFromBytes(std::string(12, 'x'), 1, 4, "rows").ok());
  // Sizes whose byte count wraps around to the message's: 2^62 floats are
  // not 0 bytes.
  TensorBytes huge;
  huge.set_name("huge");
  huge.set_dtype(DT_FLOAT);
  huge.add_shape(int64_t{1} << 62);
  EXPECT_THAT(FromWire(huge).status().message(), HasSubstr("'huge'"));
  EXPECT_FALSE(RowsFromBytes("", int64_t{1} << 62, 1, "rows").ok());
  EXPECT_FALSE(RowsFromBytes("", 1, int64_t{1} << 62, "rows").ok());
}

// One worker, asynchronous, two ps tasks: every step is the single-process
// step (the same initial values, the same optimizer updates); also with
// every variable of 512 bytes or more partitioned by rows over both ps
// tasks (dense updates and the fixed-vocabulary table's sparse ones).
class AsyncMatchTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(AsyncMatchTest, OneWorkerMatchesSingleProcess) {
  const int64_t partition_bytes = GetParam();
  const models::ModelConfig c = Config();
  const tensorflow::GraphDef def = TrainGraph(c);
  std::vector<data::Batch> batches;
  for (int i = 0; i < 6; ++i) batches.push_back(Batch(c, 32, 10 + i));

  auto single = NewSession(def);
  std::vector<Tensor> out;
  ASSERT_TRUE(single->Run({}, {}, {"init"}, &out).ok());
  for (const auto& b : batches) ASSERT_TRUE(single->Run(FeedsFor(c, b), {}, {"train"}, &out).ok());

  PsOptions po;
  po.partition_bytes = partition_bytes;
  LocalCluster cluster = LocalCluster::Start(def, 2, po);
  PsClient client(cluster.addresses);
  auto session = NewSession(def);
  WorkerOptions wo;
  wo.partition_bytes = partition_bytes;
  wo.is_chief = true;
  auto worker = Worker::Create(session.get(), &client, wo);
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_TRUE((*worker)->StartCluster("").ok());
  for (const auto& b : batches) {
    auto r = (*worker)->TrainStep(FeedsFor(c, b));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->applied);
    EXPECT_TRUE(std::isfinite(r->loss));
  }
  EXPECT_EQ((*worker)->global_step(), 6);
  ExpectSameModel(cluster, single.get(), (*worker)->plan(), AllIds(batches), 1e-5);
  // The wire carries the touched parameters and their gradients, plus ids
  // and framing: within a small factor of the minimum.
  const auto& st = (*worker)->stats();
  EXPECT_GT(st.minimum_bytes, 0);
  EXPECT_LT(double(st.bytes_sent + st.bytes_received) / st.minimum_bytes, 2.0);
  int partitioned = 0;
  for (const VariablePlacement& v : (*worker)->plan().variables) partitioned += v.ps == kPartitioned;
  // Each ps holds only its share: no variable placed on the other one.
  for (const VariablePlacement& v : (*worker)->plan().variables) {
    if (v.ps < 0) continue;
    ResourceMgr* rm = cluster.ps[1 - v.ps]->session()->device()->resource_manager();
    EXPECT_FALSE(rm->Lookup<Var>(rm->default_container(), v.shared_name).ok()) << v.node;
  }
  if (partition_bytes < 1000) {
    EXPECT_GT(partitioned, 3);
  } else {
    EXPECT_EQ(partitioned, 0);
  }

  // Each ps saves its part; the merged checkpoint restores into one process
  // (partitioned variables stacked from their parts), and into a new ps
  // (its rows only).
  const std::string dir = ::testing::TempDir() + "/dist_ckpt_" + std::to_string(partition_bytes);
  std::vector<std::string> prefixes;
  for (int p = 0; p < 2; ++p) {
    SaveRequest req;
    req.set_prefix(absl::StrCat(dir, "/part-", p));
    req.set_part(p);
    SaveResponse resp;
    ASSERT_TRUE(cluster.ps[p]->Save(req, &resp).ok());
    prefixes.push_back(req.prefix());
  }
  ASSERT_TRUE(checkpoint::MergeBundles(Env::Default(), prefixes, dir + "/model.ckpt-6",
                                       /*allow_missing_files=*/false)
                  .ok());
  auto restored = NewSession(def);
  ASSERT_TRUE(train::RestoreModel(restored.get(), dir, dir + "/model.ckpt-6").ok());
  ExpectSameModel(cluster, restored.get(), (*worker)->plan(), AllIds(batches), 1e-6);
  PsOptions po1 = po;
  po1.task_index = 1;
  po1.num_ps = 2;
  auto fresh = PsServer::Create(def, po1);
  ASSERT_TRUE(fresh.ok());
  InitRequest init;
  init.set_checkpoint_prefix(dir + "/model.ckpt-6");
  InitResponse ir;
  // A re-init from a checkpoint that is not there fails and leaves the ps
  // uninitialized (its tables were cleared, its variables reset), never
  // serving that state as the model; the next good init restores it.
  ASSERT_TRUE((*fresh)->Init(init, &ir).ok());
  InitRequest missing;
  missing.set_checkpoint_prefix(dir + "/model.ckpt-404");
  EXPECT_FALSE((*fresh)->Init(missing, &ir).ok());
  PullRequest pull;
  pull.set_include_dense(true);
  PullResponse pulled;
  absl::Status pull_status = (*fresh)->Pull(pull, &pulled);
  EXPECT_TRUE(absl::IsFailedPrecondition(pull_status)) << pull_status;
  EXPECT_THAT(pull_status.message(), HasSubstr("not initialized"));
  ASSERT_TRUE((*fresh)->Init(init, &ir).ok());
  EXPECT_EQ(ir.global_step(), 6);
  for (const VariablePlacement& v : (*worker)->plan().variables) {
    if (v.ps != 1 && v.ps != kPartitioned) continue;
    const Tensor a = ReadVar((*fresh)->session(), v);
    const Tensor b = ReadVar(cluster.ps[1]->session(), v);
    ASSERT_EQ(a.shape(), b.shape()) << v.node;
    for (int64_t i = 0; i < a.NumElements(); ++i) {
      ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << v.node;
    }
  }
}

// Note [A ps restored during a save] (worker_session.cc): ps 0 restored from
// an older checkpoint behind the chief's back, as a restart during a save
// does; the save at the chief's step is dropped, never published under a
// name that claims steps its contents do not hold.
TEST(ClusterSaverTest, SaveBehindARestoredPsZeroIsDroppedNotPublished) {
  const models::ModelConfig c = Config();
  const tensorflow::GraphDef def = TrainGraph(c);
  LocalCluster cluster = LocalCluster::Start(def, 2);
  PsClient client(cluster.addresses);
  auto session = NewSession(def);
  WorkerOptions wo;
  wo.is_chief = true;
  auto worker = Worker::Create(session.get(), &client, wo);
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_TRUE((*worker)->StartCluster("").ok());
  ClusterCheckpointer::Options co;
  co.directory = ::testing::TempDir() + "/cluster_saver_behind";
  co.sync = false;
  auto ckpt = ClusterCheckpointer::Create(co);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ClusterSaver saver(ckpt->get(), worker->get(), "", nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*worker)->TrainStep(FeedsFor(c, Batch(c, 16, i))).ok());
  auto first = saver.Save(3);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int i = 3; i < 6; ++i) ASSERT_TRUE((*worker)->TrainStep(FeedsFor(c, Batch(c, 16, i))).ok());
  ASSERT_EQ((*worker)->global_step(), 6);

  InitRequest init;
  init.set_checkpoint_prefix(*first);
  InitResponse ir;
  ASSERT_TRUE(cluster.ps[0]->Init(init, &ir).ok());
  ASSERT_EQ(ir.global_step(), 3);
  auto behind = saver.Save(6);
  EXPECT_TRUE(absl::IsAborted(behind.status())) << behind.status();
  EXPECT_THAT(behind.status().message(),
              HasSubstr("ps task 0 holds global step 3, behind the save's 6"));
  EXPECT_FALSE(Env::Default()->FileExists(co.directory + "/model.ckpt-6.index"));
  EXPECT_EQ((*ckpt)->checkpoints(), std::vector<std::string>{*first});
}

INSTANTIATE_TEST_SUITE_P(Partitioning, AsyncMatchTest, ::testing::Values(int64_t{64} << 20, 512),
                         [](const auto& info) {
                           return info.param < 1000 ? std::string("Partitioned")
                                                    : std::string("Whole");
                         });

// Sync: two workers each take half of every batch; a round averages their
// gradients, which is the single-process step on the whole batch.
TEST(DistributedTrainingTest, SyncTwoWorkersMatchSingleProcessOnTheWholeBatch) {
  const models::ModelConfig c = Config();
  const tensorflow::GraphDef def = TrainGraph(c);
  std::vector<data::Batch> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(Batch(c, 32, 40 + i));

  auto single = NewSession(def);
  std::vector<Tensor> out;
  ASSERT_TRUE(single->Run({}, {}, {"init"}, &out).ok());
  for (const auto& b : batches) ASSERT_TRUE(single->Run(FeedsFor(c, b), {}, {"train"}, &out).ok());

  PsOptions po;
  po.sync = true;
  po.replicas_to_aggregate = 2;
  po.partition_bytes = 512;  // rounds of partitioned variables too
  LocalCluster cluster = LocalCluster::Start(def, 2, po);
  PsClient client(cluster.addresses);
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int w = 0; w < 2; ++w) {
    sessions.push_back(NewSession(def));
    WorkerOptions wo;
    wo.worker_index = w;
    wo.is_chief = w == 0;
    wo.sync = true;
    wo.partition_bytes = 512;
    auto worker = Worker::Create(sessions.back().get(), &client, wo);
    ASSERT_TRUE(worker.ok()) << worker.status();
    workers.push_back(*std::move(worker));
  }
  ASSERT_TRUE(workers[0]->StartCluster("").ok());
  ASSERT_TRUE(workers[1]->WaitForCluster().ok());
  std::vector<std::thread> threads;
  std::vector<absl::Status> status(2);
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      for (const auto& b : batches) {
        auto r = workers[w]->TrainStep(FeedsFor(c, Slice(b, w * 16, 16)));
        if (!r.ok()) {
          status[w] = r.status();
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(status[0].ok()) << status[0];
  ASSERT_TRUE(status[1].ok()) << status[1];
  StatusResponse st;
  ASSERT_TRUE(cluster.ps[0]->GetStatus(&st).ok());
  EXPECT_EQ(st.global_step(), 4);  // one step per round, never two
  ExpectSameModel(cluster, single.get(), workers[0]->plan(), AllIds(batches), 2e-5);
}

TEST(PsServerTest, RefusesBadRequestsClearly) {
  const models::ModelConfig c = Config();
  const tensorflow::GraphDef def = TrainGraph(c);
  LocalCluster cluster = LocalCluster::Start(def, 2);
  PsServer* ps = cluster.ps[1].get();
  PullRequest pull;
  pull.set_include_dense(true);
  PullResponse pr;
  // Not initialized yet.
  absl::Status s = ps->Pull(pull, &pr);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("not initialized"));
  PublishUpdateRequest publish;
  PublishUpdateResponse publish_resp;
  s = ps->PublishUpdate(publish, &publish_resp);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("cannot publish a model update"));
  InitResponse ir;
  ASSERT_TRUE(ps->Init({}, &ir).ok());
  // A model update part: no prefix; a delta without its since step.
  EXPECT_THAT(ps->PublishUpdate(publish, &publish_resp).message(), HasSubstr("empty prefix"));
  publish.set_prefix(::testing::TempDir() + "/bad_publish");
  publish.set_since_step(-1);
  EXPECT_THAT(ps->PublishUpdate(publish, &publish_resp).message(),
              HasSubstr("a delta needs since_step >= 0"));
  // A graph of another config.
  pull.set_graph_fingerprint(12345);
  s = ps->Pull(pull, &pr);
  EXPECT_THAT(s.message(), HasSubstr("different training graph"));
  pull.set_graph_fingerprint(0);
  // Unknown table, ids of another shard, truncated ids.
  TableIds* t = pull.add_tables();
  t->set_table("nope");
  EXPECT_THAT(ps->Pull(pull, &pr).message(), HasSubstr("no hash table 'nope'"));
  t->set_table(ps->plan().tables[0].node);
  int64_t other = 0;
  while (PsShardOf(other, 2) == 1) ++other;
  t->set_ids(IdsToBytes({other}));
  EXPECT_THAT(ps->Pull(pull, &pr).message(), HasSubstr("belongs to ps task 0"));
  t->set_ids("abc");
  EXPECT_THAT(ps->Pull(pull, &pr).message(), HasSubstr("whole number"));
  // A push for a gradient no update op here takes.
  PushRequest push;
  push.set_worker(0);
  push.set_seq(1);
  TensorBytes* g = push.add_dense_grads();
  g->set_name("nope:0");
  ToWire(Tensor::Scalar<float>(1), g);
  PushResponse presp;
  EXPECT_THAT(ps->Push(push, &presp).message(), HasSubstr("no update op here takes"));
  // A sparse gradient for a node that is not a table update.
  push.clear_dense_grads();
  SparseGrad* sg = push.add_sparse_grads();
  sg->set_apply_node("loss");
  EXPECT_THAT(ps->Push(push, &presp).message(), HasSubstr("not a hash table update op"));
  // Over gRPC the error names the ps and its address.
  PsClient client(cluster.addresses);
  s = client.Pull(1, pull, &pr);
  EXPECT_THAT(s.message(), HasSubstr("ps task 1"));
  EXPECT_THAT(s.message(), HasSubstr(cluster.addresses[1]));
  // After Shutdown, calls end with OutOfRange.
  ps->Shutdown("test");
  pull.clear_tables();
  EXPECT_TRUE(absl::IsOutOfRange(ps->Pull(pull, &pr)));
}

TEST(PsServerTest, StartedWithoutAGraphAdoptsTheChiefsGraph) {
  // ps tasks started empty (a Python tf.train.Server): the chief sends its
  // training graph with its Init.
  const models::ModelConfig c = Config();
  const tensorflow::GraphDef def = TrainGraph(c);
  LocalCluster cluster = LocalCluster::Start(tensorflow::GraphDef(), 2);
  StatusResponse st;
  ASSERT_TRUE(cluster.ps[0]->GetStatus(&st).ok());
  EXPECT_FALSE(st.has_graph());
  EXPECT_FALSE(st.initialized());
  PullRequest pull;
  PullResponse pr;
  absl::Status s = cluster.ps[0]->Pull(pull, &pr);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("not initialized"));
  InitResponse ir;
  s = cluster.ps[0]->Init({}, &ir);
  EXPECT_THAT(s.message(), HasSubstr("has no training graph"));
  InitRequest garbage;
  garbage.set_graph_def("not a graph");
  s = cluster.ps[0]->Init(garbage, &ir);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("not a serialized GraphDef"));

  PsClient client(cluster.addresses);
  {
    // A chief with no graph to send cannot start them.
    auto session = NewSession(def);
    WorkerOptions wo;
    wo.is_chief = true;
    wo.init_wait = absl::Seconds(5);
    auto worker = Worker::Create(session.get(), &client, wo);
    ASSERT_TRUE(worker.ok()) << worker.status();
    s = (*worker)->StartCluster("");
    EXPECT_THAT(s.message(), HasSubstr("has no training graph and this chief has none"));
  }
  auto session = NewSession(def);
  WorkerOptions wo;
  wo.is_chief = true;
  wo.ps_graph = def.SerializeAsString();
  wo.ps_init_node = "init";
  wo.loss = "";  // no loss fetched: the caller fetches what it wants
  auto worker = Worker::Create(session.get(), &client, wo);
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_TRUE((*worker)->StartCluster("").ok());
  ASSERT_TRUE(cluster.ps[1]->GetStatus(&st).ok());
  EXPECT_TRUE(st.has_graph());
  EXPECT_TRUE(st.initialized());
  EXPECT_EQ(st.graph_fingerprint(), (*worker)->plan().graph_fingerprint);
  std::vector<Tensor> out;
  for (int i = 0; i < 2; ++i) {
    auto r = (*worker)->TrainStep(FeedsFor(c, Batch(c, 16, 40 + i)), {"loss:0"}, &out);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(std::isfinite(out[0].data<float>()[0]));
  }
  EXPECT_EQ((*worker)->global_step(), 2);
  // The local global step follows ps 0's after a pull.
  ASSERT_TRUE((*worker)->Evaluate(FeedsFor(c, Batch(c, 4, 50)),
                                  {(*worker)->plan().global_step + ":0"}, &out).ok());
  EXPECT_EQ(out[0].data<int64_t>()[0], 2);
  // An Init from a task with another graph is refused.
  InitRequest other;
  other.set_graph_fingerprint((*worker)->plan().graph_fingerprint + 1);
  s = cluster.ps[0]->Init(other, &ir);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("different training graph"));
}

TEST(PsServerTest, DuplicatePushIsNotAppliedTwiceAndStaleSyncPushIsDropped) {
  const models::ModelConfig c = Config();
  const tensorflow::GraphDef def = TrainGraph(c);
  {
    LocalCluster cluster = LocalCluster::Start(def, 1);
    PsServer* ps = cluster.ps[0].get();
    InitResponse ir;
    ASSERT_TRUE(ps->Init({}, &ir).ok());
    PushRequest push;
    push.set_worker(3);
    push.set_seq(5);
    PushResponse r;
    ASSERT_TRUE(ps->Push(push, &r).ok());
    EXPECT_TRUE(r.applied());
    EXPECT_EQ(r.global_step(), 1);
    ASSERT_TRUE(ps->Push(push, &r).ok());  // a retry of the same push
    EXPECT_FALSE(r.applied());
    EXPECT_THAT(r.note(), HasSubstr("applied already"));
    EXPECT_EQ(r.global_step(), 1);
  }
  {
    PsOptions po;
    po.sync = true;
    po.replicas_to_aggregate = 1;
    LocalCluster cluster = LocalCluster::Start(def, 1, po);
    PsServer* ps = cluster.ps[0].get();
    InitResponse ir;
    ASSERT_TRUE(ps->Init({}, &ir).ok());
    PushRequest push;
    push.set_global_step(0);
    PushResponse r;
    ASSERT_TRUE(ps->Push(push, &r).ok());
    EXPECT_TRUE(r.applied());
    EXPECT_EQ(r.global_step(), 1);
    ASSERT_TRUE(ps->Push(push, &r).ok());  // pulled at step 0: stale now
    EXPECT_FALSE(r.applied());
    EXPECT_THAT(r.note(), HasSubstr("stale"));
  }
}

// Backup workers: 3 workers, rounds of the first 2; the third one's push for
// a round already applied is stale, dropped and answered so.
TEST(PsServerTest, SyncRoundTakesTheFirstNAndDropsTheBackup) {
  const models::ModelConfig c = Config();
  const tensorflow::GraphDef def = TrainGraph(c);
  PsOptions po;
  po.sync = true;
  po.replicas_to_aggregate = 2;
  LocalCluster cluster = LocalCluster::Start(def, 1, po);
  PsServer* ps = cluster.ps[0].get();
  InitResponse ir;
  ASSERT_TRUE(ps->Init({}, &ir).ok());
  std::vector<PushResponse> r(3);
  std::vector<std::thread> first_two;
  for (int w = 0; w < 2; ++w) {
    first_two.emplace_back([&, w] {
      PushRequest push;
      push.set_worker(w);
      EXPECT_TRUE(ps->Push(push, &r[w]).ok());
    });
  }
  for (auto& t : first_two) t.join();
  EXPECT_TRUE(r[0].applied());
  EXPECT_TRUE(r[1].applied());
  EXPECT_EQ(r[0].global_step(), 1);
  PushRequest late;
  late.set_worker(2);
  ASSERT_TRUE(ps->Push(late, &r[2]).ok());
  EXPECT_FALSE(r[2].applied());
  EXPECT_THAT(r[2].note(), HasSubstr("stale"));
  StatusResponse st;
  ASSERT_TRUE(ps->GetStatus(&st).ok());
  EXPECT_EQ(st.global_step(), 1);
  EXPECT_EQ(st.pushes_dropped(), 1);
}

// Sync with a dead worker: the round waits round_timeout, then goes on with
// the gradients it has, instead of hanging.
TEST(PsServerTest, SyncRoundDoesNotWaitForeverForADeadWorker) {
  const models::ModelConfig c = Config();
  const tensorflow::GraphDef def = TrainGraph(c);
  PsOptions po;
  po.sync = true;
  po.replicas_to_aggregate = 2;
  po.round_timeout = absl::Milliseconds(300);
  LocalCluster cluster = LocalCluster::Start(def, 1, po);
  PsServer* ps = cluster.ps[0].get();
  InitResponse ir;
  ASSERT_TRUE(ps->Init({}, &ir).ok());
  PushRequest push;
  push.set_worker(0);
  PushResponse r;
  ASSERT_TRUE(ps->Push(push, &r).ok());  // the other worker never comes
  EXPECT_TRUE(r.applied());
  EXPECT_EQ(r.global_step(), 1);
}

// Every task serves gRPC's health service on its address: Check("") answers
// SERVING (the HealthCheckResponse bytes 08 01); PsService calls on a
// non-ps task are UNIMPLEMENTED.
TEST(TaskServerTest, AnswersHealthChecks) {
  int port = 0;
  auto server = StartTaskServer("127.0.0.1:0", &port);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT(port, 0);
  // A second task on the same address fails instead of sharing it.
  auto twice = StartTaskServer(absl::StrCat("127.0.0.1:", port), nullptr);
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("cannot listen on"));
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(s); });
  const grpc::Status s = done.get_future().get();
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
  PsClient client({absl::StrCat("127.0.0.1:", port)});
  StatusResponse st;
  absl::Status call = client.GetStatus(0, &st);
  EXPECT_TRUE(absl::IsUnimplemented(call)) << call;
  (*server)->Shutdown();
}

}  // namespace
}  // namespace recflow::distributed
