"""Built-in HTTP tools on ``requests``: http_get and http_post.

Requests have a timeout, responses are read as a stream and cut at
``max_response_bytes``, and only ``http``/``https`` URLs are accepted. With a
``context``, each request first asks ``context.request_permission`` (operation
``http-get``/``http-post``, target the URL). A status of 400 or more is an error result.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import requests

from ..errors import ConfigurationError
from ..messages import ToolOutput
from ..truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES
from ._common import ask, check_limits, guarded, visible
from .base import Tool, ToolContext

__all__ = ["http_tools"]

_SHOWN_HEADERS = ("content-type", "content-length", "location", "retry-after")


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(
            f"invalid URL {url!r}: give an absolute http:// or https:// URL"
        )


def _check_headers(headers: Any) -> dict[str, str]:
    if headers is None:
        return {}
    return {str(k): str(v) for k, v in headers.items()}


def http_tools(
    context: Any = None,
    *,
    timeout: float = 30.0,
    max_response_bytes: int = 1_048_576,
    max_lines: int = DEFAULT_MAX_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    session: requests.Session | None = None,
) -> list[Tool]:
    """``http_get {url, headers}`` and ``http_post {url, body, headers}``.

    ``body`` is a string (sent as is) or a JSON value (sent as JSON). The model sees
    the status line, a few headers and the body (truncated). ``timeout`` bounds
    connecting and each read; a body longer than ``max_response_bytes`` is cut and
    the result says so.
    """
    if timeout <= 0:
        raise ConfigurationError("timeout must be positive")
    if not isinstance(max_response_bytes, int) or max_response_bytes < 1:
        raise ConfigurationError("max_response_bytes must be a positive int")
    check_limits(max_lines, max_bytes)
    http = session or requests

    def send(method: str, url: str, ctx: ToolContext, **kwargs: Any) -> ToolOutput:
        _check_url(url)
        if context is not None:
            ask(context, ctx, f"http-{method.lower()}", url)
        ctx.cancel.raise_if_cancelled()
        try:
            resp = http.request(method, url, timeout=timeout, stream=True, allow_redirects=True, **kwargs)
        except requests.Timeout:
            return ToolOutput.error(f"{method} {url} timed out after {timeout:g}s")
        except requests.RequestException as exc:
            return ToolOutput.error(f"{method} {url} failed: {type(exc).__name__}: {exc}")
        try:
            body = bytearray()
            cut = False
            for chunk in resp.iter_content(chunk_size=65_536):
                ctx.cancel.raise_if_cancelled()
                body.extend(chunk)
                if len(body) > max_response_bytes:
                    del body[max_response_bytes:]
                    cut = True
                    break
        except requests.RequestException as exc:
            return ToolOutput.error(f"{method} {url}: reading the response failed: {exc}")
        finally:
            resp.close()
        encoding = resp.encoding or "utf-8"
        try:
            text = bytes(body).decode(encoding, errors="replace")
        except LookupError:
            text = bytes(body).decode("utf-8", errors="replace")
        lines = [f"HTTP {resp.status_code} {resp.reason or ''}".rstrip()]
        for name in _SHOWN_HEADERS:
            if name in resp.headers:
                lines.append(f"{name}: {resp.headers[name]}")
        if cut:
            lines.append(f"[response body cut at {max_response_bytes} bytes]")
        out = visible("\n".join(lines) + "\n\n" + text, max_lines, max_bytes)
        return ToolOutput.error(out) if resp.status_code >= 400 else ToolOutput.text(out)

    def http_get(url: str, ctx: ToolContext, headers: dict[str, str] | None = None) -> ToolOutput:
        return send("GET", url, ctx, headers=_check_headers(headers))

    def http_post(url: str, ctx: ToolContext, body: Any = None,
                  headers: dict[str, str] | None = None) -> ToolOutput:
        hdrs = _check_headers(headers)
        if body is None or isinstance(body, str):
            return send("POST", url, ctx, headers=hdrs, data=(body or "").encode("utf-8"))
        hdrs.setdefault("Content-Type", "application/json")
        return send("POST", url, ctx, headers=hdrs, data=json.dumps(body).encode("utf-8"))

    url_prop = {"type": "string", "description": "Absolute http:// or https:// URL"}
    headers_prop = {"type": "object", "additionalProperties": {"type": "string"},
                    "description": "Request headers"}
    return [
        Tool(name="http_get", description="Send an HTTP GET request and return the status and body.",
             input_schema={"type": "object", "properties": {"url": url_prop, "headers": headers_prop},
                           "required": ["url"], "additionalProperties": False},
             fn=guarded("http_get", http_get), context_param="ctx", read_only=True, ),
        Tool(name="http_post",
             description="Send an HTTP POST request; a string body is sent as is, any other JSON "
                         "value as application/json. Returns the status and body.",
             input_schema={"type": "object",
                           "properties": {"url": url_prop, "headers": headers_prop,
                                          "body": {"description": "Text or a JSON value"}},
                           "required": ["url"], "additionalProperties": False},
             fn=guarded("http_post", http_post), context_param="ctx"),
    ]
