"""AWS Bedrock Runtime Converse / ConverseStream wire format, as botocore's service model
(``botocore/data/bedrock-runtime/*/service-2.json``) describes it.

``POST /model/<modelId>/converse`` answers JSON; ``POST /model/<modelId>/converse-stream``
answers ``application/vnd.amazon.eventstream``: binary frames of a prelude (total and
headers length, CRC32), headers (``:event-type``, ``:content-type``, ``:message-type``,
or ``:exception-type`` for an error inside the stream), a JSON payload and a CRC32 of the
whole frame; botocore's parser (``botocore/eventstream.py``) checks both CRCs. Errors
before the stream are JSON bodies with ``x-amzn-ErrorType``.

:func:`validate` enforces the Converse request rules the real service enforces: a SigV4
``Authorization`` header, messages that start with the user and alternate, no empty or
blank text, every ``toolResult`` answering a ``toolUse`` of the assistant message right
before it (and all of them answered), ``toolConfig`` whenever tool blocks appear, tool
names and schemas of the right shape, a ``toolChoice`` naming an offered tool.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from binascii import crc32
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from .server import Recorded, Reply

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
_PATH = re.compile(r"^/model/(?P<model>[^/]+)/(?P<op>converse|converse-stream)$")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_.:-]{1,64}$")
_BLOCK_KINDS = ("text", "image", "document", "video", "audio", "toolUse", "toolResult", "guardContent",
                "cachePoint", "reasoningContent", "citationsContent", "searchResult")


# -- event-stream framing ----------------------------------------------------------------


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode("utf-8"), value.encode("utf-8")
    # name length (1 byte), name, value type 7 (string), value length (2 bytes), value
    return struct.pack("!B", len(raw_name)) + raw_name + b"\x07" + struct.pack("!H", len(raw_value)) + raw_value


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (total length, headers length, prelude CRC),
    headers, payload, message CRC (of everything before it)."""
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", crc32(prelude) & 0xFFFFFFFF)
    message = prelude + encoded + payload
    return message + struct.pack("!I", crc32(message) & 0xFFFFFFFF)


def event(event_type: str, body: dict[str, Any]) -> bytes:
    """An event frame (``:message-type: event``) with a JSON payload."""
    return frame(
        {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"},
        json.dumps(body).encode("utf-8"),
    )


def exception(exception_type: str, message: str) -> bytes:
    """An error inside the stream, as the service sends it (``throttlingException``,
    ``modelStreamErrorException``, ...): botocore raises it as an ``EventStreamError``."""
    return frame(
        {":exception-type": exception_type, ":content-type": "application/json", ":message-type": "exception"},
        json.dumps({"message": message}).encode("utf-8"),
    )


# -- answers -----------------------------------------------------------------------------


def text(value: str, pieces: int = 2) -> tuple[Any, ...]:
    return ("text", value, pieces)


def tool_use(call_id: str, name: str, fragments: Sequence[str]) -> tuple[Any, ...]:
    return ("toolUse", call_id, name, list(fragments))


def reasoning(value: str, signature: str) -> tuple[Any, ...]:
    return ("reasoning", value, signature)


def redacted(data: bytes) -> tuple[Any, ...]:
    return ("redacted", data)


def _split(value: str, pieces: int) -> list[str]:
    step = max(1, -(-len(value) // max(1, pieces)))
    return [value[i : i + step] for i in range(0, len(value), step)] or [""]


def _usage(input_tokens: int, output_tokens: int, cache_read: int, cache_write: int) -> dict[str, int]:
    usage = {"inputTokens": input_tokens, "outputTokens": output_tokens,
             "totalTokens": input_tokens + output_tokens + cache_read + cache_write}
    if cache_read or cache_write:
        usage["cacheReadInputTokens"] = cache_read
        usage["cacheWriteInputTokens"] = cache_write
    return usage


def _stop_reason(blocks: Sequence[tuple[Any, ...]], stop_reason: str | None) -> str:
    return stop_reason or ("tool_use" if any(b[0] == "toolUse" for b in blocks) else "end_turn")


def stream_events(
    *blocks: tuple[Any, ...],
    stop_reason: str | None = None,
    input_tokens: int = 25,
    output_tokens: int = 12,
    cache_read: int = 0,
    cache_write: int = 0,
    message_stop: bool = True,
    metadata: bool = True,
) -> list[Any]:
    """The frames of a streamed answer made of content blocks (the builders above)."""
    out: list[Any] = [event("messageStart", {"role": "assistant"})]
    for index, block in enumerate(blocks):
        kind = block[0]
        deltas: list[dict[str, Any]]
        if kind == "text":
            deltas = [{"text": p} for p in _split(block[1], block[2])]
        elif kind == "reasoning":
            deltas = [{"reasoningContent": {"text": p}} for p in _split(block[1], 2)]
            deltas.append({"reasoningContent": {"signature": block[2]}})
        elif kind == "redacted":
            deltas = [{"reasoningContent": {"redactedContent": base64.b64encode(block[1]).decode("ascii")}}]
        else:
            start = {"toolUse": {"toolUseId": block[1], "name": block[2]}}
            out.append(event("contentBlockStart", {"start": start, "contentBlockIndex": index}))
            deltas = [{"toolUse": {"input": f}} for f in block[3]]
        for d in deltas:
            out.append(event("contentBlockDelta", {"delta": d, "contentBlockIndex": index}))
        out.append(event("contentBlockStop", {"contentBlockIndex": index}))
    if message_stop:
        out.append(event("messageStop", {"stopReason": _stop_reason(blocks, stop_reason)}))
    if metadata:
        out.append(event("metadata", {"usage": _usage(input_tokens, output_tokens, cache_read, cache_write),
                                      "metrics": {"latencyMs": 120}}))
    return out


def stream(*blocks: tuple[Any, ...], **kw: Any) -> Reply:
    """A ConverseStream answer (see :func:`stream_events` for the options)."""
    return stream_reply(stream_events(*blocks, **kw))


def stream_reply(chunks: Sequence[Any]) -> Reply:
    """A 200 event stream of ``chunks`` (frames, gates, ``DROP``)."""
    return Reply(chunks=list(chunks), headers={"content-type": "application/vnd.amazon.eventstream",
                                               "x-amzn-requestid": "req-fake"})


def converse(
    *blocks: tuple[Any, ...],
    stop_reason: str | None = None,
    input_tokens: int = 25,
    output_tokens: int = 12,
    cache_read: int = 0,
    cache_write: int = 0,
) -> Reply:
    """A (non-streamed) Converse answer."""
    content: list[dict[str, Any]] = []
    for block in blocks:
        if block[0] == "text":
            content.append({"text": block[1]})
        elif block[0] == "reasoning":
            content.append({"reasoningContent": {"reasoningText": {"text": block[1], "signature": block[2]}}})
        elif block[0] == "redacted":
            content.append({"reasoningContent": {"redactedContent": base64.b64encode(block[1]).decode("ascii")}})
        else:
            raw = "".join(block[3])
            content.append({"toolUse": {"toolUseId": block[1], "name": block[2], "input": json.loads(raw or "{}")}})
    body = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": _stop_reason(blocks, stop_reason),
        "usage": _usage(input_tokens, output_tokens, cache_read, cache_write),
        "metrics": {"latencyMs": 120},
    }
    return Reply(json=body, headers={"x-amzn-requestid": "req-fake"})


def error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An error answer as the service sends it: the type in ``x-amzn-ErrorType``, the
    message in the JSON body."""
    return Reply(
        status=status,
        json={"message": message},
        headers={"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/",
                 "x-amzn-requestid": "req-fake", **(headers or {})},
    )


def _bad(message: str) -> Reply:
    return error(400, "ValidationException", message)


# -- the request rules -------------------------------------------------------------------


def validate(rec: Recorded) -> Reply | None:
    """The Converse request rules the adapter must respect."""
    match = _PATH.match(rec.path)
    if rec.method != "POST" or match is None:
        return error(404, "UnknownOperationException", f"no such operation: {rec.method} {rec.path}")
    auth = rec.headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 Credential=") or "x-amz-date" not in rec.headers:
        return error(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    elif "/bedrock/aws4_request" not in auth:
        return error(403, "InvalidSignatureException", "Credential should be scoped to correct service: 'bedrock'.")
    if not unquote(match.group("model")):
        return _bad("1 validation error detected: Value at 'modelId' failed to satisfy constraint")
    body = rec.body if isinstance(rec.body, dict) else {}
    return _check_system(body) or _check_tools(body) or _check_inference(body) or _check_messages(body)


def _check_system(body: dict[str, Any]) -> Reply | None:
    for i, block in enumerate(body.get("system") or []):
        if len(block) != 1:
            return _bad(f"system.{i}: exactly one member of SystemContentBlock must be set")
        if "text" in block and not block["text"].strip():
            return _bad(f"The text field in the SystemContentBlock object at system.{i} is blank. "
                        f"Add text to the text field, and try again.")
    return None


def _check_tools(body: dict[str, Any]) -> Reply | None:
    config = body.get("toolConfig")
    if config is None:
        return None
    tools = config.get("tools")
    if not tools:
        return _bad("1 validation error detected: Value at 'toolConfig.tools' failed to satisfy "
                    "constraint: Member must have length greater than or equal to 1")
    names = []
    for i, t in enumerate(tools):
        if "cachePoint" in t:
            continue
        spec = t.get("toolSpec") or {}
        if not _TOOL_NAME.match(str(spec.get("name", ""))):
            return _bad(f"Value at 'toolConfig.tools.{i + 1}.member.toolSpec.name' failed to satisfy "
                        f"constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+")
        schema = (spec.get("inputSchema") or {}).get("json")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return _bad(f"The value at toolConfig.tools.{i}.toolSpec.inputSchema.json.type must be object")
        if "description" in spec and not spec["description"]:
            return _bad(f"Value at 'toolConfig.tools.{i + 1}.member.toolSpec.description' failed to satisfy "
                        f"constraint: Member must have length greater than or equal to 1")
        names.append(spec["name"])
    choice = config.get("toolChoice")
    if choice is not None:
        if len(choice) != 1 or next(iter(choice)) not in ("auto", "any", "tool"):
            return _bad("toolChoice: exactly one of auto, any, tool must be set")
        if "tool" in choice and choice["tool"].get("name") not in names:
            return _bad(f"The tool {choice['tool'].get('name')!r} named in toolChoice is not in toolConfig.tools")
    return None


def _check_inference(body: dict[str, Any]) -> Reply | None:
    config = body.get("inferenceConfig") or {}
    for key in ("temperature", "topP"):
        if key in config and not 0 <= config[key] <= 1:
            return _bad(f"Value at 'inferenceConfig.{key}' failed to satisfy constraint: Member must have "
                        f"value between 0 and 1")
    if "maxTokens" in config and config["maxTokens"] < 1:
        return _bad("Value at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have "
                    "value greater than or equal to 1")
    return None


def _check_messages(body: dict[str, Any]) -> Reply | None:
    messages = body.get("messages") or []
    if not messages:
        return _bad("A conversation must start with a user message. Try again with a conversation that "
                    "starts with a user message.")
    if messages[0].get("role") != "user":
        return _bad("A conversation must start with a user message. Try again with a conversation that "
                    "starts with a user message.")
    uses_tools = False
    previous_uses: list[str] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("user", "assistant"):
            return _bad(f"messages.{i}.role must be user or assistant")
        if i and messages[i - 1]["role"] == role:
            return _bad("A conversation must alternate between user and assistant roles. Make sure the "
                        "conversation alternates between user and assistant roles and try again.")
        content = m.get("content") or []
        if not content:
            return _bad(f"The content field in the Message object at messages.{i} is empty. Add a "
                        f"ContentBlock object to the content field and try again.")
        results: list[str] = []
        for j, b in enumerate(content):
            kinds = [k for k in b if k in _BLOCK_KINDS]
            if len(kinds) != 1 or len(b) != 1:
                return _bad(f"messages.{i}.content.{j}: exactly one member of ContentBlock must be set")
            kind = kinds[0]
            if kind == "text" and not b["text"].strip():
                return _bad(f"The text field in the ContentBlock object at messages.{i}.content.{j} is blank. "
                            f"Add text to the text field, and try again.")
            if kind in ("toolUse", "toolResult"):
                uses_tools = True
                call_id = b[kind].get("toolUseId", "")
                if not _TOOL_ID.match(call_id):
                    return _bad(f"Value at 'messages.{i + 1}.member.content.{j + 1}.member.{kind}.toolUseId' "
                                f"failed to satisfy constraint: Member must satisfy regular expression "
                                f"pattern: [a-zA-Z0-9_.:-]+")
            if kind == "toolUse" and role != "assistant":
                return _bad(f"messages.{i}.content.{j}: toolUse blocks belong to assistant messages")
            if kind == "toolResult":
                if role != "user":
                    return _bad(f"messages.{i}.content.{j}: toolResult blocks belong to user messages")
                result = b["toolResult"]
                if not result.get("content"):
                    return _bad(f"messages.{i}.content.{j}.toolResult.content must not be empty")
                if result.get("status") not in (None, "success", "error"):
                    return _bad(f"messages.{i}.content.{j}.toolResult.status must be success or error")
                for x in result["content"]:
                    if "text" in x and not x["text"].strip():
                        return _bad(f"The text field in messages.{i}.content.{j}.toolResult.content is blank.")
                results.append(result["toolUseId"])
        if role == "user":
            if len(results) > len(previous_uses):
                return _bad(f"The number of toolResult blocks at messages.{i}.content exceeds the number of "
                            f"toolUse blocks of previous turn.")
            unknown = [r for r in results if r not in previous_uses]
            if unknown:
                return _bad(f"The toolUseId {unknown[0]} at messages.{i}.content does not match any toolUse "
                            f"block of the previous assistant message.")
            missing = [u for u in previous_uses if u not in results]
            if missing:
                return _bad(f"Expected toolResult blocks at messages.{i}.content for the following Ids: "
                            f"{', '.join(missing)}")
        previous_uses = [b["toolUse"]["toolUseId"] for b in content if "toolUse" in b] if role == "assistant" else []
    if uses_tools and not body.get("toolConfig"):
        return _bad("The toolConfig field must be defined when using toolUse and toolResult content blocks.")
    return None


def fake_credentials(monkeypatch: Any) -> None:
    """Dummy AWS keys and a region in the environment, for boto3's usual chain; no profile,
    config file or endpoint of the machine's gets in the way."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDAGENTKITFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "agentkit-fake-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/agentkit-tests/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/agentkit-tests/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
