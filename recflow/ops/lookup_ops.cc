// Lookup tables of TensorFlow's lookup_ops.cc that TF1 exports use
// (tf.contrib.lookup / tf.lookup index and vocabulary tables, the feature
// columns of estimator exports): HashTableV2, InitializeTableV2,
// InitializeTableFromTextFileV2, LookupTableFindV2, LookupTableSizeV2 and
// LookupTableImportV2, with TensorFlow's attrs and shape functions. Kernels:
// kernels/lookup_table_kernels.cc. None is differentiable.
#include <string>

#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// keys a vector, values of the same shape (TensorFlow merges the shapes).
absl::Status KeysAndValuesVectors(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 0).status());
  ASSIGN_OR_RETURN(PartialShape keys, c->WithRank(1, 1));
  RETURN_IF_ERROR(keys.Merge(c->input(2)).status());
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("HashTableV2")
    .Output("table_handle: resource")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("use_node_name_sharing: bool = false")
    .Attr("key_dtype: type")
    .Attr("value_dtype: type")
    .SetIsStateful()
    .SetShapeFn(shape_fns::ScalarShape)
    .Doc("A hash table mapping keys to values, filled once by an initializer op "
         "(InitializeTableV2, InitializeTableFromTextFileV2, LookupTableImportV2) and "
         "read-only afterwards.");

REGISTER_OP("InitializeTableV2")
    .Input("table_handle: resource")
    .Input("keys: Tkey")
    .Input("values: Tval")
    .Attr("Tkey: type")
    .Attr("Tval: type")
    .SetShapeFn(KeysAndValuesVectors)
    .Doc("Fills the table with `keys` -> `values` (two vectors of one length). Running it "
         "again with the same data does nothing; with other data it is FailedPrecondition.");

REGISTER_OP("InitializeTableFromTextFileV2")
    .Input("table_handle: resource")
    .Input("filename: string")
    .Attr("key_index: int >= -2")
    .Attr("value_index: int >= -2")
    .Attr("vocab_size: int >= -1 = -1")
    .Attr("delimiter: string = '\t'")
    .Attr("offset: int = 0")
    .SetShapeFn([](InferenceContext* c) {
      RETURN_IF_ERROR(c->WithRank(0, 0).status());
      return c->WithRank(1, 0).status();
    })
    .Doc("Fills the table from a text file, one entry per line: key and value are the "
         "line's fields `key_index` / `value_index` split at `delimiter`, or -1 for the "
         "whole line, -2 for the line number (plus `offset`). vocab_size (-1: all lines) "
         "is the number of lines to read.");

REGISTER_OP("LookupTableFindV2")
    .Input("table_handle: resource")
    .Input("keys: Tin")
    .Input("default_value: Tout")
    .Output("values: Tout")
    .Attr("Tin: type")
    .Attr("Tout: type")
    .SetShapeFn([](InferenceContext* c) {
      RETURN_IF_ERROR(c->WithRank(0, 0).status());
      // The table's value shape travels with the handle in TensorFlow
      // (handle shapes and types); without it the result is unknown.
      c->set_output(0, PartialShape::Unknown());
      return absl::OkStatus();
    })
    .Doc("The values of `keys` in the table (keys' shape), `default_value` (a scalar) "
         "for keys not in it.");

REGISTER_OP("LookupTableSizeV2")
    .Input("table_handle: resource")
    .Output("size: int64")
    .SetShapeFn([](InferenceContext* c) {
      RETURN_IF_ERROR(c->WithRank(0, 0).status());
      c->set_output(0, PartialShape(TensorShape()));
      return absl::OkStatus();
    })
    .Doc("The number of entries in the table (0 before it is initialized).");

REGISTER_OP("LookupTableImportV2")
    .Input("table_handle: resource")
    .Input("keys: Tin")
    .Input("values: Tout")
    .Attr("Tin: type")
    .Attr("Tout: type")
    .SetShapeFn(KeysAndValuesVectors)
    .Doc("Fills a hash table with `keys` -> `values`, as InitializeTableV2 does (a "
         "HashTableV2 is initialized once).");

REGISTER_NO_GRADIENT_OP("HashTableV2");
REGISTER_NO_GRADIENT_OP("InitializeTableV2");
REGISTER_NO_GRADIENT_OP("InitializeTableFromTextFileV2");
REGISTER_NO_GRADIENT_OP("LookupTableFindV2");
REGISTER_NO_GRADIENT_OP("LookupTableSizeV2");
REGISTER_NO_GRADIENT_OP("LookupTableImportV2");

}  // namespace recflow
