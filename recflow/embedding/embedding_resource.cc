#include "recflow/embedding/embedding_resource.h"

#include "recflow/core/status.h"

namespace recflow::embedding {

absl::StatusOr<std::shared_ptr<EmbeddingTableResource>>
EmbeddingTableResource::Create(const EmbeddingTableOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<HashEmbeddingTable> table,
                   HashEmbeddingTable::Create(options));
  return std::make_shared<EmbeddingTableResource>(std::move(table));
}

absl::StatusOr<std::shared_ptr<EmbeddingTableResource>>
EmbeddingTableResource::LookupOrCreate(ResourceMgr* rm,
                                       const std::string& container,
                                       const std::string& name,
                                       const EmbeddingTableOptions& options) {
  // Validate outside the manager's lock; the creator itself stays cheap
  // (an empty table allocates no rows).
  RETURN_IF_ERROR(Validate(options));
  ASSIGN_OR_RETURN(
      std::shared_ptr<EmbeddingTableResource> res,
      rm->LookupOrCreate<EmbeddingTableResource>(
          container, name,
          [&options]()
              -> absl::StatusOr<std::shared_ptr<EmbeddingTableResource>> {
            return Create(options);
          }));
  const EmbeddingTableOptions& have = res->table()->options();
  if (have.dim != options.dim || have.optimizer != options.optimizer) {
    return errors::InvalidArgument(
        "embedding table ", container, "/", name, " exists with dim ", have.dim,
        " and optimizer ", OptimizerName(have.optimizer), "; asked for dim ",
        options.dim, " and optimizer ", OptimizerName(options.optimizer));
  }
  return res;
}

absl::StatusOr<std::shared_ptr<EmbeddingTableResource>>
EmbeddingTableResource::Lookup(const ResourceMgr& rm,
                               const std::string& container,
                               const std::string& name) {
  return rm.Lookup<EmbeddingTableResource>(container, name);
}

}  // namespace recflow::embedding
