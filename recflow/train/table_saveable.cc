#include "recflow/train/table_saveable.h"

#include <algorithm>
#include <utility>

#include "recflow/core/status.h"

namespace recflow::train {
namespace {

using checkpoint::BundleReader;
using checkpoint::BundleWriter;
using embedding::EmbeddingTableResource;
using embedding::RestoreTable;
using embedding::SaveTable;
using embedding::TablePartKey;

using TableGetter = std::function<absl::StatusOr<std::shared_ptr<EmbeddingTableResource>>(
    bool for_restore)>;

// A saveable named (and saved under) `save_key`, restoring from table key
// `restore_key` in either layout.
checkpoint::Saveable MakeSaveable(std::string save_key, std::string restore_key, TableGetter get,
                                  TableSaveableOptions options) {
  checkpoint::Saveable s;
  s.name = std::move(save_key);
  s.save = [get, options](BundleWriter* writer, const std::string& key) -> absl::Status {
    ASSIGN_OR_RETURN(auto res, get(false));
    return SaveTable(res->table(), writer, key, -1, options);
  };
  s.save_delta = [get, options](BundleWriter* writer, const std::string& key,
                                int64_t since_step) -> absl::Status {
    ASSIGN_OR_RETURN(auto res, get(false));
    return SaveTable(res->table(), writer, key, std::max<int64_t>(since_step, 0), options);
  };
  s.restore = [get, options, restore_key](const BundleReader& reader,
                                          const std::string&) -> absl::Status {
    ASSIGN_OR_RETURN(auto res, get(true));
    return RestoreTable(res->table(), reader, restore_key, /*delta=*/false, options);
  };
  s.restore_delta = [get, options, restore_key](const BundleReader& reader,
                                                const std::string&) -> absl::Status {
    ASSIGN_OR_RETURN(auto res, get(true));
    return RestoreTable(res->table(), reader, restore_key, /*delta=*/true, options);
  };
  s.committed = [get](int64_t step, bool full) {
    // Deltas after a full checkpoint at `step` only need later deletions.
    if (!full) return;
    auto res = get(false);
    if (res.ok()) (*res)->table()->TrimDeletionLog(step);
  };
  return s;
}

// Looks the table up in `rm` at every save and restore.
TableGetter RmGetter(ResourceMgr* rm, TableRef ref) {
  if (ref.container.empty()) ref.container = rm->default_container();
  auto shared = std::make_shared<const TableRef>(std::move(ref));
  return [rm, shared](bool for_restore)
             -> absl::StatusOr<std::shared_ptr<EmbeddingTableResource>> {
    if (for_restore && shared->create_options.has_value()) {
      return EmbeddingTableResource::LookupOrCreate(rm, shared->container, shared->name,
                                                    *shared->create_options);
    }
    auto res = EmbeddingTableResource::Lookup(*rm, shared->container, shared->name);
    if (!res.ok()) {
      return errors::FailedPrecondition("embedding table '", shared->name, "' (container '",
                                        shared->container, "') does not exist: ",
                                        res.status().message());
    }
    return res;
  };
}

}  // namespace

checkpoint::Saveable TableSaveable(ResourceMgr* rm, TableRef ref, TableSaveableOptions options) {
  const std::string key = ref.checkpoint_key;
  return MakeSaveable(key, key, RmGetter(rm, std::move(ref)), std::move(options));
}

checkpoint::Saveable PartTableSaveable(ResourceMgr* rm, TableRef ref, int part,
                                       std::function<bool(int64_t id)> keep_id,
                                       TableSaveableOptions options) {
  const std::string key = ref.checkpoint_key;
  if (keep_id) options.keep_id = std::move(keep_id);
  return MakeSaveable(TablePartKey(key, part), key, RmGetter(rm, std::move(ref)),
                      std::move(options));
}

checkpoint::Saveable TableSaveable(std::shared_ptr<EmbeddingTableResource> table,
                                   std::string checkpoint_key, TableSaveableOptions options) {
  TableGetter get = [table](bool) -> absl::StatusOr<std::shared_ptr<EmbeddingTableResource>> {
    return table;
  };
  return MakeSaveable(checkpoint_key, checkpoint_key, std::move(get), options);
}

checkpoint::Saveable PartTableSaveable(std::shared_ptr<EmbeddingTableResource> table,
                                       std::string checkpoint_key, int part,
                                       std::function<bool(int64_t id)> keep_id,
                                       TableSaveableOptions options) {
  TableGetter get = [table](bool) -> absl::StatusOr<std::shared_ptr<EmbeddingTableResource>> {
    return table;
  };
  if (keep_id) options.keep_id = std::move(keep_id);
  return MakeSaveable(TablePartKey(checkpoint_key, part), checkpoint_key, std::move(get),
                      std::move(options));
}

}  // namespace recflow::train
