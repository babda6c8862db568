"""tf.math (TF 1.x names)."""

# pylint: disable=unused-import,redefined-builtin
from recflow.ops.math_ops import (abs, add, add_n, argmax, argmin, ceil,
                                  div_no_nan, divide, equal, erf, exp, floor, floordiv, floormod,
                                  greater, greater_equal, less, less_equal, log, log1p,
                                  logical_and, logical_not, logical_or, logical_xor, maximum,
                                  minimum, mod, multiply, negative, not_equal, pow, realdiv,
                                  reciprocal, reduce_all, reduce_any, reduce_max, reduce_mean,
                                  reduce_min, reduce_prod, reduce_sum, rsqrt, sigmoid, sign,
                                  sqrt, square, squared_difference, subtract, tanh, truediv)
