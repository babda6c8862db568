// Instantiating a library function: a FunctionDef (signature, body in
// function-body form, ret map) plus concrete attr values becomes a plain
// GraphDef that the executor can run, as TensorFlow's InstantiateFunction
// makes it:
//
//  - each input argument becomes _Arg nodes (index = its position among all
//    argument tensors, T = its dtype): one named after the argument, or for
//    a list argument (number_attr N*T, or type_list_attr) one per element,
//    named "arg_0", "arg_1", ...; FunctionDef.arg_attr entries are copied
//    onto them, resource_arg_unique_id as "_resource_arg_unique_id";
//  - attr placeholders in body attrs ("$T": AttrValue.placeholder, also
//    inside func attrs) take the call's attr values, else the signature's
//    defaults; op defaults are added;
//  - body inputs in function-body form are resolved: "arg" (a whole
//    argument), "arg:i" (one element of it), "node:out_arg" (all of a
//    node's output argument), "node:out_arg:i" (one element of it), "^node";
//  - each output argument becomes _Retval nodes named "out_RetVal" (or
//    "out_RetVal_i" for lists) reading the tensor its `ret` entry names;
//  - control_ret entries must name body nodes (every body node runs: the
//    executor does not prune a function body).
//
// A body node whose op is not registered but is a function of the library
// (TF1's Defun calls functions by name) becomes a StatefulPartitionedCall of
// that function with the node's attrs.
//
// Errors are InvalidArgument (NotFound for an unknown op) and name the
// function and the node, argument or attr at fault.
#ifndef RECFLOW_FRAMEWORK_FUNCTION_INSTANTIATION_H_
#define RECFLOW_FRAMEWORK_FUNCTION_INSTANTIATION_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/dtype.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/op_registry.h"
#include "recflow/proto/function.pb.h"
#include "recflow/proto/graph.pb.h"

namespace recflow {

// The library function named `name`, or null.
using FunctionLookup = std::function<const tensorflow::FunctionDef*(absl::string_view name)>;

struct InstantiatedFunction {
  std::vector<DataType> arg_types;  // one per _Arg, by index
  std::vector<DataType> ret_types;  // one per _Retval, by index
  tensorflow::GraphDef graph;       // _Arg nodes, body nodes, _Retval nodes
};

// `attrs` binds the signature's attrs (NameAttrList.attr of the call).
// `lookup` may be null (then bodies may use registered ops only).
absl::StatusOr<InstantiatedFunction> InstantiateFunction(
    const tensorflow::FunctionDef& fdef, const AttrMap& attrs, const FunctionLookup& lookup,
    const OpRegistry* ops = OpRegistry::Global());

// The expanded dtypes of `arg` under `attrs`: one for a plain argument, N for
// N*T (number_attr), the list for a type_list_attr argument. InvalidArgument
// naming the argument and attr when an attr it needs is missing.
absl::StatusOr<std::vector<DataType>> ArgDTypes(const tensorflow::OpDef::ArgDef& arg,
                                                const AttrMap& attrs);

// Rewrites `node`, a call of library function `fdef` by name (its op is the
// function's name, its attrs bind the function's attrs), into the
// equivalent StatefulPartitionedCall: Tin/Tout are the expanded argument and
// result dtypes, f names the function with the node's attrs. Inputs, device
// and internal ('_') attrs are kept.
absl::Status RewriteCallByName(const tensorflow::FunctionDef& fdef, tensorflow::NodeDef* node);

// Applies RewriteCallByName to every node of `graph_def` whose op is not
// registered in `ops` but names a function of `graph_def.library()`.
absl::Status RewriteCallsByName(tensorflow::GraphDef* graph_def,
                                const OpRegistry* ops = OpRegistry::Global());

// Adds the functions and gradients of `src` to `dst` (TensorFlow's merge
// rule): a function `dst` already has with an identical definition is
// skipped; one with the same name and another definition is
// InvalidArgument naming it, and then `dst` is unchanged.
absl::Status MergeFunctionLibrary(const tensorflow::FunctionDefLibrary& src,
                                  tensorflow::FunctionDefLibrary* dst);

// "f[T=float, N=2]": the call as TensorFlow prints it, attrs sorted; the
// key under which an instantiation is cached.
std::string CanonicalCallName(const tensorflow::NameAttrList& func);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_FUNCTION_INSTANTIATION_H_
