// Distributed training's inputs from outside the process: the ps service's
// tensors and requests (recflow/distributed/wire.h, ps_server.h), TF_CONFIG
// (cluster_spec.h), the YAML run config (recflow/models/config.h) and a
// dataset iterator's saved position (recflow/data/dataset.h).
//
// Each target's comment gives its input layout and the invariants it
// checks. The ps target runs requests in-process against one small ps (a
// deepfm model's dense variables and a hash embedding table), with its
// files in memory.
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "recflow/core/crc32c.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/threadpool.h"
#include "recflow/data/dataset.h"
#include "recflow/distributed/cluster_spec.h"
#include "recflow/distributed/ps_server.h"
#include "recflow/distributed/wire.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/framework/resource_var.h"
#include "recflow/framework/scope.h"
#include "recflow/models/config.h"
#include "recflow/models/model.h"
#include "recflow/train/variables.h"
#include "tests/fuzz/fuzz_target.h"

namespace recflow::fuzz {
namespace {

using distributed::ApplyPlacement;
using distributed::ClusterConfig;
using distributed::ClusterSpec;
using distributed::PsServer;
using distributed::TablePlacement;
using distributed::VariablePlacement;

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.dtype() == DT_STRING) {
    for (int64_t i = 0; i < a.NumElements(); ++i) {
      if (a.data<std::string>()[i] != b.data<std::string>()[i]) return false;
    }
    return true;
  }
  const size_t bytes = static_cast<size_t>(a.NumElements()) * DataTypeSize(a.dtype());
  return bytes == 0 || std::memcmp(a.raw_data(), b.raw_data(), bytes) == 0;
}

}  // namespace

// ---------------------------------------------------------------------------
// ps_wire: wire.h's tensors, ids and rows.
//
// Input: a length-prefixed TensorBytes message, length-prefixed id bytes,
// then n (2 bytes, in [-2, 1000]) and dim (2 bytes, in [-2, 64]) and the row
// bytes (the rest). With a high bit of the first byte set, n and dim are
// instead 8-byte values (any int64). Checks: a tensor FromWire accepts has
// the message's dtype and shape and its content's size, and ToWire gives
// the message back byte for byte; ids and rows accepted have the byte
// count's elements, and ids go back to the same bytes.

RECFLOW_FUZZ_TARGET(ps_wire) {
  FuzzInput in(data, size);
  const bool wide_sizes = in.ConsumeByte() & 0x80;
  distributed::TensorBytes msg;
  if (!msg.ParseFromString(std::string(in.ConsumeLengthPrefixed()))) {
    Note("not a TensorBytes message");
  } else {
    absl::StatusOr<Tensor> t = distributed::FromWire(msg);
    Note(absl::StrCat("FromWire dtype ", msg.dtype(), " shape [", absl::StrJoin(msg.shape(), ","),
                      "] ", msg.content().size(), " bytes -> ",
                      t.ok() ? t->shape().DebugString() : t.status().ToString()));
    if (t.ok()) {
      FUZZ_CHECK(static_cast<int32_t>(t->dtype()) == msg.dtype(), "dtype changed");
      FUZZ_CHECK(t->dims() == msg.shape_size(), "rank changed");
      for (int d = 0; d < t->dims(); ++d) {
        FUZZ_CHECK(t->dim_size(d) == msg.shape(d), absl::StrCat("dimension ", d, " changed"));
      }
      // Divided, so that a product wrapping around cannot hide a mismatch.
      const size_t element_bytes = DataTypeSize(t->dtype());
      FUZZ_CHECK(msg.content().size() % element_bytes == 0 &&
                     static_cast<uint64_t>(t->NumElements()) ==
                         msg.content().size() / element_bytes,
                 absl::StrCat(t->NumElements(), " elements from ", msg.content().size(), " bytes"));
      distributed::TensorBytes back;
      back.set_name(msg.name());
      distributed::ToWire(*t, &back);
      FUZZ_CHECK(back.dtype() == msg.dtype() && back.content() == msg.content() &&
                     absl::StrJoin(back.shape(), ",") == absl::StrJoin(msg.shape(), ","),
                 "ToWire(FromWire(x)) is not x");
    }
  }
  const std::string ids_bytes(in.ConsumeLengthPrefixed());
  absl::StatusOr<Tensor> ids = distributed::IdsFromBytes(ids_bytes, "ids");
  Note(absl::StrCat("IdsFromBytes ", ids_bytes.size(), " bytes -> ",
                    ids.ok() ? ids->shape().DebugString() : ids.status().ToString()));
  FUZZ_CHECK(ids.ok() == (ids_bytes.size() % sizeof(int64_t) == 0), ids.status().ToString());
  if (ids.ok()) {
    FUZZ_CHECK(ids->dtype() == DT_INT64 && ids->dims() == 1, ids->shape().DebugString());
    FUZZ_CHECK(distributed::IdsToBytes(ids->flat<int64_t>()) == ids_bytes, "ids round trip");
  }
  const int64_t n = wide_sizes ? in.ConsumeIntInRange(INT64_MIN, INT64_MAX, 8)
                               : in.ConsumeIntInRange(-2, 1000);
  const int64_t dim = wide_sizes ? in.ConsumeIntInRange(INT64_MIN, INT64_MAX, 8)
                                 : in.ConsumeIntInRange(-2, 64);
  const std::string rows_bytes(in.ConsumeRest());
  absl::StatusOr<Tensor> rows = distributed::RowsFromBytes(rows_bytes, n, dim, "rows");
  Note(absl::StrCat("RowsFromBytes n ", n, " dim ", dim, ", ", rows_bytes.size(), " bytes -> ",
                    rows.ok() ? rows->shape().DebugString() : rows.status().ToString()));
  if (rows.ok()) {
    FUZZ_CHECK(rows->dtype() == DT_FLOAT && rows->dims() == 2 && rows->dim_size(0) == n &&
                   rows->dim_size(1) == dim,
               rows->shape().DebugString());
    FUZZ_CHECK(rows_bytes.size() % sizeof(float) == 0 &&
                   static_cast<uint64_t>(rows->NumElements()) == rows_bytes.size() / sizeof(float),
               absl::StrCat(rows->NumElements(), " floats from ", rows_bytes.size(), " bytes"));
    FUZZ_CHECK(rows_bytes.empty() ||
                   std::memcmp(rows->raw_data(), rows_bytes.data(), rows_bytes.size()) == 0,
               "rows differ from their bytes");
  }
  return 0;
}

RECFLOW_FUZZ_SEEDS(ps_wire) {
  const auto message = [](const Tensor& t, const std::string& name) {
    distributed::TensorBytes m;
    m.set_name(name);
    distributed::ToWire(t, &m);
    return LengthPrefixed(m.SerializeAsString());
  };
  const std::string ids = LengthPrefixed(distributed::IdsToBytes({1, -7, int64_t{1} << 40}));
  // n 2, dim 3 (stored as n + 2, dim + 2): six floats.
  const std::string rows = std::string("\x04\x00\x05\x00", 4) + Floats({1, 2, 3, 4, 5, 6});
  distributed::TensorBytes lying;
  lying.set_name("huge");
  lying.set_dtype(DT_FLOAT);
  lying.add_shape(int64_t{1} << 62);  // 2^62 floats, in 0 bytes once the size wraps
  distributed::TensorBytes truncated;
  truncated.set_name("short");
  distributed::ToWire(Tensor::FromVector<float>({1, 2, 3}), &truncated);
  truncated.mutable_content()->resize(7);
  distributed::TensorBytes unknown_dtype;
  unknown_dtype.set_dtype(12345);
  unknown_dtype.add_shape(1);
  unknown_dtype.set_content("abcd");
  std::string wrapping_rows = std::string("\x80", 1) + LengthPrefixed("") + LengthPrefixed("");
  for (int64_t v : {int64_t{1} << 62, int64_t{1}}) {  // n 2^62, dim 1: 2^64 bytes wraps to 0
    for (int b = 0; b < 8; ++b) wrapping_rows.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
  }
  return {
      {"float_matrix",
       std::string(1, '\0') +
           message(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3})), "w") +
           ids + rows},
      {"int64_vector_and_scalar",
       std::string(1, '\0') + message(Tensor::FromVector<int64_t>({4, 5, 6}), "ids:0") +
           LengthPrefixed(distributed::IdsToBytes({})) + std::string("\x02\x00\x06\x00", 4)},
      {"double_scalar",
       std::string(1, '\0') + message(Tensor::Scalar<double>(2.5), "lr") + ids + rows},
      {"truncated_content",
       std::string(1, '\0') + LengthPrefixed(truncated.SerializeAsString()) +
           LengthPrefixed("12345") + std::string("\x03\x00\x06\x00", 4) + "abc"},
      {"unknown_dtype", std::string(1, '\0') + LengthPrefixed(unknown_dtype.SerializeAsString())},
      {"size_wraps_to_zero", std::string(1, '\0') + LengthPrefixed(lying.SerializeAsString())},
      {"rows_size_wraps_to_zero", wrapping_rows},
  };
}

// ---------------------------------------------------------------------------
// ps_requests: the ps service's requests (ps_service.proto), handed to
// PsServer's handlers directly.
//
// Input: a kind byte, then a serialized request: kind % 7 is 0 Pull, 1
// Push, 2 Init, 3 GetStatus (StatusRequest), 4 Save, 5 PublishUpdate, 6 an
// Init sent to a fresh ps started without a graph (its graph_def adopted).
// Shutdown is left out: it ends the ps for the rest of the process.
//
// The ps (one task of one, asynchronous) is created once per process over
// a small deepfm graph (dense variables with Adam, the hash table C1 and
// the fixed table C2) with its files in memory; a checkpoint of it is at
// /ckpt/model.ckpt-1. Before every input it is restored from it (rows of
// ids 1, 7 and -3 in the tables, step 1), and the files of the previous
// input's Save or PublishUpdate are dropped, so an input's outcome
// depends on the input alone (except for each worker's last applied push
// seq, which the ps keeps across Inits by design).
//
// Checks: a Pull answers one TableRows per requested table with the
// table's dim and n * dim floats, and dense tensors FromWire accepts with
// their variable's shape; a read-only pull adds no row; an applied Push
// moves the global step by one, a dropped one not at all. After every
// input, whatever it returned: the ps answers GetStatus as initialized,
// every variable it holds keeps its dtype and shape, every table its dim.

namespace {

class ScratchEnv : public Env {
 public:
  // Drops every file and directory, then writes `files` (their directories
  // must be in `dirs`).
  void Reset(const std::vector<std::string>& dirs,
             const std::map<std::string, std::string>& files) {
    mem_ = std::make_unique<MemEnv>();
    for (const std::string& d : dirs) FUZZ_CHECK(mem_->CreateDir(d).ok(), d);
    for (const auto& [path, bytes] : files) {
      FUZZ_CHECK(WriteStringToFile(mem_.get(), path, bytes).ok(), path);
    }
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return mem_->NewWritableFile(p);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& p) override {
    return mem_->NewAppendableFile(p);
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& p) override {
    return mem_->NewRandomAccessFile(p);
  }
  bool FileExists(const std::string& p) override { return mem_->FileExists(p); }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& p) override {
    return mem_->GetFileSize(p);
  }
  absl::Status IsDirectory(const std::string& p) override { return mem_->IsDirectory(p); }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& d) override {
    return mem_->GetChildren(d);
  }
  absl::Status CreateDir(const std::string& d) override { return mem_->CreateDir(d); }
  absl::Status DeleteFile(const std::string& p) override { return mem_->DeleteFile(p); }
  absl::Status DeleteDir(const std::string& d) override { return mem_->DeleteDir(d); }
  absl::Status RenameFile(const std::string& src, const std::string& dst) override {
    return mem_->RenameFile(src, dst);
  }
  absl::Status SyncDir(const std::string& d) override { return mem_->SyncDir(d); }
  uint64_t NowMicros() override { return mem_->NowMicros(); }
  uint64_t NowUnixMicros() override { return mem_->NowUnixMicros(); }
  void SleepForMicros(int64_t micros) override { mem_->SleepForMicros(micros); }

 private:
  std::unique_ptr<MemEnv> mem_ = std::make_unique<MemEnv>();
};

constexpr char kCheckpointDir[] = "/ckpt";
constexpr char kCheckpoint[] = "/ckpt/model.ckpt-1";
constexpr char kScratchDir[] = "/tmp";

struct PsState {
  ScratchEnv env;
  tensorflow::GraphDef graph;
  distributed::PsOptions options;
  std::unique_ptr<PsServer> ps;
  std::map<std::string, std::string> checkpoint_files;  // path -> bytes
};

const TablePlacement* FindTable(const distributed::TrainPlan& plan, const std::string& node) {
  for (const TablePlacement& t : plan.tables) {
    if (t.node == node) return &t;
  }
  return nullptr;
}

// A push as a worker sends it: a gradient for every update op (small
// values), rows of ids 1, 7, -3 for the hash table, rows 0 and 2 of the
// fixed table.
distributed::PushRequest FullPush(const PsServer& ps, int64_t seq) {
  const distributed::TrainPlan& plan = ps.plan();
  distributed::PushRequest push;
  push.set_worker(0);
  push.set_seq(seq);
  push.set_global_step(0);
  push.set_graph_fingerprint(plan.graph_fingerprint);
  for (const ApplyPlacement& a : plan.applies) {
    if (a.table) {
      const int64_t dim = FindTable(plan, a.target)->dim;
      const std::vector<int64_t> ids = {1, 7, -3};
      std::vector<float> rows(ids.size() * dim);
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = 0.01f * static_cast<float>(i % 5);
      distributed::SparseGrad* g = push.add_sparse_grads();
      g->set_apply_node(a.node);
      g->set_ids(distributed::IdsToBytes(ids));
      g->set_values(Floats(rows));
      g->set_dim(dim);
      continue;
    }
    const VariablePlacement* v = plan.FindVariable(a.target);
    TensorShape shape = v->shape.ToTensorShape();
    if (!a.indices.empty()) {
      shape.set_dim(0, 2);
      Tensor indices(a.indices_dtype, TensorShape({2}));
      if (a.indices_dtype == DT_INT32) {
        indices.data<int32_t>()[0] = 0;
        indices.data<int32_t>()[1] = 2;
      } else {
        indices.data<int64_t>()[0] = 0;
        indices.data<int64_t>()[1] = 2;
      }
      distributed::TensorBytes* t = push.add_dense_grads();
      t->set_name(a.indices);
      distributed::ToWire(indices, t);
    }
    Tensor grad(a.grad_dtype, shape);
    for (int64_t i = 0; i < grad.NumElements(); ++i) {
      if (a.grad_dtype == DT_DOUBLE) {
        grad.data<double>()[i] = 0.01 * (i % 3);
      } else {
        grad.data<float>()[i] = 0.01f * static_cast<float>(i % 3);
      }
    }
    distributed::TensorBytes* t = push.add_dense_grads();
    t->set_name(a.grad);
    distributed::ToWire(grad, t);
  }
  return push;
}

std::string Describe(const absl::Status& s) { return s.ok() ? "OK" : s.ToString(); }

int64_t TableRows(PsServer* ps) {
  distributed::StatusResponse st;
  absl::Status s = ps->GetStatus(&st);
  FUZZ_CHECK(s.ok(), s.ToString());
  return st.table_rows();
}

// The ps answers, and what it holds still has the graph's shapes.
void CheckPsState(PsServer* ps) {
  distributed::StatusResponse st;
  absl::Status s = ps->GetStatus(&st);
  FUZZ_CHECK(s.ok(), "GetStatus: " + s.ToString());
  FUZZ_CHECK(st.initialized() && st.has_graph(), "the ps lost its state");
  ResourceMgr* rm = ps->session()->device()->resource_manager();
  for (const VariablePlacement& v : ps->plan().variables) {
    const std::string container = v.container.empty() ? rm->default_container() : v.container;
    auto var = rm->Lookup<Var>(container, v.shared_name);
    FUZZ_CHECK(var.ok(), v.node + ": " + var.status().ToString());
    absl::StatusOr<Tensor> value = (*var)->Read();
    FUZZ_CHECK(value.ok(), v.node + ": " + value.status().ToString());
    FUZZ_CHECK(value->dtype() == v.dtype && v.shape.IsCompatibleWith(value->shape()),
               absl::StrCat(v.node, " is ", DataTypeString(value->dtype()), " ",
                            value->shape().DebugString(), ", the graph's ",
                            DataTypeString(v.dtype), " ", v.shape.DebugString()));
  }
  for (const TablePlacement& t : ps->plan().tables) {
    const std::string container = t.container.empty() ? rm->default_container() : t.container;
    auto res = embedding::EmbeddingTableResource::Lookup(*rm, container, t.shared_name);
    FUZZ_CHECK(res.ok(), t.node + ": " + res.status().ToString());
    FUZZ_CHECK((*res)->table()->dim() == t.dim,
               absl::StrCat(t.node, " has dim ", (*res)->table()->dim(), ", not ", t.dim));
  }
}

PsState& Ps() {
  static PsState* const state = [] {
    auto* s = new PsState;
    models::ModelConfig c;
    c.type = "deepfm";
    c.dense_features = {"I1", "I2"};
    c.sparse_features = {{.name = "C1", .hash_table = true},
                         {.name = "C2", .vocabulary_size = 10}};
    c.embedding_dim = 4;
    c.hidden_units = {4};
    c.seed = 3;
    Scope root = Scope::NewRootScope();
    auto model = models::BuildModel(root, c, models::Placeholders(root, c));
    FUZZ_CHECK(model.ok(), model.status().ToString());
    train::GlobalVariablesInitializer(root);
    auto def = root.ToGraphDef();
    FUZZ_CHECK(def.ok(), def.status().ToString());
    s->graph = *std::move(def);
    s->options.env = &s->env;
    s->options.session.inter_op_threads = s->options.session.intra_op_threads = 1;
    s->env.Reset({kCheckpointDir, kScratchDir}, {});
    auto ps = PsServer::Create(s->graph, s->options);
    FUZZ_CHECK(ps.ok(), ps.status().ToString());
    s->ps = *std::move(ps);
    // The checkpoint: after one push, so that it differs from the
    // initializers' values.
    distributed::InitResponse ir;
    absl::Status st = s->ps->Init({}, &ir);
    FUZZ_CHECK(st.ok(), st.ToString());
    distributed::PushResponse pr;
    st = s->ps->Push(FullPush(*s->ps, 1), &pr);
    FUZZ_CHECK(st.ok() && pr.applied(), st.ToString());
    distributed::SaveRequest save;
    save.set_prefix(kCheckpoint);
    distributed::SaveResponse sr;
    st = s->ps->Save(save, &sr);
    FUZZ_CHECK(st.ok(), st.ToString());
    auto names = s->env.GetChildren(kCheckpointDir);
    FUZZ_CHECK(names.ok(), names.status().ToString());
    for (const std::string& name : *names) {
      const std::string path = absl::StrCat(kCheckpointDir, "/", name);
      std::string bytes;
      FUZZ_CHECK(ReadFileToString(&s->env, path, &bytes).ok(), path);
      s->checkpoint_files[path] = std::move(bytes);
    }
    CheckPsState(s->ps.get());
    return s;
  }();
  return *state;
}

enum RequestKind { kPull, kPush, kInit, kStatus, kSave, kPublish, kInitEmptyPs, kNumKinds };

void RunPull(PsServer* ps, const std::string& bytes) {
  distributed::PullRequest req;
  if (!req.ParseFromString(bytes)) return Note("not a PullRequest");
  const int64_t rows_before = TableRows(ps);
  distributed::PullResponse resp;
  absl::Status s = ps->Pull(req, &resp);
  Note(absl::StrCat("Pull of ", req.tables_size(), " tables", req.training() ? ", training" : "",
                    req.include_dense() ? ", dense" : "", " -> ", Describe(s)));
  if (!req.training()) {
    FUZZ_CHECK(TableRows(ps) == rows_before, "a read-only pull added rows");
  }
  if (!s.ok()) return;
  FUZZ_CHECK(resp.rows_size() == req.tables_size(),
             absl::StrCat(resp.rows_size(), " rows for ", req.tables_size(), " tables"));
  for (int i = 0; i < resp.rows_size(); ++i) {
    const distributed::TableRows& rows = resp.rows(i);
    const TablePlacement* t = FindTable(ps->plan(), req.tables(i).table());
    FUZZ_CHECK(t != nullptr && rows.table() == t->node && rows.dim() == t->dim,
               "rows of " + rows.table());
    const uint64_t n = req.tables(i).ids().size() / sizeof(int64_t);
    FUZZ_CHECK(rows.values().size() == n * t->dim * sizeof(float),
               absl::StrCat(rows.values().size(), " bytes of rows for ", n, " ids"));
  }
  const auto dense = ps->plan().PrimaryVariablesOn(ps->options().task_index);
  FUZZ_CHECK(resp.dense_size() == (req.include_dense() ? static_cast<int>(dense.size()) : 0),
             absl::StrCat(resp.dense_size(), " dense tensors"));
  for (int i = 0; i < resp.dense_size(); ++i) {
    absl::StatusOr<Tensor> t = distributed::FromWire(resp.dense(i));
    FUZZ_CHECK(t.ok(), t.status().ToString());
    FUZZ_CHECK(resp.dense(i).name() == dense[i]->node &&
                   dense[i]->shape.IsCompatibleWith(t->shape()),
               resp.dense(i).name() + " is " + t->shape().DebugString());
  }
}

void RunPush(PsServer* ps, const std::string& bytes) {
  distributed::PushRequest req;
  if (!req.ParseFromString(bytes)) return Note("not a PushRequest");
  distributed::StatusResponse before;
  FUZZ_CHECK(ps->GetStatus(&before).ok(), "GetStatus");
  distributed::PushResponse resp;
  absl::Status s = ps->Push(req, &resp);
  Note(absl::StrCat("Push of ", req.dense_grads_size(), " dense and ", req.sparse_grads_size(),
                    " sparse gradients -> ", Describe(s),
                    s.ok() ? absl::StrCat(resp.applied() ? ", applied" : ", not applied: ",
                                          resp.note(), ", step ", resp.global_step())
                           : ""));
  if (!s.ok()) return;
  FUZZ_CHECK(resp.global_step() == before.global_step() + (resp.applied() ? 1 : 0),
             absl::StrCat("step ", before.global_step(), " -> ", resp.global_step()));
}

void RunInit(PsServer* ps, const std::string& bytes) {
  distributed::InitRequest req;
  if (!req.ParseFromString(bytes)) return Note("not an InitRequest");
  distributed::InitResponse resp;
  absl::Status s = ps->Init(req, &resp);
  Note(absl::StrCat("Init from '", req.checkpoint_prefix(), "' -> ", Describe(s),
                    s.ok() ? absl::StrCat(", step ", resp.global_step()) : ""));
  if (s.ok()) return;
  // An init that failed after it began rewriting the state leaves the ps
  // uninitialized: it must refuse to serve that state, and the next good
  // init (the chief's retry) restores it.
  distributed::StatusResponse st;
  absl::Status status = ps->GetStatus(&st);
  FUZZ_CHECK(status.ok(), "GetStatus: " + status.ToString());
  if (st.initialized()) return;
  distributed::PullRequest pull;
  pull.set_include_dense(true);
  distributed::PullResponse pulled;
  absl::Status p = ps->Pull(pull, &pulled);
  FUZZ_CHECK(absl::IsFailedPrecondition(p),
             "a ps left uninitialized by a failed init answered a pull: " + Describe(p));
  distributed::InitRequest again;
  again.set_checkpoint_prefix(kCheckpoint);
  distributed::InitResponse again_resp;
  absl::Status a = ps->Init(again, &again_resp);
  FUZZ_CHECK(a.ok(), "the init after a failed one: " + a.ToString());
}

void RunInitOfEmptyPs(PsState& state, const std::string& bytes) {
  distributed::InitRequest req;
  if (!req.ParseFromString(bytes)) return Note("not an InitRequest");
  auto ps = PsServer::Create(tensorflow::GraphDef(), state.options);
  FUZZ_CHECK(ps.ok(), ps.status().ToString());
  distributed::InitResponse resp;
  absl::Status s = (*ps)->Init(req, &resp);
  Note(absl::StrCat("Init of a ps without a graph, with ", req.graph_def().size(),
                    " bytes of graph -> ", Describe(s)));
  if (s.ok()) CheckPsState(ps->get());
}

void RunStatus(PsServer* ps, const std::string& bytes) {
  distributed::StatusRequest req;
  if (!req.ParseFromString(bytes)) return Note("not a StatusRequest");
  distributed::StatusResponse resp;
  absl::Status s = ps->GetStatus(&resp, req);
  Note(absl::StrCat("GetStatus -> ", Describe(s), ", ", resp.workers_gone_size(),
                    " workers gone"));
  FUZZ_CHECK(s.ok(), s.ToString());
}

void RunSave(PsServer* ps, const std::string& bytes) {
  distributed::SaveRequest req;
  if (!req.ParseFromString(bytes)) return Note("not a SaveRequest");
  distributed::SaveResponse resp;
  absl::Status s = ps->Save(req, &resp);
  Note(absl::StrCat("Save to '", req.prefix(), "' part ", req.part(), " -> ", Describe(s)));
}

void RunPublish(PsServer* ps, const std::string& bytes) {
  distributed::PublishUpdateRequest req;
  if (!req.ParseFromString(bytes)) return Note("not a PublishUpdateRequest");
  distributed::PublishUpdateResponse resp;
  absl::Status s = ps->PublishUpdate(req, &resp);
  Note(absl::StrCat("PublishUpdate to '", req.prefix(), "'", req.full() ? " full" : " delta",
                    " -> ", Describe(s), s.ok() ? absl::StrCat(", ", resp.rows(), " rows") : ""));
}

}  // namespace

RECFLOW_FUZZ_TARGET(ps_requests) {
  PsState& state = Ps();
  PsServer* ps = state.ps.get();
  FuzzInput in(data, size);
  const int kind = in.ConsumeByte() % kNumKinds;
  const std::string bytes(in.ConsumeRest());
  distributed::InitRequest reinit;
  reinit.set_checkpoint_prefix(kCheckpoint);
  distributed::InitResponse ir;
  absl::Status s = ps->Init(reinit, &ir);
  FUZZ_CHECK(s.ok(), "restoring the ps: " + s.ToString());
  switch (kind) {
    case kPull: RunPull(ps, bytes); break;
    case kPush: RunPush(ps, bytes); break;
    case kInit: RunInit(ps, bytes); break;
    case kStatus: RunStatus(ps, bytes); break;
    case kSave: RunSave(ps, bytes); break;
    case kPublish: RunPublish(ps, bytes); break;
    case kInitEmptyPs: RunInitOfEmptyPs(state, bytes); break;
  }
  CheckPsState(ps);
  if (kind == kSave || kind == kPublish) {
    state.env.Reset({kCheckpointDir, kScratchDir}, state.checkpoint_files);
  }
  return 0;
}

RECFLOW_FUZZ_SEEDS(ps_requests) {
  PsServer* ps = Ps().ps.get();
  const distributed::TrainPlan& plan = ps->plan();
  const auto seed = [](RequestKind kind, const google::protobuf::Message& m) {
    return std::string(1, static_cast<char>(kind)) + m.SerializeAsString();
  };
  Seeds seeds;

  distributed::PullRequest pull;
  pull.set_worker(1);
  pull.set_training(true);
  pull.set_include_dense(true);
  pull.set_graph_fingerprint(plan.graph_fingerprint);
  for (const TablePlacement& t : plan.tables) {
    distributed::TableIds* ids = pull.add_tables();
    ids->set_table(t.node);
    ids->set_ids(distributed::IdsToBytes({1, 7, -3, int64_t{1} << 50}));
  }
  seeds.push_back({"pull_training", seed(kPull, pull)});
  pull.set_training(false);
  pull.set_include_dense(false);
  seeds.push_back({"pull_read_only", seed(kPull, pull)});
  pull.mutable_tables(0)->set_ids("1234567");
  seeds.push_back({"pull_truncated_ids", seed(kPull, pull)});
  pull.mutable_tables(0)->set_table("no_such_table");
  seeds.push_back({"pull_unknown_table", seed(kPull, pull)});

  // Each push seed with a seq of its own: the ps drops a (worker, seq) it
  // has applied.
  const distributed::PushRequest push = FullPush(*ps, 10);
  seeds.push_back({"push_every_gradient", seed(kPush, push)});
  distributed::PushRequest bad = push;
  bad.set_seq(11);
  for (distributed::TensorBytes& g : *bad.mutable_dense_grads()) {
    if (g.shape_size() > 0) g.set_shape(0, g.shape(0) + 1);  // content now too short
  }
  seeds.push_back({"push_bad_sizes", seed(kPush, bad)});
  bad = push;
  bad.set_seq(12);
  for (distributed::TensorBytes& g : *bad.mutable_dense_grads()) {
    if (g.shape_size() == 0) continue;
    // Same bytes, another shape of the same size: [a, b] as [a * b].
    int64_t n = 1;
    for (int64_t d : g.shape()) n *= d;
    g.clear_shape();
    g.add_shape(n);
  }
  seeds.push_back({"push_reshaped_gradients", seed(kPush, bad)});
  bad = push;
  bad.set_seq(13);
  for (distributed::SparseGrad& g : *bad.mutable_sparse_grads()) g.set_dim(g.dim() + 1);
  bad.mutable_sparse_grads(0)->mutable_values()->resize(5);
  seeds.push_back({"push_bad_rows", seed(kPush, bad)});

  distributed::InitRequest init;
  init.set_checkpoint_prefix(kCheckpoint);
  seeds.push_back({"init_from_checkpoint", seed(kInit, init)});
  init.set_checkpoint_prefix("/ckpt/missing");
  seeds.push_back({"init_missing_checkpoint", seed(kInit, init)});
  init.set_checkpoint_prefix("");
  init.set_only_if_uninitialized(true);
  seeds.push_back({"init_only_if_uninitialized", seed(kInit, init)});

  distributed::StatusRequest status;
  status.set_leaving(true);
  status.set_worker(3);
  seeds.push_back({"status_leaving", seed(kStatus, status)});

  distributed::SaveRequest save;
  save.set_prefix(absl::StrCat(kScratchDir, "/save"));
  save.set_part(0);
  seeds.push_back({"save", seed(kSave, save)});
  save.set_prefix("");
  seeds.push_back({"save_no_prefix", seed(kSave, save)});

  distributed::PublishUpdateRequest publish;
  publish.set_prefix(absl::StrCat(kScratchDir, "/update"));
  publish.set_full(true);
  for (const VariablePlacement& v : plan.variables) publish.add_variables(v.node);
  seeds.push_back({"publish_full", seed(kPublish, publish)});
  publish.set_full(false);
  publish.set_since_step(0);
  seeds.push_back({"publish_delta", seed(kPublish, publish)});

  distributed::InitRequest adopt;
  adopt.set_graph_def(Ps().graph.SerializeAsString());
  adopt.set_init_node("init");
  seeds.push_back({"init_empty_ps_with_graph", seed(kInitEmptyPs, adopt)});
  // Found by random stress: an update op this binary does not register
  // (PlanTraining read its op definition through a null pointer).
  tensorflow::GraphDef unregistered = Ps().graph;
  for (tensorflow::NodeDef& n : *unregistered.mutable_node()) {
    if (n.op() == "ResourceApplyAdam") n.set_op("NoSuchApplyOp");
  }
  adopt.set_graph_def(unregistered.SerializeAsString());
  seeds.push_back({"init_empty_ps_unregistered_update_op", seed(kInitEmptyPs, adopt)});
  adopt.set_graph_def("not a graph");
  seeds.push_back({"init_empty_ps_garbage_graph", seed(kInitEmptyPs, adopt)});
  seeds.push_back({"garbage", std::string("\x01\xff\xff\xff\x0f\x12\x07", 7)});
  return seeds;
}

// ---------------------------------------------------------------------------
// tf_config: TF_CONFIG JSON, TF1's cluster flags and device names
// (cluster_spec.h).
//
// Input: a mode byte; mode % 3 is 0: the rest is TF_CONFIG JSON; 1: five
// length-prefixed parts (ps hosts, worker hosts, chief host, job name, and
// the task index as text), for FromFlags; 2: the rest is a device name.
// Checks: an accepted config survives ToTfConfig -> FromTfConfig with the
// same jobs and task, and ClusterSpec::Create of its jobs; every device of
// the cluster validates; the task's address, index and chief agree with
// the cluster. A device name ParseDeviceName accepts parses back from
// ToString to the same.

namespace {

void CheckClusterConfig(const ClusterConfig& c) {
  const std::string json = c.ToTfConfig();
  Note("config: " + json);
  absl::StatusOr<ClusterConfig> back = ClusterSpec::FromTfConfig(json);
  FUZZ_CHECK(back.ok(), json + ": " + back.status().ToString());
  FUZZ_CHECK(back->cluster.jobs() == c.cluster.jobs() && back->task == c.task,
             "FromTfConfig(ToTfConfig(x)) is not x: " + back->ToTfConfig());
  absl::StatusOr<ClusterSpec> again = ClusterSpec::Create(c.cluster.jobs());
  FUZZ_CHECK(again.ok() && again->jobs() == c.cluster.jobs(), again.status().ToString());
  for (const std::string& device : c.cluster.Devices()) {
    absl::Status s = c.cluster.ValidateDevice(device);
    FUZZ_CHECK(s.ok(), device + ": " + s.ToString());
  }
  const int index = c.training_worker_index();
  FUZZ_CHECK(index >= -1 && index < c.num_training_workers(),
             absl::StrCat("training index ", index, " of ", c.num_training_workers()));
  FUZZ_CHECK(c.is_chief() == (index == 0), "is_chief disagrees with the training index");
  if (c.cluster.HasTask(c.task)) {
    absl::StatusOr<std::string> address = c.cluster.Address(c.task);
    FUZZ_CHECK(address.ok() && *address == c.address(), "the task's address");
    FUZZ_CHECK(c.cluster.ListenAddress(c.task).ok(), "the task's listen address");
  } else {
    FUZZ_CHECK(c.task.job == distributed::kEvaluatorJob && c.address().empty(),
               "task " + distributed::DeviceName(c.task) + " is not in the cluster");
  }
}

}  // namespace

RECFLOW_FUZZ_TARGET(tf_config) {
  FuzzInput in(data, size);
  const int mode = in.ConsumeByte() % 3;
  if (mode == 0) {
    const absl::string_view json = in.ConsumeRest();
    absl::StatusOr<ClusterConfig> c = ClusterSpec::FromTfConfig(json);
    Note(absl::StrCat("FromTfConfig -> ", Describe(c.status())));
    if (c.ok()) CheckClusterConfig(*c);
    if (!c.ok()) {
      FUZZ_CHECK(absl::StartsWith(c.status().message(), "TF_CONFIG"), c.status().ToString());
    }
  } else if (mode == 1) {
    const absl::string_view ps = in.ConsumeLengthPrefixed();
    const absl::string_view workers = in.ConsumeLengthPrefixed();
    const absl::string_view chief = in.ConsumeLengthPrefixed();
    const absl::string_view job = in.ConsumeLengthPrefixed();
    const int task_index = static_cast<int>(in.ConsumeIntInRange(-2, 40, 1));
    absl::StatusOr<ClusterConfig> c =
        ClusterSpec::FromFlags(ps, workers, chief, job, task_index);
    Note(absl::StrCat("FromFlags -> ", Describe(c.status())));
    if (c.ok()) CheckClusterConfig(*c);
  } else {
    const absl::string_view name = in.ConsumeRest();
    absl::StatusOr<distributed::DeviceNameSpec> d = distributed::ParseDeviceName(name);
    Note(absl::StrCat("ParseDeviceName -> ", d.ok() ? "'" + d->ToString() + "'"
                                                    : d.status().ToString()));
    if (d.ok()) {
      const std::string canonical = d->ToString();
      absl::StatusOr<distributed::DeviceNameSpec> back = distributed::ParseDeviceName(canonical);
      FUZZ_CHECK(back.ok() && back->ToString() == canonical,
                 canonical + ": " + back.status().ToString());
      static const ClusterSpec* const cluster = [] {
        auto c = ClusterSpec::Create(
            {{"ps", {"h1:1", "h2:1"}}, {"worker", {"h3:1"}}, {"chief", {"h0:1"}}});
        FUZZ_CHECK(c.ok(), c.status().ToString());
        return new ClusterSpec(*std::move(c));
      }();
      Note("validate: " + Describe(cluster->ValidateDevice(name)));
    }
  }
  return 0;
}

RECFLOW_FUZZ_SEEDS(tf_config) {
  const std::string chief =
      R"({"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],)"
      R"( "ps": ["host3:2222", "host4:2222"]}, "task": {"type": "worker", "index": 1},)"
      R"( "environment": "cloud"})";
  const std::string dict_form =
      R"({"cluster": {"worker": {"1": "[::1]:2", "0": "10.0.0.1:65535"}, "ps": ["a-b.c:1"]},)"
      R"( "task": {"type": "ps", "index": "0"}})";
  const std::string evaluator =
      R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "evaluator", "index": 0}})";
  const std::string flags = std::string(1, '\x01') + LengthPrefixed("ps0:2222, ps1:2222") +
                            LengthPrefixed("w0:2222,w1:2222,") + LengthPrefixed("c:1") +
                            LengthPrefixed("worker") + std::string(1, '\x03');  // index 1
  return {
      {"tf_config_with_chief", std::string(1, '\0') + chief},
      {"tf_config_dict_form", std::string(1, '\0') + dict_form},
      {"tf_config_evaluator", std::string(1, '\0') + evaluator},
      {"tf_config_bad_port",
       std::string(1, '\0') + R"({"cluster": {"worker": ["a:70000"]}, "task": {"type": "worker",)"
                              R"( "index": 0}})"},
      {"tf_config_not_json", std::string(1, '\0') + R"({"cluster": [1, {"x": )"},
      {"flags", flags},
      {"device_full", "\x02/job:ps/replica:0/task:1/device:CPU:0"},
      {"device_legacy", "\x02/cpu:0"},
      {"device_bad", "\x02/task:1/job:ps"},
  };
}

// ---------------------------------------------------------------------------
// run_config_yaml: the YAML run config (recflow/models/config.h).
//
// Input: a byte, then YAML text. With the byte's low bit set the text
// starts with one override (a length-prefixed dotted key and a
// length-prefixed value) applied by WithOverrides before parsing. No
// exception may leave recflow (yaml-cpp's are Status). Checks: a config
// ParseRunConfig accepts is emitted again by WithOverrides (no override)
// and parses back to the same config.

namespace {

std::string Summary(const models::RunConfig& c) {
  const models::ModelConfig& m = c.model;
  std::string s = absl::StrCat(m.type, "|", absl::StrJoin(m.dense_features, ","), "|",
                               m.embedding_dim, "|", absl::StrJoin(m.hidden_units, ","), "|",
                               m.activation, "|", m.seed, "|", m.l2_regularization, "|",
                               absl::StrJoin(m.user_features, ","), "|",
                               absl::StrJoin(m.item_features, ","), "|");
  for (const models::SparseFeatureConfig& f : m.sparse_features) {
    absl::StrAppend(&s, f.name, ":", f.vocabulary_size, ":", f.hash_table ? 1 : 0, ":", f.dim, ":",
                    f.combiner, ":", f.sequence_of, ":", f.missing, ":", f.dram_budget_mb, ":",
                    f.cold_dir, ";");
  }
  for (const models::OptimizerConfig* o : {&m.embedding_optimizer, &m.dense_optimizer}) {
    absl::StrAppend(&s, "|", o->type, ":", o->learning_rate, ":", o->schedule, ":",
                    o->warmup_steps, ":", o->decay_steps, ":", o->decay_rate);
  }
  absl::StrAppend(&s, "|", c.data.format, ":", c.data.train, ":", c.data.eval, ":",
                  c.data.hash_ids ? 1 : 0, ":", c.data.stream ? 1 : 0, "|", c.train.batch_size, ":",
                  c.train.steps, ":", c.train.epochs, ":", c.train.save_steps, ":",
                  c.train.keep, ":", c.train.eval_every_steps, ":", c.train.eval_batches);
  return s;
}

}  // namespace

RECFLOW_FUZZ_TARGET(run_config_yaml) {
  FuzzInput in(data, size);
  const bool override_first = in.ConsumeBool();
  std::string yaml;
  if (override_first) {
    const std::string key(in.ConsumeLengthPrefixed());
    const std::string value(in.ConsumeLengthPrefixed());
    absl::StatusOr<std::string> with = models::WithOverrides(std::string(in.ConsumeRest()),
                                                             {{key, value}});
    Note(absl::StrCat("override ", key, "=", value, " -> ", Describe(with.status())));
    if (!with.ok()) return 0;
    yaml = *std::move(with);
  } else {
    yaml = std::string(in.ConsumeRest());
  }
  absl::StatusOr<models::RunConfig> c = models::ParseRunConfig(yaml, "fuzz.yaml");
  Note("ParseRunConfig -> " + (c.ok() ? Summary(*c) : c.status().ToString()));
  if (!c.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(c.status()), c.status().ToString());
    return 0;
  }
  absl::StatusOr<std::string> emitted = models::WithOverrides(yaml, {});
  FUZZ_CHECK(emitted.ok(), "cannot emit an accepted config: " + emitted.status().ToString());
  absl::StatusOr<models::RunConfig> back = models::ParseRunConfig(*emitted, "emitted.yaml");
  FUZZ_CHECK(back.ok(), "the emitted config does not parse: " + back.status().ToString() +
                            "\n" + *emitted);
  FUZZ_CHECK(Summary(*back) == Summary(*c),
             "the emitted config differs:\n" + Summary(*c) + "\n" + Summary(*back));
  return 0;
}

RECFLOW_FUZZ_SEEDS(run_config_yaml) {
  const std::string full = R"(
model: {type: dcn_v2, embedding_dim: 16, hidden_units: [32], cross_layers: 3, seed: 3}
features:
  dense: 4
  sparse_defaults: {vocabulary_size: 200, combiner: sqrtn}
  sparse:
    - user
    - {name: item, hash_table: true, dim: 8}
    - {name: ad, vocabulary_size: 30}
optimizer:
  embedding: {type: ftrl, learning_rate: 0.05}
  dense: {type: sgd, learning_rate: 0.01}
data: {format: criteo, train: /d/train-*.tsv, eval: /d/test-*.tsv, parse_threads: 2}
train: {batch_size: 128, epochs: 2}
checkpoint: {save_secs: 60, keep: 2}
)";
  const std::string din = R"(
model: {type: din, embedding_dim: 4, attention_units: [8]}
features:
  dense: [price]
  sparse:
    - {name: item, hash_table: true}
    - {name: history, sequence_of: item, combiner: mean}
data: {format: tfrecord, train: "a.tfrecord,b.tfrecord", label_key: clicked}
)";
  return {
      {"full", std::string(1, '\0') + full},
      {"din_sequences", std::string(1, '\0') + din},
      {"counts", std::string(1, '\0') + "model: {type: lr}\nfeatures: {dense: 2, sparse: 3}\n"},
      {"override", std::string(1, '\x01') + LengthPrefixed("train.batch_size") +
                       LengthPrefixed("64") + full},
      {"override_into_scalar", std::string(1, '\x01') + LengthPrefixed("model.type.x") +
                                   LengthPrefixed("1") + full},
      {"duplicate_key", std::string(1, '\0') + "model: {type: lr}\nmodel: {type: fm}\n"},
      {"anchors_and_tags",
       std::string(1, '\0') + "model: {type: !!str lr, hidden_units: &u [4, 2]}\n"
                            "features: {dense: &n 3, sparse: *n}\ntrain: {steps: *n}\n"},
      {"not_yaml", std::string(1, '\0') + "model: [\n  - {type: lr\n\t: ]"},
      {"too_large", std::string(1, '\0') +
                        "model: {type: mlp}\nfeatures: {dense: 99999999999999999999}\n"
                        "train: {batch_size: 1e400}\n"},
  };
}

// ---------------------------------------------------------------------------
// iterator_state: restoring a dataset iterator from arbitrary bytes
// (dataset.h, "Iterator state").
//
// Input: a pipeline byte, a flags byte, then the state bytes. Pipelines
// (built once per process, over in-memory files): 0 text lines -> shuffle
// -> batch; 1 range -> parallel ragged map -> shuffle -> repeat -> batch ->
// prefetch; 2 range -> parallel interleave -> cache -> repeat -> shard ->
// take/skip. With the flags' low bit set the last four bytes are replaced
// by the state's crc32c, so that mutated states get past the checksum.
// Checks: an IteratorState that parses serializes to bytes that parse to
// the same; after a restore is accepted, the restored iterator yields only
// elements of the pipeline's dtypes, and a save of it restored into a
// fresh iterator yields the same elements (and errors) for a few steps.

namespace {

struct Pipelines {
  MemEnv env;
  std::unique_ptr<ThreadPool> pool;
  std::vector<data::Dataset> datasets;
};

absl::StatusOr<data::Element> Ragged(data::Element e) {
  const int64_t i = e[0].scalar<int64_t>();
  std::vector<int64_t> ids(i % 4, i);
  return data::Element{Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids)),
                       Tensor::FromVector<float>({static_cast<float>(i), -1.f})};
}

absl::StatusOr<data::Dataset> Block(const data::Element& e) {
  const int64_t i = e[0].scalar<int64_t>();
  return data::Dataset::Range(i % 5 + 1).Map([i](data::Element x) -> absl::StatusOr<data::Element> {
    return data::Element{Tensor::Scalar<int64_t>(i * 10 + x[0].scalar<int64_t>())};
  });
}

Pipelines& GetPipelines() {
  static Pipelines* const p = [] {
    auto* p = new Pipelines;
    FUZZ_CHECK(p->env.CreateDir("/d").ok(), "/d");
    std::vector<std::string> files;
    for (int f = 0; f < 3; ++f) {
      std::string text;
      for (int i = 0; i < 6 + 4 * f; ++i) absl::StrAppend(&text, "f", f, "-line", i, "\n");
      files.push_back(absl::StrCat("/d/part-", f));
      FUZZ_CHECK(WriteStringToFile(&p->env, files.back(), text).ok(), files.back());
    }
    p->pool = std::make_unique<ThreadPool>("fuzz_data", 2);
    data::TextLineOptions lines;
    lines.lines_per_element = 2;
    lines.read_buffer_bytes = 16;
    p->datasets.push_back(data::Dataset::TextLine(files, {}, lines).Shuffle(3, 7).Batch(2));
    p->datasets.push_back(data::Dataset::Range(40)
                              .Map(Ragged, 2, {DT_INT64, DT_FLOAT},
                                   {PartialShape{-1}, PartialShape{2}})
                              .Shuffle(4, 3)
                              .Repeat(2)
                              .Batch(3)
                              .Prefetch(2));
    p->datasets.push_back(data::Dataset::Range(9)
                              .Interleave(Block, 3, 2, 2, {DT_INT64}, {PartialShape(TensorShape())})
                              .Cache()
                              .Repeat(2)
                              .Shard(2, 1)
                              .Take(30)
                              .Skip(1));
    return p;
  }();
  return *p;
}

absl::StatusOr<data::Iterator> NewIterator(Pipelines& p, int pipeline) {
  data::IteratorContext ctx;
  ctx.env = &p.env;
  ctx.thread_pool = p.pool.get();
  return p.datasets[pipeline].MakeIterator(ctx);
}

}  // namespace

RECFLOW_FUZZ_TARGET(iterator_state) {
  Pipelines& p = GetPipelines();
  FuzzInput in(data, size);
  const int pipeline = in.ConsumeByte() % static_cast<int>(p.datasets.size());
  const bool fix_crc = in.ConsumeBool();
  std::string bytes(in.ConsumeRest());
  if (fix_crc && bytes.size() >= 4) {
    const uint32_t crc =
        crc32c::Mask(crc32c::Value(absl::string_view(bytes).substr(0, bytes.size() - 4)));
    for (int b = 0; b < 4; ++b) bytes[bytes.size() - 4 + b] = static_cast<char>(crc >> (8 * b));
  }
  absl::StatusOr<data::IteratorState> state = data::IteratorState::Parse(bytes);
  if (state.ok()) {
    const std::string again = state->Serialize();
    absl::StatusOr<data::IteratorState> reparsed = data::IteratorState::Parse(again);
    FUZZ_CHECK(reparsed.ok() && reparsed->Serialize() == again, "state round trip");
  }
  absl::StatusOr<data::Iterator> it = NewIterator(p, pipeline);
  FUZZ_CHECK(it.ok(), it.status().ToString());
  absl::Status s = it->RestoreFromString(bytes);
  Note(absl::StrCat(p.datasets[pipeline].DebugString(), ": ", state.ok() ? state->size() : 0,
                    " entries, restore -> ", Describe(s)));
  if (!s.ok()) return 0;
  absl::StatusOr<std::string> saved = it->SaveToString();
  FUZZ_CHECK(saved.ok(), "save after restore: " + saved.status().ToString());
  absl::StatusOr<data::Iterator> twin = NewIterator(p, pipeline);
  FUZZ_CHECK(twin.ok(), twin.status().ToString());
  s = twin->RestoreFromString(*saved);
  FUZZ_CHECK(s.ok(), "restoring what a restored iterator saved: " + s.ToString());
  const std::vector<DataType>& dtypes = p.datasets[pipeline].impl()->output_dtypes();
  for (int step = 0; step < 6; ++step) {
    data::Element a, b;
    bool a_end = false, b_end = false;
    const absl::Status sa = it->GetNext(&a, &a_end);
    const absl::Status sb = twin->GetNext(&b, &b_end);
    Note(absl::StrCat("  step ", step, ": ", Describe(sa), a_end ? ", end" : "",
                      sa.ok() && !a_end ? absl::StrCat(", ", a.size(), " components") : ""));
    FUZZ_CHECK(sa.code() == sb.code() && a_end == b_end,
               absl::StrCat("step ", step, ": ", Describe(sa), " vs ", Describe(sb)));
    if (!sa.ok() || a_end) break;
    FUZZ_CHECK(a.size() == b.size(), absl::StrCat(a.size(), " vs ", b.size(), " components"));
    for (size_t i = 0; i < a.size(); ++i) {
      FUZZ_CHECK(SameTensor(a[i], b[i]), absl::StrCat("step ", step, " component ", i));
    }
    FUZZ_CHECK(a.size() == dtypes.size(), absl::StrCat(a.size(), " components, the pipeline's ",
                                                       dtypes.size()));
    for (size_t i = 0; i < a.size(); ++i) {
      FUZZ_CHECK(a[i].dtype() == dtypes[i],
                 absl::StrCat("component ", i, " is ", DataTypeString(a[i].dtype())));
    }
  }
  return 0;
}

RECFLOW_FUZZ_SEEDS(iterator_state) {
  Pipelines& p = GetPipelines();
  Seeds seeds;
  for (int pipeline = 0; pipeline < static_cast<int>(p.datasets.size()); ++pipeline) {
    const std::string head(1, static_cast<char>(pipeline));
    absl::StatusOr<data::Iterator> it = NewIterator(p, pipeline);
    FUZZ_CHECK(it.ok(), it.status().ToString());
    std::string last;
    for (int step = 0; step <= 12; ++step) {
      if (step == 0 || step == 3 || step == 12) {
        absl::StatusOr<std::string> bytes = it->SaveToString();
        FUZZ_CHECK(bytes.ok(), bytes.status().ToString());
        seeds.push_back({absl::StrCat("pipeline", pipeline, "_after_", step),
                         head + std::string(1, '\0') + *bytes});
        last = *bytes;
      }
      data::Element e;
      bool end = false;
      if (!it->GetNext(&e, &end).ok() || end) break;
    }
    if (pipeline == 1) {
      // Prefetch's buffer claiming 2^32 results: found while writing this
      // target (RestoreResults allocated them all before reading the first).
      absl::StatusOr<data::IteratorState> state = data::IteratorState::Parse(last);
      FUZZ_CHECK(state.ok(), state.status().ToString());
      state->WriteInt("Iterator/buffer/count", int64_t{1} << 32);
      seeds.push_back({"pipeline1_huge_result_count", head + std::string(1, '\0') +
                                                           state->Serialize()});
    }
    seeds.push_back({absl::StrCat("pipeline", pipeline, "_truncated"),
                     head + std::string(1, '\0') + last.substr(0, last.size() / 2)});
    // A byte changed in the middle, crc fixed: restore sees a wrong value.
    std::string changed = last;
    changed[changed.size() / 2] ^= 0x40;
    seeds.push_back({absl::StrCat("pipeline", pipeline, "_changed_crc_fixed"),
                     head + std::string(1, '\x01') + changed});
  }
  seeds.push_back({"bad_magic", std::string("\x00\x00nope0000000000000000", 22)});
  return seeds;
}

}  // namespace recflow::fuzz
