"""Gemini API wire format (``generateContent`` / ``streamGenerateContent?alt=sse``), as
the google-genai SDK speaks it and Google documents it.

Builders for answers (a ``GenerateContentResponse`` body, or its SSE stream of chunks:
``data: {...}`` frames, the parts spread over chunks, ``finishReason`` and
``usageMetadata`` in the last) and error bodies (``{"error": {"code", "message",
"status", "details"}}``), plus :func:`validator`, which enforces the request rules the
real API enforces: the ``x-goog-api-key`` header, roles ``user`` / ``model`` that
alternate starting with ``user``, one data field per part, function responses that
answer the function calls of the model turn right before them (as many, same names,
same order, same ids where the calls had ids), thought signatures sent back on the part
they came on, no JSON response schema together with function calling before Gemini 3,
and (for a thinking model, ``require_signatures=True``) the signature of the first
function call of each model step of the current turn. The SDK writes some
fields in snake_case (``thought_signature``, ``mime_type``): the real API takes both
spellings, and so does this fake.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from .server import Recorded, Reply

MODEL = "gemini-2.5-flash"
_PATH = re.compile(r"^/(v1|v1beta)/models/([^/:]+):(generateContent|streamGenerateContent)(\?.*)?$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
_DATA = ("text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode",
         "codeExecutionResult")


def _get(obj: dict[str, Any], camel: str) -> Any:
    """A field in either spelling (``thoughtSignature`` / ``thought_signature``)."""
    if camel in obj:
        return obj[camel]
    return obj.get(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel))


def _has(obj: dict[str, Any], camel: str) -> bool:
    return _get(obj, camel) is not None


# -- signatures: opaque to the client, checkable here ------------------------------------


def signature_for(kind: str, payload: Any) -> str:
    """The signature this fake issues for a part (base64, as on the wire)."""
    raw = f"sig|{kind}|{json.dumps(payload, sort_keys=True)}".encode()
    return base64.b64encode(raw).decode("ascii")


def _signed_key(part: dict[str, Any]) -> tuple[str, Any]:
    call = _get(part, "functionCall")
    if call is not None:
        return "call", {"name": call.get("name"), "args": call.get("args") or {}}
    if part.get("thought"):
        return "thought", part.get("text", "")
    return "text", None  # a text part's signature belongs to the turn's text, however split


# -- answers -----------------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    return {"text": value}


def signed_text(value: str) -> dict[str, Any]:
    return {"text": value, "thoughtSignature": signature_for("text", None)}


def thought(value: str, signed: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {"text": value, "thought": True}
    if signed:
        part["thoughtSignature"] = signature_for("thought", value)
    return part


def call(name: str, args: dict[str, Any], *, call_id: str | None = None, signed: bool = False) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        fc["id"] = call_id
    part: dict[str, Any] = {"functionCall": fc}
    if signed:
        part["thoughtSignature"] = signature_for("call", {"name": name, "args": args})
    return part


def usage(prompt: int = 20, candidates: int = 8, cached: int | None = None, thoughts: int | None = None,
          tool_prompt: int | None = None) -> dict[str, Any]:
    u: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": candidates}
    if cached is not None:
        u["cachedContentTokenCount"] = cached
    if thoughts is not None:
        u["thoughtsTokenCount"] = thoughts
    if tool_prompt is not None:
        u["toolUsePromptTokenCount"] = tool_prompt
    u["totalTokenCount"] = prompt + candidates + (thoughts or 0) + (tool_prompt or 0)
    return u


def body(*parts: dict[str, Any], finish: str | None = "STOP", usage_metadata: dict[str, Any] | None = None,
         response_id: str = "resp-fake-1") -> dict[str, Any]:
    """A whole ``GenerateContentResponse``."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": usage() if usage_metadata is None else usage_metadata,
        "modelVersion": MODEL,
        "responseId": response_id,
    }


def response(*parts: dict[str, Any], **kw: Any) -> Reply:
    return Reply(json=body(*parts, **kw))


def stream(*parts: dict[str, Any], finish: str | None = "STOP", usage_metadata: dict[str, Any] | None = None,
           pieces: int = 2, response_id: str = "resp-fake-1", end: Sequence[Any] = ()) -> Reply:
    """The SSE stream of an answer: text parts split in ``pieces`` chunks (the signature
    on the last piece), other parts one chunk each, the finish reason and usage in the
    last chunk. ``end`` adds raw events after it (a ``DROP``, say)."""
    chunks: list[dict[str, Any]] = []
    for part in parts:
        value = part.get("text")
        if isinstance(value, str) and len(value) > 1 and pieces > 1:
            step = -(-len(value) // pieces)
            texts = [value[i : i + step] for i in range(0, len(value), step)]
            for i, piece in enumerate(texts):
                p = {**part, "text": piece}
                if i < len(texts) - 1:
                    p.pop("thoughtSignature", None)
                chunks.append({"candidates": [{"content": {"role": "model", "parts": [p]}, "index": 0}]})
        else:
            chunks.append({"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]})
    if not chunks:
        chunks.append({"candidates": [{"content": {"role": "model", "parts": []}, "index": 0}]})
    for c in chunks:
        c["modelVersion"] = MODEL
        c["responseId"] = response_id
        c["usageMetadata"] = {"promptTokenCount": (usage_metadata or usage())["promptTokenCount"]}
    last = chunks[-1]
    if finish is not None:
        last["candidates"][0]["finishReason"] = finish
    last["usageMetadata"] = usage() if usage_metadata is None else usage_metadata
    return Reply(events=[(None, c) for c in chunks] + [(None, e) for e in end])


def error(code: int, status: str, message: str, *, details: list[dict[str, Any]] | None = None,
          headers: dict[str, str] | None = None) -> Reply:
    err: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        err["details"] = details
    return Reply(status=code, json={"error": err}, headers=headers or {})


def _bad(message: str) -> Reply:
    return error(400, "INVALID_ARGUMENT", message)


# -- the request rules -------------------------------------------------------------------


def validator(*, key: str | None = None, require_signatures: bool = False) -> Callable[[Recorded], Reply | None]:
    """A ``FakeServer(check=...)`` enforcing Gemini's request rules; ``key`` is the only
    API key it accepts (any non-empty one when None); ``require_signatures`` makes it a
    thinking model that insists on its function calls' thought signatures."""

    def check(rec: Recorded) -> Reply | None:
        return validate(rec, key=key, require_signatures=require_signatures)

    return check


def validate(rec: Recorded, *, key: str | None = None, require_signatures: bool = False) -> Reply | None:
    match = _PATH.match(rec.path)
    if match is None:
        return error(404, "NOT_FOUND", f"fake Gemini API: no such method {rec.path}")
    if match.group(3) == "streamGenerateContent" and "alt=sse" not in (match.group(4) or ""):
        return _bad("fake Gemini API: this fake streams only with alt=sse, as the SDK asks")
    sent = rec.headers.get("x-goog-api-key")
    if not sent:
        return error(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without "
                     "established identity). Please use API Key or other form of API consumer identity to call "
                     "this API.")
    if key is not None and sent != key:
        return error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", details=[
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
             "domain": "googleapis.com"}])
    req = rec.body if isinstance(rec.body, dict) else {}
    config = req.get("generationConfig") or {}
    if (re.match(r"gemini-[12][.-]", match.group(2)) and req.get("tools")
            and _get(config, "responseMimeType") == "application/json"):
        return _bad("Function calling with a response mime type: 'application/json' is unsupported")
    return (_check_contents(req.get("contents"), require_signatures) or _check_tools(req)
            or _check_config(config) or _check_system(req))


def _check_system(req: dict[str, Any]) -> Reply | None:
    system = _get(req, "systemInstruction")
    if system is None:
        return None
    if not system.get("parts") or not all(isinstance(p.get("text"), str) for p in system["parts"]):
        return _bad("system_instruction: parts must be text")
    return None


def _check_contents(contents: Any, require_signatures: bool) -> Reply | None:
    if not isinstance(contents, list) or not contents:
        return _bad("* GenerateContentRequest.contents: contents is not specified")
    if contents[0].get("role") != "user":
        return _bad("Please ensure that multiturn requests alternate between user and model, starting with user.")
    calls: list[dict[str, Any]] = []  # the function calls of the model turn before
    current_turn = 0  # where the current turn starts: the last user content with more than responses
    for i, content in enumerate(contents):
        role = content.get("role")
        parts = content.get("parts") or []
        if role not in ("user", "model"):
            return _bad(f"* GenerateContentRequest.contents[{i}].role: must be 'user' or 'model', got {role!r}")
        if i and contents[i - 1].get("role") == role:
            return _bad("Please ensure that multiturn requests alternate between user and model.")
        if not parts:
            return _bad(f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.")
        for j, part in enumerate(parts):
            rejected = _check_part(part, f"contents[{i}].parts[{j}]", role)
            if rejected is not None:
                return rejected
        responses = [_get(p, "functionResponse") for p in parts if _has(p, "functionResponse")]
        if role == "user":
            if responses or calls:
                names = [c.get("name") for c in calls]
                if len(responses) != len(calls):
                    return _bad("Please ensure that the number of function response parts is equal to the number "
                                "of function call parts of the function call turn.")
                if [r.get("name") for r in responses] != names:
                    return _bad(f"* contents[{i}]: the function responses must answer the function calls "
                                f"{names} in order, got {[r.get('name') for r in responses]}")
                for c, r in zip(calls, responses, strict=True):
                    if c.get("id") and r.get("id") != c["id"]:
                        return _bad(f"* contents[{i}]: function response id {r.get('id')!r} does not match "
                                    f"the function call id {c['id']!r}")
                    if not isinstance(r.get("response"), dict):
                        return _bad(f"* contents[{i}].function_response.response: must be an object")
            if len(responses) < len(parts):
                current_turn = i
            calls = []
        else:
            calls = [_get(p, "functionCall") for p in parts if _has(p, "functionCall")]
    if require_signatures:
        for i, content in enumerate(contents[current_turn:], start=current_turn):
            first = next((p for p in content.get("parts") or [] if _has(p, "functionCall")), None)
            if content.get("role") == "model" and first is not None and not _has(first, "thoughtSignature"):
                return _bad(f"Function call is missing a thought_signature in functionCall parts. This is "
                            f"required for tools to work correctly, and missing thought_signature may lead to "
                            f"degraded model performance. Additional data, function call `default_api:"
                            f"{_get(first, 'functionCall').get('name')}` , position {i + 1}. Please refer to "
                            f"https://ai.google.dev/gemini-api/docs/thought-signatures for more details.")
    return None


def _check_part(part: dict[str, Any], where: str, role: str) -> Reply | None:
    present = [f for f in _DATA if _has(part, f)]
    if len(present) != 1:
        return _bad(f"* GenerateContentRequest.{where}.data: required oneof field 'data' must have one "
                    f"initialized field" + (f" (got {present})" if present else ""))
    if role == "user" and _has(part, "functionCall"):
        return _bad(f"* {where}: a function call must come from the model role")
    if role == "model" and _has(part, "functionResponse"):
        return _bad(f"* {where}: a function response must come from the user role")
    blob = _get(part, "inlineData")
    if blob is not None:
        if not _get(blob, "mimeType"):
            return _bad(f"* {where}.inline_data.mime_type: required")
        try:
            base64.b64decode(blob.get("data") or "", validate=True)
        except (binascii.Error, ValueError):
            return _bad(f"* {where}.inline_data.data: Base64 decoding failed")
    signature = _get(part, "thoughtSignature")
    if signature is not None:
        if role != "model":
            return _bad(f"* {where}: thought_signature only on model parts")
        kind, payload = _signed_key(part)
        if signature != signature_for(kind, payload):
            return _bad(f"* {where}.thought_signature: Thought signature is not valid (it must be sent back "
                        f"unchanged, on the part it came with)")
    return None


def _check_tools(req: dict[str, Any]) -> Reply | None:
    names: list[str] = []
    for t in req.get("tools") or []:
        for d in _get(t, "functionDeclarations") or []:
            name = str(d.get("name", ""))
            if not _NAME.match(name):
                return _bad(f"* GenerateContentRequest.tools[0].function_declarations: Invalid function name "
                            f"{name!r}. Must start with a letter or an underscore, then a-z, A-Z, 0-9, _ . : -")
            if _has(d, "parameters") and _has(d, "parametersJsonSchema"):
                return _bad("parameters and parameters_json_schema cannot both be set")
            names.append(name)
    calling = _get(_get(req, "toolConfig") or {}, "functionCallingConfig") or {}
    mode = calling.get("mode", "AUTO")
    if mode not in ("AUTO", "ANY", "NONE", "VALIDATED"):
        return _bad(f"* tool_config.function_calling_config.mode: invalid value {mode!r}")
    allowed = _get(calling, "allowedFunctionNames")
    if allowed:
        if mode != "ANY":
            return _bad("allowed_function_names may only be set with function calling mode ANY")
        unknown = [n for n in allowed if n not in names]
        if unknown:
            return _bad(f"allowed_function_names {unknown} are not among the function declarations")
    return None


def _check_config(config: dict[str, Any]) -> Reply | None:
    has_schema = _has(config, "responseJsonSchema") or _has(config, "responseSchema")
    if _has(config, "responseJsonSchema") and _has(config, "responseSchema"):
        return _bad("response_schema and response_json_schema cannot both be set")
    if has_schema and _get(config, "responseMimeType") != "application/json":
        return _bad("* GenerateContentRequest.generation_config.response_mime_type: a response schema needs "
                    "response_mime_type application/json")
    thinking = _get(config, "thinkingConfig") or {}
    if _has(thinking, "thinkingBudget") and _has(thinking, "thinkingLevel"):
        return _bad("You can only set only one of thinking budget and thinking level.")
    level = _get(thinking, "thinkingLevel")
    if level is not None and str(level).upper() not in ("MINIMAL", "LOW", "MEDIUM", "HIGH"):
        return _bad(f"* generation_config.thinking_config.thinking_level: invalid value {level!r}")
    return None
