// Shared by the tf.data kernels (dataset_kernels.cc,
// dataset_function_kernels.cc, data_kernels.cc): the base class of kernels
// whose output is a dataset (a DT_VARIANT scalar), scalar-argument readers
// with TensorFlow's error messages, and the iteration context a graph
// iterator runs with. Private to recflow/kernels.
#ifndef RECFLOW_KERNELS_DATASET_KERNEL_UTIL_H_
#define RECFLOW_KERNELS_DATASET_KERNEL_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/data/dataset.h"
#include "recflow/data/dataset_variant.h"
#include "recflow/framework/op_kernel.h"

namespace recflow::dataset_kernels {

// A kernel that builds a dataset from its inputs. Reads output_types (or
// Toutput_types) and output_shapes when the op has them and checks that the
// dataset it built has those element types (InvalidArgument naming the
// node otherwise). Cheap: runs inline.
class DatasetOpKernel : public OpKernel {
 public:
  explicit DatasetOpKernel(OpKernelConstruction* c);
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) final;

 protected:
  virtual absl::StatusOr<data::Dataset> MakeDataset(OpKernelContext* ctx) = 0;

  std::vector<DataType> output_types_;  // Empty when the op has no such attr.
  std::vector<PartialShape> output_shapes_;
};

// Input `i` (named `name` in errors) as a scalar of the given type.
absl::StatusOr<int64_t> ScalarInt(OpKernelContext* ctx, int i,
                                  absl::string_view name);
absl::StatusOr<bool> ScalarBool(OpKernelContext* ctx, int i,
                                absl::string_view name);
absl::StatusOr<std::string> ScalarString(OpKernelContext* ctx, int i,
                                         absl::string_view name);

// The dataset in input `i` (the op's "input_dataset").
absl::StatusOr<data::Dataset> InputDataset(OpKernelContext* ctx, int i);

// How an iterator made by a graph op (MakeIterator, OneShotIterator) reads:
// bad records fail the step, as in TensorFlow (the C++ pipelines' default
// is to skip and count them).
data::IteratorContext GraphIteratorContext();

// The attr `name` of kind func.
absl::Status GetFuncAttr(const tensorflow::NodeDef& def, absl::string_view name,
                         tensorflow::NameAttrList* out);

}  // namespace recflow::dataset_kernels

#endif  // RECFLOW_KERNELS_DATASET_KERNEL_UTIL_H_
