"""tf.distribute (TF 1.x): cluster_resolver.TFConfigClusterResolver, for ps/worker jobs
started under TF_CONFIG (docs/python.md, "Distributed training from Python")."""

from recflow.compat.v1.distribute import cluster_resolver  # pylint: disable=unused-import
