"""recflow's graph-building core: dtypes, shapes, Graph/Operation/Tensor, errors."""
