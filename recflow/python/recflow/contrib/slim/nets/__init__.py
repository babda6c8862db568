"""TF-slim's model library on recflow: lenet, cifarnet, mobilenet_v1, resnet_v1 (with
resnet_utils) and nets_factory, which maps names to networks and lets a program register
its own (docs/slim.md, "Adding a net")."""
