#include "recflow/framework/op_registry.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/framework/attr_value_util.h"

namespace recflow {

using tensorflow::AttrValue;
using tensorflow::OpDef;

namespace {

constexpr absl::string_view kAttrKinds[] = {"string", "int", "float", "bool",
                                           "type", "shape", "tensor", "func"};

// TensorFlow's type-class shorthands ("T: numbertype") as allowed-type lists.
const char* TypeClassExpansion(absl::string_view name) {
  if (name == "numbertype") {
    return "float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, "
           "bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64";
  }
  if (name == "realnumbertype") {
    return "float, double, int32, int64, uint8, int16, int8, uint16, half, uint32, uint64, "
           "bfloat16";
  }
  if (name == "quantizedtype") return "qint8, quint8, qint32, qint16, quint16";
  if (name == "floatingpointtype") return "half, bfloat16, float, double";
  if (name == "integraltype") return "int8, int16, int32, int64, uint8, uint16, uint32, uint64";
  return nullptr;
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || !(absl::ascii_isalpha(s[0]) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(c) || c == '_')) return false;
  }
  return true;
}

// Splits "a, 'b,c', d" on commas outside quotes.
std::vector<std::string> SplitList(absl::string_view s) {
  std::vector<std::string> parts;
  std::string cur;
  char quote = 0;
  int depth = 0;
  for (char c : s) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '[' || c == '(') {
      ++depth;
    } else if (c == ']' || c == ')') {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.emplace_back(absl::StripAsciiWhitespace(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!absl::StripAsciiWhitespace(cur).empty() || !parts.empty()) {
    parts.emplace_back(absl::StripAsciiWhitespace(cur));
  }
  return parts;
}

absl::StatusOr<std::string> ParseQuoted(absl::string_view s) {
  s = absl::StripAsciiWhitespace(s);
  if (s.size() < 2 || (s.front() != '\'' && s.front() != '"') || s.back() != s.front()) {
    return errors::InvalidArgument("expected a quoted string, got '", s, "'");
  }
  std::string out;
  std::string error;
  if (!absl::CUnescape(s.substr(1, s.size() - 2), &out, &error)) {
    return errors::InvalidArgument("bad string ", s, ": ", error);
  }
  return out;
}

// Parses one default value of attr kind `kind` (no "list(...)").
absl::Status ParseScalarValue(absl::string_view kind, absl::string_view text, AttrValue* out) {
  text = absl::StripAsciiWhitespace(text);
  if (kind == "string") {
    ASSIGN_OR_RETURN(std::string s, ParseQuoted(text));
    out->set_s(s);
  } else if (kind == "int") {
    int64_t v;
    if (!absl::SimpleAtoi(text, &v)) return errors::InvalidArgument("bad int '", text, "'");
    out->set_i(v);
  } else if (kind == "float") {
    float v;
    if (!absl::SimpleAtof(text, &v)) return errors::InvalidArgument("bad float '", text, "'");
    out->set_f(v);
  } else if (kind == "bool") {
    if (text == "true") {
      out->set_b(true);
    } else if (text == "false") {
      out->set_b(false);
    } else {
      return errors::InvalidArgument("bad bool '", text, "'");
    }
  } else if (kind == "type") {
    ASSIGN_OR_RETURN(DataType dt, DataTypeFromString(text));
    out->set_type(static_cast<tensorflow::DataType>(dt));
  } else if (kind == "shape") {
    if (text == "<unknown>") text = "?";
    ASSIGN_OR_RETURN(PartialShape s, PartialShape::Parse(text));
    s.ToProto(out->mutable_shape());
  } else {
    return errors::InvalidArgument("attrs of kind '", kind, "' cannot have a default");
  }
  return absl::OkStatus();
}

absl::Status ParseDefault(absl::string_view type, absl::string_view text, AttrValue* out) {
  if (absl::StartsWith(type, "list(")) {
    absl::string_view kind = type.substr(5, type.size() - 6);
    text = absl::StripAsciiWhitespace(text);
    if (!absl::ConsumePrefix(&text, "[") || !absl::ConsumeSuffix(&text, "]")) {
      return errors::InvalidArgument("list default must look like [a, b], got '", text, "'");
    }
    out->mutable_list();
    for (const std::string& part : SplitList(text)) {
      AttrValue one;
      RETURN_IF_ERROR(ParseScalarValue(kind, part, &one));
      auto* list = out->mutable_list();
      switch (one.value_case()) {
        case AttrValue::kS: list->add_s(one.s()); break;
        case AttrValue::kI: list->add_i(one.i()); break;
        case AttrValue::kF: list->add_f(one.f()); break;
        case AttrValue::kB: list->add_b(one.b()); break;
        case AttrValue::kType: list->add_type(one.type()); break;
        case AttrValue::kShape: *list->add_shape() = one.shape(); break;
        default: break;
      }
    }
    return absl::OkStatus();
  }
  return ParseScalarValue(type, text, out);
}

// Parses "{float, int32}" or "{'a', 'b'}" into allowed values; sets *kind
// to "type" or "string".
absl::Status ParseAllowed(absl::string_view body, std::string* kind, AttrValue* allowed) {
  auto* list = allowed->mutable_list();
  for (const std::string& part : SplitList(body)) {
    if (!part.empty() && (part[0] == '\'' || part[0] == '"')) {
      ASSIGN_OR_RETURN(std::string s, ParseQuoted(part));
      list->add_s(s);
      *kind = "string";
    } else {
      ASSIGN_OR_RETURN(DataType dt, DataTypeFromString(part));
      list->add_type(static_cast<tensorflow::DataType>(dt));
      *kind = "type";
    }
  }
  if (list->s_size() > 0 && list->type_size() > 0) {
    return errors::InvalidArgument("allowed values mix strings and types: {", body, "}");
  }
  if (list->s_size() == 0 && list->type_size() == 0) {
    return errors::InvalidArgument("empty allowed-value set {}");
  }
  return absl::OkStatus();
}

absl::Status ParseAttrSpec(absl::string_view spec, OpDef::AttrDef* attr) {
  const size_t colon = spec.find(':');
  if (colon == absl::string_view::npos) {
    return errors::InvalidArgument("attr spec '", spec, "' has no ':'");
  }
  const absl::string_view name = absl::StripAsciiWhitespace(spec.substr(0, colon));
  if (!IsIdentifier(name)) {
    return errors::InvalidArgument("attr name '", name, "' is not an identifier");
  }
  attr->set_name(std::string(name));
  absl::string_view rest = spec.substr(colon + 1);
  // The default follows the first '=' outside quotes that is not part of ">=".
  absl::string_view default_text;
  bool has_default = false;
  {
    char quote = 0;
    for (size_t i = 0; i < rest.size(); ++i) {
      const char c = rest[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '=' && !(i > 0 && rest[i - 1] == '>')) {
        default_text = rest.substr(i + 1);
        rest = rest.substr(0, i);
        has_default = true;
        break;
      }
    }
  }
  rest = absl::StripAsciiWhitespace(rest);
  // Minimum: "... >= N".
  if (const size_t ge = rest.find(">="); ge != absl::string_view::npos) {
    int64_t min;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(rest.substr(ge + 2)), &min)) {
      return errors::InvalidArgument("bad minimum in attr spec '", spec, "'");
    }
    attr->set_has_minimum(true);
    attr->set_minimum(min);
    rest = absl::StripAsciiWhitespace(rest.substr(0, ge));
  }
  std::string type;
  bool is_list = false;
  absl::string_view inner = rest;
  if (absl::ConsumePrefix(&inner, "list(")) {
    if (!absl::ConsumeSuffix(&inner, ")")) {
      return errors::InvalidArgument("unbalanced list( in attr spec '", spec, "'");
    }
    is_list = true;
    inner = absl::StripAsciiWhitespace(inner);
  }
  if (absl::StartsWith(inner, "{")) {
    if (!absl::EndsWith(inner, "}")) {
      return errors::InvalidArgument("unbalanced { in attr spec '", spec, "'");
    }
    RETURN_IF_ERROR(ParseAllowed(inner.substr(1, inner.size() - 2), &type,
                                 attr->mutable_allowed_values()));
  } else if (const char* expansion = TypeClassExpansion(inner)) {
    RETURN_IF_ERROR(ParseAllowed(expansion, &type, attr->mutable_allowed_values()));
  } else {
    type = std::string(inner);
    if (std::find(std::begin(kAttrKinds), std::end(kAttrKinds), type) == std::end(kAttrKinds)) {
      return errors::InvalidArgument("unknown attr type '", type, "' in spec '", spec, "'");
    }
  }
  if (attr->has_minimum() && !is_list && type != "int") {
    return errors::InvalidArgument("attr spec '", spec, "': only int and list attrs take a minimum");
  }
  attr->set_type(is_list ? absl::StrCat("list(", type, ")") : type);
  if (has_default) {
    RETURN_IF_ERROR(errors::Annotate(
        ParseDefault(attr->type(), default_text, attr->mutable_default_value()),
        absl::StrCat("default of attr '", name, "'")));
  }
  return absl::OkStatus();
}

OpDef::AttrDef* FindAttrDef(OpDef* op, absl::string_view name) {
  for (auto& a : *op->mutable_attr()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

absl::Status ParseArgSpec(absl::string_view spec, OpDef* op, OpDef::ArgDef* arg) {
  const size_t colon = spec.find(':');
  if (colon == absl::string_view::npos) {
    return errors::InvalidArgument("input/output spec '", spec, "' has no ':'");
  }
  const absl::string_view name = absl::StripAsciiWhitespace(spec.substr(0, colon));
  if (!IsIdentifier(name)) {
    return errors::InvalidArgument("argument name '", name, "' is not an identifier");
  }
  arg->set_name(std::string(name));
  absl::string_view type = absl::StripAsciiWhitespace(spec.substr(colon + 1));
  if (absl::ConsumePrefix(&type, "Ref(")) {
    if (!absl::ConsumeSuffix(&type, ")")) {
      return errors::InvalidArgument("unbalanced Ref( in spec '", spec, "'");
    }
    arg->set_is_ref(true);
    type = absl::StripAsciiWhitespace(type);
  }
  if (const size_t star = type.find('*'); star != absl::string_view::npos) {
    const std::string number(absl::StripAsciiWhitespace(type.substr(0, star)));
    if (!IsIdentifier(number)) {
      return errors::InvalidArgument("bad number attr '", number, "' in spec '", spec, "'");
    }
    arg->set_number_attr(number);
    type = absl::StripAsciiWhitespace(type.substr(star + 1));
    if (OpDef::AttrDef* a = FindAttrDef(op, number)) {
      if (a->type() != "int") {
        return errors::InvalidArgument("number attr '", number, "' of spec '", spec,
                                       "' must be an int attr, not ", a->type());
      }
    } else {
      auto* added = op->add_attr();
      added->set_name(number);
      added->set_type("int");
      added->set_has_minimum(true);
      added->set_minimum(1);
    }
  }
  if (auto dt = DataTypeFromString(type); dt.ok() && !IsRefType(*dt)) {
    arg->set_type(static_cast<tensorflow::DataType>(*dt));
    return absl::OkStatus();
  }
  if (!IsIdentifier(type)) {
    return errors::InvalidArgument("bad type '", type, "' in spec '", spec, "'");
  }
  OpDef::AttrDef* a = FindAttrDef(op, type);
  if (a == nullptr) {
    a = op->add_attr();
    a->set_name(std::string(type));
    a->set_type("type");
  }
  if (a->type() == "type") {
    arg->set_type_attr(std::string(type));
  } else if (a->type() == "list(type)") {
    if (!arg->number_attr().empty()) {
      return errors::InvalidArgument("spec '", spec, "' uses a number attr with a type list");
    }
    arg->set_type_list_attr(std::string(type));
  } else {
    return errors::InvalidArgument("attr '", type, "' used as the type of '", name,
                                   "' must be a type or list(type) attr, not ", a->type());
  }
  return absl::OkStatus();
}

}  // namespace

OpDefBuilder::OpDefBuilder(std::string op_name) : name_(std::move(op_name)) {}
OpDefBuilder& OpDefBuilder::Attr(std::string spec) { attrs_.push_back(std::move(spec)); return *this; }
OpDefBuilder& OpDefBuilder::Input(std::string spec) { inputs_.push_back(std::move(spec)); return *this; }
OpDefBuilder& OpDefBuilder::Output(std::string spec) { outputs_.push_back(std::move(spec)); return *this; }
OpDefBuilder& OpDefBuilder::SetIsStateful() { stateful_ = true; return *this; }
OpDefBuilder& OpDefBuilder::SetIsCommutative() { commutative_ = true; return *this; }
OpDefBuilder& OpDefBuilder::SetIsAggregate() { aggregate_ = true; return *this; }
OpDefBuilder& OpDefBuilder::SetAllowsUninitializedInput() {
  allows_uninitialized_input_ = true;
  return *this;
}
OpDefBuilder& OpDefBuilder::SetShapeFn(ShapeFn fn) { shape_fn_ = std::move(fn); return *this; }
OpDefBuilder& OpDefBuilder::Doc(std::string text) { doc_ = std::move(text); return *this; }

absl::StatusOr<OpRegistrationData> OpDefBuilder::Finalize() const {
  OpRegistrationData data;
  OpDef& op = data.op_def;
  auto fail = [&](const absl::Status& s) {
    return errors::Annotate(s, absl::StrCat("op '", name_, "'"));
  };
  if (!IsIdentifier(name_) || (!absl::ascii_isupper(name_[0]) && name_[0] != '_')) {
    return errors::InvalidArgument("op name '", name_,
                                   "' must be CamelCase (start with a capital letter)");
  }
  op.set_name(name_);
  for (const std::string& spec : attrs_) {
    OpDef::AttrDef attr;
    if (auto s = ParseAttrSpec(spec, &attr); !s.ok()) return fail(s);
    if (FindAttrDef(&op, attr.name()) != nullptr) {
      return fail(errors::InvalidArgument("attr '", attr.name(), "' declared twice"));
    }
    *op.add_attr() = std::move(attr);
  }
  for (const std::string& spec : inputs_) {
    if (auto s = ParseArgSpec(spec, &op, op.add_input_arg()); !s.ok()) return fail(s);
  }
  for (const std::string& spec : outputs_) {
    if (auto s = ParseArgSpec(spec, &op, op.add_output_arg()); !s.ok()) return fail(s);
  }
  // Argument names are unique across inputs and outputs; attr names must not
  // collide with them either (TensorFlow's rule, keeps generated APIs sane).
  std::vector<std::string> names;
  for (const auto& a : op.input_arg()) names.push_back(a.name());
  for (const auto& a : op.output_arg()) names.push_back(a.name());
  std::sort(names.begin(), names.end());
  if (auto dup = std::adjacent_find(names.begin(), names.end()); dup != names.end()) {
    return fail(errors::InvalidArgument("argument name '", *dup, "' used twice"));
  }
  // Defaults must satisfy the constraints they come with.
  for (const auto& attr : op.attr()) {
    if (!attr.has_default_value() || !attr.has_allowed_values()) continue;
    const auto& allowed = attr.allowed_values().list();
    const auto& d = attr.default_value();
    bool ok = true;
    if (d.value_case() == AttrValue::kType) {
      ok = std::find(allowed.type().begin(), allowed.type().end(), d.type()) != allowed.type().end();
    } else if (d.value_case() == AttrValue::kS) {
      ok = std::find(allowed.s().begin(), allowed.s().end(), d.s()) != allowed.s().end();
    }
    if (!ok) {
      return fail(errors::InvalidArgument("default ", SummarizeAttrValue(d), " of attr '",
                                          attr.name(), "' is not among its allowed values"));
    }
  }
  op.set_is_stateful(stateful_);
  op.set_is_commutative(commutative_);
  op.set_is_aggregate(aggregate_);
  op.set_allows_uninitialized_input(allows_uninitialized_input_);
  if (!doc_.empty()) {
    const size_t nl = doc_.find('\n');
    op.set_summary(std::string(absl::StripAsciiWhitespace(doc_.substr(0, nl))));
    if (nl != std::string::npos) {
      op.set_description(std::string(absl::StripAsciiWhitespace(doc_.substr(nl + 1))));
    }
  }
  data.shape_fn = shape_fn_;
  return data;
}

OpRegistry* OpRegistry::Global() {
  static OpRegistry* const registry = new OpRegistry;
  return registry;
}

absl::Status OpRegistry::Register(const OpDefBuilder& builder) {
  ASSIGN_OR_RETURN(OpRegistrationData data, builder.Finalize());
  MutexLock lock(&mu_);
  if (ops_.count(data.op_def.name()) > 0) {
    return errors::AlreadyExists("op '", data.op_def.name(), "' is already registered");
  }
  const std::string name = data.op_def.name();
  ops_.emplace(name, std::make_unique<OpRegistrationData>(std::move(data)));
  return absl::OkStatus();
}

const OpRegistrationData* OpRegistry::Find(absl::string_view op_name) const {
  MutexLock lock(&mu_);
  auto it = ops_.find(op_name);
  return it == ops_.end() ? nullptr : it->second.get();
}

absl::StatusOr<const OpRegistrationData*> OpRegistry::LookUp(absl::string_view op_name) const {
  if (const OpRegistrationData* d = Find(op_name)) return d;
  // Suggest ops that share a case-insensitive prefix or contain the name.
  std::vector<std::string> similar;
  const std::string lower = absl::AsciiStrToLower(op_name);
  for (const std::string& name : ListOpNames()) {
    const std::string l = absl::AsciiStrToLower(name);
    if (!lower.empty() && (absl::StrContains(l, lower) || absl::StrContains(lower, l) ||
                           l.substr(0, 3) == lower.substr(0, 3))) {
      similar.push_back(name);
    }
  }
  const size_t total = ListOpNames().size();
  return errors::NotFound(
      "op type not registered: '", op_name, "' (", total, " ops are registered",
      similar.empty() ? std::string(")")
                      : absl::StrCat("; similar: ", absl::StrJoin(similar, ", "), ")"),
      ". If it comes from a custom-op library, load it with LoadOpLibrary() "
      "or --load_op_library");
}

std::vector<std::string> OpRegistry::ListOpNames() const {
  MutexLock lock(&mu_);
  std::vector<std::string> names;
  names.reserve(ops_.size());
  for (const auto& [name, data] : ops_) names.push_back(name);
  return names;
}

void OpRegistry::Export(tensorflow::OpList* ops) const {
  MutexLock lock(&mu_);
  ops->Clear();
  for (const auto& [name, data] : ops_) *ops->add_op() = data->op_def;
}

std::vector<std::string> OpRegistry::RegistrationErrors() const {
  MutexLock lock(&mu_);
  return errors_;
}

void OpRegistry::RecordRegistrationError(std::string error) {
  MutexLock lock(&mu_);
  errors_.push_back(std::move(error));
}

namespace register_op {
OpDefBuilderReceiver::OpDefBuilderReceiver(const OpDefBuilderWrapper& wrapper) {
  absl::Status s = OpRegistry::Global()->Register(wrapper.builder());
  if (!s.ok()) {
    LOG(ERROR) << "failed to register op: " << s.message();
    OpRegistry::Global()->RecordRegistrationError(std::string(s.message()));
  }
}
}  // namespace register_op

}  // namespace recflow
