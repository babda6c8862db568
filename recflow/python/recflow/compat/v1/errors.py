"""tf.errors: TensorFlow's exception classes and error codes."""

# pylint: disable=unused-import,wildcard-import
from recflow.framework.errors import *  # noqa
from recflow.framework.errors import (OpError, exception_type_from_error_code,
                                      error_code_from_exception_type)
