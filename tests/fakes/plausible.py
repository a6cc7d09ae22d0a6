"""Responders that answer any request plausibly, for examples written against a real provider.

The documentation's examples say ``run_agent("openai:gpt-4.1-mini", ...)`` or
``"anthropic:claude-sonnet-4-5"`` (or ``"openai-responses:gpt-5-mini"``); tests/test_docs.py
points the official SDKs at a :class:`~tests.fakes.server.FakeServer` with one of these responders. They speak the real
wire formats (streamed or not) and behave like a cooperative model:

* when tools are offered and the last message is not a tool result, call one tool: the
  forced one (``tool_choice`` naming a tool, which is called every time), else the one
  whose name shares a word with the latest user text, else the first; with arguments
  made from its JSON Schema (numbers taken from the user text in order; a file-like
  token from the text for path-like string properties; the user text for other strings;
  nested objects, arrays, ``$ref`` and unions followed);
* a ``json_schema`` response format (structured output) gets an object of that schema;
  with ``tool_choice`` ``any`` after tool results (Anthropic), the ``final_answer`` tool is
  called;
* otherwise answer in text: the tool results it was given, or a short reply to the user.

With extended thinking requested (Anthropic), the answer starts with a signed thinking
block, as the real API's does. Every request is also checked by the wire module's
``validate``, so a malformed request fails the example the way the real API would.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from . import anthropic_wire, bedrock_wire, gemini_wire, openai_responses_wire, openai_wire
from .server import Recorded, Reply

__all__ = ["anthropic_responder", "bedrock_responder", "gemini_responder", "openai_responder", "responses_responder"]

_IDS = itertools.count(1)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_FILE = re.compile(r"[\w./-]+\.\w{1,5}\b")


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", text.lower()) if len(w) > 2}


def _pick_tool(
    tools: list[tuple[str, dict[str, Any]]], prompt: str, forced: str | None = None
) -> tuple[str, dict[str, Any]]:
    for name, schema in tools:
        if name == forced:
            return name, schema
    said = _words(prompt)
    for name, schema in tools:
        if _words(name.replace("_", " ")) & said:
            return name, schema
    return tools[0]


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Follow a local ``$ref`` (``#/$defs/Name``) and take the first branch of a union."""
    for _ in range(20):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            schema = target if isinstance(target, dict) else {}
            continue
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches:
            schema = next((b for b in branches if b.get("type") != "null"), branches[0])
            continue
        return schema
    return schema


def _value(name: str, schema: dict[str, Any], prompt: str, numbers: list[str], root: dict[str, Any]) -> Any:
    schema = _resolve(schema, root)
    kind = schema.get("type")
    if "const" in schema:
        return schema["const"]
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind in ("integer", "number"):
        raw = numbers.pop(0) if numbers else "2"
        number = float(raw)
        return int(number) if kind == "integer" else number
    if kind == "boolean":
        return False
    if kind == "array":
        items = schema.get("items")
        return [_value(name, items, prompt, numbers, root)] if isinstance(items, dict) and items else []
    if kind == "object":
        return _fill(schema, prompt, numbers, root)
    if any(w in name.lower() for w in ("path", "file")):
        found = _FILE.search(prompt)
        return found.group(0) if found else "notes.txt"
    return prompt[:200] or "example"


def _fill(schema: dict[str, Any], prompt: str, numbers: list[str], root: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    required = schema.get("required") or list(properties)
    return {
        key: _value(key, properties.get(key) or {}, prompt, numbers, root) for key in required if key in properties
    }


def _arguments(schema: dict[str, Any], prompt: str) -> dict[str, Any]:
    """An object satisfying ``schema``, its numbers taken from ``prompt`` in order."""
    return _fill(_resolve(schema, schema), prompt, _NUMBER.findall(prompt), schema)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") in ("text", "input_text"):
            parts.append(block.get("text", ""))
    return " ".join(parts)


def _reply_text(prompt: str, results: list[str]) -> str:
    if "JSON" in prompt:
        return json.dumps({"answer": results or prompt.strip()[:120]})
    if results:
        return "Done: " + "; ".join(r.strip()[:200] for r in results)
    return f"A scripted answer to: {prompt.strip()[:120] or '(nothing)'}"


# -- OpenAI Chat Completions -------------------------------------------------------------


def openai_responder(rec: Recorded) -> Reply:
    """Answer a Chat Completions request (``stream`` true or false), or a Responses API
    one (``POST /v1/responses``) with :func:`responses_responder`."""
    if rec.path.endswith("/responses"):
        return responses_responder(rec)
    rejected = openai_wire.validate(rec)
    if rejected is not None:
        return rejected
    body = rec.body or {}
    messages = body.get("messages") or []
    prompt = next((_text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    results: list[str] = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        results.insert(0, _text_of(m.get("content")))
    tools = [(t["function"]["name"], t["function"].get("parameters") or {}) for t in body.get("tools") or []]
    stream = bool(body.get("stream"))
    choice = body.get("tool_choice")
    forced = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if tools and ((not results and choice != "none") or forced):
        name, schema = _pick_tool(tools, prompt, forced)
        args = json.dumps(_arguments(schema, prompt))
        call_id = f"call_docs_{next(_IDS)}"
        if stream:
            return openai_wire.tool_stream([(call_id, name, [args[: len(args) // 2], args[len(args) // 2 :]])])
        return openai_wire.completion(tool_calls=[(call_id, name, args)])
    text = _reply_text(prompt, results)
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":  # structured output: an object of that schema
        text = json.dumps(_arguments(response_format.get("json_schema", {}).get("schema") or {}, prompt))
    if stream:
        return openai_wire.text_stream(*(text[i : i + 16] for i in range(0, len(text), 16)))
    return openai_wire.completion(text)


# -- OpenAI Responses --------------------------------------------------------------------

_RESPONSES = openai_responses_wire.ResponsesAPI()


def responses_responder(rec: Recorded) -> Reply:
    """Answer a Responses API request (streamed or not; with ``previous_response_id``
    the stored conversation counts), reasoning first when reasoning is asked for."""
    rejected = _RESPONSES.validate(rec)
    if rejected is not None:
        return rejected
    body = rec.body or {}
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
    conversation = [*_RESPONSES.stored.get(body.get("previous_response_id") or "", []), *items]
    prompt = next((_text_of(i.get("content")) for i in reversed(conversation) if i.get("role") == "user"), "")
    results: list[str] = []
    for item in reversed(conversation):
        if item.get("type") != "function_call_output":
            break
        results.insert(0, str(item.get("output")))
    tools = [(t["name"], t.get("parameters") or {}) for t in body.get("tools") or [] if t.get("type") == "function"]
    choice = body.get("tool_choice")
    forced = choice.get("name") if isinstance(choice, dict) else None
    w = openai_responses_wire
    lead = [w.reasoning("Working out what to do.")] if body.get("reasoning") else []
    if tools and ((not results and choice != "none") or forced):
        name, schema = _pick_tool(tools, prompt, forced)
        return _RESPONSES.answer(*lead, w.call(f"call_docs_{next(_IDS)}", name, _arguments(schema, prompt)))(rec)
    text = _reply_text(prompt, results)
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema":  # structured output: an object of that schema
        text = json.dumps(_arguments(fmt.get("schema") or {}, prompt))
    return _RESPONSES.answer(*lead, w.text(*(text[i : i + 16] for i in range(0, len(text), 16))))(rec)


# -- Anthropic Messages ------------------------------------------------------------------


def anthropic_responder(rec: Recorded) -> Reply:
    """Answer a Messages API request (always streamed, as agentkit's adapter asks)."""
    rejected = anthropic_wire.validate(rec)
    if rejected is not None:
        return rejected
    body = rec.body or {}
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    content = last.get("content")
    blocks = content if isinstance(content, list) else []
    results = [
        _text_of(b.get("content")) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    prompt = ""
    for m in reversed(messages):
        text = _text_of(m.get("content")) if m.get("role") == "user" else ""
        if text.strip():
            prompt = text
            break
    thinking = (body.get("thinking") or {}).get("type") == "enabled"
    lead = [anthropic_wire.thinking("Working out what to do.", "sig-docs")] if thinking else []
    tools = [(t["name"], t.get("input_schema") or {}) for t in body.get("tools") or [] if "name" in t]
    choice = (body.get("tool_choice") or {}).get("type")
    forced = (body.get("tool_choice") or {}).get("name") if choice == "tool" else None
    if choice == "any" and results and tools:  # a tool call is required: finish with the answer tool
        names = [n for n, _ in tools]
        forced = "final_answer" if "final_answer" in names else names[0]
    if tools and ((not results and choice != "none") or forced):
        name, schema = _pick_tool(tools, prompt, forced)
        args = json.dumps(_arguments(schema, prompt))
        return anthropic_wire.stream(*lead, anthropic_wire.tool_use(f"toolu_docs_{next(_IDS)}", name, [args]))
    return anthropic_wire.stream(*lead, anthropic_wire.text(_reply_text(prompt, results)))


# -- AWS Bedrock Converse ----------------------------------------------------------------


def _converse_text(content: Any) -> str:
    return " ".join(b["text"] for b in content or [] if isinstance(b, dict) and isinstance(b.get("text"), str))


def bedrock_responder(rec: Recorded) -> Reply:
    """Answer a Converse or ConverseStream request (the path says which)."""
    rejected = bedrock_wire.validate(rec)
    if rejected is not None:
        return rejected
    body = rec.body or {}
    messages = body.get("messages") or []
    last = messages[-1]["content"] if messages else []
    results = [_converse_text(b["toolResult"].get("content")) for b in last if "toolResult" in b]
    prompt = next((t for m in reversed(messages) if m["role"] == "user" and (t := _converse_text(m["content"]))), "")
    config = body.get("toolConfig") or {}
    tools = [(t["toolSpec"]["name"], t["toolSpec"]["inputSchema"].get("json") or {})
             for t in config.get("tools") or [] if "toolSpec" in t]
    choice = config.get("toolChoice") or {}
    forced = (choice.get("tool") or {}).get("name")
    if "any" in choice and results and tools:  # a tool call is required: finish with the answer tool
        names = [n for n, _ in tools]
        forced = "final_answer" if "final_answer" in names else names[0]
    answer = bedrock_wire.stream if rec.path.endswith("/converse-stream") else bedrock_wire.converse
    if tools and (not results or forced):
        name, schema = _pick_tool(tools, prompt, forced)
        args = json.dumps(_arguments(schema, prompt))
        return answer(bedrock_wire.tool_use(f"tooluse_docs_{next(_IDS)}", name, [args]))
    return answer(bedrock_wire.text(_reply_text(prompt, results)))


# -- Gemini generateContent ----------------------------------------------------------------


def _gemini_text(parts: list[Any]) -> str:
    return " ".join(p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))


def gemini_responder(rec: Recorded) -> Reply:
    """Answer a Gemini ``generateContent`` or ``streamGenerateContent`` request. With a
    ``thinkingConfig`` the answer starts with a thought summary and its function call is
    signed, as a thinking model's are."""
    rejected = gemini_wire.validate(rec)
    if rejected is not None:
        return rejected
    body = rec.body or {}
    contents = body.get("contents") or []
    last_parts = (contents[-1].get("parts") or []) if contents else []
    results = []
    for p in last_parts:
        response = gemini_wire._get(p, "functionResponse")
        if response is not None:
            value = (response.get("response") or {}).get("output", response.get("response"))
            results.append(value if isinstance(value, str) else json.dumps(value))
    prompt = next((t for c in reversed(contents) if c.get("role") == "user"
                   for t in [_gemini_text(c.get("parts") or [])] if t.strip()), "")
    tools = [(d["name"], gemini_wire._get(d, "parametersJsonSchema") or d.get("parameters") or {})
             for t in body.get("tools") or [] for d in gemini_wire._get(t, "functionDeclarations") or []]
    calling = gemini_wire._get(gemini_wire._get(body, "toolConfig") or {}, "functionCallingConfig") or {}
    allowed = gemini_wire._get(calling, "allowedFunctionNames") or []
    forced = allowed[0] if len(allowed) == 1 else None
    config = body.get("generationConfig") or {}
    thinking = gemini_wire._get(config, "thinkingConfig") is not None
    lead = [gemini_wire.thought("Working out what to do.")] if thinking else []
    usage = gemini_wire.usage(thoughts=6 if thinking else None)
    answer = gemini_wire.stream if ":streamGenerateContent" in rec.path else gemini_wire.response
    if tools and ((not results and calling.get("mode") != "NONE") or forced):
        name, schema = _pick_tool(tools, prompt, forced)
        return answer(*lead, gemini_wire.call(name, _arguments(schema, prompt), signed=thinking),
                      usage_metadata=usage)
    text = _reply_text(prompt, results)
    schema = gemini_wire._get(config, "responseJsonSchema")
    if schema is not None:  # structured output: an object of that schema
        text = json.dumps(_arguments(schema, prompt))
    return answer(*lead, gemini_wire.text(text), usage_metadata=usage)
