"""``@tool``: build a Tool from a typed Python function."""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar, overload

from ..errors import ToolDefinitionError
from ._tool import FunctionTool, Reconcile, ResultCache, ToolContext

_P = ParamSpec("_P")
_R = TypeVar("_R")

_SECTION_RE = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_ARG_RE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {arg: description})."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc_lines: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        m = _SECTION_RE.match(line)
        if m:
            section = m.group(1)
            current = None
            arg_indent = None
            continue
        if section is None:
            desc_lines.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            if not line.strip():
                continue
            indent = len(line) - len(line.lstrip())
            am = _ARG_RE.match(line)
            if am and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = am.group(1)
                args[current] = am.group(2).strip()
            elif current is not None:
                args[current] = (args[current] + " " + line.strip()).strip()
    return "\n".join(desc_lines).strip(), args


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            k: _strip_titles(v)
            for k, v in schema.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _parent_namespace(frame: types.FrameType | None) -> Mapping[str, Any] | None:
    """The locals of the frame that applied ``@tool``, so string annotations may name things
    local to the defining function (as pydantic does for models defined in a function);
    None at module level, where the function's globals already have everything, and for
    agentkit's own frames (a plain function wrapped on the way in)."""
    if frame is None or frame.f_back is None or frame.f_code.co_name == "<module>":
        return None
    if str(frame.f_globals.get("__name__", "")).startswith("agentkit."):
        return None
    return frame.f_locals


def _resolve_hints(fn: Callable[..., Any], tool_name: str, sig: inspect.Signature,
                   parent_ns: Mapping[str, Any] | None) -> dict[str, Any]:
    """Each parameter's annotation, string annotations evaluated in the function's globals
    and, before those, the defining frame's locals and the function's closure. The return
    annotation is not needed and not evaluated."""
    target = inspect.unwrap(fn)
    globalns = getattr(target, "__globals__", {})
    localns: dict[str, Any] = {}
    try:
        localns.update(inspect.getclosurevars(target).nonlocals)
    except (TypeError, ValueError):  # not a Python function
        pass
    localns.update(parent_ns or {})
    hints: dict[str, Any] = {}
    for pname, param in sig.parameters.items():
        if param.annotation is inspect.Parameter.empty:
            continue
        holder = types.SimpleNamespace(__annotations__={pname: param.annotation})
        try:
            hints[pname] = typing.get_type_hints(holder, globalns, localns, include_extras=True)[pname]
        except Exception as exc:  # noqa: BLE001 - NameError, SyntaxError, TypeError...
            raise ToolDefinitionError(
                f"tool {tool_name!r}: cannot resolve the type hint {param.annotation!r} of parameter "
                f"{pname!r} ({type(exc).__name__}: {exc}); import or define the names it uses in the "
                f"module, or in the function that applies @tool before applying it"
            ) from None
    return hints


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


_UNKNOWN_TYPE_RE = re.compile(r"Unable to generate pydantic-core schema for (.+?)\. Set `arbitrary_types_allowed")


def _schema_detail(exc: Exception) -> str:
    """What pydantic could not describe as JSON Schema, in one line and without its
    advice about ``arbitrary_types_allowed`` (JSON cannot carry such a value anyway):
    ``there is no JSON Schema for Conn``. Structured output's errors use it too."""
    text = str(exc)
    m = _UNKNOWN_TYPE_RE.search(text)
    if m is not None:
        unknown = re.sub(r"^<class '(?:.*\.)?(\w+)'>$", r"\1", m.group(1))
        return f"there is no JSON Schema for {unknown}"
    if "JsonSchema for core_schema." in text:
        kind = text.split("JsonSchema for core_schema.", 1)[1].split()[0].removesuffix("Schema")
        return f"a {kind.lower()} has no JSON Schema"
    return text.split("\n", 1)[0].split(". Set `arbitrary_types_allowed", 1)[0]


def _schema_error(tool_name: str, fields: Mapping[str, Any], exc: Exception) -> ToolDefinitionError:
    """A ToolDefinitionError naming the tool and the parameter pydantic cannot describe, in
    @tool's terms (pydantic's advice about ``arbitrary_types_allowed`` is left out: a tool's
    input must be JSON, so that setting would not help)."""
    import pydantic

    culprit = None
    for pname, spec in fields.items():
        try:
            pydantic.create_model("probe", p=spec).model_json_schema()
        except Exception:  # noqa: BLE001 - the same error, for one field
            culprit = pname
            break
    detail = _schema_detail(exc)
    what = "its type hints" if culprit is None else (
        f"parameter {culprit!r} of type {_type_name(fields[culprit][0])}")
    return ToolDefinitionError(
        f"tool {tool_name!r}: cannot describe {what} to a model as JSON Schema ({detail}). Use "
        f"JSON-compatible types (str, int, float, bool, None, list, dict, Literal, Optional, unions, "
        f"dataclasses, TypedDicts, pydantic models), or give the tool that value another way (a "
        f"closure, or the execution context through ToolContext)"
    )


def _build(fn: Callable[_P, _R], name: str | None, description: str | None,
           read_only: bool, timeout: float | None,
           parent_ns: Mapping[str, Any] | None = None, strict: bool = True,
           reconcile: Reconcile | None = None, cache: ResultCache | None = None) -> FunctionTool[_P, _R]:
    import pydantic

    model_name = name or getattr(fn, "__name__", None) or type(fn).__name__
    sig = inspect.signature(fn)
    hints = _resolve_hints(fn, model_name, sig, parent_ns)
    doc_desc, arg_docs = _parse_docstring(fn.__doc__)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            stars = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise ToolDefinitionError(
                f"tool {model_name!r}: parameter {stars}{pname} cannot be described to a model; "
                f"declare each argument as a named parameter"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"tool {model_name!r}: positional-only parameter {pname!r} is not supported; "
                f"remove the '/' from its signature"
            )
        annotation = hints.get(pname, Any)
        if annotation is ToolContext or typing.get_origin(annotation) is ToolContext:  # ToolContext[Deps]
            context_param = pname
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        # pydantic fields get neutral names with the parameter as alias, so parameters
        # named like BaseModel attributes (schema, json, copy, model_*) or starting with
        # an underscore neither warn nor break
        fields[pname] = (
            annotation,
            pydantic.Field(default, alias=pname, description=arg_docs.get(pname) or None),
        )
    internal = {f"f{i}": spec for i, spec in enumerate(fields.values())}
    params = dict(zip(fields, internal, strict=True))
    try:
        args_model = pydantic.create_model(
            f"{model_name}_input", __config__=pydantic.ConfigDict(extra="forbid"), **internal
        )
        schema = _strip_titles(args_model.model_json_schema(by_alias=True))
    except Exception as exc:  # noqa: BLE001 - pydantic raises several types here
        raise _schema_error(model_name, fields, exc) from None
    schema.setdefault("properties", {})
    schema["type"] = "object"

    def prepare(data: dict[str, Any]) -> dict[str, Any]:
        validated = args_model.model_validate(data)
        return {k: getattr(validated, f) for k, f in params.items()}

    simple = all(_is_plain(f[0]) for f in fields.values())
    if description is None and not doc_desc:
        warnings.warn(
            f"tool {model_name!r} has no description: the model is told only its name and "
            f"parameters, and may not know when to call it. Give the function a docstring "
            f"or pass @tool(description=...)",
            UserWarning,
            stacklevel=_caller_level(),
        )
    return FunctionTool(
        name=model_name,
        description=description if description is not None else doc_desc,
        input_schema=schema,
        fn=fn,
        read_only=read_only,
        timeout=timeout,
        context_param=context_param,
        prepare_input=None if simple and strict else prepare,
        strict=strict,
        reconcile=reconcile,
        cache=cache,
    )


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside agentkit (the code defining the
    tool), counted from the function calling ``warnings.warn``."""
    level, frame = 1, sys._getframe(1)
    while frame.f_back is not None and str(frame.f_globals.get("__name__", "")).startswith("agentkit."):
        frame, level = frame.f_back, level + 1
    return level


def _is_plain(annotation: Any) -> bool:
    """True when JSON values can be passed to the function unchanged."""
    return annotation in (str, int, float, bool, Any, dict, list) or annotation is type(None)


@overload
def tool(fn: Callable[_P, _R], /) -> FunctionTool[_P, _R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    timeout: float | None = None,
    strict: bool = True,
    reconcile: Reconcile | None = None,
    cache: ResultCache | None = None,
) -> Callable[[Callable[_P, _R]], FunctionTool[_P, _R]]: ...


def tool(
    fn: Callable[_P, _R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    timeout: float | None = None,
    strict: bool = True,
    reconcile: Reconcile | None = None,
    cache: ResultCache | None = None,
) -> FunctionTool[_P, _R] | Callable[[Callable[_P, _R]], FunctionTool[_P, _R]]:
    """Make a :class:`Tool` from a function.

    The JSON Schema comes from the type hints (``Literal``, ``Optional``, defaults,
    lists, nested dataclasses and pydantic models); the description from the docstring,
    with per-argument descriptions from its ``Args:`` section (a function without either
    gets a ``UserWarning``: the model would see no description). ``strict=True`` (the
    default) holds the model's input to the JSON Schema; ``strict=False`` lets pydantic's
    lax mode check and convert it instead (``"3"`` for an ``int`` becomes ``3``). A
    parameter annotated :class:`ToolContext` receives the call context and is not part of
    the schema. ``reconcile`` is the tool's probe for calls a crash interrupted
    (:attr:`Tool.reconcile`). ``cache`` (a :class:`~agentkit.ToolCache`, only with
    ``read_only=True``) answers a repeated call from the cache (docs/tools.md)::

        @tool
        def add(a: int, b: int) -> int:
            \"\"\"Add two integers.

            Args:
                a: the first addend
                b: the second addend
            \"\"\"
            return a + b
    """
    # as pydantic does for a model defined in a function: string annotations may name
    # things local to the function that applies @tool (e.g. a Literal imported there)
    parent_ns = _parent_namespace(sys._getframe(1))
    if fn is not None:
        return _build(fn, name, description, read_only, timeout, parent_ns, strict, reconcile, cache)

    def wrap(f: Callable[_P, _R]) -> FunctionTool[_P, _R]:
        return _build(f, name, description, read_only, timeout, parent_ns, strict, reconcile, cache)

    return wrap
