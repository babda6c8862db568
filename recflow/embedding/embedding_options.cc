#include "recflow/embedding/embedding_options.h"

#include <cmath>

#include "absl/numeric/bits.h"
#include "recflow/core/status.h"

namespace recflow::embedding {

int NumSlots(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return 0;
    case OptimizerKind::kAdagrad:
      return 1;
    case OptimizerKind::kAdam:
    case OptimizerKind::kFtrl:
      return 2;
  }
  return 0;
}

const char* OptimizerName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdagrad:
      return "adagrad";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kFtrl:
      return "ftrl";
  }
  return "unknown";
}

std::vector<std::string> SlotNames(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return {};
    case OptimizerKind::kAdagrad:
      return {"accumulator"};
    case OptimizerKind::kAdam:
      return {"m", "v"};
    case OptimizerKind::kFtrl:
      return {"accumulator", "linear"};
  }
  return {};
}

absl::Status Validate(const EmbeddingTableOptions& o) {
  auto bad = [&o](auto... what) {
    return errors::InvalidArgument("embedding table '", o.name, "': ", what...);
  };
  if (o.dim <= 0) return bad("dim must be > 0, got ", o.dim);
  if (o.num_shards < 1 || o.num_shards > 4096 ||
      !absl::has_single_bit(static_cast<unsigned>(o.num_shards))) {
    return bad("num_shards must be a power of two in [1, 4096], got ",
               o.num_shards);
  }
  if (!o.default_value.empty() && o.default_value.size() != 1 &&
      static_cast<int64_t>(o.default_value.size()) != o.dim) {
    return bad("default_value must hold 0, 1 or dim=", o.dim, " values, got ",
               o.default_value.size());
  }
  const InitializerOptions& init = o.initializer;
  using Kind = InitializerOptions::Kind;
  if (init.kind == Kind::kUniform &&
      !(std::isfinite(init.minval) && std::isfinite(init.maxval) &&
        init.minval <= init.maxval)) {
    return bad("uniform initializer needs finite minval <= maxval, got [",
               init.minval, ", ", init.maxval, ")");
  }
  if ((init.kind == Kind::kNormal || init.kind == Kind::kTruncatedNormal) &&
      !(std::isfinite(init.mean) && std::isfinite(init.stddev) &&
        init.stddev >= 0.0f)) {
    return bad(
        "normal initializer needs finite mean and stddev >= 0, got "
        "mean ",
        init.mean, " stddev ", init.stddev);
  }
  if (!(o.initial_accumulator_value >= 0.0f) ||
      !std::isfinite(o.initial_accumulator_value)) {
    return bad("initial_accumulator_value must be finite and >= 0, got ",
               o.initial_accumulator_value);
  }
  const AdmissionOptions& adm = o.admission;
  if (adm.kind == AdmissionOptions::Kind::kCount && adm.min_count < 1) {
    return bad("admission min_count must be >= 1, got ", adm.min_count);
  }
  if (adm.kind == AdmissionOptions::Kind::kProbability &&
      !(adm.probability >= 0.0 && adm.probability <= 1.0)) {
    return bad("admission probability must be in [0, 1], got ",
               adm.probability);
  }
  if (adm.kind != AdmissionOptions::Kind::kAlways) {
    if (adm.sketch_width < 1 || adm.sketch_width > (int64_t{1} << 36)) {
      return bad("admission sketch_width must be in [1, 2^36], got ",
                 adm.sketch_width);
    }
    if (adm.sketch_depth < 1 || adm.sketch_depth > 16) {
      return bad("admission sketch_depth must be in [1, 16], got ",
                 adm.sketch_depth);
    }
  }
  if (o.eviction.max_age_steps < 0 || o.eviction.min_frequency < 0) {
    return bad("eviction max_age_steps and min_frequency must be >= 0, got ",
               o.eviction.max_age_steps, " and ", o.eviction.min_frequency);
  }
  if (o.rows_per_slab < 0 || o.rows_per_slab > (int64_t{1} << 24)) {
    return bad("rows_per_slab must be in [0, 2^24], got ", o.rows_per_slab);
  }
  if (o.tier.dram_budget_bytes < 0) {
    return bad("tier.dram_budget_bytes must be >= 0, got ",
               o.tier.dram_budget_bytes);
  }
  if (o.tier.dram_budget_bytes > 0) {
    if (o.tier.cold_dir.empty()) {
      return bad(
          "tier.cold_dir must name a directory when tier.dram_budget_bytes is "
          "set");
    }
    if (o.row_format != RowFormat::kFloat32) {
      return bad("tier.dram_budget_bytes needs float32 rows, not ",
                 RowFormatName(o.row_format));
    }
  }
  if (o.tier.frequency_half_life_steps <= 0) {
    return bad("tier.frequency_half_life_steps must be > 0, got ",
               o.tier.frequency_half_life_steps);
  }
  return absl::OkStatus();
}

}  // namespace recflow::embedding
