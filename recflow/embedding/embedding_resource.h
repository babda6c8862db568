// EmbeddingTableResource: a HashEmbeddingTable held in a ResourceMgr, so the
// embedding ops of a graph find it by container and shared name (or through
// a DT_RESOURCE handle that carries it). The ops engineer's entry point:
//
//   ASSIGN_OR_RETURN(auto res, EmbeddingTableResource::LookupOrCreate(
//                                  ctx->resource_manager(), container,
//                                  shared_name, options));
//   HashEmbeddingTable* table = res->table();
//
// The table is created once per (container, name); later calls must ask for
// a compatible table (same dim and optimizer). Thread-safe (the table is).
#ifndef RECFLOW_EMBEDDING_EMBEDDING_RESOURCE_H_
#define RECFLOW_EMBEDDING_EMBEDDING_RESOURCE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "recflow/core/resource_handle.h"
#include "recflow/embedding/hash_embedding_table.h"
#include "recflow/framework/resource_mgr.h"

namespace recflow::embedding {

class EmbeddingTableResource : public ResourceBase {
 public:
  explicit EmbeddingTableResource(std::unique_ptr<HashEmbeddingTable> table)
      : table_(std::move(table)) {}

  // Never null.
  HashEmbeddingTable* table() const { return table_.get(); }

  std::string DebugString() const override { return table_->DebugString(); }
  int64_t MemoryUsed() const override { return table_->GetStats().total_bytes; }

  // Builds the table from `options` (InvalidArgument when they are invalid).
  static absl::StatusOr<std::shared_ptr<EmbeddingTableResource>> Create(
      const EmbeddingTableOptions& options);

  // The table registered under container/name, or a new one made from
  // `options` and registered there. InvalidArgument when the existing table's
  // dim or optimizer differ from `options` (naming both).
  static absl::StatusOr<std::shared_ptr<EmbeddingTableResource>> LookupOrCreate(
      ResourceMgr* rm, const std::string& container, const std::string& name,
      const EmbeddingTableOptions& options);

  // The registered table; NotFound naming container/name when absent.
  static absl::StatusOr<std::shared_ptr<EmbeddingTableResource>> Lookup(
      const ResourceMgr& rm, const std::string& container,
      const std::string& name);

 private:
  std::unique_ptr<HashEmbeddingTable> table_;
};

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_EMBEDDING_RESOURCE_H_
