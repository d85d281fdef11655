"""Importable helpers for the torch.multiprocessing notebook series."""

__version__ = "0.1.0"
