#!/usr/bin/python3
"""Trains a TF-slim image classifier on recflow, as TF-slim's train_image_classifier.py
does, then evaluates it on the test split and prints `test accuracy X` last.

  PYTHONPATH=build/python /usr/bin/python3 examples/python/slim/train_image_classifier.py

With no arguments: LeNet on scikit-learn's 8x8 digits (converted to TFRecords in
/tmp/recflow_slim/digits on first use, resized to 28x28 in the input pipeline), momentum
SGD, checkpoints in /tmp/recflow_slim/train. The pieces are TF-slim's: nets_factory,
dataset_factory, a DatasetDataProvider, model_deploy clones, slim.learning.train and
slim.evaluation. --export_dir also writes a SavedModel that `recflow serve` serves (a
classify signature over tf.Example "pixels", and a predict signature over images); see
examples/python/slim/README.md.

A net of your own: put it in a file that registers it with
nets_factory.register_network and pass --nets_module=FILE --model_name=NAME
(examples/python/slim/nets/my_lenet.py is one).
"""

import argparse
import logging
import os
import shutil
import sys

import recflow.compat.v1 as tf
from recflow.contrib import slim
from recflow.contrib.slim.datasets import dataset_factory
from recflow.contrib.slim.deployment import model_deploy
from recflow.contrib.slim.nets import nets_factory
from recflow.contrib.slim.preprocessing import preprocessing_factory

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_image_classifier as evaluation  # noqa: E402  pylint: disable=wrong-import-position


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--train_dir", default=os.path.join(evaluation.DEFAULT_ROOT, "train"),
                      help="checkpoints and summaries")
  parser.add_argument("--fresh", action="store_true",
                      help="delete --train_dir first (otherwise training resumes from it)")
  parser.add_argument("--max_number_of_steps", type=int, default=1500,
                      help="stop at this global step")
  parser.add_argument("--optimizer", default="momentum",
                      choices=["sgd", "momentum", "adam", "adagrad", "ftrl"])
  parser.add_argument("--learning_rate", type=float, default=0.01)
  parser.add_argument("--momentum", type=float, default=0.9)
  parser.add_argument("--weight_decay", type=float, default=0.0,
                      help="L2 weight decay given to the net's arg_scope")
  parser.add_argument("--num_clones", type=int, default=1,
                      help="model clones on this machine (model_deploy)")
  parser.add_argument("--log_every_n_steps", type=int, default=100)
  parser.add_argument("--save_interval_secs", type=int, default=600)
  parser.add_argument("--save_summaries_secs", type=int, default=600)
  parser.add_argument("--seed", type=int, default=0, help="graph-level random seed")
  parser.add_argument("--export_dir", default=None,
                      help="also export a SavedModel here (e.g. BASE/1 for recflow serve)")
  parser.add_argument("--no_eval", action="store_true", help="skip the test-split evaluation")
  evaluation.add_common_flags(parser)
  return parser.parse_args(argv)


def _optimizer(args):
  if args.optimizer == "sgd":
    return tf.train.GradientDescentOptimizer(args.learning_rate)
  if args.optimizer == "momentum":
    return tf.train.MomentumOptimizer(args.learning_rate, args.momentum)
  if args.optimizer == "adam":
    return tf.train.AdamOptimizer(args.learning_rate)
  if args.optimizer == "adagrad":
    return tf.train.AdagradOptimizer(args.learning_rate)
  return tf.train.FtrlOptimizer(args.learning_rate)


def train(args):
  """Trains to --max_number_of_steps; returns the last loss."""
  with tf.Graph().as_default():
    tf.set_random_seed(args.seed)
    config = model_deploy.DeploymentConfig(num_clones=args.num_clones)
    with tf.device(config.variables_device()):
      global_step = tf.train.get_or_create_global_step()
    dataset = dataset_factory.get_dataset(args.dataset_name, "train", args.dataset_dir)
    network_fn = nets_factory.get_network_fn(args.model_name, num_classes=dataset.num_classes,
                                             weight_decay=args.weight_decay, is_training=True)
    size = evaluation.image_size(args, network_fn)
    preprocess = preprocessing_factory.get_preprocessing(evaluation.preprocessing_name(args),
                                                         is_training=True)
    with tf.device(config.inputs_device()):
      provider = slim.dataset_data_provider.DatasetDataProvider(
          dataset, shuffle=True, common_queue_capacity=2 * dataset.num_samples,
          seed=args.seed)
      batches = provider.batch_iterator(
          ["image", "label"], args.batch_size, drop_remainder=True,
          preprocess_fn=lambda image, label: (preprocess(image, size, size), label))

    def clone_fn(batches):
      images, labels = batches.get_next()
      logits, end_points = network_fn(images)
      tf.losses.softmax_cross_entropy(
          slim.one_hot_encoding(labels, dataset.num_classes), logits)
      return end_points

    clones = model_deploy.create_clones(config, clone_fn, [batches])
    with tf.device(config.optimizer_device()):
      optimizer = _optimizer(args)
      total_loss, grads_and_vars = model_deploy.optimize_clones(clones, optimizer)
      tf.summary.scalar("total_loss", total_loss)
      update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, clones[0].scope or None)
      with tf.control_dependencies(update_ops):
        apply = optimizer.apply_gradients(grads_and_vars, global_step=global_step)
      with tf.control_dependencies([apply]):
        train_op = tf.identity(total_loss, name="train_op")
    return slim.learning.train(train_op, args.train_dir,
                               number_of_steps=args.max_number_of_steps,
                               log_every_n_steps=args.log_every_n_steps,
                               save_interval_secs=args.save_interval_secs,
                               save_summaries_secs=args.save_summaries_secs)


def export(args, export_dir):
  """A SavedModel of the newest checkpoint: "serving_default" classifies tf.Examples whose
  float feature "pixels" holds an image's H*W*C values (0-255, row-major); "predict_images"
  takes images [batch, H, W, C]. Both resize and scale the images as training did."""
  if os.path.exists(export_dir):
    raise SystemExit("--export_dir %s exists; remove it or choose a new version" % export_dir)
  checkpoint = tf.train.latest_checkpoint(args.train_dir)
  with tf.Graph().as_default():
    dataset = dataset_factory.get_dataset(args.dataset_name, "test", args.dataset_dir)
    image_shape = dataset.decoder._items_to_handlers["image"]._shape  # pylint: disable=protected-access
    height, width, channels = image_shape
    network_fn = nets_factory.get_network_fn(args.model_name, num_classes=dataset.num_classes,
                                             is_training=False)
    size = evaluation.image_size(args, network_fn)
    serialized = tf.placeholder(tf.string, [None], name="tf_example")
    features = tf.parse_example(serialized, {
        "pixels": tf.FixedLenFeature([height * width * channels], tf.float32)})
    images = tf.placeholder_with_default(
        tf.reshape(features["pixels"], [-1, height, width, channels]),
        [None, height, width, channels], name="images")
    resized = tf.image.resize_bilinear(images, [size, size], half_pixel_centers=True)
    logits, _ = network_fn(resized / 127.5 - 1.0)
    scores = tf.nn.softmax(logits, name="scores")
    names = tf.constant([dataset.labels_to_names[i] for i in range(dataset.num_classes)])
    classes = tf.tile(tf.expand_dims(names, 0), tf.stack([tf.shape(scores)[0], 1]))
    builder = tf.saved_model.builder.SavedModelBuilder(export_dir)
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, checkpoint)
      builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={
          "serving_default": tf.saved_model.signature_def_utils.classification_signature_def(
              serialized, classes, scores),
          "predict_images": tf.saved_model.signature_def_utils.predict_signature_def(
              {"images": images}, {"scores": scores, "classes": tf.argmax(scores, 1)}),
      })
    builder.save()
  print("exported %s to %s" % (checkpoint, export_dir))


def main(argv=None):
  args = parse_args(argv)
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
  evaluation.import_nets_modules(args.nets_module)
  evaluation.prepare_dataset(args)
  if args.fresh and os.path.isdir(args.train_dir):
    shutil.rmtree(args.train_dir)
  loss = train(args)
  print("final training loss %s" % loss)
  if args.export_dir:
    export(args, args.export_dir)
  if not args.no_eval:
    values = evaluation.evaluate(args, args.train_dir)
    print("test accuracy %.4f" % values["accuracy"])
  return 0


if __name__ == "__main__":
  sys.exit(main())
