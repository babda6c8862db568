"""dataset_factory: data sets by name (TF-slim's research repository has cifar10, flowers,
imagenet and mnist; recflow ships digits, which needs no download). register_dataset adds
a program's own."""

from recflow.contrib.slim.datasets import digits

__all__ = ["datasets_map", "get_dataset", "register_dataset"]

datasets_map = {"digits": digits}


def register_dataset(name, module, replace=False):
  """module must have get_split(split_name, dataset_dir, file_pattern=None, reader=None)."""
  if not hasattr(module, "get_split"):
    raise TypeError("register_dataset(%r): %r has no get_split" % (name, module))
  if name in datasets_map and not replace:
    raise ValueError("register_dataset: a data set named %r is already registered" % name)
  datasets_map[name] = module


def get_dataset(name, split_name, dataset_dir, file_pattern=None, reader=None):
  if name not in datasets_map:
    raise ValueError("Name of dataset unknown %s (known: %s)"
                     % (name, ", ".join(sorted(datasets_map))))
  return datasets_map[name].get_split(split_name, dataset_dir, file_pattern, reader)
