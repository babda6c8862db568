// The graph face of the input pipeline (recflow/data): ops that pull
// elements from an iterator registered in the ResourceMgr
// (recflow/data/iterator_resource.h), with TensorFlow's names where TF has
// the op (IteratorV2, IteratorGetNext) and recflow's own for saving the
// position as a plain string tensor (TF uses a variant tensor there).
#ifndef RECFLOW_OPS_DATA_OPS_H_
#define RECFLOW_OPS_DATA_OPS_H_

#include <string>
#include <vector>

#include "recflow/core/dtype.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/framework/scope.h"

namespace recflow::ops {

// A handle to the iterator registered as (container, shared_name); the
// types and shapes must be those of the registered pipeline's elements.
Output IteratorV2(const Scope& scope, const std::string& shared_name,
                  const std::vector<DataType>& output_types,
                  const std::vector<PartialShape>& output_shapes,
                  const std::string& container = "");

// The next element's components. Fails with OutOfRange "End of sequence"
// when the data is exhausted.
std::vector<Output> IteratorGetNext(
    const Scope& scope, Output iterator,
    const std::vector<DataType>& output_types,
    const std::vector<PartialShape>& output_shapes);

// The iterator's position as a scalar string, and restoring it.
Output IteratorSaveState(const Scope& scope, Output iterator);
Output IteratorRestoreState(const Scope& scope, Output iterator, Output state);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_DATA_OPS_H_
