"""The transforms Glue scripts import with ``from awsglue.transforms import *``."""

from __future__ import annotations

from typing import Any

from framework.glue.dynamicframe import DynamicFrame, DynamicFrameCollection

__all__ = ["Relationalize"]


class Relationalize:
    """``Relationalize.apply(frame=..., staging_path=..., name="root")``: Glue's layout, with
    deterministic keys (``framework.transforms.relationalize``)."""

    @staticmethod
    def apply(frame: DynamicFrame, staging_path: str = "", name: str = "roottable",
              options: Any = None, transformation_ctx: str = "", **_: Any
              ) -> DynamicFrameCollection:
        return frame.relationalize(name, staging_path)
