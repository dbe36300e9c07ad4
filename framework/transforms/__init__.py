"""Transforms jobs apply between reading and writing."""

from framework.transforms.relationalize import rejoin, relationalize

__all__ = ["rejoin", "relationalize"]
