"""nets_factory: networks by name, each with its arg_scope, as TF-slim's research repository
has it; plus register_network for a program's own nets.

    network_fn = nets_factory.get_network_fn("lenet", num_classes=10, weight_decay=0.0,
                                             is_training=True)
    logits, end_points = network_fn(images)     # network_fn.default_image_size == 28

To add a net without editing recflow, define it in a file of your own (a function
net(images, num_classes, is_training, ...) -> (logits, end_points), and an arg_scope
function taking weight_decay) and register it:

    nets_factory.register_network("my_lenet", my_lenet.my_lenet, my_lenet.my_lenet_arg_scope)
"""

import functools

from recflow.contrib import slim
from recflow.contrib.slim.nets import cifarnet
from recflow.contrib.slim.nets import lenet
from recflow.contrib.slim.nets import mobilenet_v1
from recflow.contrib.slim.nets import resnet_v1

__all__ = ["arg_scopes_map", "get_network_fn", "networks_map", "register_network"]

networks_map = {
    "cifarnet": cifarnet.cifarnet,
    "lenet": lenet.lenet,
    "mobilenet_v1": mobilenet_v1.mobilenet_v1,
    "mobilenet_v1_075": mobilenet_v1.mobilenet_v1_075,
    "mobilenet_v1_050": mobilenet_v1.mobilenet_v1_050,
    "mobilenet_v1_025": mobilenet_v1.mobilenet_v1_025,
    "resnet_v1_50": resnet_v1.resnet_v1_50,
    "resnet_v1_101": resnet_v1.resnet_v1_101,
    "resnet_v1_152": resnet_v1.resnet_v1_152,
    "resnet_v1_200": resnet_v1.resnet_v1_200,
}

arg_scopes_map = {
    "cifarnet": cifarnet.cifarnet_arg_scope,
    "lenet": lenet.lenet_arg_scope,
    "mobilenet_v1": mobilenet_v1.mobilenet_v1_arg_scope,
    "mobilenet_v1_075": mobilenet_v1.mobilenet_v1_arg_scope,
    "mobilenet_v1_050": mobilenet_v1.mobilenet_v1_arg_scope,
    "mobilenet_v1_025": mobilenet_v1.mobilenet_v1_arg_scope,
    "resnet_v1_50": resnet_v1.resnet_arg_scope,
    "resnet_v1_101": resnet_v1.resnet_arg_scope,
    "resnet_v1_152": resnet_v1.resnet_arg_scope,
    "resnet_v1_200": resnet_v1.resnet_arg_scope,
}


def register_network(name, network_fn, arg_scope_fn, replace=False):
  """Makes get_network_fn(name) build network_fn under arg_scope_fn(weight_decay=...).
  A name already registered is refused unless replace."""
  if not isinstance(name, str) or not name:
    raise ValueError("register_network: name must be a non-empty string, got %r" % (name,))
  if not callable(network_fn) or not callable(arg_scope_fn):
    raise TypeError("register_network(%r): network_fn and arg_scope_fn must be callable" % name)
  if name in networks_map and not replace:
    raise ValueError("register_network: a network named %r is already registered (pass "
                     "replace=True to replace it)" % name)
  networks_map[name] = network_fn
  arg_scopes_map[name] = arg_scope_fn


def get_network_fn(name, num_classes, weight_decay=0.0, is_training=False):
  """A function images -> (logits, end_points) building network `name` for num_classes
  (0 or None: the features before the logits) under its arg_scope with weight_decay."""
  if name not in networks_map:
    raise ValueError("Name of network unknown %s (known: %s)"
                     % (name, ", ".join(sorted(networks_map))))
  func = networks_map[name]
  arg_scope_fn = arg_scopes_map[name]

  @functools.wraps(func)
  def network_fn(images, **kwargs):
    with slim.arg_scope(arg_scope_fn(weight_decay=weight_decay)):
      return func(images, num_classes=num_classes, is_training=is_training, **kwargs)
  if hasattr(func, "default_image_size"):
    network_fn.default_image_size = func.default_image_size
  return network_fn
