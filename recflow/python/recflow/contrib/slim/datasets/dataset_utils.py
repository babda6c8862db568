"""Helpers for data set converters: tf.train.Feature builders, an image as a tf.Example,
and the labels.txt file mapping class ids to names."""

import os

from recflow.framework import example_pb2

__all__ = ["LABELS_FILENAME", "bytes_feature", "float_feature", "has_labels",
           "image_to_tfexample", "int64_feature", "read_label_file", "write_label_file"]

LABELS_FILENAME = "labels.txt"


def _as_list(values):
  return list(values) if isinstance(values, (tuple, list)) else [values]


def int64_feature(values):
  return example_pb2.Feature(int64_list=example_pb2.Int64List(value=_as_list(values)))


def bytes_feature(values):
  return example_pb2.Feature(bytes_list=example_pb2.BytesList(value=_as_list(values)))


def float_feature(values):
  return example_pb2.Feature(float_list=example_pb2.FloatList(value=_as_list(values)))


def image_to_tfexample(image_data, image_format, height, width, class_id):
  """A tf.Example with TF-slim's image keys: image/encoded, image/format,
  image/class/label, image/height, image/width."""
  if isinstance(image_format, str):
    image_format = image_format.encode()
  return example_pb2.Example(features=example_pb2.Features(feature={
      "image/encoded": bytes_feature(image_data),
      "image/format": bytes_feature(image_format),
      "image/class/label": int64_feature(int(class_id)),
      "image/height": int64_feature(int(height)),
      "image/width": int64_feature(int(width)),
  }))


def write_label_file(labels_to_class_names, dataset_dir, filename=LABELS_FILENAME):
  """Writes "id:name" lines, by id."""
  with open(os.path.join(dataset_dir, filename), "w") as f:
    for label in sorted(labels_to_class_names):
      f.write("%d:%s\n" % (label, labels_to_class_names[label]))


def has_labels(dataset_dir, filename=LABELS_FILENAME):
  return os.path.exists(os.path.join(dataset_dir, filename))


def read_label_file(dataset_dir, filename=LABELS_FILENAME):
  """{id: name} from the labels file; a malformed line is an error naming it."""
  path = os.path.join(dataset_dir, filename)
  labels = {}
  with open(path) as f:
    for number, line in enumerate(f, 1):
      line = line.rstrip("\n")
      if not line:
        continue
      index = line.find(":")
      try:
        labels[int(line[:index])] = line[index + 1:]
      except ValueError:
        raise ValueError("%s:%d: expected 'id:name', got %r" % (path, number, line))
  return labels
