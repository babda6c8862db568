// The hash embedding tables of a graph: its HashEmbeddingTableOp nodes,
// where each one's table lives in a ResourceMgr (container and shared
// name) and the options it is built with, parsed from the node's attrs.
// The one way to find and create them, shared by the op's kernel
// (kernels/hash_table_kernels.cc), training (train::CreateHashTables,
// SavedModel export), distributed ps tasks and workers (through
// train::CreateHashTables) and serving's SavedModel load:
//
//   ASSIGN_OR_RETURN(std::vector<GraphTable> tables,
//                    CreateGraphTables(*session->graph(), rm));
//   for (const GraphTable& t : tables) ... t.where.node, t.resource->table() ...
//
// A table is created once per (container, shared name), as the op's kernel
// does when it runs (EmbeddingTableResource::LookupOrCreate); an existing
// table is returned when its dim and optimizer agree with the node's.
//
// Thread-safe (the ResourceMgr is); the functions hold no state.
#ifndef RECFLOW_EMBEDDING_GRAPH_TABLES_H_
#define RECFLOW_EMBEDDING_GRAPH_TABLES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/embedding/embedding_options.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/resource_mgr.h"
#include "recflow/proto/node_def.pb.h"

namespace recflow::embedding {

// The op whose nodes hold hash embedding tables (ops/hash_table_ops.cc).
inline constexpr char kHashTableOp[] = "HashEmbeddingTableOp";

// Where the table of one HashEmbeddingTableOp node lives, and how it is
// built.
struct TableNode {
  std::string node;       // the node's name (the table's checkpoint key)
  std::string container;  // never empty: the ResourceMgr's default when the attr is
  std::string name;       // the shared name; never empty: the node's name when the attr is
  EmbeddingTableOptions options;  // from the attrs; options.name == name
};

// Parses the attrs of HashEmbeddingTableOp node `node` (with the op's
// defaults filled in, as a Graph's nodes have them). InvalidArgument naming
// the node and the attr for a missing or bad attr (e.g. an unknown
// optimizer, num_shards not a power of two in [1, 4096]).
absl::StatusOr<TableNode> ParseTableNode(const tensorflow::NodeDef& node,
                                         const std::string& default_container);

// Every HashEmbeddingTableOp node of `graph`, in graph order, parsed
// against `rm`'s default container.
absl::StatusOr<std::vector<TableNode>> FindGraphTables(const Graph& graph,
                                                        const ResourceMgr& rm);

struct GraphTable {
  TableNode where;
  std::shared_ptr<EmbeddingTableResource> resource;  // never null
};

// Creates (or finds) the table of every HashEmbeddingTableOp node of
// `graph` in `rm`, as running the nodes would. Errors name the node. Tables
// created here store their rows in `row_format` (serving's quantized rows)
// and, with keep_tiers false, keep every row in memory whatever the nodes'
// tier attrs say (serving: the trainer's cold directory is not the
// server's, and an export's tables are opened in place); a table found
// keeps its own.
absl::StatusOr<std::vector<GraphTable>> CreateGraphTables(
    const Graph& graph, ResourceMgr* rm, RowFormat row_format = RowFormat::kFloat32,
    bool keep_tiers = true);

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_GRAPH_TABLES_H_
