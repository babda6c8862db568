// tf.data's graph ops: datasets as DT_VARIANT scalars (see
// recflow/data/dataset_variant.h) and the iterator ops that turn them into
// IteratorResources. Names, inputs, attrs (with their defaults) and shape
// functions follow tensorflow/core/ops/dataset_ops.cc, so TF1 GraphDefs
// that contain a tf.data pipeline load and run; kernels are in
// kernels/dataset_*_kernels.cc. Source dataset ops are stateful so that
// constant folding and CSE leave them alone (as TF1 marked them). IteratorV2,
// IteratorGetNext and the save/restore ops are in data_ops.cc. None is
// differentiable.
#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// Inputs `scalars` must be scalars; every output is a scalar.
ShapeFn ScalarInputs(std::vector<int> scalars) {
  return [scalars = std::move(scalars)](InferenceContext* c) -> absl::Status {
    for (int i : scalars) {
      const int index = i >= 0 ? i : c->num_inputs() + i;
      RETURN_IF_ERROR(c->WithRank(index, 0).status());
    }
    return shape_fns::ScalarShape(c);
  };
}

// A scalar or a vector of file names, then scalar inputs.
absl::Status FileSourceShape(InferenceContext* c) {
  if (c->input(0).rank() > 1) {
    return errors::InvalidArgument("filenames must be a scalar or a vector, got ",
                                   c->input(0).DebugString());
  }
  for (int i = 1; i < c->num_inputs(); ++i) {
    RETURN_IF_ERROR(c->WithRank(i, 0).status());
  }
  return shape_fns::ScalarShape(c);
}

// The element signature of a dataset op: the lists must have equal length.
absl::Status CheckSignature(InferenceContext* c, const char* types_attr) {
  std::vector<DataType> types;
  std::vector<PartialShape> shapes;
  RETURN_IF_ERROR(c->GetAttr(types_attr, &types));
  RETURN_IF_ERROR(c->GetAttr("output_shapes", &shapes));
  if (types.size() != shapes.size()) {
    return errors::InvalidArgument(types_attr, " has ", types.size(),
                                   " entries but output_shapes has ",
                                   shapes.size());
  }
  return absl::OkStatus();
}

ShapeFn Signed(const char* types_attr, ShapeFn then) {
  return [types_attr, then = std::move(then)](InferenceContext* c) -> absl::Status {
    RETURN_IF_ERROR(CheckSignature(c, types_attr));
    return then(c);
  };
}

ShapeFn DatasetShape(std::vector<int> scalars = {}) {
  return Signed("output_types", ScalarInputs(std::move(scalars)));
}

}  // namespace

// Sources.
REGISTER_OP("TensorDataset")
    .Input("components: Toutput_types")
    .Output("handle: variant")
    .Attr("Toutput_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(Signed("Toutput_types", shape_fns::ScalarShape))
    .Doc("A dataset that yields `components` once, as one element.");

REGISTER_OP("TensorSliceDataset")
    .Input("components: Toutput_types")
    .Output("handle: variant")
    .Attr("Toutput_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("is_files: bool = false")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(Signed("Toutput_types", shape_fns::ScalarShape))
    .Doc("A dataset that yields each dim-0 slice of `components`.");

REGISTER_OP("RangeDataset")
    .Input("start: int64")
    .Input("stop: int64")
    .Input("step: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .Attr("replicate_on_split: bool = false")
    .SetIsStateful()
    .SetShapeFn(DatasetShape({0, 1, 2}))
    .Doc("A dataset of start, start + step, ... up to (excluding) stop.");

REGISTER_OP("TextLineDataset")
    .Input("filenames: string")
    .Input("compression_type: string")
    .Input("buffer_size: int64")
    .Output("handle: variant")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(FileSourceShape)
    .Doc("A dataset of the lines of the files (without the line ends).");

REGISTER_OP("TFRecordDataset")
    .Input("filenames: string")
    .Input("compression_type: string")
    .Input("buffer_size: int64")
    .Output("handle: variant")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(FileSourceShape)
    .Doc("A dataset of the records of the TFRecord files.");

// Stages without functions.
REGISTER_OP("ZipDataset")
    .Input("input_datasets: N * variant")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("N: int >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape())
    .Doc("The components of every input's next element, until one input ends.");

REGISTER_OP("BatchDataset")
    .Input("input_dataset: variant")
    .Input("batch_size: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({1}))
    .Doc("Stacks batch_size consecutive elements (the last batch may be smaller).");

REGISTER_OP("BatchDatasetV2")
    .Input("input_dataset: variant")
    .Input("batch_size: int64")
    .Input("drop_remainder: bool")
    .Output("handle: variant")
    .Attr("parallel_copy: bool = false")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({1, 2}))
    .Doc("Stacks batch_size consecutive elements; drop_remainder drops a short "
         "last batch.");

REGISTER_OP("ShuffleDataset")
    .Input("input_dataset: variant")
    .Input("buffer_size: int64")
    .Input("seed: int64")
    .Input("seed2: int64")
    .Output("handle: variant")
    .Attr("reshuffle_each_iteration: bool = true")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({1, 2, 3}))
    .Doc("Shuffles with a buffer of buffer_size elements; seed = seed2 = 0 "
         "means nondeterministic.");

REGISTER_OP("RepeatDataset")
    .Input("input_dataset: variant")
    .Input("count: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({1}))
    .Doc("Repeats the input count times (negative: forever).");

REGISTER_OP("TakeDataset")
    .Input("input_dataset: variant")
    .Input("count: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({1}))
    .Doc("The first count elements (negative: all).");

REGISTER_OP("SkipDataset")
    .Input("input_dataset: variant")
    .Input("count: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({1}))
    .Doc("Skips the first count elements (negative: all).");

REGISTER_OP("ShardDataset")
    .Input("input_dataset: variant")
    .Input("num_shards: int64")
    .Input("index: int64")
    .Output("handle: variant")
    .Attr("require_non_empty: bool = false")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({1, 2}))
    .Doc("Every num_shards-th element, starting at index.");

REGISTER_OP("CacheDataset")
    .Input("input_dataset: variant")
    .Input("filename: string")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({1}))
    .Doc("Keeps the elements of the first pass in memory (filename must be "
         "empty in recflow).");

REGISTER_OP("PrefetchDataset")
    .Input("input_dataset: variant")
    .Input("buffer_size: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("slack_period: int = 0")
    .Attr("legacy_autotune: bool = true")
    .Attr("buffer_size_min: int = 0")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({1}))
    .Doc("Produces up to buffer_size elements ahead on a background thread "
         "(-1: AUTOTUNE).");

REGISTER_OP("ModelDataset")
    .Input("input_dataset: variant")
    .Output("handle: variant")
    .Attr("algorithm: int = 0")
    .Attr("cpu_budget: int = 0")
    .Attr("ram_budget: int = 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetShapeFn(DatasetShape())
    .Doc("tf.data's autotuning model; in recflow the input unchanged.");

REGISTER_OP("OptimizeDataset")
    .Input("input_dataset: variant")
    .Input("optimizations: string")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("optimization_configs: list(string) = []")
    .SetShapeFn(DatasetShape())
    .Doc("tf.data's graph rewrites; in recflow the input unchanged.");

REGISTER_OP("OptimizeDatasetV2")
    .Input("input_dataset: variant")
    .Input("optimizations_enabled: string")
    .Input("optimizations_disabled: string")
    .Input("optimizations_default: string")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("optimization_configs: list(string) = []")
    .SetShapeFn(DatasetShape())
    .Doc("tf.data's graph rewrites; in recflow the input unchanged.");

// Stages that call a function of the graph's library.
REGISTER_OP("MapDataset")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("use_inter_op_parallelism: bool = true")
    .Attr("preserve_cardinality: bool = false")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape())
    .Doc("f(element components..., other_arguments...) for each element.");

REGISTER_OP("ParallelMapDataset")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Input("num_parallel_calls: int32")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("use_inter_op_parallelism: bool = true")
    .Attr("sloppy: bool = false")
    .Attr("preserve_cardinality: bool = false")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({-1}))
    .Doc("MapDataset with up to num_parallel_calls calls at once (in order).");

REGISTER_OP("ParallelMapDatasetV2")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Input("num_parallel_calls: int64")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("use_inter_op_parallelism: bool = true")
    .Attr("deterministic: string = 'default'")
    .Attr("preserve_cardinality: bool = false")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({-1}))
    .Doc("MapDataset with up to num_parallel_calls calls at once (in order).");

REGISTER_OP("FlatMapDataset")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape())
    .Doc("The elements of the datasets f returns, one dataset after another.");

REGISTER_OP("InterleaveDataset")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Input("cycle_length: int64")
    .Input("block_length: int64")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({-2, -1}))
    .Doc("Interleaves block_length elements from each of cycle_length datasets "
         "that f returns.");

REGISTER_OP("ParallelInterleaveDatasetV2")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Input("cycle_length: int64")
    .Input("block_length: int64")
    .Input("num_parallel_calls: int64")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("sloppy: bool = false")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({-3, -2, -1}))
    .Doc("InterleaveDataset reading ahead on num_parallel_calls threads.");

REGISTER_OP("ParallelInterleaveDatasetV4")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Input("cycle_length: int64")
    .Input("block_length: int64")
    .Input("buffer_output_elements: int64")
    .Input("prefetch_input_elements: int64")
    .Input("num_parallel_calls: int64")
    .Output("handle: variant")
    .Attr("f: func")
    .Attr("deterministic: string = 'default'")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape({-5, -4, -3, -2, -1}))
    .Doc("InterleaveDataset reading ahead on num_parallel_calls threads.");

REGISTER_OP("FilterDataset")
    .Input("input_dataset: variant")
    .Input("other_arguments: Targuments")
    .Output("handle: variant")
    .Attr("predicate: func")
    .Attr("Targuments: list(type) >= 0")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(DatasetShape())
    .Doc("The elements for which predicate returns a scalar true.");

// Iterators.
REGISTER_OP("Iterator")
    .Output("handle: resource")
    .Attr("shared_name: string")
    .Attr("container: string")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(DatasetShape())
    .Doc("A handle to the iterator (container, shared_name), created "
         "uninitialized on first use; MakeIterator initializes it.");

REGISTER_OP("AnonymousIterator")
    .Output("handle: resource")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(DatasetShape())
    .Doc("A new uninitialized iterator per run.");

REGISTER_OP("AnonymousIteratorV2")
    .Output("handle: resource")
    .Output("deleter: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(DatasetShape())
    .Doc("A new uninitialized iterator per run, and the deleter DeleteIterator "
         "takes.");

REGISTER_OP("AnonymousIteratorV3")
    .Output("handle: resource")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(DatasetShape())
    .Doc("A new uninitialized iterator per run.");

REGISTER_OP("DeleteIterator")
    .Input("handle: resource")
    .Input("deleter: variant")
    .SetIsStateful()
    .SetShapeFn(shape_fns::NoOutputs)
    .Doc("Drops the iterator from its resource manager.");

REGISTER_OP("MakeIterator")
    .Input("dataset: variant")
    .Input("iterator: resource")
    .SetIsStateful()
    .SetShapeFn(shape_fns::NoOutputs)
    .Doc("(Re)starts `iterator` at the beginning of `dataset`.");

REGISTER_OP("OneShotIterator")
    .Output("handle: resource")
    .Attr("dataset_factory: func")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(DatasetShape())
    .Doc("An iterator over the dataset that dataset_factory (no arguments) "
         "returns, made on first use.");

REGISTER_OP("IteratorGetNextSync")
    .Input("iterator: resource")
    .Output("components: output_types")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) -> absl::Status {
      RETURN_IF_ERROR(CheckSignature(c, "output_types"));
      RETURN_IF_ERROR(c->WithRank(0, 0).status());
      std::vector<PartialShape> shapes;
      RETURN_IF_ERROR(c->GetAttr("output_shapes", &shapes));
      for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, shapes[i]);
      return absl::OkStatus();
    })
    .Doc("IteratorGetNext, run on the caller's thread.");

REGISTER_OP("IteratorToStringHandle")
    .Input("resource_handle: resource")
    .Output("string_handle: string")
    .SetIsStateful()
    .SetShapeFn(ScalarInputs({0}))
    .Doc("The iterator's handle as a string (for IteratorFromStringHandle).");

REGISTER_OP("IteratorFromStringHandle")
    .Input("string_handle: string")
    .Output("resource_handle: resource")
    .Attr("output_types: list(type) >= 0 = []")
    .Attr("output_shapes: list(shape) >= 0 = []")
    .SetIsStateful()
    .SetShapeFn(ScalarInputs({0}))
    .Doc("The iterator a string handle names.");

REGISTER_OP("IteratorFromStringHandleV2")
    .Input("string_handle: string")
    .Output("resource_handle: resource")
    .Attr("output_types: list(type) >= 0 = []")
    .Attr("output_shapes: list(shape) >= 0 = []")
    .SetIsStateful()
    .SetShapeFn(ScalarInputs({0}))
    .Doc("The iterator a string handle names.");

REGISTER_NO_GRADIENT_OP("TensorDataset");
REGISTER_NO_GRADIENT_OP("TensorSliceDataset");
REGISTER_NO_GRADIENT_OP("RangeDataset");
REGISTER_NO_GRADIENT_OP("TextLineDataset");
REGISTER_NO_GRADIENT_OP("TFRecordDataset");
REGISTER_NO_GRADIENT_OP("ZipDataset");
REGISTER_NO_GRADIENT_OP("BatchDataset");
REGISTER_NO_GRADIENT_OP("BatchDatasetV2");
REGISTER_NO_GRADIENT_OP("ShuffleDataset");
REGISTER_NO_GRADIENT_OP("RepeatDataset");
REGISTER_NO_GRADIENT_OP("TakeDataset");
REGISTER_NO_GRADIENT_OP("SkipDataset");
REGISTER_NO_GRADIENT_OP("ShardDataset");
REGISTER_NO_GRADIENT_OP("CacheDataset");
REGISTER_NO_GRADIENT_OP("PrefetchDataset");
REGISTER_NO_GRADIENT_OP("ModelDataset");
REGISTER_NO_GRADIENT_OP("OptimizeDataset");
REGISTER_NO_GRADIENT_OP("OptimizeDatasetV2");
REGISTER_NO_GRADIENT_OP("MapDataset");
REGISTER_NO_GRADIENT_OP("ParallelMapDataset");
REGISTER_NO_GRADIENT_OP("ParallelMapDatasetV2");
REGISTER_NO_GRADIENT_OP("FlatMapDataset");
REGISTER_NO_GRADIENT_OP("InterleaveDataset");
REGISTER_NO_GRADIENT_OP("ParallelInterleaveDatasetV2");
REGISTER_NO_GRADIENT_OP("ParallelInterleaveDatasetV4");
REGISTER_NO_GRADIENT_OP("FilterDataset");
REGISTER_NO_GRADIENT_OP("Iterator");
REGISTER_NO_GRADIENT_OP("AnonymousIterator");
REGISTER_NO_GRADIENT_OP("AnonymousIteratorV2");
REGISTER_NO_GRADIENT_OP("AnonymousIteratorV3");
REGISTER_NO_GRADIENT_OP("DeleteIterator");
REGISTER_NO_GRADIENT_OP("MakeIterator");
REGISTER_NO_GRADIENT_OP("OneShotIterator");
REGISTER_NO_GRADIENT_OP("IteratorGetNextSync");
REGISTER_NO_GRADIENT_OP("IteratorToStringHandle");
REGISTER_NO_GRADIENT_OP("IteratorFromStringHandle");
REGISTER_NO_GRADIENT_OP("IteratorFromStringHandleV2");

}  // namespace recflow
