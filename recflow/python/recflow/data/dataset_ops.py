"""tf.data.Dataset (TensorFlow 1.15's DatasetV1 API) over TensorFlow's
dataset ops. A Dataset owns the DT_VARIANT tensor that its op chain yields
in the graph it was built in, and its element structure (a nest of dtypes and
static shapes). Transformations add one op each, as TensorFlow does."""

import numpy as np

from recflow.data import structure
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import op_def_library
from recflow.framework import random_seed
from recflow.framework import tensor_shape
from recflow.util import nest

AUTOTUNE = -1


def _scalar(value, dtype, name):
  return ops.convert_to_tensor(value, dtype=dtype, name=name)


def _apply(op_type, structure_, name=None, **kwargs):
  """Adds a dataset op whose elements have `structure_`."""
  return op_def_library.apply_op(op_type, name=name,
                                 output_types=structure.flat_types(structure_),
                                 output_shapes=structure.flat_shapes(structure_), **kwargs)


class Dataset(object):
  """A pipeline of elements, each a nest of tensors (TF's tf.data.Dataset)."""

  def __init__(self, variant_tensor, element_structure):
    if variant_tensor.dtype != dtypes.variant:
      raise TypeError("a Dataset wraps a variant tensor, got %s" % variant_tensor.dtype)
    self._variant_tensor = variant_tensor
    self._structure = element_structure

  # --- element structure --------------------------------------------------
  @property
  def output_types(self):
    return structure.types(self._structure)

  @property
  def output_shapes(self):
    return structure.shapes(self._structure)

  @property
  def output_classes(self):
    return structure.classes(self._structure)

  @property
  def element_spec(self):
    return self._structure

  def _inputs(self):
    return [self]

  # --- sources --------------------------------------------------------------
  @staticmethod
  def from_tensor_slices(tensors):
    """One element per slice along the first dimension of every component."""
    with ops.name_scope("TensorSliceDataset"):
      tensors = structure.to_tensors(tensors, "from_tensor_slices")
      flat = nest.flatten(tensors)
      if not flat:
        raise ValueError("from_tensor_slices needs at least one component")
      spec = structure.spec_of(tensors, drop_first_dim=True)
      t = op_def_library.apply_op("TensorSliceDataset", components=flat,
                                  output_shapes=structure.flat_shapes(spec))
    return Dataset(t, spec)

  @staticmethod
  def from_tensors(tensors):
    """A dataset of exactly one element: `tensors`."""
    with ops.name_scope("TensorDataset"):
      tensors = structure.to_tensors(tensors, "from_tensors")
      spec = structure.spec_of(tensors)
      t = op_def_library.apply_op("TensorDataset", components=nest.flatten(tensors),
                                  output_shapes=structure.flat_shapes(spec))
    return Dataset(t, spec)

  @staticmethod
  def range(*args):
    """range(stop), range(start, stop) or range(start, stop, step), as int64."""
    if not 1 <= len(args) <= 3:
      raise ValueError("Dataset.range takes 1 to 3 arguments, got %d" % len(args))
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (
        (args[0], args[1], 1) if len(args) == 2 else args)
    spec = structure.Spec(dtypes.int64, tensor_shape.TensorShape([]))
    with ops.name_scope("RangeDataset"):
      t = _apply("RangeDataset", spec, start=_scalar(start, dtypes.int64, "start"),
                 stop=_scalar(stop, dtypes.int64, "stop"),
                 step=_scalar(step, dtypes.int64, "step"))
    return Dataset(t, spec)

  @staticmethod
  def zip(datasets):
    """Elements of every dataset in `datasets` (a nest of Datasets) side by
    side, in that nest's structure, until the shortest ends."""
    flat = nest.flatten(datasets)
    if not flat or not all(isinstance(d, Dataset) for d in flat):
      raise TypeError("Dataset.zip takes a (nested) structure of Datasets, got %r" % (datasets,))
    spec = nest.pack_sequence_as(datasets, [d.element_spec for d in flat])
    with ops.name_scope("ZipDataset"):
      t = _apply("ZipDataset", spec,
                 input_datasets=[d._variant_tensor for d in flat])  # pylint: disable=protected-access
    return Dataset(t, spec)

  # --- transformations ------------------------------------------------------
  def _unary(self, op_type, spec=None, **kwargs):
    spec = self._structure if spec is None else spec
    t = _apply(op_type, spec, input_dataset=self._variant_tensor, **kwargs)
    return Dataset(t, spec)

  def batch(self, batch_size, drop_remainder=False):
    """Stacks batch_size consecutive elements; every component of the elements
    of one batch must have the same shape (else InvalidArgument at run time)."""
    if isinstance(drop_remainder, bool) and isinstance(batch_size, (int, np.integer)):
      batch_dim = int(batch_size) if drop_remainder else None
    else:
      batch_dim = None
    spec = structure.batched(self._structure, batch_dim)
    return self._unary("BatchDatasetV2", spec,
                       batch_size=_scalar(batch_size, dtypes.int64, "batch_size"),
                       drop_remainder=_scalar(drop_remainder, dtypes.bool, "drop_remainder"))

  def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None):
    seed, seed2 = random_seed.get_seed(seed)
    return self._unary("ShuffleDataset",
                       buffer_size=_scalar(buffer_size, dtypes.int64, "buffer_size"),
                       seed=_scalar(0 if seed is None else seed, dtypes.int64, "seed"),
                       seed2=_scalar(0 if seed2 is None else seed2, dtypes.int64, "seed2"),
                       reshuffle_each_iteration=(True if reshuffle_each_iteration is None
                                                 else bool(reshuffle_each_iteration)))

  def repeat(self, count=None):
    return self._unary("RepeatDataset",
                       count=_scalar(-1 if count is None else count, dtypes.int64, "count"))

  def take(self, count):
    return self._unary("TakeDataset", count=_scalar(count, dtypes.int64, "count"))

  def skip(self, count):
    return self._unary("SkipDataset", count=_scalar(count, dtypes.int64, "count"))

  def shard(self, num_shards, index):
    return self._unary("ShardDataset", num_shards=_scalar(num_shards, dtypes.int64, "num_shards"),
                       index=_scalar(index, dtypes.int64, "index"))

  def cache(self, filename=""):
    return self._unary("CacheDataset", filename=_scalar(filename, dtypes.string, "filename"))

  def prefetch(self, buffer_size):
    return self._unary("PrefetchDataset",
                       buffer_size=_scalar(buffer_size, dtypes.int64, "buffer_size"))

  def map(self, map_func, num_parallel_calls=None):
    """map_func(*element) (a tuple is unpacked into arguments, as in TF) traced
    into a graph function; tensors it captures become other_arguments."""
    from recflow.data import function_adapter  # pylint: disable=g-import-not-at-top
    fn = function_adapter.trace(map_func, self._structure, "Dataset.map")
    kwargs = dict(input_dataset=self._variant_tensor, other_arguments=fn.captured, f=fn.func)
    if num_parallel_calls is None:
      t = _apply("MapDataset", fn.output_structure, **kwargs)
    else:
      t = _apply("ParallelMapDataset", fn.output_structure,
                 num_parallel_calls=_scalar(num_parallel_calls, dtypes.int32,
                                            "num_parallel_calls"), **kwargs)
    return Dataset(t, fn.output_structure)

  def _dataset_fn(self, map_func, what):
    from recflow.data import function_adapter  # pylint: disable=g-import-not-at-top
    return function_adapter.trace(map_func, self._structure, what, returns_dataset=True)

  def flat_map(self, map_func):
    fn = self._dataset_fn(map_func, "Dataset.flat_map")
    return Dataset(_apply("FlatMapDataset", fn.output_structure,
                          input_dataset=self._variant_tensor, other_arguments=fn.captured,
                          f=fn.func), fn.output_structure)

  def interleave(self, map_func, cycle_length=AUTOTUNE, block_length=1,
                 num_parallel_calls=None):
    fn = self._dataset_fn(map_func, "Dataset.interleave")
    kwargs = dict(input_dataset=self._variant_tensor, other_arguments=fn.captured, f=fn.func,
                  cycle_length=_scalar(cycle_length, dtypes.int64, "cycle_length"),
                  block_length=_scalar(block_length, dtypes.int64, "block_length"))
    if num_parallel_calls is None:
      t = _apply("InterleaveDataset", fn.output_structure, **kwargs)
    else:
      t = _apply("ParallelInterleaveDatasetV2", fn.output_structure,
                 num_parallel_calls=_scalar(num_parallel_calls, dtypes.int64,
                                            "num_parallel_calls"), **kwargs)
    return Dataset(t, fn.output_structure)

  def filter(self, predicate):
    from recflow.data import function_adapter  # pylint: disable=g-import-not-at-top
    fn = function_adapter.trace(predicate, self._structure, "Dataset.filter")
    out = nest.flatten(fn.output_structure)
    if len(out) != 1 or out[0].dtype != dtypes.bool or out[0].shape.ndims not in (None, 0):
      raise ValueError("Dataset.filter: the predicate must return a scalar bool tensor, "
                       "got %s" % (fn.output_structure,))
    return Dataset(_apply("FilterDataset", self._structure,
                          input_dataset=self._variant_tensor, other_arguments=fn.captured,
                          predicate=fn.func), self._structure)

  # --- iterators ------------------------------------------------------------
  def make_one_shot_iterator(self):
    from recflow.data import iterator_ops  # pylint: disable=g-import-not-at-top
    return iterator_ops.make_one_shot_iterator(self)

  def make_initializable_iterator(self, shared_name=None):
    from recflow.data import iterator_ops  # pylint: disable=g-import-not-at-top
    return iterator_ops.make_initializable_iterator(self, shared_name)

  def __iter__(self):
    raise TypeError("a recflow Dataset is not iterable in Python (graph mode, as TF1): use "
                    "make_one_shot_iterator().get_next() and Session.run")

  def __repr__(self):
    return "<Dataset shapes: %s, types: %s>" % (self.output_shapes, self.output_types)


DatasetV1 = Dataset


def _file_dataset(op_type, filenames, compression_type, buffer_size, what):
  if compression_type not in (None, ""):
    raise NotImplementedError("%s(compression_type=%r): recflow reads uncompressed files only"
                              % (what, compression_type))
  spec = structure.Spec(dtypes.string, tensor_shape.TensorShape([]))
  with ops.name_scope(op_type):
    filenames = ops.convert_to_tensor(filenames, dtype=dtypes.string, name="filenames")
    if filenames.shape.ndims is not None and filenames.shape.ndims > 1:
      raise ValueError("%s: filenames must be a scalar or a vector, got shape %s" %
                       (what, filenames.shape))
    t = op_def_library.apply_op(op_type, filenames=filenames,
                                compression_type=_scalar("", dtypes.string, "compression_type"),
                                buffer_size=_scalar(buffer_size or 0, dtypes.int64,
                                                    "buffer_size"))
  return t, spec


class TextLineDataset(Dataset):
  """The lines of one or more text files (without the line ends)."""

  def __init__(self, filenames, compression_type=None, buffer_size=None):
    t, spec = _file_dataset("TextLineDataset", filenames, compression_type, buffer_size,
                            "TextLineDataset")
    super(TextLineDataset, self).__init__(t, spec)


class TFRecordDataset(Dataset):
  """The records of one or more TFRecord files."""

  def __init__(self, filenames, compression_type=None, buffer_size=None,
               num_parallel_reads=None):
    if num_parallel_reads not in (None, 1):
      raise NotImplementedError("TFRecordDataset(num_parallel_reads=%r): use "
                                "Dataset.from_tensor_slices(files).interleave(...) in recflow"
                                % num_parallel_reads)
    t, spec = _file_dataset("TFRecordDataset", filenames, compression_type, buffer_size,
                            "TFRecordDataset")
    super(TFRecordDataset, self).__init__(t, spec)
