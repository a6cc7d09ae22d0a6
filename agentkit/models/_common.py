"""Small helpers shared by the model adapters (published to adapter authors through
:mod:`agentkit.models.adapter`)."""

from __future__ import annotations

import base64
import inspect
import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._json import json_problem, loads
from ..errors import ConfigurationError
from ..messages import Message, ToolOutput, ToolResultPart
from .base import ModelRequest, ToolSpec, tool_choice_problem

_SIGNATURES: dict[Any, frozenset[str]] = {}


def sdk_call_kwargs(create: Callable[..., Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """Split request parameters into the keyword arguments the SDK method declares and
    an ``extra_body`` for the rest, so options newer (or older) than the installed SDK
    still reach the server. An explicit ``extra_body`` is merged last and wins."""
    func = getattr(create, "__func__", create)
    known = _SIGNATURES.get(func)
    if known is None:
        known = frozenset(inspect.signature(create).parameters)
        _SIGNATURES[func] = known
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in params.items():
        if key == "extra_body":
            continue
        if key in known:
            kwargs[key] = value
        else:
            extra[key] = value
    explicit = params.get("extra_body")
    if explicit:
        extra.update(explicit)
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def function_tools(specs: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs in the OpenAI function-tool shape (also what LangChain's
    ``bind_tools`` accepts). Imports no SDK."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": dict(t.input_schema)},
        }
        for t in specs
    ]


def parse_tool_arguments(raw: str) -> tuple[Any, str | None]:
    """(input, input_error) from a model's raw argument text. Empty text is ``{}``;
    text that is not a JSON object (or nests deeper than 500 levels) comes back unchanged
    with an error message."""
    if not raw.strip():
        return {}, None
    try:
        value = loads(raw, strict=True)
    except json.JSONDecodeError as exc:
        return raw, f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    except ValueError as exc:  # NaN or Infinity
        return raw, f"the arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return raw, f"the arguments must be a JSON object, got {type(value).__name__}"
    problem = json_problem(value)
    if problem is not None:
        return raw, f"the arguments are not plain JSON: {problem}"
    return value, None


def data_url(data: bytes, media_type: str) -> str:
    """A ``data:`` URL for inline bytes."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def tool_result_text(output: ToolOutput) -> str:
    """A tool output as text; error results say so for APIs without an error flag."""
    text = output.as_text()
    if output.is_error and not text.lower().startswith("error"):
        return f"Error: {text}"
    return text


def check_tool_choice(request: ModelRequest) -> None:
    """Reject a tool_choice naming a tool the request does not offer."""
    problem = tool_choice_problem(request.tool_choice, [t.name for t in request.tools])
    if problem is not None:
        raise ConfigurationError(problem)


def text_of_file(data: bytes, filename: str | None) -> str:
    """A text file's content as a text block for the model."""
    body = data.decode("utf-8", errors="replace")
    return f"<file name={json.dumps(filename or 'file')}>\n{body}\n</file>"


def is_text_media(media_type: str) -> bool:
    return media_type.startswith("text/") or media_type in (
        "application/json",
        "application/xml",
        "application/x-yaml",
    )


KEY_PLACEHOLDER = "agentkit-resolves-this-key-per-request"
"""What an SDK client built for a callable ``api_key`` holds instead of a key: the adapter
swaps the key the callable returns into the auth header of each request."""


def make_client(
    sdk_class: Any,
    client: Any,
    *,
    api_key: str | Callable[[], str] | None,
    env_key: str,
    base_url: str | None,
    timeout: float | None,
    default_headers: Mapping[str, str] | None,
    label: str,
    read_env: bool = True,
    **extra: Any,
) -> Any:
    """An SDK client with the SDK's own retries off (``max_retries=0``): agentkit's
    retry loop is the only one. A given client is copied with that option (and with
    ``timeout`` / ``default_headers`` when given); it keeps its own key and server, so
    passing those as well is an error. ``read_env=False`` keeps the provider's key in
    ``env_key`` away from a third-party server. A callable ``api_key`` is resolved per
    request by the adapter (:class:`~agentkit.models._sdk.SDKModel`); the client gets
    :data:`KEY_PLACEHOLDER`."""
    if api_key is not None and not isinstance(api_key, str) and not callable(api_key):
        raise ConfigurationError(
            f"{label}: api_key must be a str or a callable returning one (resolved before every "
            f"request), not {type(api_key).__name__}"
        )
    if callable(api_key):
        api_key = KEY_PLACEHOLDER
    if client is not None:
        clashing = [n for n, v in (("api_key", api_key), ("base_url", base_url), *extra.items()) if v]
        if clashing:
            raise ConfigurationError(
                f"{label}: pass either client= or {'=, '.join(clashing)}=, not both (a client "
                f"keeps its own settings; configure it, or leave client= out)"
            )
        overrides: dict[str, Any] = {"max_retries": 0}
        if timeout is not None:
            overrides["timeout"] = timeout
        if default_headers:
            overrides["default_headers"] = dict(default_headers)
        return client.with_options(**overrides)
    key = api_key or (os.environ.get(env_key) if read_env else None)
    if not key:
        if base_url is None:
            raise ConfigurationError(
                f"no {label} API key: set the {env_key} environment variable or pass api_key="
            )
        key = "not-needed"  # local compatible servers usually ignore the key
    options: dict[str, Any] = {"api_key": key, "max_retries": 0}
    for name, value in (("base_url", base_url), ("timeout", timeout), *extra.items()):
        if value is not None:
            options[name] = value
    if default_headers:
        options["default_headers"] = dict(default_headers)
    return sdk_class(**options)


def user_blocks(m: Message, *, tool_result: Callable[[ToolResultPart], dict[str, Any]],
                content_block: Callable[[Any], dict[str, Any] | None], api: str) -> list[dict[str, Any]]:
    """A user (or tool) message's content blocks for an API of content blocks (Anthropic
    Messages, Bedrock Converse): tool results and other parts, each in order; a user
    message of only empty text is refused, since ``api`` rejects it."""
    blocks: list[dict[str, Any]] = []
    for p in m.content:
        if isinstance(p, ToolResultPart):
            blocks.append(tool_result(p))
        else:
            block = content_block(p)
            if block is not None:
                blocks.append(block)
    if not blocks and m.role == "user" and m.content:
        raise ConfigurationError(
            f"a user message holds only empty or whitespace text, which {api} rejects; send some "
            f"text (or leave the message out)"
        )
    return blocks
