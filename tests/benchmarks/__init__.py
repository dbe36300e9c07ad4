"""Benchmarks: each prints its figures beside a baseline measured in the same run."""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def medians(bench: str, times: Mapping[K, Sequence[float]]) -> dict[K, float]:
    """Each series' median, after printing every sample (``bench_x samples: ...``): a
    reader sees how far the rounds spread."""
    def label(key: K) -> str:
        return " ".join(key) if isinstance(key, tuple) else str(key)

    print(f"{bench} samples: " + "; ".join(
        f"{label(key)} {', '.join(f'{t:.2f}' for t in values)}" for key, values in times.items()))
    return {key: statistics.median(values) for key, values in times.items()}
