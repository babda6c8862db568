// Hash embedding tables in a SavedModel: imported from the variables bundle
// after the graph's restore op (see saved_model_bundle.h), through the
// table <-> bundle bridge that training restores with
// (embedding/table_bundle.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/core/status.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/embedding/table_bundle.h"
#include "recflow/serving/saved_model_bundle.h"

namespace recflow::serving {
namespace {

constexpr char kTableOp[] = "HashEmbeddingTableOp";

std::string StringAttrOf(const tensorflow::NodeDef& node, const char* name) {
  auto it = node.attr().find(name);
  return it == node.attr().end() ? "" : it->second.s();
}

}  // namespace

absl::Status RestoreHashTables(Session* session, const tensorflow::GraphDef& graph_def, Env* env,
                               const std::string& variables_prefix) {
  std::vector<const tensorflow::NodeDef*> tables;
  for (const auto& node : graph_def.node()) {
    if (node.op() == kTableOp) tables.push_back(&node);
  }
  if (tables.empty()) return absl::OkStatus();
  if (!env->FileExists(variables_prefix + ".index")) {
    return errors::NotFound("the graph has hash embedding table '", tables[0]->name(),
                            "' but there is no variables bundle ", variables_prefix, ".index");
  }
  // Running the table ops creates the tables from their attrs.
  std::vector<std::string> targets;
  for (const auto* node : tables) targets.push_back(node->name());
  RETURN_IF_ERROR(session->Run({}, {}, targets, nullptr));
  ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(env, variables_prefix));
  ResourceMgr* rm = session->device()->resource_manager();
  embedding::TableBundleOptions options;
  options.env = env;
  // The session runs no step yet: its intra-op pool is idle, and the
  // restore lanes use its size.
  options.pool = session->device()->intra_op_pool();
  // Serving lookups read no optimizer slot: they keep their initial values.
  options.restore_slots = false;
  for (const auto* node : tables) {
    std::string container = StringAttrOf(*node, "container");
    if (container.empty()) container = rm->default_container();
    std::string name = StringAttrOf(*node, "shared_name");
    if (name.empty()) name = node->name();
    ASSIGN_OR_RETURN(auto res, embedding::EmbeddingTableResource::Lookup(*rm, container, name));
    absl::Status s = embedding::RestoreTable(res->table(), *reader, node->name(),
                                             /*delta=*/false, options);
    if (!s.ok()) {
      return errors::Annotate(s, absl::StrCat("importing hash embedding table '", node->name(),
                                              "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace recflow::serving
