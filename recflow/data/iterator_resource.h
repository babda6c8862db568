// IteratorResource: an input pipeline's iterator held in a ResourceMgr, so
// a graph can pull batches with the IteratorV2 / IteratorGetNext ops (the
// "graph face" of recflow/data). The pipeline itself is built in C++ with
// the Dataset builder and registered under a container and name:
//
//   Dataset ds = Dataset::TextLine(files, {}, {.lines_per_element = 4096})
//                    .Map(parse_fn, 2).Prefetch(2);
//   RETURN_IF_ERROR(RegisterIterator(session->device()->resource_manager(),
//                                    "", "train_input", ds));
//   // graph: h = IteratorV2(shared_name="train_input", output_types=...,
//   //                       output_shapes=...);  batch = IteratorGetNext(h)
//
// The graph can also make the pipeline itself, as TensorFlow's tf.data does:
// a dataset op chain yields a DT_VARIANT dataset (data/dataset_variant.h),
// IteratorV2 / Iterator / AnonymousIterator create an uninitialized
// IteratorResource, and MakeIterator (the iterator's "initializer") starts
// a pass over the dataset with Initialize(); running it again restarts from
// the beginning. GetNext before any Initialize is FailedPrecondition.
//
// GetNext is thread-safe (calls are serialized: a pipeline yields each
// element once, in order). At the end of the data GetNext reports it, and
// the IteratorGetNext kernel turns that into OutOfRange("End of sequence"),
// as TensorFlow does.

#ifndef RECFLOW_DATA_ITERATOR_RESOURCE_H_
#define RECFLOW_DATA_ITERATOR_RESOURCE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "recflow/core/mutex.h"
#include "recflow/core/resource_handle.h"
#include "recflow/data/dataset.h"
#include "recflow/framework/resource_mgr.h"

namespace recflow::data {

class IteratorResource : public ResourceBase {
 public:
  IteratorResource(Iterator iterator, std::vector<DataType> dtypes,
                   std::vector<PartialShape> shapes, std::string debug);
  // Uninitialized: elements of `dtypes` / `shapes` once Initialize()d.
  IteratorResource(std::vector<DataType> dtypes,
                   std::vector<PartialShape> shapes, std::string debug);

  // Starts a new pass over `dataset` (dropping the current one).
  // InvalidArgument naming both when the dataset's element types differ
  // from output_dtypes() or its shapes are incompatible with
  // output_shapes(); the dataset's own builder error (Batch(0) ...) as is.
  absl::Status Initialize(const Dataset& dataset, IteratorContext ctx = {});
  bool initialized() const;
  // Starts a new pass over the dataset of the last Initialize (dropping the
  // current one, e.g. one a failed RestoreFromString left half restored).
  // FailedPrecondition before any Initialize.
  absl::Status Restart();

  absl::Status GetNext(Element* out, bool* end_of_sequence);
  // The position as bytes (see Iterator::SaveToString) and back.
  absl::StatusOr<std::string> SaveToString();
  absl::Status RestoreFromString(absl::string_view bytes);

  const std::vector<DataType>& output_dtypes() const { return dtypes_; }
  const std::vector<PartialShape>& output_shapes() const { return shapes_; }
  // REQUIRES: initialized().
  DataStats& stats();
  int64_t elements_produced() const;

  std::string DebugString() const override;

 private:
  absl::Status CheckInitialized() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::unique_ptr<Iterator> iterator_ ABSL_GUARDED_BY(mu_);  // Null: uninitialized.
  // What the last Initialize was given (Restart).
  std::optional<Dataset> dataset_ ABSL_GUARDED_BY(mu_);
  IteratorContext ctx_ ABSL_GUARDED_BY(mu_);
  int64_t produced_ = 0;
  const std::vector<DataType> dtypes_;
  const std::vector<PartialShape> shapes_;
  const std::string debug_;
};

// Starts an iterator over `dataset` and registers it in `rm` under
// (container or rm's default container, name). When an uninitialized
// iterator is there already (an IteratorV2 node ran first) it is
// initialized with `dataset`; AlreadyExists when an initialized one is.
absl::Status RegisterIterator(ResourceMgr* rm, const std::string& container,
                              const std::string& name, const Dataset& dataset,
                              IteratorContext ctx = {});

}  // namespace recflow::data

#endif  // RECFLOW_DATA_ITERATOR_RESOURCE_H_
