"""deepnmt-repro: a small PyTorch library for deep-Transformer NMT studies."""

__version__ = "0.1.0"
