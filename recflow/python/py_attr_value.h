// Python values <-> AttrValue, by the attr types OpDef declares ("int",
// "list(type)", "shape", "tensor", ...): the part of TensorFlow's
// op_def_library that turns keyword arguments into node attrs.
//
// Python spellings taken (the recflow package converts its own objects to
// these first): string: bytes or str; int: int or NumPy integer (not bool);
// float: int or float; bool: bool or numpy.bool_; type: the DataType number
// (TensorFlow's enum) or an object with `as_datatype_enum`; shape: None
// (unknown rank) or a sequence of int / None (-1 also means unknown); tensor:
// anything np.asarray takes; func: a library function's name (str) or a
// serialized NameAttrList (bytes); list(T): a list or tuple of T.
//
// Call with the GIL held.
#ifndef RECFLOW_PYTHON_PY_ATTR_VALUE_H_
#define RECFLOW_PYTHON_PY_ATTR_VALUE_H_

#include <pybind11/pybind11.h>

#include <string>

#include "absl/strings/string_view.h"
#include "recflow/proto/attr_value.pb.h"
#include "recflow/proto/op_def.pb.h"

namespace recflow {
namespace python {

// `value` as an attr of OpDef type `type`. TypeError / ValueError messages
// name `where` (e.g. "attr 'T' of node 'x' (Cast)").
tensorflow::AttrValue AttrValueFromPython(pybind11::handle value,
                                          const std::string& type,
                                          absl::string_view where);
// For attrs no OpDef declares (internal "_name" attrs): the type follows the
// Python value (bool, int, float, bytes/str, or a list of one of those).
tensorflow::AttrValue AttrValueFromPythonUntyped(pybind11::handle value,
                                                 absl::string_view where);

// (kind, value): kind as OpDef spells the type ("int", "list(type)"; "list"
// for an empty list), value in the Python spellings above, except that
// strings come back as bytes (as TensorFlow returns them) and tensors as
// NumPy arrays.
pybind11::tuple AttrValueToPython(const tensorflow::AttrValue& value);

// The OpDef as plain Python data (dicts, lists), for the generated wrappers:
// {name, summary, description, is_stateful, is_commutative, is_aggregate,
//  allows_uninitialized_input, input_arg: [...], output_arg: [...],
//  attr: [{name, type, description, default_value: (kind, value) | None,
//          has_minimum, minimum, allowed_values: (kind, value) | None}]}.
pybind11::dict OpDefToPython(const tensorflow::OpDef& op_def);

}  // namespace python
}  // namespace recflow

#endif  // RECFLOW_PYTHON_PY_ATTR_VALUE_H_
