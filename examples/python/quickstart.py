#!/usr/bin/python3
"""recflow from Python: a TensorFlow 1.x program with only the import changed.

  PYTHONPATH=build/python /usr/bin/python3 examples/python/quickstart.py

Fits y = 2 x0 - 3 x1 + 1 by gradient descent with a feed_dict, as in any
TF 1.x tutorial; then shows what the graph holds. See docs/python.md.
"""

import numpy as np

import recflow.compat.v1 as tf


def main():
  rng = np.random.RandomState(0)
  x_data = rng.rand(256, 2).astype(np.float32)
  y_data = x_data.dot([[2.0], [-3.0]]).astype(np.float32) + 1.0

  tf.reset_default_graph()
  x = tf.placeholder(tf.float32, [None, 2], name="x")
  y = tf.placeholder(tf.float32, [None, 1], name="y")
  w = tf.get_variable("w", [2, 1], initializer=tf.zeros_initializer())
  b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
  loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
  train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)

  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(601):
      _, loss_value = sess.run([train_op, loss], feed_dict={x: x_data, y: y_data})
      if step % 200 == 0:
        print("step %3d  loss %.6f" % (step, loss_value))
    w_value, b_value = sess.run([w, b])
  print("w = %s  b = %.4f  (want [2, -3] and 1)" % (np.round(w_value.ravel(), 4), b_value[0]))
  print("the graph has %d nodes; the loss is %s" % (len(tf.get_default_graph().get_operations()),
                                                    loss))
  return {"loss": float(loss_value), "w": w_value, "b": b_value}


if __name__ == "__main__":
  main()
