"""Which origins a browser may reach: an explicit allow-list of scheme, host and port
(private).

An origin is written ``http://127.0.0.1:8123`` or ``https://docs.example.com`` (the
default port of the scheme may be left out). Hosts are compared in their canonical form
(lower case, IP addresses in standard notation, international names in punycode: the
network guard's ``canonical_host``), so ``http://LOCALHOST:80`` and ``http://localhost``
are the same origin. ``about:blank``, the empty page, belongs to no origin and is always
allowed: it is where a browser is put back after a refusal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigurationError
from ..tools._netguard import canonical_host

BLANK = "about:blank"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an http(s) URL, or None for any other URL (data:,
    file:, javascript:, chrome-error:...) and for one whose host or port cannot be read."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    if any(c == "\\" or ord(c) <= 32 or c == "\x7f" for c in parts.netloc):
        return None  # parsers disagree on where such a host ends
    return scheme, canonical_host(parts.hostname), port or _DEFAULT_PORTS[scheme]


def _parse(text: Any) -> tuple[str, str, int]:
    bad = ConfigurationError(
        f"allowed_origins: {text!r} is not an origin; give scheme, host and optional port, "
        f"such as 'http://127.0.0.1:8123' or 'https://docs.example.com' (no path, query or user)"
    )
    if not isinstance(text, str):
        raise bad
    parts = urlsplit(text.strip())
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        raise bad
    origin = origin_of(text.strip())
    if origin is None or "*" in origin[1]:
        raise bad
    return origin


@dataclass(frozen=True)
class OriginPolicy:
    """The origins a browser may load pages and resources from."""

    origins: tuple[tuple[str, str, int], ...]

    @classmethod
    def from_option(cls, allowed_origins: Any) -> OriginPolicy:
        """Validate ``allowed_origins`` (a non-empty list of origins), else
        ConfigurationError saying what to give."""
        if isinstance(allowed_origins, str) or not isinstance(allowed_origins, Iterable):
            raise ConfigurationError(
                f"allowed_origins must be a list of origins such as ['http://127.0.0.1:8123'], "
                f"got {allowed_origins!r}"
            )
        origins = tuple(dict.fromkeys(_parse(o) for o in allowed_origins))
        if not origins:
            raise ConfigurationError(
                "allowed_origins is empty: a browser that may load nothing is useless; list the "
                "origins its pages may come from, such as ['http://127.0.0.1:8123']"
            )
        return cls(origins)

    def allows(self, url: str) -> bool:
        """True when ``url`` is ``about:blank`` or belongs to an allowed origin."""
        if url == BLANK:
            return True
        return origin_of(url) in self.origins

    def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be loaded (for the model to read), or None."""
        if self.allows(url):
            return None
        return f"{url} is outside the allowed origins ({self.describe()})"

    def names(self) -> tuple[str, ...]:
        """The allowed origins written out: ``http://127.0.0.1:8123``."""
        return tuple(f"{s}://{h if ':' not in h else f'[{h}]'}:{p}" for s, h, p in self.origins)

    def describe(self) -> str:
        """The allowed origins, comma separated."""
        return ", ".join(self.names())
