"""Random tensors: random_normal, truncated_normal, random_uniform (seeded as TF 1.x)."""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import random_seed
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops


def _shape_tensor(shape):
  if isinstance(shape, (list, tuple)) and not shape:
    return ops.convert_to_tensor(shape, dtype=dtypes.int32)
  return ops.convert_to_tensor(shape, name="shape")


def _seeds(seed):
  seed1, seed2 = random_seed.get_seed(seed)
  return (seed1 or 0), (seed2 or 0)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None):
  with ops.name_scope(name, "random_normal", [shape, mean, stddev]) as name:
    shape_tensor = _shape_tensor(shape)
    mean_tensor = ops.convert_to_tensor(mean, dtype=dtype, name="mean")
    stddev_tensor = ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
    seed1, seed2 = _seeds(seed)
    rnd = gen.random_standard_normal(shape_tensor, dtype, seed=seed1, seed2=seed2)
    return gen.add_v2(gen.mul(rnd, stddev_tensor), mean_tensor, name=name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None):
  with ops.name_scope(name, "truncated_normal", [shape, mean, stddev]) as name:
    shape_tensor = _shape_tensor(shape)
    mean_tensor = ops.convert_to_tensor(mean, dtype=dtype, name="mean")
    stddev_tensor = ops.convert_to_tensor(stddev, dtype=dtype, name="stddev")
    seed1, seed2 = _seeds(seed)
    rnd = gen.truncated_normal(shape_tensor, dtype, seed=seed1, seed2=seed2)
    return gen.add_v2(gen.mul(rnd, stddev_tensor), mean_tensor, name=name)


def random_uniform(shape, minval=0, maxval=None, dtype=dtypes.float32, seed=None, name=None):
  dtype = dtypes.as_dtype(dtype)
  if maxval is None:
    if dtype.is_integer:
      raise ValueError("Must specify maxval for integer dtype %r" % dtype)
    maxval = 1
  with ops.name_scope(name, "random_uniform", [shape, minval, maxval]) as name:
    shape_tensor = _shape_tensor(shape)
    minval = ops.convert_to_tensor(minval, dtype=dtype, name="min")
    maxval = ops.convert_to_tensor(maxval, dtype=dtype, name="max")
    seed1, seed2 = _seeds(seed)
    if dtype.is_integer:
      return gen.random_uniform_int(shape_tensor, minval, maxval, seed=seed1, seed2=seed2,
                                    name=name)
    rnd = gen.random_uniform(shape_tensor, dtype, seed=seed1, seed2=seed2)
    return gen.add_v2(gen.mul(rnd, gen.sub(maxval, minval)), minval, name=name)


def random_shuffle(value, seed=None, name=None):
  raise NotImplementedError("tf.random_shuffle: recflow has no RandomShuffle op yet")


def multinomial(logits, num_samples, seed=None, name=None, output_dtype=None):
  raise NotImplementedError("tf.multinomial: recflow has no Multinomial op yet")


_ = math_ops
