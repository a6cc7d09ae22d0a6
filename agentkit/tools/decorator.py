"""``@tool``: build a Tool from a typed Python function."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from typing import Any, overload

from ..errors import ToolDefinitionError
from .base import Tool, ToolContext

__all__ = ["tool"]

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


def _build(fn: Callable[..., Any], name: str | None, description: str | None,
           read_only: bool, timeout: float | None) -> Tool:
    import pydantic

    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - unresolved forward references
        raise ToolDefinitionError(
            f"cannot resolve the type hints of {fn.__qualname__}: {exc}"
        ) from None
    sig = inspect.signature(fn)
    doc_desc, arg_docs = _parse_docstring(fn.__doc__)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {fn.__qualname__}: *args/**kwargs cannot be described to a model; "
                f"declare each argument"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"tool {fn.__qualname__}: positional-only parameter {pname!r} is not supported"
            )
        annotation = hints.get(pname, Any)
        if annotation is ToolContext:
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
    model_name = name or fn.__name__
    internal = {f"f{i}": spec for i, spec in enumerate(fields.values())}
    params = dict(zip(fields, internal, strict=True))
    try:
        args_model = pydantic.create_model(  # type: ignore[call-overload]
            f"{model_name}_input", __config__=pydantic.ConfigDict(extra="forbid"), **internal
        )
        schema = _strip_titles(args_model.model_json_schema(by_alias=True))
    except Exception as exc:  # noqa: BLE001 - pydantic raises several types here
        raise ToolDefinitionError(
            f"tool {model_name!r}: cannot derive a JSON Schema from its type hints: {exc}"
        ) from None
    schema.setdefault("properties", {})
    schema["type"] = "object"

    def prepare(data: dict[str, Any]) -> dict[str, Any]:
        validated = args_model.model_validate(data)
        return {k: getattr(validated, f) for k, f in params.items()}

    simple = all(_is_plain(f[0]) for f in fields.values())
    return Tool(
        name=model_name,
        description=description if description is not None else doc_desc,
        input_schema=schema,
        fn=fn,
        read_only=read_only,
        timeout=timeout,
        context_param=context_param,
        prepare_input=None if simple else prepare,
    )


def _is_plain(annotation: Any) -> bool:
    """True when JSON values can be passed to the function unchanged."""
    return annotation in (str, int, float, bool, Any, dict, list) or annotation is type(None)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a function.

    The JSON Schema comes from the type hints (``Literal``, ``Optional``, defaults,
    lists, nested dataclasses and pydantic models); the description from the docstring,
    with per-argument descriptions from its ``Args:`` section. A parameter annotated
    :class:`ToolContext` receives the call context and is not part of the schema::

        @tool
        def add(a: int, b: int) -> int:
            \"\"\"Add two integers.

            Args:
                a: the first addend
                b: the second addend
            \"\"\"
            return a + b
    """
    if fn is not None:
        return _build(fn, name, description, read_only, timeout)

    def wrap(f: Callable[..., Any]) -> Tool:
        return _build(f, name, description, read_only, timeout)

    return wrap
