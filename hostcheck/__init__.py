"""hostcheck: prove that a PyTorch host can feed its GPUs."""

__version__ = "0.1.0"
