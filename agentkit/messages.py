"""Messages: what a model sees.

A :class:`Message` has a role (``system``, ``user``, ``assistant`` or ``tool``) and a flat
tuple of content parts. Messages are built from events right before an inference
(:mod:`agentkit.context`); they are never the canonical state.

Serialisation to and from plain JSON-ready dicts lives here and nowhere else.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from .errors import ConfigurationError

__all__ = [
    "ContentPart",
    "FilePart",
    "ImagePart",
    "Message",
    "Prompt",
    "ReasoningPart",
    "Role",
    "TextPart",
    "ToolCallPart",
    "ToolOutput",
    "ToolResultPart",
    "content_from_dict",
    "content_to_dict",
    "normalize_prompt",
    "text_of",
]

Role = Literal["system", "user", "assistant", "tool"]
ToolOutputKind = Literal["text", "json", "content", "error-text", "error-json"]


@dataclass(frozen=True, kw_only=True)
class TextPart:
    """Plain text."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, kw_only=True)
class ImagePart:
    """An image, given inline (``data``) or by ``url``."""

    data: bytes | None = None
    """Raw image bytes (not base64)."""
    url: str | None = None
    """An http(s) or ``data:`` URL."""
    media_type: str = "image/png"
    kind: Literal["image"] = "image"

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise ConfigurationError("ImagePart needs exactly one of data= (bytes) or url=")

    @classmethod
    def from_base64(cls, b64: str, media_type: str = "image/png") -> ImagePart:
        """Build an image part from a base64 string."""
        return cls(data=base64.b64decode(b64), media_type=media_type)

    def base64(self) -> str:
        """The inline bytes as base64 (raises if the image is a URL)."""
        if self.data is None:
            raise ConfigurationError("this ImagePart is a URL; it has no inline data")
        return base64.b64encode(self.data).decode("ascii")


@dataclass(frozen=True, kw_only=True)
class FilePart:
    """A file (for example a PDF), inline or by URL."""

    data: bytes | None = None
    url: str | None = None
    media_type: str = "application/octet-stream"
    filename: str | None = None
    kind: Literal["file"] = "file"

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise ConfigurationError("FilePart needs exactly one of data= (bytes) or url=")


@dataclass(frozen=True, kw_only=True)
class ReasoningPart:
    """Model reasoning ("thinking").

    ``signature`` and ``redacted_data`` are opaque provider values that must be sent back
    unchanged on the next request (Anthropic extended thinking).
    """

    text: str = ""
    signature: str | None = None
    redacted_data: str | None = None
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, kw_only=True)
class ToolCallPart:
    """A tool call written by the model.

    When the model produced arguments that are not valid JSON, ``input`` holds the raw
    text and ``input_error`` says what was wrong; the call is answered with an error
    result instead of running.
    """

    tool_call_id: str
    tool_name: str
    input: Any = field(default_factory=dict)
    input_error: str | None = None
    kind: Literal["tool-call"] = "tool-call"


@dataclass(frozen=True, kw_only=True)
class ToolOutput:
    """The output of a tool call.

    ``kind`` is ``text`` (``value`` is a str), ``json`` (any JSON value), ``content``
    (a tuple of text/image/file parts), ``error-text`` or ``error-json``.
    """

    kind: ToolOutputKind
    value: Any
    metadata: dict[str, Any] | None = None
    """Data for the application that is never sent to the model (for example a LangChain
    tool's ``artifact`` or ``return_direct`` flag). Keep it JSON-ready: it is stored with
    the event."""

    @property
    def is_error(self) -> bool:
        """True for ``error-text`` and ``error-json``."""
        return self.kind.startswith("error")

    @classmethod
    def text(cls, value: str) -> ToolOutput:
        """A successful text output."""
        return cls(kind="text", value=value)

    @classmethod
    def error(cls, message: str) -> ToolOutput:
        """An error output the model reads."""
        return cls(kind="error-text", value=message)

    def as_text(self) -> str:
        """The output rendered as text (JSON values are serialised)."""
        import json

        if self.kind in ("text", "error-text"):
            return str(self.value)
        if self.kind == "content":
            return "\n".join(p.text for p in self.value if isinstance(p, TextPart))
        return json.dumps(self.value, ensure_ascii=False, default=str)


@dataclass(frozen=True, kw_only=True)
class ToolResultPart:
    """The result of one tool call, matched to it by ``tool_call_id``."""

    tool_call_id: str
    tool_name: str
    output: ToolOutput
    kind: Literal["tool-result"] = "tool-result"


ContentPart = Union[TextPart, ImagePart, FilePart, ReasoningPart, ToolCallPart, ToolResultPart]

_ALLOWED: dict[str, tuple[type, ...]] = {
    "system": (TextPart,),
    "user": (TextPart, ImagePart, FilePart),
    "assistant": (TextPart, ReasoningPart, ToolCallPart, FilePart, ImagePart),
    "tool": (ToolResultPart,),
}


@dataclass(frozen=True, kw_only=True)
class Message:
    """One message for a model: a role and a flat tuple of content parts."""

    role: Role
    content: tuple[ContentPart, ...]

    def __post_init__(self) -> None:
        allowed = _ALLOWED.get(self.role)
        if allowed is None:
            raise ConfigurationError(
                f"unknown message role {self.role!r}; use system, user, assistant or tool"
            )
        if not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))
        for part in self.content:
            if not isinstance(part, allowed):
                raise ConfigurationError(
                    f"a {self.role} message cannot hold a {type(part).__name__}; "
                    f"allowed: {', '.join(t.__name__ for t in allowed)}"
                )

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls(role="system", content=(TextPart(text=text),))

    @classmethod
    def user(cls, content: Prompt) -> Message:
        """A user message from a prompt (text, or a list of parts)."""
        return cls(role="user", content=normalize_prompt(content))

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant message holding only text."""
        return cls(role="assistant", content=(TextPart(text=text),))

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return text_of(self.content)

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool-call parts of an assistant message."""
        return tuple(p for p in self.content if isinstance(p, ToolCallPart))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (bytes are base64)."""
        return {"role": self.role, "content": content_to_dict(self.content)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        """Inverse of :meth:`to_dict`."""
        return cls(role=data["role"], content=content_from_dict(data["content"]))


Prompt = Union[str, ContentPart, Sequence[Union[str, ContentPart]]]
"""A user prompt: text, one part, or a list of text and image/file parts."""


def normalize_prompt(prompt: Prompt) -> tuple[ContentPart, ...]:
    """Turn a prompt into a tuple of user content parts, or raise ConfigurationError."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ConfigurationError("the prompt is empty; pass some text or content parts")
        return (TextPart(text=prompt),)
    if isinstance(prompt, (TextPart, ImagePart, FilePart)):
        return (prompt,)
    if isinstance(prompt, Iterable) and not isinstance(prompt, (bytes, dict)):
        parts: list[ContentPart] = []
        for item in prompt:
            if isinstance(item, str):
                parts.append(TextPart(text=item))
            elif isinstance(item, (TextPart, ImagePart, FilePart)):
                parts.append(item)
            else:
                raise ConfigurationError(
                    f"a prompt item must be str, TextPart, ImagePart or FilePart, "
                    f"not {type(item).__name__}"
                )
        if not parts:
            raise ConfigurationError("the prompt is empty; pass text or content parts")
        return tuple(parts)
    raise ConfigurationError(
        f"a prompt must be a str, a content part or a list of them, not {type(prompt).__name__}"
    )


def text_of(parts: Iterable[ContentPart]) -> str:
    """Concatenate the text parts of a content tuple."""
    return "".join(p.text for p in parts if isinstance(p, TextPart))


# -- serialisation ---------------------------------------------------------------------


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data)


def _output_to_dict(out: ToolOutput) -> dict[str, Any]:
    value = content_to_dict(out.value) if out.kind == "content" else out.value
    data: dict[str, Any] = {"kind": out.kind, "value": value}
    if out.metadata is not None:
        data["metadata"] = out.metadata
    return data


def _output_from_dict(data: dict[str, Any]) -> ToolOutput:
    value = data["value"]
    if data["kind"] == "content":
        value = content_from_dict(value)
    return ToolOutput(kind=data["kind"], value=value, metadata=data.get("metadata"))


def _part_to_dict(p: ContentPart) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"kind": "text", "text": p.text}
    if isinstance(p, ImagePart):
        return {"kind": "image", "data": _b64(p.data), "url": p.url, "media_type": p.media_type}
    if isinstance(p, FilePart):
        return {
            "kind": "file",
            "data": _b64(p.data),
            "url": p.url,
            "media_type": p.media_type,
            "filename": p.filename,
        }
    if isinstance(p, ReasoningPart):
        return {
            "kind": "reasoning",
            "text": p.text,
            "signature": p.signature,
            "redacted_data": p.redacted_data,
        }
    if isinstance(p, ToolCallPart):
        return {
            "kind": "tool-call",
            "tool_call_id": p.tool_call_id,
            "tool_name": p.tool_name,
            "input": p.input,
            "input_error": p.input_error,
        }
    if isinstance(p, ToolResultPart):
        return {
            "kind": "tool-result",
            "tool_call_id": p.tool_call_id,
            "tool_name": p.tool_name,
            "output": _output_to_dict(p.output),
        }
    raise ConfigurationError(f"not a content part: {p!r}")


def _part_from_dict(d: dict[str, Any]) -> ContentPart:
    kind = d.get("kind")
    if kind == "text":
        return TextPart(text=d["text"])
    if kind == "image":
        return ImagePart(data=_unb64(d.get("data")), url=d.get("url"), media_type=d["media_type"])
    if kind == "file":
        return FilePart(
            data=_unb64(d.get("data")),
            url=d.get("url"),
            media_type=d["media_type"],
            filename=d.get("filename"),
        )
    if kind == "reasoning":
        return ReasoningPart(
            text=d.get("text", ""), signature=d.get("signature"), redacted_data=d.get("redacted_data")
        )
    if kind == "tool-call":
        return ToolCallPart(
            tool_call_id=d["tool_call_id"],
            tool_name=d["tool_name"],
            input=d.get("input"),
            input_error=d.get("input_error"),
        )
    if kind == "tool-result":
        return ToolResultPart(
            tool_call_id=d["tool_call_id"],
            tool_name=d["tool_name"],
            output=_output_from_dict(d["output"]),
        )
    raise ConfigurationError(f"unknown content part kind {kind!r}")


def content_to_dict(parts: Iterable[ContentPart]) -> list[dict[str, Any]]:
    """Serialise content parts to JSON-ready dicts."""
    return [_part_to_dict(p) for p in parts]


def content_from_dict(data: Iterable[dict[str, Any]]) -> tuple[ContentPart, ...]:
    """Inverse of :func:`content_to_dict`; ConfigurationError when ``data`` is not a
    list of part objects."""
    if isinstance(data, (str, bytes, dict)) or not isinstance(data, Iterable):
        raise ConfigurationError(f"content must be a list of content parts, not {type(data).__name__}")
    parts = []
    for d in data:
        if not isinstance(d, dict):
            raise ConfigurationError(f"a content part must be a JSON object, not {type(d).__name__}")
        parts.append(_part_from_dict(d))
    return tuple(parts)
