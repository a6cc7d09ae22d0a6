"""Structured output (``output_type=``): the schema a model is asked for, and checking
what it gave.

An output type is anything pydantic's ``TypeAdapter`` takes: a pydantic model, a
dataclass, a TypedDict or a plain type (``int``, ``list[str]``). Its JSON Schema is
asked for as an object: a type whose schema is not ``"type": "object"`` is wrapped as
``{"response": <schema>}`` and unwrapped again when validated. Compiling a type (the
adapter and its schema) is cached, so a generation pays for it once per type, and a
generation without ``output_type`` never comes here.

How the model gives it is the model's ``output_mode``: ``json-schema`` (the final text
is the JSON) or ``tool`` (the input of the :data:`OUTPUT_TOOL` call is the output).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast, get_args

from ..errors import ConfigurationError, OutputValidationError
from ..messages import ToolCallPart, ToolOutput
from ..models.base import OutputMode, OutputSpec, ToolSpec

OUTPUT_TOOL = "final_answer"
"""The name of the tool a model calls to give its structured output (``tool`` mode)."""
_WRAP_KEY = "response"
_NAME_RE = re.compile(r"[^A-Za-z0-9_-]")
# keywords the strict mode of OpenAI's structured outputs accepts; a schema using any
# other one is sent with strict false
_STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "const",
    "$ref", "$defs", "description", "title", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
})  # fmt: skip
_MAX_ERRORS = 20


@dataclass(frozen=True)
class OutputPlan:
    """A compiled output type: its validator and the schema the model is asked for."""

    output_type: Any
    adapter: Any  # pydantic.TypeAdapter
    spec: OutputSpec
    wrapped: bool

    def for_mode(self, mode: OutputMode) -> OutputPlan:
        """This plan with the spec of ``mode`` (the tool's name in ``tool`` mode)."""
        if mode == "tool":
            return replace(self, spec=replace(self.spec, name=OUTPUT_TOOL, mode="tool",
                                              description=_tool_description(self.spec.description)))
        return replace(self, spec=replace(self.spec, mode="json-schema"))

    def tool_spec(self) -> ToolSpec:
        """The output tool as a model sees it (``tool`` mode)."""
        return ToolSpec(name=self.spec.name, description=self.spec.description, input_schema=self.spec.schema)

    def parse_text(self, text: str) -> tuple[Any, str | None]:
        """(value, None) for valid JSON text of the output, else (None, the errors)."""
        raw = text.strip()
        if raw.startswith("```"):  # a fenced block: what many models write around JSON
            raw = re.sub(r"^```[A-Za-z0-9]*\s*|\s*```$", "", raw)
        if self.wrapped:
            try:
                value = json.loads(raw)
            except ValueError:
                pass
            else:
                return self.parse_input(value)
        return self._validate(raw)

    def parse_input(self, value: Any) -> tuple[Any, str | None]:
        """(value, None) for a valid tool input (or parsed JSON), else (None, the errors)."""
        if self.wrapped:
            if not isinstance(value, Mapping) or _WRAP_KEY not in value:
                bare, errors = self._validate(json.dumps(value))  # the value itself, unwrapped?
                if errors is None:
                    return bare, None
                return None, f"- the answer must be a JSON object with the key {_WRAP_KEY!r}"
            value = value[_WRAP_KEY]
        return self._validate(json.dumps(value))

    def _validate(self, raw: str) -> tuple[Any, str | None]:
        import pydantic

        try:
            return self.adapter.validate_json(raw), None
        except pydantic.ValidationError as exc:
            return None, _errors_text(exc, self.wrapped)
        except Exception as exc:  # noqa: BLE001 - a validator of the type raised: the model reads it
            return None, f"- (the answer): a validator raised {type(exc).__name__}: {exc}"


def output_mode_of(model: Any) -> OutputMode:
    """How ``model`` gives structured output: its ``output_mode``, else ``tool``."""
    mode = getattr(model, "output_mode", "tool")
    if mode not in ("json-schema", "tool"):
        raise ConfigurationError(
            f"{type(model).__name__}.output_mode must be 'json-schema' or 'tool', got {mode!r}"
        )
    return cast(OutputMode, mode)


def output_plan(options: Any) -> OutputPlan:
    """The plan of a generation: ``options.output_type`` asked for in ``options.model``'s mode."""
    mode = output_mode_of(options.model)
    try:
        return _planned(options.output_type, mode)
    except TypeError as exc:
        if "unhashable" not in str(exc):
            raise
        return _compile(options.output_type).for_mode(mode)


@functools.lru_cache(maxsize=256)
def _planned(output_type: Any, mode: OutputMode) -> OutputPlan:
    return _compiled(output_type).for_mode(mode)


def plan_for(output_type: Any) -> OutputPlan:
    """The compiled plan of ``output_type``; a type pydantic cannot validate is a
    ConfigurationError."""
    try:
        return _compiled(output_type)
    except TypeError as exc:
        if "unhashable" not in str(exc):
            raise
        return _compile(output_type)  # e.g. Annotated with an unhashable marker


@functools.lru_cache(maxsize=256)
def _compiled(output_type: Any) -> OutputPlan:
    return _compile(output_type)


def _compile(output_type: Any) -> OutputPlan:
    import pydantic

    if output_type is None or isinstance(output_type, (str, bytes, int, float, bool)):
        raise ConfigurationError(
            f"output_type must be a type (a pydantic model, a dataclass, a TypedDict, or a type "
            f"such as int or list[str]), not {output_type!r}"
        )
    try:
        adapter = pydantic.TypeAdapter(output_type)
        schema = adapter.json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
        from ..tools.decorator import _schema_detail

        raise ConfigurationError(
            f"output_type {_shown_type(output_type) if get_args(output_type) else _type_name(output_type)} "
            f"cannot be validated from JSON "
            f"({_schema_detail(exc)}). The supported output types are a pydantic model, a "
            f"dataclass or a TypedDict whose fields have JSON types, and the JSON types "
            f"themselves (str, int, float, bool, None, list[...], dict[str, ...], Literal, "
            f"unions)" + ("; a plain class has no fields to fill: make it a dataclass or a "
                          "pydantic model" if isinstance(output_type, type) else "")
        ) from None
    description = str(schema.pop("description", "") or "")
    wrapped = schema.get("type") != "object"
    if wrapped:
        defs = schema.pop("$defs", None)
        inner = schema
        schema = {"type": "object", "properties": {_WRAP_KEY: inner}, "required": [_WRAP_KEY]}
        if defs:
            schema["$defs"] = defs
    strict_schema, strict = strictify(schema)
    name = _NAME_RE.sub("_", _type_name(output_type))[:64] or "output"
    spec = OutputSpec(name=name, schema=strict_schema, description=description, strict=strict)
    return OutputPlan(output_type=output_type, adapter=adapter, spec=spec, wrapped=wrapped)


def strictify(schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """``schema`` with every object closed (``additionalProperties: false`` where it does
    not say), and whether the result meets the strict-mode rules: all properties required,
    no open objects, only the keywords strict mode knows."""
    ok = True

    def walk(node: Any) -> Any:
        nonlocal ok
        if isinstance(node, list):
            return [walk(x) for x in node]
        if not isinstance(node, Mapping):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("properties", "$defs") and isinstance(value, Mapping):
                out[key] = {k: walk(v) for k, v in value.items()}
            elif key in ("items", "anyOf", "additionalProperties"):
                out[key] = walk(value)
            else:
                out[key] = value
            if key not in _STRICT_KEYWORDS:
                ok = False
        if out.get("type") == "object":
            if "additionalProperties" not in out:
                out["additionalProperties"] = False
            elif out["additionalProperties"] is not False:
                ok = False
            if set(out.get("properties", {})) != set(out.get("required", ())):
                ok = False
        return out

    result = walk(schema)
    return result, ok


def _tool_description(doc: str) -> str:
    text = "Give your final answer by calling this tool: its input is the answer. Call it once, when you are done."
    return f"{text}\n\n{doc}" if doc else text


def _type_name(output_type: Any) -> str:
    name = getattr(output_type, "__name__", None)
    if isinstance(name, str) and not get_args(output_type):
        return name
    return "output"


def _errors_text(exc: Any, wrapped: bool) -> str:
    lines = []
    for err in exc.errors(include_url=False)[:_MAX_ERRORS]:
        loc = [str(x) for x in err.get("loc", ())]
        if wrapped and loc[:1] == [_WRAP_KEY]:
            loc = loc[1:]
        where = ".".join(loc) or "(the answer)"
        lines.append(f"- {where}: {err.get('msg', 'invalid')}")
    more = exc.error_count() - _MAX_ERRORS
    if more > 0:
        lines.append(f"- ... and {more} more")
    return "\n".join(lines)


class OutputRun:
    """One generation's structured output: its plan and the output tool calls judged so
    far (calls may run on worker threads; each writes only its own id)."""

    def __init__(self, plan: OutputPlan) -> None:
        self.plan = plan
        self.tool: str | None = plan.spec.name if plan.spec.mode == "tool" else None
        """The output tool's name in ``tool`` mode, else None."""
        self._judged: dict[str, tuple[Any, str | None]] = {}

    def take(self, call: ToolCallPart) -> ToolOutput:
        """Run the output tool: validate its input, keep the verdict for the step's end,
        and return the result the model reads."""
        errors: str | None
        if call.input_error is not None:
            value, errors = None, f"- the arguments are not valid JSON: {call.input_error}"
        else:
            value, errors = self.plan.parse_input(call.input)
        self._judged[call.tool_call_id] = (value, errors)
        if errors is not None:
            return ToolOutput.error(retry_text(self.plan, errors))
        return ToolOutput.text("Answer accepted.")

    def outcome(self, calls: list[ToolCallPart], text: str) -> tuple[bool, Any, tuple[Any, str] | None]:
        """(answered, value, problem) of a step: its output tool call that validated, or
        its final text in ``json-schema`` mode; ``problem`` is (raw output, errors) when
        the model tried and failed, or ended without an output."""
        if self.tool is None:
            if calls:
                return False, None, None
            value, errors = self.plan.parse_text(text)
            return (True, value, None) if errors is None else (False, None, (text, errors))
        tried = [c for c in calls if c.tool_name == self.tool]
        for call in tried:
            value, errors = self._judged.get(call.tool_call_id, (None, None))
            if call.tool_call_id in self._judged and errors is None:
                return True, value, None
        if tried:
            last = tried[-1]
            errors = self._judged.get(last.tool_call_id, (None, None))[1]
            return False, None, (last.input, errors or "- the answer was not validated")
        if calls:
            return False, None, None
        return False, None, (text, missing_call_text(self.plan))

    def feedback(self, problem: tuple[Any, str], calls: list[ToolCallPart]) -> str | None:
        """The user message that sends the model back, or None when it reads why in the
        output tool's error result (committed with the step's tool results)."""
        if calls:
            return None
        return retry_text(self.plan, problem[1]) if self.tool is None else problem[1]

    def exhausted(self, problem: tuple[Any, str], attempts: int, limit: int) -> OutputValidationError:
        """The error that ends a generation whose retries are spent."""
        raw, errors = problem
        return OutputValidationError(
            f"the model's output did not match output_type {_shown_type(self.plan.output_type)} after {attempts} "
            f"attempt(s) (max_validation_retries={limit}):\n{errors}",
            raw=raw, errors=errors, attempts=attempts,
        )


def _shown_type(output_type: Any) -> str:
    """``int``, ``list[str]``, ``Invoice``: how a user wrote the type."""
    if isinstance(output_type, type) and not getattr(output_type, "__args__", None):
        return output_type.__qualname__
    return repr(output_type).replace("typing.", "")


def retry_text(plan: OutputPlan, errors: str) -> str:
    """What the model reads after an invalid output."""
    if plan.spec.mode == "tool":
        return (f"The answer does not match the required output schema:\n{errors}\n"
                f"Call {plan.spec.name} again with a corrected answer.")
    return (f"Your answer does not match the required output schema:\n{errors}\n"
            f"Reply again with only the corrected JSON.")


def missing_call_text(plan: OutputPlan) -> str:
    """What the model reads when it answered in text instead of calling the output tool."""
    return (f"Give your answer by calling the {plan.spec.name} tool (its input is the answer); "
            f"a text reply is not accepted.")
