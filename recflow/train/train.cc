// recflow/train: optimizers, losses, metrics, training loop (see DESIGN.md).
