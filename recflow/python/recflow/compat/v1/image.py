"""tf.image (TF 1.x names): resizing (bilinear), PNG/JPEG decoding and
encoding, convert_image_dtype, per_image_standardization."""

# pylint: disable=unused-import
from recflow.ops.image_ops import (ResizeMethod, convert_image_dtype, decode_image, decode_jpeg,
                                   decode_png, encode_jpeg, encode_png, per_image_standardization,
                                   resize, resize_bilinear, resize_images)
