// Hash embedding tables in a SavedModel: created from the graph's nodes and
// imported from the variables bundle after the graph's restore op (see
// saved_model_bundle.h), through the table <-> bundle bridge that training
// restores with (embedding/table_bundle.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/core/status.h"
#include "recflow/embedding/graph_tables.h"
#include "recflow/embedding/table_bundle.h"
#include "recflow/serving/saved_model_bundle.h"

namespace recflow::serving {

absl::Status RestoreHashTables(Session* session, Env* env, const std::string& variables_prefix,
                               embedding::RowFormat row_format, bool open_in_place,
                               bool wait_for_check) {
  ResourceMgr* rm = session->device()->resource_manager();
  ASSIGN_OR_RETURN(std::vector<embedding::GraphTable> tables,
                   embedding::CreateGraphTables(*session->graph(), rm, row_format,
                                                /*keep_tiers=*/false));
  if (tables.empty()) return absl::OkStatus();
  if (!env->FileExists(variables_prefix + ".index")) {
    return errors::NotFound("the graph has hash embedding table '", tables[0].where.node,
                            "' but there is no variables bundle ", variables_prefix, ".index");
  }
  ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(env, variables_prefix));
  embedding::TableBundleOptions options;
  options.env = env;
  // The session runs no step yet: its intra-op pool is idle, and the
  // restore lanes use its size.
  options.pool = session->device()->intra_op_pool();
  // Serving lookups read no optimizer slot: they keep their initial values.
  options.restore_slots = false;
  // An export's tables carry their hash index: they are mapped and answer
  // at once (embedding/mapped_rows.h); others are imported.
  options.open_in_place = open_in_place;
  for (const embedding::GraphTable& t : tables) {
    absl::Status s = embedding::RestoreTable(t.resource->table(), *reader, t.where.node,
                                             /*delta=*/false, options);
    if (!s.ok()) {
      return errors::Annotate(s, absl::StrCat("importing hash embedding table '", t.where.node,
                                              "'"));
    }
  }
  // The passes of all tables run together; each is waited for in turn.
  for (const embedding::GraphTable& t : tables) {
    if (!wait_for_check) break;
    absl::Status s = t.resource->table()->WaitForBase();
    if (!s.ok()) {
      return errors::Annotate(s, absl::StrCat("importing hash embedding table '", t.where.node,
                                              "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace recflow::serving
