"""tf.initializers (TF 1.x names)."""

# pylint: disable=unused-import
from recflow.ops.init_ops import (Constant as constant, GlorotNormal as glorot_normal,
                                  GlorotUniform as glorot_uniform, Ones as ones,
                                  RandomNormal as random_normal,
                                  RandomUniform as random_uniform,
                                  TruncatedNormal as truncated_normal,
                                  VarianceScaling as variance_scaling, Zeros as zeros,
                                  he_normal, he_uniform, lecun_normal, lecun_uniform)
from recflow.ops.variables import global_variables_initializer as global_variables
from recflow.ops.variables import local_variables_initializer as local_variables
from recflow.ops.variables import variables_initializer as variables
