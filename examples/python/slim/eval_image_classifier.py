#!/usr/bin/python3
"""Evaluates a TF-slim image classifier's checkpoint on a data set split, as TF-slim's
eval_image_classifier.py does, and prints `test accuracy X` last.

  PYTHONPATH=build/python /usr/bin/python3 examples/python/slim/eval_image_classifier.py \\
      --checkpoint_path=/tmp/recflow_slim/train --dataset_dir=/tmp/recflow_slim/digits

--checkpoint_path may be a checkpoint or a directory (its newest checkpoint is used).
The whole split is read once (one epoch, in order); accuracy and recall@5 are
computed with slim.metrics and slim.evaluation.evaluate_once.
"""

import argparse
import importlib.util
import logging
import os
import sys

import recflow.compat.v1 as tf
from recflow.contrib import slim
from recflow.contrib.slim.datasets import dataset_factory
from recflow.contrib.slim.nets import nets_factory
from recflow.contrib.slim.preprocessing import preprocessing_factory

DEFAULT_ROOT = "/tmp/recflow_slim"


def add_common_flags(parser):
  """The flags train_image_classifier.py shares."""
  parser.add_argument("--dataset_name", default="digits",
                      help="a data set of dataset_factory (default digits)")
  parser.add_argument("--dataset_dir", default=os.path.join(DEFAULT_ROOT, "digits"),
                      help="where the data set's TFRecords are (digits: made if missing)")
  parser.add_argument("--model_name", default="lenet", help="a net of nets_factory")
  parser.add_argument("--preprocessing_name", default=None,
                      help="a preprocessing_factory name (default: 'digits' for the digits "
                           "data set, else the model's name)")
  parser.add_argument("--image_size", type=int, default=None,
                      help="the net's input size (default: the net's default_image_size)")
  parser.add_argument("--nets_module", action="append", default=[],
                      help="a Python file to import first, e.g. one that registers a net "
                           "with nets_factory.register_network (repeatable)")
  parser.add_argument("--batch_size", type=int, default=32, help="examples per step")


def import_nets_modules(paths):
  """Imports each file (it registers its nets with nets_factory)."""
  for path in paths:
    if not os.path.exists(path):
      raise SystemExit("--nets_module: no file %s" % path)
    name = "user_nets_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def preprocessing_name(args):
  if args.preprocessing_name:
    return args.preprocessing_name
  return "digits" if args.dataset_name == "digits" else args.model_name


def image_size(args, network_fn):
  size = args.image_size or getattr(network_fn, "default_image_size", None)
  if not size:
    raise SystemExit("--image_size is needed: %s has no default_image_size" % args.model_name)
  return size


def prepare_dataset(args):
  if args.dataset_name == "digits":
    from recflow.contrib.slim.datasets import digits  # pylint: disable=import-outside-toplevel
    digits.convert(args.dataset_dir)


def evaluate(args, checkpoint_path, split_name="test"):
  """Accuracy of checkpoint_path on split_name: {"accuracy": a, "recall_5": r}."""
  if os.path.isdir(checkpoint_path):
    newest = tf.train.latest_checkpoint(checkpoint_path)
    if newest is None:
      raise SystemExit("no checkpoint in %s" % checkpoint_path)
    checkpoint_path = newest
  with tf.Graph().as_default():
    tf.train.get_or_create_global_step()
    dataset = dataset_factory.get_dataset(args.dataset_name, split_name, args.dataset_dir)
    network_fn = nets_factory.get_network_fn(args.model_name, num_classes=dataset.num_classes,
                                             is_training=False)
    size = image_size(args, network_fn)
    preprocess = preprocessing_factory.get_preprocessing(preprocessing_name(args),
                                                         is_training=False)
    provider = slim.dataset_data_provider.DatasetDataProvider(dataset, shuffle=False,
                                                              num_epochs=1)
    images, labels = provider.get_batch(
        ["image", "label"], args.batch_size,
        preprocess_fn=lambda image, label: (preprocess(image, size, size), label))
    logits, _ = network_fn(images)
    predictions = tf.argmax(logits, 1)
    names_to_values, names_to_updates = slim.metrics.aggregate_metric_map({
        "accuracy": slim.metrics.streaming_accuracy(predictions, labels),
        "recall_5": slim.metrics.streaming_recall_at_k(logits, labels, 5),
    })
    num_batches = -(-dataset.num_samples // args.batch_size)
    return slim.evaluation.evaluate_once(
        "", checkpoint_path, None, num_evals=num_batches,
        eval_op=list(names_to_updates.values()), final_op=names_to_values,
        variables_to_restore=slim.get_variables_to_restore())


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--checkpoint_path", default=os.path.join(DEFAULT_ROOT, "train"),
                      help="a checkpoint, or a directory whose newest checkpoint is used")
  parser.add_argument("--dataset_split_name", default="test")
  add_common_flags(parser)
  args = parser.parse_args(argv)
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
  import_nets_modules(args.nets_module)
  prepare_dataset(args)
  values = evaluate(args, args.checkpoint_path, args.dataset_split_name)
  print("recall@5 %.4f" % values["recall_5"])
  print("%s accuracy %.4f" % (args.dataset_split_name, values["accuracy"]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
