#include "recflow/embedding/graph_tables.h"

#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/resource_mgr.h"

namespace recflow::embedding {
namespace {

// Reads string attr `name` into *out by `choices` (value, enumerator);
// InvalidArgument listing the choices for any other value.
template <typename E>
absl::Status GetChoiceAttr(const AttrSlice& attrs, const char* name,
                           std::initializer_list<std::pair<const char*, E>> choices, E* out) {
  std::string s;
  RETURN_IF_ERROR(GetNodeAttr(attrs, name, &s));
  std::string listed;
  size_t i = 0;
  for (const auto& [value, e] : choices) {
    if (s == value) {
      *out = e;
      return absl::OkStatus();
    }
    absl::StrAppend(&listed, i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ", "'", value,
                    "'");
    ++i;
  }
  return errors::InvalidArgument(name, " must be ", listed, ", not '", s, "'");
}

// The table options in the attrs of a HashEmbeddingTableOp node.
absl::Status ParseOptions(const AttrSlice& attrs, EmbeddingTableOptions* o) {
  int64_t i64 = 0;
  RETURN_IF_ERROR(GetNodeAttr(attrs, "dim", &o->dim));
  RETURN_IF_ERROR(GetChoiceAttr<OptimizerKind>(attrs, "optimizer",
                                               {{"sgd", OptimizerKind::kSgd},
                                                {"adagrad", OptimizerKind::kAdagrad},
                                                {"adam", OptimizerKind::kAdam},
                                                {"ftrl", OptimizerKind::kFtrl}},
                                               &o->optimizer));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "initial_accumulator_value", &o->initial_accumulator_value));
  using InitKind = InitializerOptions::Kind;
  RETURN_IF_ERROR(GetChoiceAttr<InitKind>(attrs, "initializer",
                                          {{"zeros", InitKind::kZeros},
                                           {"constant", InitKind::kConstant},
                                           {"uniform", InitKind::kUniform},
                                           {"normal", InitKind::kNormal},
                                           {"truncated_normal", InitKind::kTruncatedNormal}},
                                          &o->initializer.kind));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "init_value", &o->initializer.value));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "init_minval", &o->initializer.minval));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "init_maxval", &o->initializer.maxval));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "init_mean", &o->initializer.mean));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "init_stddev", &o->initializer.stddev));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "seed", &i64));
  o->seed = static_cast<uint64_t>(i64);
  RETURN_IF_ERROR(GetNodeAttr(attrs, "num_shards", &i64));
  if (i64 < 1 || i64 > 4096) {
    return errors::InvalidArgument("num_shards must be a power of two in [1, 4096], got ", i64);
  }
  o->num_shards = static_cast<int>(i64);
  RETURN_IF_ERROR(GetNodeAttr(attrs, "default_value", &o->default_value));
  using AdmitKind = AdmissionOptions::Kind;
  RETURN_IF_ERROR(GetChoiceAttr<AdmitKind>(attrs, "admission",
                                           {{"always", AdmitKind::kAlways},
                                            {"count", AdmitKind::kCount},
                                            {"probability", AdmitKind::kProbability}},
                                           &o->admission.kind));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "admission_min_count", &o->admission.min_count));
  float p = 1.0f;
  RETURN_IF_ERROR(GetNodeAttr(attrs, "admission_probability", &p));
  o->admission.probability = p;
  RETURN_IF_ERROR(GetNodeAttr(attrs, "sketch_width", &o->admission.sketch_width));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "sketch_depth", &i64));
  if (i64 < 1 || i64 > 64) {
    return errors::InvalidArgument("sketch_depth must be in [1, 64], got ", i64);
  }
  o->admission.sketch_depth = static_cast<int>(i64);
  RETURN_IF_ERROR(GetNodeAttr(attrs, "max_age_steps", &o->eviction.max_age_steps));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "min_frequency", &o->eviction.min_frequency));
  RETURN_IF_ERROR(GetChoiceAttr<NonFinitePolicy>(attrs, "nonfinite_gradients",
                                                 {{"skip_row", NonFinitePolicy::kSkipRow},
                                                  {"apply", NonFinitePolicy::kApply},
                                                  {"error", NonFinitePolicy::kError}},
                                                 &o->nonfinite_gradients));
  // Tiers: optional (graphs written before them lack the attrs).
  if (attrs.Find("dram_budget_bytes") != nullptr) {
    RETURN_IF_ERROR(GetNodeAttr(attrs, "dram_budget_bytes", &o->tier.dram_budget_bytes));
  }
  if (attrs.Find("cold_dir") != nullptr) {
    RETURN_IF_ERROR(GetNodeAttr(attrs, "cold_dir", &o->tier.cold_dir));
  }
  if (attrs.Find("frequency_half_life_steps") != nullptr) {
    RETURN_IF_ERROR(GetNodeAttr(attrs, "frequency_half_life_steps",
                                &o->tier.frequency_half_life_steps));
  }
  return Validate(*o);
}

}  // namespace

absl::StatusOr<TableNode> ParseTableNode(const tensorflow::NodeDef& node,
                                         const std::string& default_container) {
  const AttrSlice attrs(node);
  TableNode t;
  t.node = node.name();
  auto where = [&]() {
    return absl::StrCat(kHashTableOp, " '", node.name(), "'");
  };
  ResourceLocation location = NodeResourceLocation(node, default_container);
  t.container = std::move(location.container);
  t.name = std::move(location.name);
  t.options.name = t.name;
  absl::Status s = ParseOptions(attrs, &t.options);
  if (!s.ok()) return errors::Annotate(s, where());
  return t;
}

absl::StatusOr<std::vector<TableNode>> FindGraphTables(const Graph& graph,
                                                        const ResourceMgr& rm) {
  std::vector<TableNode> out;
  for (const auto& node : graph.nodes()) {
    if (node->op() != kHashTableOp) continue;
    ASSIGN_OR_RETURN(TableNode t, ParseTableNode(node->def(), rm.default_container()));
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<std::vector<GraphTable>> CreateGraphTables(const Graph& graph, ResourceMgr* rm,
                                                          RowFormat row_format, bool keep_tiers) {
  ASSIGN_OR_RETURN(std::vector<TableNode> nodes, FindGraphTables(graph, *rm));
  std::vector<GraphTable> out;
  out.reserve(nodes.size());
  for (TableNode& t : nodes) {
    t.options.row_format = row_format;
    if (!keep_tiers) t.options.tier = TierOptions();
    auto res = EmbeddingTableResource::LookupOrCreate(rm, t.container, t.name, t.options);
    if (!res.ok()) {
      return errors::Annotate(res.status(), absl::StrCat(kHashTableOp, " '", t.node, "'"));
    }
    out.push_back({std::move(t), *std::move(res)});
  }
  return out;
}

}  // namespace recflow::embedding
