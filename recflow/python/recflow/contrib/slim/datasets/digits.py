"""scikit-learn's handwritten digits (python3-sklearn's load_digits: 1,797 8x8 grayscale
images of 0-9) as a TF-slim data set.

convert(dataset_dir) writes digits_train.tfrecord (1,437 images) and digits_test.tfrecord
(360), a fixed shuffled 80/20 split, each image PNG-encoded (pixels 0-16 scaled to 0-255)
with TF-slim's keys, and labels.txt. get_split(name, dataset_dir) describes a split for
DatasetDataProvider.
"""

import os

import numpy as np

from recflow.contrib.slim.data import dataset as dataset_lib
from recflow.contrib.slim.data import tfexample_decoder
from recflow.contrib.slim.datasets import dataset_utils
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.lib.io import tf_record
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import parsing_ops

__all__ = ["SPLITS_TO_SIZES", "NUM_CLASSES", "IMAGE_SIZE", "convert", "get_split",
           "load_arrays"]

_FILE_PATTERN = "digits_%s.tfrecord"
SPLITS_TO_SIZES = {"train": 1437, "test": 360}
NUM_CLASSES = 10
IMAGE_SIZE = 8
_SPLIT_SEED = 0
_ITEMS_TO_DESCRIPTIONS = {
    "image": "An 8x8 grayscale image of a handwritten digit (uint8, 0-255).",
    "label": "The digit, between 0 and 9.",
}


def load_arrays():
  """(train_images, train_labels, test_images, test_labels): uint8 [n, 8, 8, 1] images
  (0-255) and int64 labels, split as convert() writes them."""
  try:
    from sklearn import datasets  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ImportError("the digits data set comes from scikit-learn: install Debian's "
                      "python3-sklearn (scripts/install-deps.sh does)")
  digits = datasets.load_digits()
  images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
  labels = digits.target.astype(np.int64)
  order = np.random.RandomState(_SPLIT_SEED).permutation(len(labels))
  images, labels = images[order], labels[order]
  n_test = SPLITS_TO_SIZES["test"]
  return images[n_test:], labels[n_test:], images[:n_test], labels[:n_test]


def _encode_pngs(images):
  """PNG bytes of each [8, 8, 1] uint8 image, encoded by recflow's EncodePng op."""
  from recflow.client import session as session_lib  # pylint: disable=import-outside-toplevel
  graph = ops.Graph()
  with graph.as_default():
    image = array_ops.placeholder(dtypes.uint8, [IMAGE_SIZE, IMAGE_SIZE, 1])
    png = gen.encode_png(image)
    with session_lib.Session(graph=graph) as sess:
      return [sess.run(png, {image: im}) for im in images]


def convert(dataset_dir):
  """Writes the two splits and labels.txt into dataset_dir (made if missing); does nothing
  when they are all there already."""
  if not os.path.isdir(dataset_dir):
    os.makedirs(dataset_dir)
  paths = {s: os.path.join(dataset_dir, _FILE_PATTERN % s) for s in SPLITS_TO_SIZES}
  if all(os.path.exists(p) for p in paths.values()) and dataset_utils.has_labels(dataset_dir):
    return
  train_images, train_labels, test_images, test_labels = load_arrays()
  for split, images, labels in (("train", train_images, train_labels),
                                ("test", test_images, test_labels)):
    tmp = paths[split] + ".tmp"
    with tf_record.TFRecordWriter(tmp) as writer:
      for png, label in zip(_encode_pngs(images), labels):
        example = dataset_utils.image_to_tfexample(png, b"png", IMAGE_SIZE, IMAGE_SIZE, label)
        writer.write(example.SerializeToString())
    os.replace(tmp, paths[split])
  dataset_utils.write_label_file({i: str(i) for i in range(NUM_CLASSES)}, dataset_dir)


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
  """The slim Dataset of split 'train' or 'test' in dataset_dir."""
  if split_name not in SPLITS_TO_SIZES:
    raise ValueError("split name %r was not recognized (digits has %s)"
                     % (split_name, ", ".join(sorted(SPLITS_TO_SIZES))))
  path = os.path.join(dataset_dir, (file_pattern or _FILE_PATTERN) % split_name)
  if not os.path.exists(path):
    raise ValueError("%s is missing: run recflow.contrib.slim.datasets.digits.convert(%r) "
                     "first" % (path, dataset_dir))
  keys_to_features = {
      "image/encoded": parsing_ops.FixedLenFeature((), dtypes.string, default_value=""),
      "image/format": parsing_ops.FixedLenFeature((), dtypes.string, default_value="png"),
      "image/class/label": parsing_ops.FixedLenFeature([], dtypes.int64, default_value=0),
  }
  items_to_handlers = {
      "image": tfexample_decoder.Image(shape=[IMAGE_SIZE, IMAGE_SIZE, 1], channels=1),
      "label": tfexample_decoder.Tensor("image/class/label"),
  }
  decoder = tfexample_decoder.TFExampleDecoder(keys_to_features, items_to_handlers)
  labels_to_names = None
  if dataset_utils.has_labels(dataset_dir):
    labels_to_names = dataset_utils.read_label_file(dataset_dir)
  return dataset_lib.Dataset(data_sources=path, reader=reader, decoder=decoder,
                             num_samples=SPLITS_TO_SIZES[split_name],
                             items_to_descriptions=_ITEMS_TO_DESCRIPTIONS,
                             num_classes=NUM_CLASSES, labels_to_names=labels_to_names)
