"""Helpers shared by the LangChain adapter modules. Nothing here imports langchain-core
at import time."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from ...errors import MissingDependencyError
from ...models.base import FinishReason
from ...usage import Usage

__all__: list[str] = []


def require_langchain(feature: str) -> None:
    """Raise MissingDependencyError naming the extra when langchain-core is missing."""
    try:
        import langchain_core  # noqa: F401
    except ImportError:
        raise MissingDependencyError("langchain-core", "langchain", feature) from None


def usage_from_langchain(metadata: Mapping[str, Any] | None) -> Usage | None:
    """A LangChain ``usage_metadata`` dict as an agentkit Usage (None stays None)."""
    if not metadata:
        return None
    details = metadata.get("input_token_details") or {}
    inp = int(metadata.get("input_tokens") or 0)
    out = int(metadata.get("output_tokens") or 0)
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=int(metadata.get("total_tokens") or inp + out),
        cache_read_tokens=int(details.get("cache_read") or 0),
        cache_write_tokens=int(details.get("cache_creation") or 0),
    )


_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "eos": "stop",
    "complete": "stop",
    "length": "length",
    "max_tokens": "length",
    "model_length": "length",
    "tool_calls": "tool-calls",
    "tool_use": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
    "safety": "content-filter",
    "refusal": "content-filter",
    "recitation": "content-filter",
    "prohibited_content": "content-filter",
    "error": "error",
}


def finish_reason_from_langchain(metadata: Mapping[str, Any] | None) -> tuple[FinishReason, str] | None:
    """(agentkit reason, raw value) from a message's ``response_metadata``, or None when
    the model did not say why it stopped (OpenAI ``finish_reason``, Anthropic
    ``stop_reason``, Ollama ``done_reason``)."""
    if not metadata:
        return None
    for key in ("finish_reason", "stop_reason", "done_reason"):
        raw = metadata.get(key)
        if isinstance(raw, str) and raw:
            return _FINISH.get(raw.lower(), "other"), raw
    return None


def _json_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json")
        except TypeError:  # pydantic v1 style model_dump without mode
            return dump()
    legacy = getattr(value, "dict", None)
    if callable(legacy) and hasattr(value, "__fields__"):
        return legacy()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


def jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON, so a live session and one restored from a
    store hold equal data: tuples become lists, pydantic models and dataclasses dicts,
    bytes base64 text, anything else its repr."""
    try:
        return json.loads(json.dumps(value, default=_json_default))
    except (TypeError, ValueError, RecursionError):  # circular or exotic: keep a readable trace
        return repr(value)
