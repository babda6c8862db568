"""tf.contrib.framework on recflow: arg_scope and the variable helpers TF-slim uses."""

# pylint: disable=unused-import,wildcard-import
from recflow.contrib.framework.arg_scope import (add_arg_scope, arg_scope, arg_scope_func_key,
                                                 arg_scoped_arguments, current_arg_scope,
                                                 has_arg_scope)
from recflow.contrib.framework.variables import (VariableDeviceChooser, add_model_variable,
                                                 assert_global_step,
                                                 assign_from_checkpoint_fn,
                                                 create_global_step, filter_variables,
                                                 get_global_step, get_local_variables,
                                                 get_model_variables,
                                                 get_or_create_global_step,
                                                 get_trainable_variables, get_unique_variable,
                                                 get_variables, get_variables_by_name,
                                                 get_variables_by_suffix,
                                                 get_variables_to_restore, local_variable,
                                                 model_variable, variable)
