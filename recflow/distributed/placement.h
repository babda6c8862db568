// Placement: which ps task holds what, and which graph endpoints travel,
// for between-graph replication (docs/distributed.md).
//
//   ASSIGN_OR_RETURN(TrainPlan plan, PlanTraining(*session->graph(), {.num_ps = 2}));
//   plan.DenseVariablesOn(1);   // what ps 1 holds and a worker pulls from it
//   plan.applies;               // each update: its owner and the gradient
//                               // endpoints a worker fetches and the ps feeds
//
// Every task builds the same training graph (a model with its optimizers'
// update ops). PlanTraining reads that graph:
//   - Update ops ("apply" nodes: ApplyAdam, ResourceSparseApplyAdagrad,
//     HashTableApplyAdagrad, ... every op named *Apply* whose first input is
//     a variable or a hash table). Their data inputs computed from the
//     batch (the feed nodes: Placeholder and IteratorGetNext) are the
//     gradient endpoints: `grad` (dense, or a sparse gradient's rows) and
//     `indices` (a sparse gradient's ids).
//   - Variables. The variable an update op updates (input 0) is primary; its
//     other resource inputs (optimizer slots) go with it. Primary variables
//     are placed on the ps tasks balanced by bytes (slots included): the
//     largest first, each to the least loaded task (ties: lowest index). A
//     variable whose node asks for a device ("/job:ps/task:1") is placed
//     there; a device the cluster does not have is InvalidArgument naming
//     the node and the device and listing the cluster's ps devices. A
//     primary variable of at least PlanOptions::partition_bytes (and at
//     least num_ps rows) is partitioned instead: ps p holds rows
//     [part_offsets[p], part_offsets[p + 1]) of it and of its slots (rows
//     split as evenly as they go), so no single ps holds, updates or
//     serves all of it. Every
//     other variable (the global step, Adam's beta powers: read by the
//     updates, updated once per step) is replicated: every ps holds a copy.
//   - Hash embedding tables: sharded over every ps by id (PsShardOf), so no
//     ps is hot for a big table. The lookups of each table (HashEmbeddingBag,
//     HashEmbeddingLookup) give the ids endpoints a worker must know before
//     its step (to pull their rows).
//   - Post-update nodes: assignments of replicated variables other than the
//     global step that run after an update op (Adam's beta-power updates: a
//     control input from an update op, directly or through the ops computing
//     the assigned value, as TF 1.x's control_dependencies builds them). Every
//     ps runs them once per applied push, after its updates, so its copy of
//     the replicated variables follows the job's steps.
// PsGraphDef rewrites the graph for a ps: control inputs from nodes that
// depend on the batch are dropped (a ps has no batch), and every update
// op's gradient inputs come from placeholders of unknown shape
// (ApplyPlacement::ps_grad_feed, ps_indices_feed), so an update op runs with
// only its own gradients fed, whole or a partition's rows.
#ifndef RECFLOW_DISTRIBUTED_PLACEMENT_H_
#define RECFLOW_DISTRIBUTED_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/dtype.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/proto/graph.pb.h"

namespace recflow::distributed {

// The ps task holding `id`'s row of every hash table: a 64-bit mix of the id
// (so hashed and sequential ids spread alike), modulo num_ps.
int PsShardOf(int64_t id, int num_ps);

inline constexpr int kReplicated = -1;   // every ps holds a copy
inline constexpr int kPartitioned = -2;  // every ps holds a row range

struct VariablePlacement {
  std::string node;          // the variable's node name (its checkpoint key)
  std::string container;     // as the Session's ResourceMgr knows it
  std::string shared_name;
  DataType dtype = DT_INVALID;
  PartialShape shape;
  int64_t bytes = 0;         // -1 when the shape is not fully defined
  int ps = -1;               // owner; kReplicated or kPartitioned
  // kPartitioned: ps p holds rows [part_offsets[p], part_offsets[p + 1]).
  std::vector<int64_t> part_offsets;
  bool primary = false;      // updated by an apply op (a worker pulls it)
  std::string primary_of;    // for a slot: its primary variable's node
};

struct TablePlacement {
  std::string node;  // HashEmbeddingTableOp node (its checkpoint key)
  std::string container;
  std::string shared_name;
  int64_t dim = 0;
  // Endpoints ("node:index") of the int64 ids its lookups read.
  std::vector<std::string> ids_endpoints;
};

struct ApplyPlacement {
  std::string node;     // the update op
  std::string op;       // its type
  std::string target;   // the variable or table node it updates
  bool table = false;
  int ps = -1;          // owner (-1 for a table: every ps, by id;
                        // kPartitioned: every ps, its rows)
  std::string grad;     // endpoint of the gradient (or a sparse gradient's rows)
  std::string indices;  // endpoint of a sparse gradient's ids ("" when dense)
  DataType grad_dtype = DT_INVALID;
  DataType indices_dtype = DT_INVALID;
  int grad_input = -1, indices_input = -1;  // their input positions
  // What a ps feeds instead (PsGraphDef's placeholders of unknown shape, so
  // a partitioned variable's rows can be fed).
  std::string ps_grad_feed, ps_indices_feed;
};

struct TrainPlan {
  int num_ps = 0;
  std::vector<VariablePlacement> variables;
  std::vector<TablePlacement> tables;
  std::vector<ApplyPlacement> applies;
  std::vector<std::string> post_update_nodes;
  std::string global_step;  // its variable node ("" when the graph has none)
  // Fingerprint64 of the graph's nodes (names, ops, inputs, attrs): tasks
  // compare it so that a ps and a worker built from different configs fail
  // clearly instead of exchanging mismatched tensors.
  uint64_t graph_fingerprint = 0;

  // Primary variables held by ps `ps` (whole, or its rows of a partitioned
  // one), in plan order.
  std::vector<const VariablePlacement*> PrimaryVariablesOn(int ps) const;
  // Every variable ps `ps` holds and saves: owned (primary and slots; its
  // part of partitioned ones, saved as "<name>/part_<ps>"), and the
  // replicated ones when `ps` is 0.
  std::vector<const VariablePlacement*> SavedVariablesOn(int ps) const;
  // Bytes of the variables placed on each ps (slots included).
  std::vector<int64_t> BytesPerPs() const;
  const VariablePlacement* FindVariable(const std::string& node) const;
};

struct PlanOptions {
  int num_ps = 1;
  // The cluster's devices (ClusterSpec::Devices()), for messages; empty:
  // "/job:ps/task:0" .. "/job:ps/task:<num_ps - 1>".
  std::vector<std::string> devices;
  // Primary variables this large or larger are partitioned over the ps
  // tasks by rows (<= 0: never).
  int64_t partition_bytes = int64_t{64} << 20;
};

absl::StatusOr<TrainPlan> PlanTraining(const Graph& graph, const PlanOptions& options);

// The graph a ps runs (see the file comment).
absl::StatusOr<tensorflow::GraphDef> PsGraphDef(const Graph& graph, const TrainPlan& plan);

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_PLACEMENT_H_
