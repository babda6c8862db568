"""tf.dtypes."""

# pylint: disable=unused-import,redefined-builtin
from recflow.framework.dtypes import (DType, as_dtype, bfloat16, bool, complex64, complex128,
                                      double, float16, float32, float64, half, int8, int16,
                                      int32, int64, qint8, qint16, qint32, quint8, quint16,
                                      resource, string, uint8, uint16, uint32, uint64, variant)
