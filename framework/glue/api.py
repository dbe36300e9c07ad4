"""The base of deltamark's awsglue classes."""

from __future__ import annotations

from typing import Any

from framework.errors import GlueUnsupportedAttributeError

__all__ = ["GlueApi"]


class GlueApi:
    """An awsglue class: a public name it does not have is a Glue call deltamark does not
    serve, which fails with the one-line error naming it (not a bare AttributeError)."""

    #: how scripts name the object (``GlueContext``, ``glueContext.write_dynamic_frame``)
    glue_name = "awsglue"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise GlueUnsupportedAttributeError(
            f"{self.glue_name}.{name}", "the calls served are listed in docs/glue.md")
