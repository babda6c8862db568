#include "recflow/models/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "recflow/core/status.h"
#include "recflow/core/utf8.h"
#include "recflow/core/threadpool.h"

namespace recflow::models {
namespace {

std::string Where(const std::string& file, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return file;
  return absl::StrCat(file, ":", m.line + 1, ":", m.column + 1);
}

// Every number of a config is finite and within float32's range: the graph
// computes in float32, and an infinite learning rate would only surface as
// a NaN loss steps later.
constexpr double kMaxMagnitude = std::numeric_limits<float>::max();

// The valid values of a number key: above min (or at it unless min_open),
// below max (or at it unless max_open).
struct Range {
  double min = -kMaxMagnitude;
  bool min_open = false;
  double max = kMaxMagnitude;
  bool max_open = false;

  bool Contains(double v) const {
    return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
  }
  std::string ToString() const {
    if (max == kMaxMagnitude && !max_open) return absl::StrCat(min_open ? "> " : ">= ", min);
    return absl::StrCat("in ", min_open ? "(" : "[", min, ", ", max, max_open ? ")" : "]");
  }
};
constexpr Range kNonNegative{.min = 0};
constexpr Range kPositive{.min = 0, .min_open = true};
constexpr Range kAny{};

// Checks that no map of the document has a key twice: yaml-cpp keeps both
// entries and reads the first, so the second would be ignored silently.
// `path` names the node ("train", "features.sparse[1]"). Nodes reached
// again through an alias are checked once (by their position in the text),
// so a chain of aliases cannot make this walk exponential.
absl::Status CheckNoDuplicateKeys(const YAML::Node& n, const std::string& path,
                                  const std::string& file, std::set<int>* visited) {
  if (!n.IsMap() && !n.IsSequence()) return absl::OkStatus();
  if (!visited->insert(n.Mark().pos).second) return absl::OkStatus();
  auto join = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      RETURN_IF_ERROR(CheckNoDuplicateKeys(n[i], absl::StrCat(path, "[", i, "]"), file, visited));
    }
    return absl::OkStatus();
  }
  std::map<std::string, int> first_line;  // key -> 1-based line
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
    const int line = it->first.Mark().line + 1;
    if (it->first.IsScalar()) {
      auto [at, inserted] = first_line.emplace(key, line);
      if (!inserted) {
        return errors::InvalidArgument(Where(file, it->first), ": duplicate key '", join(key),
                                       "' (lines ", at->second, " and ", line,
                                       "); a key may appear once in a map");
      }
    }
    RETURN_IF_ERROR(CheckNoDuplicateKeys(it->second, join(key), file, visited));
  }
  return absl::OkStatus();
}

// Reads the keys of one YAML map, remembering which were read so that the
// rest can be reported as unknown. A key that is present must have a value:
// `batch_size:` or `batch_size: ~` is an error naming it rather than the
// default in disguise. Only a section (a map of keys, CheckIsMap) may be
// empty.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path, const std::string* file)
      : node_(node), path_(std::move(path)), file_(file) {}

  absl::Status CheckIsMap() const {
    if (node_.IsMap() || !node_.IsDefined() || node_.IsNull()) return absl::OkStatus();
    return Error(node_, absl::StrCat(path_, " must be a map of keys"));
  }

  // The child `key` (undefined when absent). Marks the key as known.
  YAML::Node Child(const std::string& key) {
    known_.push_back(key);
    if (!node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    return node_[key];
  }
  std::string PathOf(const std::string& key) const {
    return path_.empty() ? key : absl::StrCat(path_, ".", key);
  }

  // An integer in [min_value, max_value].
  absl::Status Int(const std::string& key, int64_t* out, int64_t min_value,
                   int64_t max_value = std::numeric_limits<int64_t>::max()) {
    YAML::Node n = Child(key);
    if (!n.IsDefined()) return absl::OkStatus();
    if (n.IsNull()) return NullError(key, "an integer", absl::StrCat(*out));
    int64_t v;
    if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v)) {
      return Error(n, absl::StrCat(PathOf(key), ": expected an integer, got ", Describe(n)));
    }
    if (v < min_value) {
      return Error(n, absl::StrCat(PathOf(key), " must be >= ", min_value, ", got ", v));
    }
    if (v > max_value) {
      return Error(n, absl::StrCat(PathOf(key), " must be <= ", max_value, ", got ", v));
    }
    *out = v;
    return absl::OkStatus();
  }
  absl::Status Int32(const std::string& key, int* out, int64_t min_value) {
    int64_t v = *out;
    RETURN_IF_ERROR(Int(key, &v, min_value, std::numeric_limits<int>::max()));
    *out = static_cast<int>(v);
    return absl::OkStatus();
  }
  // A thread count: 0 (one per CPU) to kMaxThreads.
  absl::Status Threads(const std::string& key, int* out) {
    int64_t v = *out;
    RETURN_IF_ERROR(Int(key, &v, 0));
    if (absl::Status s = ValidateThreadCount(PathOf(key), v, /*min_threads=*/0); !s.ok()) {
      return Error(node_[key], absl::StrCat(s.message(), "; 0 means one per CPU"));
    }
    *out = static_cast<int>(v);
    return absl::OkStatus();
  }
  absl::Status Uint(const std::string& key, uint64_t* out) {
    int64_t v = static_cast<int64_t>(*out);
    RETURN_IF_ERROR(Int(key, &v, 0));
    *out = static_cast<uint64_t>(v);
    return absl::OkStatus();
  }
  // A finite number in `range`.
  // `default_text` says what leaving it out means (default: *out's value).
  absl::Status Double(const std::string& key, double* out, const Range& range,
                      const char* default_text = nullptr) {
    YAML::Node n = Child(key);
    if (!n.IsDefined()) return absl::OkStatus();
    if (n.IsNull()) {
      return NullError(key, "a number",
                       default_text != nullptr ? default_text : absl::StrCat(*out));
    }
    double v;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v)) {
      return Error(n, absl::StrCat(PathOf(key), ": expected a number, got ", Describe(n)));
    }
    if (!std::isfinite(v) || std::fabs(v) > kMaxMagnitude) {
      return Error(n, absl::StrCat(PathOf(key), " must be a finite number (at most ",
                                   kMaxMagnitude, " in magnitude: float32's range), got ",
                                   Describe(n)));
    }
    if (!range.Contains(v)) {
      return Error(n, absl::StrCat(PathOf(key), " must be ", range.ToString(), ", got ", v));
    }
    *out = v;
    return absl::OkStatus();
  }
  absl::Status Bool(const std::string& key, bool* out) {
    YAML::Node n = Child(key);
    if (!n.IsDefined()) return absl::OkStatus();
    if (n.IsNull()) return NullError(key, "true or false", *out ? "true" : "false");
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, *out)) {
      return Error(n, absl::StrCat(PathOf(key), ": expected true or false, got ", Describe(n)));
    }
    return absl::OkStatus();
  }
  // A string, one of `allowed` unless that is empty.
  absl::Status String(const std::string& key, std::string* out,
                      const std::vector<std::string>& allowed = {}) {
    YAML::Node n = Child(key);
    if (!n.IsDefined()) return absl::OkStatus();
    if (n.IsNull()) {
      return NullError(key,
                       allowed.empty() ? "a string"
                                       : absl::StrCat("one of ", absl::StrJoin(allowed, ", ")),
                       *out);
    }
    if (!n.IsScalar()) {
      return Error(n, absl::StrCat(PathOf(key), ": expected a string, got ", Describe(n)));
    }
    const std::string v = n.Scalar();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      return Error(n, absl::StrCat(PathOf(key), ": unknown value '", v, "' (one of: ",
                                   absl::StrJoin(allowed, ", "), ")"));
    }
    *out = v;
    return absl::OkStatus();
  }
  // A list of integers >= min_value, at most max_size of them.
  absl::Status IntList(const std::string& key, std::vector<int64_t>* out, int64_t min_value,
                       int64_t max_size) {
    YAML::Node n = Child(key);
    if (!n.IsDefined()) return absl::OkStatus();
    if (n.IsNull()) {
      return NullError(key, "a list of integers like [256, 128] ([] for none)",
                       absl::StrCat("[", absl::StrJoin(*out, ", "), "]"));
    }
    if (!n.IsSequence()) {
      return Error(n, absl::StrCat(PathOf(key), ": expected a list of integers like [256, 128], "
                                   "got ", Describe(n)));
    }
    if (static_cast<int64_t>(n.size()) > max_size) {
      return Error(n, absl::StrCat(PathOf(key), " has ", n.size(), " entries; at most ",
                                   max_size));
    }
    std::vector<int64_t> v;
    for (size_t i = 0; i < n.size(); ++i) {
      int64_t x;
      if (!n[i].IsScalar() || !YAML::convert<int64_t>::decode(n[i], x)) {
        return Error(n[i], absl::StrCat(PathOf(key), "[", i, "]: expected an integer, got ",
                                        Describe(n[i])));
      }
      if (x < min_value) {
        return Error(n[i], absl::StrCat(PathOf(key), "[", i, "] must be >= ", min_value,
                                        ", got ", x));
      }
      v.push_back(x);
    }
    *out = std::move(v);
    return absl::OkStatus();
  }

  absl::Status StringList(const std::string& key, std::vector<std::string>* out) {
    YAML::Node n = Child(key);
    if (!n.IsDefined()) return absl::OkStatus();
    if (n.IsNull()) return NullError(key, "a list of names like [C1, I1] ([] for none)", "");
    if (!n.IsSequence()) {
      return Error(n, absl::StrCat(PathOf(key), ": expected a list of names like [C1, I1], got ",
                                   Describe(n)));
    }
    std::vector<std::string> v;
    for (size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar()) {
        return Error(n[i], absl::StrCat(PathOf(key), "[", i, "]: expected a name, got ",
                                        Describe(n[i])));
      }
      v.push_back(n[i].Scalar());
    }
    *out = std::move(v);
    return absl::OkStatus();
  }

  // InvalidArgument for the first key that was never asked for.
  absl::Status Finish() const {
    if (!node_.IsMap()) return absl::OkStatus();
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (std::find(known_.begin(), known_.end(), key) == known_.end()) {
        return Error(it->first, absl::StrCat("unknown key '", PathOf(key), "' (known keys",
                                             path_.empty() ? "" : " of " + path_, ": ",
                                             absl::StrJoin(known_, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Error(const YAML::Node& at, const std::string& message) const {
    return errors::InvalidArgument(Where(*file_, at.IsDefined() ? at : node_), ": ", message);
  }
  // `key` is present without a value (reported at the key: a missing value
  // has no place of its own). `expected` says what it takes,
  // `default_value` what leaving it out gives ("" when nothing to say).
  absl::Status NullError(const std::string& key, const std::string& expected,
                         const std::string& default_value) const {
    // reset(), not '=': assigning to a Node bound to another makes yaml-cpp
    // overwrite that node (here the map being walked, freeing it under the
    // iterator); reset() only rebinds the handle.
    YAML::Node at = node_;
    for (auto it = node_.begin(); node_.IsMap() && it != node_.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) at.reset(it->first);
    }
    return Error(at, absl::StrCat(PathOf(key), " has no value (null); expected ", expected,
                                  default_value.empty()
                                      ? ", or leave the key out"
                                      : absl::StrCat(", or leave the key out for the default (",
                                                     default_value, ")")));
  }

  static std::string Describe(const YAML::Node& n) {
    if (n.IsScalar()) return absl::StrCat("'", n.Scalar(), "'");
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a map";
    if (n.IsNull()) return "null";
    return "nothing";
  }

 private:
  YAML::Node node_;
  std::string path_;
  const std::string* file_;
  std::vector<std::string> known_;
};

const std::vector<std::string>& OptimizerTypes() {
  static const auto* v = new std::vector<std::string>{"sgd", "adagrad", "adam", "ftrl"};
  return *v;
}

absl::Status ParseOptimizerMap(const YAML::Node& n, const std::string& path,
                               const std::string* file, OptimizerConfig* o) {
  MapReader r(n, path, file);
  RETURN_IF_ERROR(r.CheckIsMap());
  RETURN_IF_ERROR(r.String("type", &o->type, OptimizerTypes()));
  RETURN_IF_ERROR(r.Double("learning_rate", &o->learning_rate, kPositive, "the model's"));
  RETURN_IF_ERROR(
      r.Double("initial_accumulator_value", &o->initial_accumulator_value, kNonNegative));
  constexpr Range kBeta{.min = 0, .max = 1, .max_open = true};
  RETURN_IF_ERROR(r.Double("beta1", &o->beta1, kBeta));
  RETURN_IF_ERROR(r.Double("beta2", &o->beta2, kBeta));
  RETURN_IF_ERROR(r.Double("epsilon", &o->epsilon, kNonNegative, "the optimizer's"));
  RETURN_IF_ERROR(r.Bool("lazy", &o->lazy));
  RETURN_IF_ERROR(r.Double("l1", &o->l1, kNonNegative));
  RETURN_IF_ERROR(r.Double("l2", &o->l2, kNonNegative));
  RETURN_IF_ERROR(
      r.String("schedule", &o->schedule, {"constant", "exponential_decay", "linear_warmup"}));
  RETURN_IF_ERROR(r.Int("warmup_steps", &o->warmup_steps, 0));
  RETURN_IF_ERROR(r.Int("decay_steps", &o->decay_steps, 0));
  RETURN_IF_ERROR(r.Double("decay_rate", &o->decay_rate, kPositive));
  if (o->schedule == "exponential_decay" && o->decay_steps <= 0) {
    return r.Error(n, absl::StrCat(path, ": schedule exponential_decay needs decay_steps > 0"));
  }
  if (o->schedule == "linear_warmup" && o->warmup_steps <= 0) {
    return r.Error(n, absl::StrCat(path, ": schedule linear_warmup needs warmup_steps > 0"));
  }
  return r.Finish();
}

// {type: uniform, limit: 0.01} | a bare type name (zeros, glorot_uniform).
absl::Status ParseInitializer(const YAML::Node& n, const std::string& path,
                              const std::string* file, InitializerConfig* out) {
  if (n.IsScalar()) {
    const std::string v = n.Scalar();
    const auto& types = InitializerTypes();
    if (std::find(types.begin(), types.end(), v) == types.end()) {
      return errors::InvalidArgument(Where(*file, n), ": ", path, ": unknown initializer '", v,
                                     "' (one of: ", absl::StrJoin(types, ", "), ")");
    }
    *out = InitializerConfig{.type = v};
    return absl::OkStatus();
  }
  MapReader r(n, path, file);
  RETURN_IF_ERROR(r.CheckIsMap());
  InitializerConfig c;
  c.type.clear();
  RETURN_IF_ERROR(r.String("type", &c.type, InitializerTypes()));
  if (c.type.empty()) {
    return r.Error(n, absl::StrCat(path, ".type is required (one of: ",
                                   absl::StrJoin(InitializerTypes(), ", "), ")"));
  }
  RETURN_IF_ERROR(r.Double("value", &c.value, kAny));
  RETURN_IF_ERROR(r.Double("limit", &c.limit, kNonNegative));
  RETURN_IF_ERROR(r.Double("mean", &c.mean, kAny));
  RETURN_IF_ERROR(r.Double("stddev", &c.stddev, kNonNegative));
  RETURN_IF_ERROR(
      r.String("scale", &c.scale, {"none", "inverse_sqrt_rows", "inverse_sqrt_dim"}));
  RETURN_IF_ERROR(r.Finish());
  *out = c;
  return absl::OkStatus();
}

// dense: 13 | [I1, I2, ...]
absl::Status ParseDense(const YAML::Node& n, const std::string* file,
                        std::vector<std::string>* out) {
  out->clear();
  if (!n.IsDefined()) return absl::OkStatus();  // ParseRoot refused a null
  int64_t count;
  if (n.IsScalar() && YAML::convert<int64_t>::decode(n, count)) {
    if (count < 0 || count > kMaxFeatureCount) {
      return errors::InvalidArgument(Where(*file, n), ": features.dense must be between 0 and ",
                                     kMaxFeatureCount, ", got ", count);
    }
    for (int64_t i = 1; i <= count; ++i) out->push_back(absl::StrCat("I", i));
    return absl::OkStatus();
  }
  if (!n.IsSequence()) {
    return errors::InvalidArgument(Where(*file, n),
                                   ": features.dense: expected a count or a list of names");
  }
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar()) {
      return errors::InvalidArgument(Where(*file, n[i]), ": features.dense[", i,
                                     "]: expected a name");
    }
    out->push_back(n[i].Scalar());
  }
  return absl::OkStatus();
}

absl::Status ParseSparseEntry(const YAML::Node& n, const std::string& path,
                              const std::string* file, SparseFeatureConfig* f) {
  MapReader r(n, path, file);
  RETURN_IF_ERROR(r.CheckIsMap());
  RETURN_IF_ERROR(r.String("name", &f->name));
  RETURN_IF_ERROR(r.Int("vocabulary_size", &f->vocabulary_size, 0));
  RETURN_IF_ERROR(r.Bool("hash_table", &f->hash_table));
  RETURN_IF_ERROR(r.Int("dim", &f->dim, 0));
  RETURN_IF_ERROR(r.String("combiner", &f->combiner, {"sum", "mean", "sqrtn"}));
  RETURN_IF_ERROR(r.String("sequence_of", &f->sequence_of));
  RETURN_IF_ERROR(r.String("missing", &f->missing, {"empty", "id"}));
  RETURN_IF_ERROR(r.Int("dram_budget_mb", &f->dram_budget_mb, 0));
  RETURN_IF_ERROR(r.String("cold_dir", &f->cold_dir));
  YAML::Node init = r.Child("initializer");
  if (init.IsDefined() && init.IsNull()) {
    return r.NullError("initializer", "an initializer (a type name or a map)", "");
  }
  if (init.IsDefined()) {
    InitializerConfig c;
    RETURN_IF_ERROR(ParseInitializer(init, r.PathOf("initializer"), file, &c));
    f->initializer = c;
  }
  return r.Finish();
}

// sparse: 26 | [C1, {name: C2, vocabulary_size: 10}, ...], over defaults.
absl::Status ParseSparse(const YAML::Node& n, const SparseFeatureConfig& defaults,
                         const std::string* file, std::vector<SparseFeatureConfig>* out) {
  out->clear();
  if (!n.IsDefined()) return absl::OkStatus();  // ParseRoot refused a null
  int64_t count;
  if (n.IsScalar() && YAML::convert<int64_t>::decode(n, count)) {
    if (count < 0 || count > kMaxFeatureCount) {
      return errors::InvalidArgument(Where(*file, n), ": features.sparse must be between 0 and ",
                                     kMaxFeatureCount, ", got ", count);
    }
    for (int64_t i = 1; i <= count; ++i) {
      SparseFeatureConfig f = defaults;
      f.name = absl::StrCat("C", i);
      out->push_back(f);
    }
    return absl::OkStatus();
  }
  if (!n.IsSequence()) {
    return errors::InvalidArgument(
        Where(*file, n), ": features.sparse: expected a count or a list of names or maps");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < n.size(); ++i) {
    SparseFeatureConfig f = defaults;
    const std::string path = absl::StrCat("features.sparse[", i, "]");
    if (n[i].IsNull()) {
      return errors::InvalidArgument(Where(*file, n[i]), ": ", path,
                                     " has no value (null); expected a name or a map");
    }
    if (n[i].IsScalar()) {
      f.name = n[i].Scalar();
    } else {
      RETURN_IF_ERROR(ParseSparseEntry(n[i], path, file, &f));
      if (f.name.empty()) {
        return errors::InvalidArgument(Where(*file, n[i]), ": ", path, ".name is required");
      }
    }
    if (!names.insert(f.name).second) {
      return errors::InvalidArgument(Where(*file, n[i]), ": ", path, ": feature '", f.name,
                                     "' is listed twice");
    }
    out->push_back(f);
  }
  // A sequence names another sparse feature, which is not a sequence.
  for (size_t i = 0; i < out->size(); ++i) {
    const SparseFeatureConfig& f = (*out)[i];
    if (f.sequence_of.empty()) continue;
    bool found = false;
    for (const SparseFeatureConfig& t : *out) {
      found |= t.name == f.sequence_of && t.name != f.name && t.sequence_of.empty();
    }
    if (!found) {
      const YAML::Node at = n[i].IsMap() ? n[i]["sequence_of"] : n[i];
      return errors::InvalidArgument(Where(*file, at), ": features.sparse[", i, "].sequence_of: '",
                                     f.sequence_of,
                                     "' is not another sparse feature (that is not a sequence)");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseRoot(const YAML::Node& root, const std::string* file, RunConfig* c) {
  MapReader r(root, "", file);
  YAML::Node model_node;
  if (!root.IsMap()) {
    return errors::InvalidArgument(*file, ": a config is a YAML map with the keys model, "
                                          "features, optimizer, data, train, checkpoint, eval");
  }
  // model
  {
    YAML::Node n = r.Child("model");
    if (!n.IsDefined() || n.IsNull()) {
      return errors::InvalidArgument(*file, ": model is required (model: {type: deepfm, ...})");
    }
    MapReader m(n, "model", file);
    RETURN_IF_ERROR(m.CheckIsMap());
    ModelConfig& mc = c->model;
    const std::vector<std::string> types = ModelTypes();
    RETURN_IF_ERROR(m.String("type", &mc.type, types));
    if (mc.type.empty()) {
      return m.Error(n, absl::StrCat("model.type is required (one of: ",
                                     absl::StrJoin(types, ", "), ")"));
    }
    RETURN_IF_ERROR(m.Int("embedding_dim", &mc.embedding_dim, 1));
    RETURN_IF_ERROR(m.IntList("hidden_units", &mc.hidden_units, 1, kMaxLayers));
    RETURN_IF_ERROR(m.IntList("bottom_units", &mc.bottom_units, 1, kMaxLayers));
    RETURN_IF_ERROR(m.Int("cross_layers", &mc.cross_layers, 0, kMaxLayers));
    RETURN_IF_ERROR(m.String("fm_dense", &mc.fm_dense, {"fields", "projection", "none"}));
    RETURN_IF_ERROR(m.Bool("self_interaction", &mc.self_interaction));
    RETURN_IF_ERROR(m.IntList("attention_units", &mc.attention_units, 1, kMaxLayers));
    RETURN_IF_ERROR(m.StringList("user_features", &mc.user_features));
    RETURN_IF_ERROR(m.StringList("item_features", &mc.item_features));
    RETURN_IF_ERROR(m.Int("tower_dim", &mc.tower_dim, 1));
    RETURN_IF_ERROR(m.Double("temperature", &mc.temperature, kPositive));
    model_node = n;
    RETURN_IF_ERROR(
        m.String("activation", &mc.activation, {"relu", "sigmoid", "tanh", "identity"}));
    RETURN_IF_ERROR(m.Double("l2_regularization", &mc.l2_regularization, kNonNegative));
    RETURN_IF_ERROR(m.Uint("seed", &mc.seed));
    YAML::Node inits = m.Child("initializers");
    if (inits.IsDefined()) {
      MapReader ir(inits, "model.initializers", file);
      RETURN_IF_ERROR(ir.CheckIsMap());
      InitializersConfig& ic = mc.initializers;
      for (auto [key, part] : {std::pair<const char*, InitializerConfig*>{"embedding", &ic.embedding},
                               {"linear", &ic.linear},
                               {"kernel", &ic.kernel},
                               {"bias", &ic.bias}}) {
        YAML::Node pn = ir.Child(key);
        if (pn.IsDefined() && pn.IsNull()) {
          return ir.NullError(key, "an initializer (a type name or a map)", "");
        }
        if (pn.IsDefined()) {
          RETURN_IF_ERROR(ParseInitializer(pn, ir.PathOf(key), file, part));
        }
      }
      RETURN_IF_ERROR(ir.Finish());
    }
    RETURN_IF_ERROR(m.Finish());
  }
  // features
  {
    YAML::Node n = r.Child("features");
    if (!n.IsDefined() || n.IsNull()) {
      return errors::InvalidArgument(*file, ": features is required (features: {dense: 13, "
                                            "sparse: 26})");
    }
    MapReader f(n, "features", file);
    RETURN_IF_ERROR(f.CheckIsMap());
    SparseFeatureConfig defaults;
    defaults.vocabulary_size = 100000;
    YAML::Node d = f.Child("sparse_defaults");
    if (d.IsDefined() && !d.IsNull()) {
      RETURN_IF_ERROR(ParseSparseEntry(d, "features.sparse_defaults", file, &defaults));
      if (!defaults.name.empty()) {
        return errors::InvalidArgument(Where(*file, d),
                                       ": features.sparse_defaults cannot set a name");
      }
    }
    const YAML::Node dense = f.Child("dense"), sparse = f.Child("sparse");
    if (dense.IsDefined() && dense.IsNull()) {
      return f.NullError("dense", "a count or a list of names ([] for none)", "");
    }
    if (sparse.IsDefined() && sparse.IsNull()) {
      return f.NullError("sparse", "a count or a list of names or maps ([] for none)", "");
    }
    RETURN_IF_ERROR(ParseDense(dense, file, &c->model.dense_features));
    RETURN_IF_ERROR(ParseSparse(sparse, defaults, file, &c->model.sparse_features));
    RETURN_IF_ERROR(f.Finish());
    if (c->model.dense_features.empty() && c->model.sparse_features.empty()) {
      return errors::InvalidArgument(Where(*file, n), ": features: no dense or sparse features");
    }
    // Each fixed table's parameters (rows x dim), and their sum, must fit in
    // int64: a count that wraps would be reported as a small model.
    // (BuildModel counts every variable exactly, and the memory they need
    // is checked before training allocates them.)
    const YAML::Node sparse_node = n["sparse"];
    const YAML::Node defaults_node = d.IsMap() ? d["vocabulary_size"] : YAML::Node();
    int64_t total = 0;
    for (size_t i = 0; i < c->model.sparse_features.size(); ++i) {
      const SparseFeatureConfig& sf = c->model.sparse_features[i];
      if (sf.sequence_of.empty() && sf.vocabulary_size <= 0 && !sf.hash_table) {
        return errors::InvalidArgument(
            Where(*file, n), ": features.sparse: feature '", sf.name,
            "' needs vocabulary_size > 0 or hash_table: true");
      }
      if (sf.dram_budget_mb > 0 && (!sf.hash_table || sf.cold_dir.empty() ||
                                    sf.dram_budget_mb > (int64_t{1} << 40))) {
        return errors::InvalidArgument(
            Where(*file, n), ": features.sparse: feature '", sf.name, "' has dram_budget_mb ",
            sf.dram_budget_mb, ", which needs hash_table: true, a cold_dir and at most 2^40");
      }
      if (!sf.sequence_of.empty() || sf.hash_table) continue;
      const int64_t dim = sf.dim > 0 ? sf.dim : c->model.embedding_dim;
      const int64_t extra = sf.missing == "id" ? 1 : 0;
      int64_t rows = 0, params = 0;
      if (__builtin_add_overflow(sf.vocabulary_size, extra, &rows) ||
          __builtin_mul_overflow(rows, dim, &params) ||
          __builtin_add_overflow(total, params, &total)) {
        // Point at the vocabulary_size that sets it.
        YAML::Node at = n;  // rebound with reset() (see NullError)
        if (sparse_node.IsSequence() && sparse_node[i].IsMap() &&
            sparse_node[i]["vocabulary_size"].IsDefined()) {
          at.reset(sparse_node[i]["vocabulary_size"]);
        } else if (defaults_node.IsDefined()) {
          at.reset(defaults_node);
        }
        return errors::InvalidArgument(
            Where(*file, at), ": features.sparse: the table of '", sf.name, "' (vocabulary_size ",
            sf.vocabulary_size, extra ? " + 1 missing-id row" : "", " x dim ", dim,
            i > 0 ? ", with the tables before it" : "",
            ") has more parameters than fit in int64; make vocabulary_size smaller or use "
            "hash_table: true");
      }
    }
  }
  // two_tower's feature lists must name features of the config.
  for (const char* key : {"user_features", "item_features"}) {
    const std::vector<std::string>& list =
        std::string(key) == "user_features" ? c->model.user_features : c->model.item_features;
    for (size_t i = 0; i < list.size(); ++i) {
      bool found = std::find(c->model.dense_features.begin(), c->model.dense_features.end(),
                             list[i]) != c->model.dense_features.end();
      for (const SparseFeatureConfig& f : c->model.sparse_features) found |= f.name == list[i];
      if (!found) {
        return errors::InvalidArgument(Where(*file, model_node[key][i]), ": model.", key, "[",
                                       i, "]: '", list[i],
                                       "' is not a dense or sparse feature under features");
      }
    }
  }
  // optimizer
  {
    YAML::Node n = r.Child("optimizer");
    MapReader o(n, "optimizer", file);
    RETURN_IF_ERROR(o.CheckIsMap());
    YAML::Node e = o.Child("embedding");
    if (e.IsDefined() && !e.IsNull()) {
      RETURN_IF_ERROR(
          ParseOptimizerMap(e, "optimizer.embedding", file, &c->model.embedding_optimizer));
    }
    YAML::Node dn = o.Child("dense");
    if (dn.IsDefined() && !dn.IsNull()) {
      RETURN_IF_ERROR(ParseOptimizerMap(dn, "optimizer.dense", file, &c->model.dense_optimizer));
    }
    RETURN_IF_ERROR(o.Finish());
  }
  // data
  {
    MapReader d(r.Child("data"), "data", file);
    RETURN_IF_ERROR(d.CheckIsMap());
    RETURN_IF_ERROR(d.String("format", &c->data.format, {"criteo", "tfrecord"}));
    RETURN_IF_ERROR(d.String("label_key", &c->data.label_key));
    RETURN_IF_ERROR(d.Bool("log_transform", &c->data.log_transform));
    RETURN_IF_ERROR(d.String("train", &c->data.train));
    RETURN_IF_ERROR(d.String("eval", &c->data.eval));
    RETURN_IF_ERROR(d.Bool("hash_ids", &c->data.hash_ids));
    RETURN_IF_ERROR(d.Threads("parse_threads", &c->data.parse_threads));
    RETURN_IF_ERROR(d.Bool("stream", &c->data.stream));
    RETURN_IF_ERROR(d.String("stream_done_suffix", &c->data.stream_done_suffix));
    RETURN_IF_ERROR(d.Int("stream_auc_window", &c->data.stream_auc_window, 0));
    RETURN_IF_ERROR(d.Finish());
  }
  // train
  {
    MapReader t(r.Child("train"), "train", file);
    RETURN_IF_ERROR(t.CheckIsMap());
    RETURN_IF_ERROR(t.Int("batch_size", &c->train.batch_size, 1, kMaxBatchSize));
    RETURN_IF_ERROR(t.Int("steps", &c->train.steps, 0));
    RETURN_IF_ERROR(t.Int("epochs", &c->train.epochs, 1));
    RETURN_IF_ERROR(t.Int("shuffle_buffer", &c->train.shuffle_buffer, 0));
    RETURN_IF_ERROR(t.Threads("threads", &c->train.threads));
    RETURN_IF_ERROR(t.Double("log_every_secs", &c->train.log_every_secs, kNonNegative));
    RETURN_IF_ERROR(t.Int("summary_every_steps", &c->train.summary_every_steps, 0));
    RETURN_IF_ERROR(
        t.Double("publish_interval_secs", &c->train.publish_interval_secs, kNonNegative));
    RETURN_IF_ERROR(t.Finish());
  }
  // checkpoint
  {
    MapReader k(r.Child("checkpoint"), "checkpoint", file);
    RETURN_IF_ERROR(k.CheckIsMap());
    RETURN_IF_ERROR(k.Int("save_steps", &c->train.save_steps, 0));
    RETURN_IF_ERROR(k.Double("save_secs", &c->train.save_secs, kNonNegative));
    RETURN_IF_ERROR(k.Int32("keep", &c->train.keep, 1));
    RETURN_IF_ERROR(k.Bool("open_in_place", &c->train.open_in_place));
    RETURN_IF_ERROR(k.Finish());
  }
  // eval
  {
    MapReader e(r.Child("eval"), "eval", file);
    RETURN_IF_ERROR(e.CheckIsMap());
    RETURN_IF_ERROR(e.Int("every_steps", &c->train.eval_every_steps, 0));
    RETURN_IF_ERROR(e.Int("batches", &c->train.eval_batches, 0));
    RETURN_IF_ERROR(e.Finish());
  }
  return r.Finish();
}

// YAML streams are Unicode; yaml-cpp reads other bytes as they are and
// writes them back altered, so a config with them would change under
// WithOverrides. InvalidArgument at the first bad byte.
absl::Status CheckUtf8(absl::string_view text, const std::string& what) {
  const size_t valid = ValidUtf8Prefix(text);
  if (valid == text.size()) return absl::OkStatus();
  const absl::string_view before = text.substr(0, valid);
  const size_t line_start = before.rfind('\n') == absl::string_view::npos ? 0
                                                                          : before.rfind('\n') + 1;
  return errors::InvalidArgument(what, ":", std::count(before.begin(), before.end(), '\n') + 1,
                                 ":", valid - line_start + 1, ": not valid UTF-8 (byte 0x",
                                 absl::Hex(static_cast<unsigned char>(text[valid]), absl::kZeroPad2),
                                 "); a config is UTF-8 text");
}

}  // namespace

absl::StatusOr<RunConfig> ParseRunConfig(const std::string& yaml, const std::string& filename) {
  RETURN_IF_ERROR(CheckUtf8(yaml, filename));
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return errors::InvalidArgument(filename, ":", e.mark.line + 1, ":", e.mark.column + 1,
                                   ": not valid YAML: ", e.msg);
  }
  RunConfig config;
  config.path = filename;
  try {
    std::set<int> visited;
    RETURN_IF_ERROR(CheckNoDuplicateKeys(root, "", filename, &visited));
    RETURN_IF_ERROR(ParseRoot(root, &config.path, &config));
  } catch (const YAML::Exception& e) {
    return errors::InvalidArgument(filename, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ",
                                   e.msg);
  }
  return config;
}

absl::StatusOr<std::string> WithOverrides(
    const std::string& yaml, const std::vector<std::pair<std::string, std::string>>& overrides) {
  RETURN_IF_ERROR(CheckUtf8(yaml, "the config"));
  for (const auto& [key, value] : overrides) {
    RETURN_IF_ERROR(CheckUtf8(absl::StrCat(key, "=", value), "the override"));
  }
  try {
    YAML::Node root = YAML::Load(yaml);
    for (const auto& [key, value] : overrides) {
      std::vector<std::string> parts = absl::StrSplit(key, '.');
      // yaml-cpp's operator[] returns proxies; walk with explicit copies.
      std::vector<YAML::Node> path = {root};
      for (size_t i = 0; i + 1 < parts.size(); ++i) path.push_back(path.back()[parts[i]]);
      path.back()[parts.back()] = value;
    }
    YAML::Emitter out;
    out << root;
    return std::string(out.c_str()) + "\n";
  } catch (const YAML::Exception& e) {
    return errors::InvalidArgument("cannot apply overrides: ", e.what());
  }
}

absl::StatusOr<RunConfig> LoadRunConfig(Env* env, const std::string& path) {
  std::string text;
  absl::Status s = ReadFileToString(env, path, &text);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot read config ", path, ": ", s.message()));
  }
  if (text.size() > (size_t{1} << 20)) {
    return errors::InvalidArgument(path, ": a config of ", text.size(),
                                   " bytes is too large (at most 1 MiB)");
  }
  return ParseRunConfig(text, path);
}

}  // namespace recflow::models
