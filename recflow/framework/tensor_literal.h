// Tensor literals: numbers and rectangular nested lists written as text
// ("3", "true", "[1.5, 2]", "[[1, 2], [3, 4]]"), as `recflow saved_model
// run --input_exprs` takes them (TensorFlow's saved_model_cli syntax), and
// their conversion to a Tensor of the dtype and shape a signature declares.
//
// A literal is parsed into a TensorLiteral (a shape and row-major values
// held as long double, which represents every float, double and int32 and
// every int64 exactly) before the dtype is known; TensorLiteralToTensor
// then casts, refusing integers that are not integral or out of range.
// Whitespace is allowed between tokens; true/True and false/False read as
// 1 and 0; lists must be rectangular and at most 32 deep. Errors are
// InvalidArgument naming the position in the text.
//
// Thread-safety: free functions without shared state.
#ifndef RECFLOW_FRAMEWORK_TENSOR_LITERAL_H_
#define RECFLOW_FRAMEWORK_TENSOR_LITERAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/partial_shape.h"

namespace recflow {

// Values with a shape, before a dtype is chosen: numbers in `values`, or
// strings in `strings` (never both).
struct TensorLiteral {
  std::vector<int64_t> shape;        // [] for a scalar; an empty list is [0]
  std::vector<long double> values;   // row-major, one per element
  std::vector<std::string> strings;  // row-major, when the literal is strings
};

// Parses a number, true/false, a string, or a nested list of them. Strings
// are written as Python writes them: "..." or '...', optionally b-prefixed,
// with the escapes \\ \' \" \n \r \t \0 and \xHH (bytes, as
// saved_model_cli's --input_exprs feeds a string tensor).
absl::StatusOr<TensorLiteral> ParseTensorLiteral(absl::string_view text);

// The values of a numeric, bool or string tensor (Unimplemented for other
// dtypes), e.g. to cast a tensor read from a file as a literal.
absl::StatusOr<TensorLiteral> TensorLiteralFromTensor(const Tensor& t);

// `literal` as a tensor of `dtype`: float, double, half, bfloat16, every
// integer dtype (range-checked: an integer dtype refuses 1.5 or 300 for
// uint8), bool, or string (from a string literal only); Unimplemented for
// other dtypes. When the literal is a vector or a scalar that
// does not fit `want` but exactly one layout of `want` holds its elements
// ([1,2,5] for [?,1]), the tensor gets that layout and *reshaped (when not
// null) is set; else the tensor has the literal's shape (whether it fits
// `want` is the caller's check). Errors name `what` ("input 'x'").
absl::StatusOr<Tensor> TensorLiteralToTensor(const TensorLiteral& literal,
                                             DataType dtype,
                                             const PartialShape& want,
                                             absl::string_view what,
                                             bool* reshaped = nullptr);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_TENSOR_LITERAL_H_
