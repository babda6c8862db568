// Hash embedding tables in a SavedModel: imported from the variables bundle
// after the graph's restore op (see saved_model_bundle.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/core/status.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/serving/saved_model_bundle.h"

namespace recflow::serving {
namespace {

constexpr char kTableOp[] = "HashEmbeddingTableOp";
constexpr int64_t kRowsPerChunk = 65536;

std::string StringAttrOf(const tensorflow::NodeDef& node, const char* name) {
  auto it = node.attr().find(name);
  return it == node.attr().end() ? "" : it->second.s();
}

// Replaces the table's rows with the bundle's rows under `key` (K/keys,
// K/values, optional K/frequencies and K/versions; slots are not needed for
// serving and start at their initial values). Values stream in chunks.
absl::Status ImportTable(embedding::HashEmbeddingTable* table,
                         const checkpoint::BundleReader& reader, const std::string& key) {
  const std::string keys_name = absl::StrCat(key, "/keys");
  const std::string values_name = absl::StrCat(key, "/values");
  if (!reader.Contains(keys_name) || !reader.Contains(values_name)) {
    return errors::NotFound("the variables bundle ", reader.prefix(),
                            " has no rows for hash embedding table '", key, "' (no '", keys_name,
                            "' / '", values_name, "')");
  }
  ASSIGN_OR_RETURN(Tensor keys, reader.Lookup(keys_name));
  if (keys.dtype() != DT_INT64 || keys.dims() != 1) {
    return errors::InvalidArgument("'", keys_name, "' in ", reader.prefix(), " is ",
                                   DataTypeString(keys.dtype()), " ",
                                   keys.shape().DebugString(), "; expected int64 [n]");
  }
  const int64_t n = keys.dim_size(0);
  const int64_t dim = table->dim();
  ASSIGN_OR_RETURN(checkpoint::TensorInfo info, reader.GetInfo(values_name));
  if (info.dtype != DT_FLOAT || info.shape.dims() != 2 || info.shape.dim_size(0) != n ||
      info.shape.dim_size(1) != dim) {
    return errors::InvalidArgument("'", values_name, "' in ", reader.prefix(), " is ",
                                   DataTypeString(info.dtype), " ", info.shape.DebugString(),
                                   "; table '", table->name(), "' needs float [", n, ",", dim,
                                   "]");
  }
  Tensor freqs, versions;
  for (auto [part, out] : {std::pair<const char*, Tensor*>{"frequencies", &freqs},
                           {"versions", &versions}}) {
    const std::string name = absl::StrCat(key, "/", part);
    if (!reader.Contains(name)) continue;
    ASSIGN_OR_RETURN(*out, reader.Lookup(name));
    if (out->dtype() != DT_INT64 || out->dims() != 1 || out->dim_size(0) != n) {
      return errors::InvalidArgument("'", name, "' in ", reader.prefix(), " is ",
                                     DataTypeString(out->dtype()), " ",
                                     out->shape().DebugString(), "; expected int64 [", n, "]");
    }
  }
  table->Clear();
  table->Reserve(n);
  Tensor buffer(DT_FLOAT, TensorShape({kRowsPerChunk, dim}));
  const size_t row_bytes = dim * sizeof(float);
  const size_t capacity = kRowsPerChunk * row_bytes;
  size_t filled = 0;
  int64_t start = 0;
  auto flush = [&]() -> absl::Status {
    const int64_t m = static_cast<int64_t>(filled / row_bytes);
    if (m > n - start) {
      return errors::DataLoss("'", values_name, "' in ", reader.prefix(),
                              " holds more rows than its keys");
    }
    embedding::TableChunk chunk;
    chunk.keys = keys.Slice(start, start + m);
    chunk.values = buffer.Slice(0, m);
    if (freqs.IsInitialized()) chunk.frequencies = freqs.Slice(start, start + m);
    if (versions.IsInitialized()) chunk.versions = versions.Slice(start, start + m);
    RETURN_IF_ERROR(table->Import(chunk));
    start += m;
    filled = 0;
    return absl::OkStatus();
  };
  absl::Status s = reader.ReadChunks(values_name, [&](absl::string_view piece) -> absl::Status {
    while (!piece.empty()) {
      const size_t take = std::min(piece.size(), capacity - filled);
      std::memcpy(buffer.raw_data() + filled, piece.data(), take);
      filled += take;
      piece.remove_prefix(take);
      if (filled == capacity) RETURN_IF_ERROR(flush());
    }
    return absl::OkStatus();
  });
  if (s.ok() && filled > 0) s = flush();
  if (s.ok() && start != n) {
    s = errors::DataLoss("'", values_name, "' in ", reader.prefix(), " holds ", start,
                         " rows, its keys ", n);
  }
  if (!s.ok()) {
    table->Clear();  // never serve a half-imported table
    return s;
  }
  return absl::OkStatus();
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
  for (const auto* node : tables) {
    std::string container = StringAttrOf(*node, "container");
    if (container.empty()) container = rm->default_container();
    std::string name = StringAttrOf(*node, "shared_name");
    if (name.empty()) name = node->name();
    ASSIGN_OR_RETURN(auto res, embedding::EmbeddingTableResource::Lookup(*rm, container, name));
    absl::Status s = ImportTable(res->table(), *reader, node->name());
    if (!s.ok()) {
      return errors::Annotate(s, absl::StrCat("importing hash embedding table '", node->name(),
                                              "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace recflow::serving
