#include "recflow/python/py_attr_value.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "recflow/core/status.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/python/py_status.h"
#include "recflow/python/py_tensor.h"

namespace py = pybind11;
using tensorflow::AttrValue;

namespace recflow {
namespace python {
namespace {

std::string Describe(py::handle v) {
  std::string repr = py::repr(v);
  if (repr.size() > 60) repr = repr.substr(0, 57) + "...";
  return absl::StrCat(
      repr, " of type '",
      std::string(py::str(py::type::handle_of(v).attr("__name__"))), "'");
}

[[noreturn]] void Expected(absl::string_view kind, absl::string_view where,
                           py::handle v) {
  throw py::type_error(
      absl::StrCat("Expected ", kind, " for ", where, ", got ", Describe(v)));
}

bool IsBool(py::handle v) {
  if (PyBool_Check(v.ptr())) return true;
  static PyObject* np_bool = [] {
    py::object t = py::module_::import("numpy").attr("bool_");
    return t.release().ptr();  // leaked on purpose, as in py_tensor.cc
  }();
  return PyObject_IsInstance(v.ptr(), np_bool) == 1;
}

bool IsText(py::handle v) {
  return PyBytes_Check(v.ptr()) || PyUnicode_Check(v.ptr());
}

bool IsSequence(py::handle v) {
  return PyList_Check(v.ptr()) || PyTuple_Check(v.ptr());
}

int64_t ToInt(py::handle v, absl::string_view where) {
  if (IsBool(v) || !PyIndex_Check(v.ptr())) Expected("int", where, v);
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) {
    throw py::value_error(absl::StrCat(where, ": ", std::string(py::repr(v)),
                                       " does not fit in int64"));
  }
  if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<int64_t>(x);
}

float ToFloat(py::handle v, absl::string_view where) {
  if (IsBool(v) || IsText(v) || !PyNumber_Check(v.ptr()))
    Expected("float", where, v);
  const double x = PyFloat_AsDouble(v.ptr());
  if (x == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<float>(x);
}

bool ToBool(py::handle v, absl::string_view where) {
  if (!IsBool(v)) Expected("bool", where, v);
  return PyObject_IsTrue(v.ptr()) == 1;
}

std::string ToText(py::handle v, absl::string_view where) {
  if (PyBytes_Check(v.ptr()))
    return std::string(py::bytes(py::reinterpret_borrow<py::object>(v)));
  if (PyUnicode_Check(v.ptr())) return py::cast<std::string>(v);
  Expected("string", where, v);
}

DataType ToType(py::handle v, absl::string_view where) {
  py::handle value = v;
  py::object holder;
  if (py::hasattr(v, "as_datatype_enum")) {
    holder = v.attr("as_datatype_enum");
    value = holder;
  } else if (IsBool(v) || !PyIndex_Check(v.ptr())) {
    Expected("a DType", where, v);
  }
  const int64_t x = ToInt(value, where);
  if (x == DT_INVALID || x < 0 || x > INT32_MAX ||
      !DataTypeIsValid(static_cast<int>(x))) {
    throw py::value_error(
        absl::StrCat(where, ": ", x, " is not a valid DataType"));
  }
  return static_cast<DataType>(x);
}

PartialShape ToShape(py::handle v, absl::string_view where) {
  if (v.is_none()) return PartialShape::Unknown();
  if (!IsSequence(v))
    Expected("a shape (None or a list of int / None)", where, v);
  std::vector<int64_t> dims;
  for (py::handle d : v) {
    if (d.is_none()) {
      dims.push_back(kUnknownDim);
      continue;
    }
    const int64_t x = ToInt(d, where);
    if (x < -1) {
      throw py::value_error(
          absl::StrCat(where, ": dimension ", x, " is negative"));
    }
    dims.push_back(x);
  }
  return PartialShape(absl::MakeConstSpan(dims));
}

// One value of scalar kind `kind` into `out` (a scalar AttrValue).
void ScalarFromPython(py::handle v, absl::string_view kind,
                      absl::string_view where, AttrValue* out) {
  if (kind == "string") {
    SetAttrValue(ToText(v, where), out);
  } else if (kind == "int") {
    SetAttrValue(ToInt(v, where), out);
  } else if (kind == "float") {
    SetAttrValue(ToFloat(v, where), out);
  } else if (kind == "bool") {
    SetAttrValue(ToBool(v, where), out);
  } else if (kind == "type") {
    SetAttrValue(ToType(v, where), out);
  } else if (kind == "shape") {
    SetAttrValue(ToShape(v, where), out);
  } else if (kind == "tensor") {
    SetAttrValue(TensorFromPython(v, DT_INVALID, where), out);
  } else if (kind == "func") {
    // A function's name (str), or a serialized NameAttrList (bytes: a name
    // plus attrs).
    if (py::isinstance<py::str>(v)) {
      out->mutable_func()->set_name(py::cast<std::string>(v));
    } else if (py::isinstance<py::bytes>(v)) {
      if (!out->mutable_func()->ParseFromString(py::cast<std::string>(v)) ||
          out->func().name().empty()) {
        throw py::type_error(absl::StrCat(
            where, ": bytes for a func attr must be a serialized NameAttrList with a name"));
      }
    } else {
      throw py::type_error(absl::StrCat(
          where, ": a func attr takes a function name (str) or a serialized NameAttrList "
                 "(bytes), not ", py::str(py::type::of(v)).cast<std::string>()));
    }
  } else {
    throw py::type_error(
        absl::StrCat(where, ": unknown attr type '", kind, "'"));
  }
}

void AppendToList(const AttrValue& scalar, AttrValue::ListValue* list) {
  switch (scalar.value_case()) {
    case AttrValue::kS:
      list->add_s(scalar.s());
      break;
    case AttrValue::kI:
      list->add_i(scalar.i());
      break;
    case AttrValue::kF:
      list->add_f(scalar.f());
      break;
    case AttrValue::kB:
      list->add_b(scalar.b());
      break;
    case AttrValue::kType:
      list->add_type(scalar.type());
      break;
    case AttrValue::kShape:
      *list->add_shape() = scalar.shape();
      break;
    case AttrValue::kTensor:
      *list->add_tensor() = scalar.tensor();
      break;
    default:
      break;
  }
}

py::object ShapeToPython(const tensorflow::TensorShapeProto& proto) {
  if (proto.unknown_rank()) return py::none();
  py::list dims;
  for (const auto& d : proto.dim()) {
    dims.append(d.size() < 0 ? py::object(py::none())
                             : py::object(py::int_(d.size())));
  }
  return dims;
}

py::object TensorProtoToPython(const tensorflow::TensorProto& proto) {
  Tensor t = ValueOrThrow(TensorFromProto(proto));
  return TensorToNumpy(std::move(t), "tensor attr");
}

py::dict ArgToPython(const tensorflow::OpDef::ArgDef& arg) {
  py::dict d;
  d["name"] = arg.name();
  d["description"] = arg.description();
  d["type"] = static_cast<int>(arg.type());
  d["type_attr"] = arg.type_attr();
  d["number_attr"] = arg.number_attr();
  d["type_list_attr"] = arg.type_list_attr();
  d["is_ref"] = arg.is_ref();
  return d;
}

}  // namespace

AttrValue AttrValueFromPython(py::handle value, const std::string& type,
                              absl::string_view where) {
  AttrValue out;
  absl::string_view kind = type;
  if (absl::ConsumePrefix(&kind, "list(") && absl::ConsumeSuffix(&kind, ")")) {
    if (!IsSequence(value))
      Expected(absl::StrCat("a list of ", kind), where, value);
    AttrValue::ListValue* list = out.mutable_list();
    int64_t i = 0;
    for (py::handle item : value) {
      AttrValue one;
      ScalarFromPython(item, kind, absl::StrCat(where, " (element ", i++, ")"),
                       &one);
      AppendToList(one, list);
    }
    return out;
  }
  ScalarFromPython(value, type, where, &out);
  return out;
}

AttrValue AttrValueFromPythonUntyped(py::handle value,
                                     absl::string_view where) {
  auto kind_of = [&](py::handle v) -> std::string {
    if (IsBool(v)) return "bool";
    if (PyLong_Check(v.ptr())) return "int";
    if (PyFloat_Check(v.ptr())) return "float";
    if (IsText(v)) return "string";
    Expected("bool, int, float or string", where, v);
  };
  if (IsSequence(value)) {
    AttrValue out;
    out.mutable_list();
    if (py::len(value) == 0) return out;
    py::sequence seq = py::reinterpret_borrow<py::sequence>(value);
    return AttrValueFromPython(
        value, absl::StrCat("list(", kind_of(seq[0]), ")"), where);
  }
  return AttrValueFromPython(value, kind_of(value), where);
}

py::tuple AttrValueToPython(const AttrValue& value) {
  const std::string kind = AttrValueKind(value);
  switch (value.value_case()) {
    case AttrValue::kS:
      return py::make_tuple(kind, py::bytes(value.s()));
    case AttrValue::kI:
      return py::make_tuple(kind, value.i());
    case AttrValue::kF:
      return py::make_tuple(kind, value.f());
    case AttrValue::kB:
      return py::make_tuple(kind, value.b());
    case AttrValue::kType:
      return py::make_tuple(kind, static_cast<int>(value.type()));
    case AttrValue::kShape:
      return py::make_tuple(kind, ShapeToPython(value.shape()));
    case AttrValue::kTensor:
      return py::make_tuple(kind, TensorProtoToPython(value.tensor()));
    case AttrValue::kFunc:
      return py::make_tuple(kind, value.func().name());
    case AttrValue::kPlaceholder:
      return py::make_tuple(kind, value.placeholder());
    case AttrValue::kList: {
      const auto& l = value.list();
      py::list items;
      for (const auto& s : l.s()) items.append(py::bytes(s));
      for (int64_t i : l.i()) items.append(i);
      for (float f : l.f()) items.append(f);
      for (bool b : l.b()) items.append(b);
      for (int t : l.type()) items.append(t);
      for (const auto& s : l.shape()) items.append(ShapeToPython(s));
      for (const auto& t : l.tensor()) items.append(TensorProtoToPython(t));
      for (const auto& f : l.func()) items.append(f.name());
      return py::make_tuple(kind, items);
    }
    default:
      return py::make_tuple(std::string("none"), py::none());
  }
}

py::dict OpDefToPython(const tensorflow::OpDef& op_def) {
  py::dict d;
  d["name"] = op_def.name();
  d["summary"] = op_def.summary();
  d["description"] = op_def.description();
  d["is_stateful"] = op_def.is_stateful();
  d["is_commutative"] = op_def.is_commutative();
  d["is_aggregate"] = op_def.is_aggregate();
  d["allows_uninitialized_input"] = op_def.allows_uninitialized_input();
  py::list inputs, outputs, attrs;
  for (const auto& a : op_def.input_arg()) inputs.append(ArgToPython(a));
  for (const auto& a : op_def.output_arg()) outputs.append(ArgToPython(a));
  for (const auto& a : op_def.attr()) {
    py::dict attr;
    attr["name"] = a.name();
    attr["type"] = a.type();
    attr["description"] = a.description();
    attr["default_value"] =
        a.has_default_value() ? py::object(AttrValueToPython(a.default_value()))
                              : py::none();
    attr["has_minimum"] = a.has_minimum();
    attr["minimum"] = a.minimum();
    attr["allowed_values"] =
        a.has_allowed_values()
            ? py::object(AttrValueToPython(a.allowed_values()))
            : py::none();
    attrs.append(attr);
  }
  d["input_arg"] = inputs;
  d["output_arg"] = outputs;
  d["attr"] = attrs;
  return d;
}

}  // namespace python
}  // namespace recflow
