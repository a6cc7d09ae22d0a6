"""Built-in HTTP tools on ``requests``: http_get and http_post.

Requests have a timeout, responses are read as a stream and cut at
``max_response_bytes``, and only ``http``/``https`` URLs are accepted. By default only
public addresses are reachable: a URL whose host is, or resolves to, a loopback, private,
link-local (cloud metadata), unspecified, multicast or carrier-grade NAT address is
refused (``allow_private_networks`` opts in, ``allowed_hosts`` narrows), and the check is
made on the address actually connected to (see ``_netguard`` and ``_http_transport``).
With a ``context``, each request also asks ``context.request_permission`` (operation
``http-get``/``http-post``, target the URL). Redirects are followed here, hop by hop, so
every URL the tool reaches is checked and asked for the same way (a redirect cannot
smuggle a request to a host the policy or the permission handler would refuse), and
credentials are not carried to another host. A status of 400 or more is an error result.
The values of ``Authorization``, ``Proxy-Authorization``, ``Cookie`` and ``X-Api-Key``
request headers are sent but never recorded (``Tool.redact_input``). POST, PUT, PATCH and
DELETE requests carry ``Idempotency-Key: <ctx.idempotency_key>`` (the same for one call
in every retry, resume and process), replacing one the model put in ``headers``; a lent
``session`` whose headers name ``Idempotency-Key`` (a value, or None for none) is the
user's own choice and is sent instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from email.message import Message
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from ..context._truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES
from ..errors import ConfigurationError
from ..messages import ToolOutput
from ..session._redaction import REDACTED
from ._common import ask, check_limits, guarded, visible
from ._http_transport import GuardedAdapter
from ._netguard import AddressRefused, NetworkPolicy, check_http_url
from .base import Tool, ToolContext

_SHOWN_HEADERS = ("content-type", "content-length", "location", "retry-after")
_CREDENTIALS = ("authorization", "proxy-authorization", "cookie")
_SECRET_HEADERS = frozenset((*_CREDENTIALS, "x-api-key"))
_IDEMPOTENCY_KEY = "Idempotency-Key"
_UNSAFE_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))


def _hide_secret_headers(data: Any) -> Any:
    """The input as it is recorded: the values of credential headers replaced (the
    request still sends them)."""
    headers = data.get("headers") if isinstance(data, dict) else None
    if not isinstance(headers, dict) or not any(str(k).lower() in _SECRET_HEADERS for k in headers):
        return data
    hidden = {k: REDACTED if str(k).lower() in _SECRET_HEADERS else v for k, v in headers.items()}
    return {**data, "headers": hidden}


def _check_headers(headers: Any) -> dict[str, str]:
    if headers is None:
        return {}
    return {str(k): str(v) for k, v in headers.items()}


def _charset(content_type: str | None) -> str:
    """The charset a Content-Type names, else UTF-8 (not ISO-8859-1: what servers that
    omit it actually send today)."""
    msg = Message()
    msg["content-type"] = content_type or "application/octet-stream"
    return str(msg.get_param("charset") or "utf-8")


def _redirected(method: str, status: int, kwargs: dict[str, Any], old_url: str,
                new_url: str) -> tuple[str, dict[str, Any]]:
    """The method and request options for following a redirect, as browsers do: 303
    (and 301/302 after a POST) become a GET without a body; credentials are dropped
    when the host changes."""
    kwargs = dict(kwargs)
    headers = dict(kwargs.get("headers") or {})
    if status == 303 or (status in (301, 302) and method == "POST"):
        method = "GET"
        kwargs.pop("data", None)
        headers = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "content-length")}
    if urlsplit(old_url).hostname != urlsplit(new_url).hostname:
        headers = {k: v for k, v in headers.items() if k.lower() not in _CREDENTIALS}
    kwargs["headers"] = headers
    return method, kwargs


class _Http:
    """The HTTP tools' client: one call's requests, redirects (each target checked and
    asked for) and response, under the options :func:`http_tools` was given."""

    def __init__(self, context: Any, policy: NetworkPolicy, session: requests.Session | None, timeout: float,
                 max_response_bytes: int, max_redirects: int, max_lines: int, max_bytes: int) -> None:
        self.context = context
        self.policy = policy
        self.session = session
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.max_redirects = max_redirects
        self.max_lines = max_lines
        self.max_bytes = max_bytes

    def request(self, adapter: GuardedAdapter, method: str, url: str, key: str | None,
                **kwargs: Any) -> requests.Response:
        """One request, prepared with the lent ``session``'s settings when given and sent directly
        (no proxy) through the address-checked ``adapter``; a POST, PUT, PATCH or DELETE carries
        the call's idempotency ``key`` unless the lent session sets that header itself."""
        headers = requests.structures.CaseInsensitiveDict(kwargs.pop("headers", None) or {})
        if key is not None and method in _UNSAFE_METHODS and (
                self.session is None or _IDEMPOTENCY_KEY not in self.session.headers):
            headers[_IDEMPOTENCY_KEY] = key
        req = requests.Request(method, url, headers=headers, **kwargs)
        if self.session is None:
            req.headers = requests.utils.default_headers()
            req.headers.update(headers)
            return adapter.send(req.prepare(), stream=True, timeout=self.timeout, proxies={})
        prepared = self.session.prepare_request(req)
        resp = adapter.send(prepared, stream=True, timeout=self.timeout, verify=self.session.verify,
                            cert=self.session.cert, proxies={})
        requests.cookies.extract_cookies_to_jar(self.session.cookies, prepared, resp.raw)
        return resp

    def send(self, method: str, url: str, ctx: ToolContext, **kwargs: Any) -> ToolOutput:
        adapter = GuardedAdapter(self.policy)  # one per call: its connections close with it
        try:
            return self.exchange(adapter, method, url, ctx, **kwargs)
        finally:
            adapter.close()

    def exchange(self, adapter: GuardedAdapter, method: str, url: str, ctx: ToolContext,
                 **kwargs: Any) -> ToolOutput:
        first_url = url
        for _ in range(self.max_redirects + 1):
            check_http_url(url)
            refused = self.policy.check_url(url)
            if refused is not None:
                return ToolOutput.error(f"{method} {url} refused: {refused}")
            if self.context is not None:
                ask(self.context, ctx, f"http-{method.lower()}", url)
            ctx.cancel.raise_if_cancelled()
            try:
                resp = self.request(adapter, method, url, ctx.idempotency_key, **kwargs)
            except AddressRefused as exc:
                return ToolOutput.error(f"{method} {url} refused: {exc}")
            except requests.Timeout:
                return ToolOutput.error(f"{method} {url} timed out after {self.timeout:g}s")
            except requests.RequestException as exc:
                return ToolOutput.error(f"{method} {url} failed: {type(exc).__name__}: {exc}")
            if not resp.is_redirect:
                break
            resp.close()
            target = urljoin(url, resp.headers["location"])
            method, kwargs = _redirected(method, resp.status_code, kwargs, url, target)
            url = target
        else:
            return ToolOutput.error(
                f"{method} {url}: more than {self.max_redirects} redirects; request the final URL directly"
            )
        try:
            body = bytearray()
            cut = False
            for chunk in resp.iter_content(chunk_size=65_536):
                ctx.cancel.raise_if_cancelled()
                body.extend(chunk)
                if len(body) > self.max_response_bytes:
                    del body[self.max_response_bytes:]
                    cut = True
                    break
        except requests.RequestException as exc:
            return ToolOutput.error(f"{method} {url}: reading the response failed: {exc}")
        finally:
            resp.close()
        if b"\x00" in body[:8192]:  # binary: its bytes would cost tokens and say nothing
            text = f"[binary body of {len(body)} bytes, not shown]"
        else:
            try:
                text = bytes(body).decode(_charset(resp.headers.get("content-type")), errors="replace")
            except LookupError:
                text = bytes(body).decode("utf-8", errors="replace")
        lines = [f"HTTP {resp.status_code} {resp.reason or ''}".rstrip()]
        if url != first_url:
            lines.append(f"(redirected to {url})")
        for name in _SHOWN_HEADERS:
            if name in resp.headers:
                lines.append(f"{name}: {resp.headers[name]}")
        if cut:
            lines.append(f"[response body cut at {self.max_response_bytes} bytes]")
        out = visible("\n".join(lines) + "\n\n" + text, self.max_lines, self.max_bytes)
        return ToolOutput.error(out) if resp.status_code >= 400 else ToolOutput.text(out)


def http_tools(
    context: Any = None,
    *,
    timeout: float = 30.0,
    max_response_bytes: int = 1_048_576,
    max_lines: int = DEFAULT_MAX_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_redirects: int = 5,
    session: requests.Session | None = None,
    allowed_hosts: Iterable[str] | None = None,
    allow_private_networks: bool | Iterable[str] = False,
) -> list[Tool]:
    """``http_get {url, headers}`` and ``http_post {url, body, headers}``.

    ``body`` is a string (sent as is) or a JSON value (sent as JSON). The model sees
    the status line, a few headers and the body (truncated). ``timeout`` bounds
    connecting and each read; a body longer than ``max_response_bytes`` is cut and
    the result says so. At most ``max_redirects`` redirects are followed, each target
    checked and (with a ``context``) asked for like the first URL.

    Only public addresses are reachable unless ``allow_private_networks`` is True (any
    host) or a list of host patterns (those hosts only): loopback, private, link-local
    (cloud metadata), unspecified, multicast and carrier-grade NAT addresses are refused,
    in any notation and whatever name resolves to them, checked on the address connected
    to. ``allowed_hosts`` (hosts, ``*.example.com`` globs, IP addresses, each optionally
    with ``:port``) limits the tools to those hosts. ``session`` lends its headers,
    cookies, auth and ``verify``/``cert`` settings; the connection itself is always the
    tools' own, direct (never through a proxy) and address-checked.

    A POST (and a PUT, PATCH or DELETE) sends ``Idempotency-Key: <ctx.idempotency_key>``
    when the call has one (every call of a generation does), so a server that honours it
    does a resent request's work once; the key replaces an ``Idempotency-Key`` the model
    put in ``headers``, and is left out when the lent ``session``'s headers name that
    header (their value, or None for no header, is the user's choice).
    """
    if timeout <= 0:
        raise ConfigurationError("timeout must be positive")
    if not isinstance(max_response_bytes, int) or max_response_bytes < 1:
        raise ConfigurationError("max_response_bytes must be a positive int")
    if not isinstance(max_redirects, int) or max_redirects < 0:
        raise ConfigurationError("max_redirects must be an int >= 0")
    check_limits(max_lines, max_bytes)
    policy = NetworkPolicy.from_options(allowed_hosts, allow_private_networks)

    client = _Http(context, policy, session, timeout, max_response_bytes, max_redirects, max_lines, max_bytes)
    send = client.send

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
             fn=guarded("http_get", http_get), context_param="ctx", read_only=True,
             redact_input=_hide_secret_headers),
        Tool(name="http_post",
             description="Send an HTTP POST request; a string body is sent as is, any other JSON "
                         "value as application/json. Returns the status and body.",
             input_schema={"type": "object",
                           "properties": {"url": url_prop, "headers": headers_prop,
                                          "body": {"description": "Text or a JSON value"}},
                           "required": ["url"], "additionalProperties": False},
             fn=guarded("http_post", http_post), context_param="ctx", redact_input=_hide_secret_headers),
    ]
