"""The ``evals`` extra: importing this module raises MissingDependencyError, naming the
install command, when pydantic-evals is not installed (private)."""

from __future__ import annotations

from ..errors import MissingDependencyError

__all__: list[str] = []

try:
    import pydantic_evals  # noqa: F401
except ImportError as _exc:  # a missing extra is named
    raise MissingDependencyError(
        "pydantic-evals", "evals", "agentkit.evals (evaluations on pydantic-evals)"
    ) from _exc
