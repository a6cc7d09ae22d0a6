"""LangChain tools <-> agentkit tools.

:func:`from_langchain_tool` keeps what a LangChain tool shows a model (name,
description, argument JSON Schema as ``convert_to_openai_tool`` renders it) and runs it
the way LangChain does: ``tool.invoke`` with the model's tool call, so ``ToolException``
handling, content-and-artifact output, injected arguments and callbacks behave as they
do in a LangChain agent. :func:`to_langchain_tool` goes the other way.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, Union, get_args

from ..._threads import shared_loop
from ...cancel import CancelToken
from ...errors import ToolDefinitionError
from ...messages import ToolCallPart, ToolOutput
from ...tools._tool import _NAME_RE
from ...tools.base import Tool, ToolContext, coerce_tool, to_tool_output
from ...tools.runner import run_tool_call
from ._blocks import block_from_part
from ._common import jsonable, require_langchain
from .messages import tool_output_from_tool_message

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, StructuredTool

Injected = Union[Mapping[str, Any], Callable[[ToolContext], Mapping[str, Any]]]
"""Values for a LangChain tool's ``InjectedToolArg`` arguments: a mapping, or a function
of the call's :class:`~agentkit.ToolContext` returning one."""

_CTX = "__agentkit_tool_context__"
_CALL_ID = "__agentkit_tool_call_id__"


def _run_async(fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any, cancel: CancelToken,
               **kwargs: Any) -> Any:
    """Run a coroutine-only tool's ``fn(*args, **kwargs)`` on the process's one background
    loop (started on first use, and again in a forked child: a Celery prefork worker) and
    wait; cancelling ``cancel`` cancels it. Async clients a tool keeps stay on that loop."""
    return shared_loop().run(partial(fn, *args, **kwargs), timeout=None, cancel=cancel)


def _is_base_tool(obj: Any) -> bool:
    from langchain_core.tools import BaseTool

    return isinstance(obj, BaseTool)


def _field_names(schema: Any) -> dict[str, Any]:
    fields = getattr(schema, "model_fields", None)
    if fields is None:
        fields = getattr(schema, "__fields__", {})  # pydantic.v1 models
    return dict(fields)


def _annotation_marks(schema: Any, name: str) -> tuple[Any, ...]:
    import typing

    try:
        hints = typing.get_type_hints(schema, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable forward references
        return ()
    return get_args(hints.get(name))[1:]


def _injected_fields(lc_tool: BaseTool) -> tuple[set[str], set[str]]:
    """(call-id fields LangChain fills itself, other injected fields) of a tool whose
    argument schema is a pydantic model: the fields its full input schema has and the
    schema shown to a model lacks."""
    from langchain_core.tools import InjectedToolCallId

    if lc_tool.args_schema is not None and isinstance(lc_tool.args_schema, dict):
        return set(), set()
    full = lc_tool.get_input_schema()
    shown = lc_tool.tool_call_schema
    fields = _field_names(full)
    injected = set(fields) - set(_field_names(shown))
    call_ids = {
        name
        for name in injected
        if name == "tool_call_id"
        or any(
            m is InjectedToolCallId or isinstance(m, InjectedToolCallId)
            or (isinstance(m, type) and issubclass(m, InjectedToolCallId))
            for m in _annotation_marks(full, name)
        )
    }
    return call_ids, injected - call_ids


def _is_required(schema: Any, name: str) -> bool:
    info = _field_names(schema).get(name)
    is_required = getattr(info, "is_required", None)
    if callable(is_required):  # pydantic 2
        return bool(is_required())
    return getattr(info, "required", False) is True  # pydantic.v1


def _schema_of(lc_tool: BaseTool, name: str) -> tuple[dict[str, Any], str]:
    from langchain_core.utils.function_calling import convert_to_openai_function

    try:
        fn = convert_to_openai_function(lc_tool)
    except Exception as exc:  # noqa: BLE001 - pydantic / LangChain raise several types
        raise ToolDefinitionError(
            f"LangChain tool {name!r}: cannot derive the JSON Schema a model would see: {exc}"
        ) from None
    schema = dict(fn.get("parameters") or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema, fn.get("description") or lc_tool.description or ""


def _validates_itself(lc_tool: BaseTool) -> bool:
    """True when LangChain validates the tool's input itself: its ``args_schema`` is a
    pydantic model (``BaseTool._parse_input``), not a JSON Schema dict or absent."""
    from pydantic import BaseModel
    from pydantic.v1 import BaseModel as BaseModelV1

    schema = lc_tool.args_schema
    return isinstance(schema, type) and issubclass(schema, (BaseModel, BaseModelV1))


def _validation_errors() -> tuple[type[Exception], ...]:
    from pydantic import ValidationError
    from pydantic.v1 import ValidationError as ValidationErrorV1

    return ValidationError, ValidationErrorV1


def _about_schema(exc: Exception, schema: Any) -> bool:
    """True when a pydantic ValidationError is about ``schema`` (the tool's input), not
    about some other model the tool validated while running."""
    model = getattr(exc, "title", None) or getattr(getattr(exc, "model", None), "__name__", None)
    return isinstance(schema, type) and model == schema.__name__


@dataclass(frozen=True, kw_only=True)
class _LangChainTool(Tool):
    """An adapted LangChain tool. When LangChain validates the input itself (a pydantic
    ``args_schema``), agentkit's JSON Schema check steps aside so the tool behaves as it
    did in LangChain: pydantic's coercion (``"6"`` for an ``int``), its constraints, and
    the tool's ``handle_validation_error`` text. A rejected input is still an error
    result the model reads."""

    validated_by_langchain: bool = False

    def validation_error(self, data: Any) -> str | None:
        """None when LangChain will validate ``data`` itself; else the JSON Schema check."""
        if self.validated_by_langchain and isinstance(data, dict):
            return None
        return super().validation_error(data)


def _overrides_arun(lc_tool: BaseTool) -> bool:
    from langchain_core.tools import BaseTool

    return type(lc_tool)._arun is not BaseTool._arun


def _as_output(result: Any, tool_name: str, return_direct: bool) -> ToolOutput:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools.base import ToolOutputMixin  # type: ignore[attr-defined]

    if isinstance(result, ToolMessage):
        out = tool_output_from_tool_message(result, f"result of LangChain tool {tool_name!r}")
    elif isinstance(result, ToolOutputMixin) or (
        isinstance(result, list) and result and all(isinstance(r, ToolOutputMixin) for r in result)
    ):
        return ToolOutput.error(
            f"LangChain tool {tool_name!r} returned a {type(result).__name__}, which agentkit cannot "
            f"use as a tool result (LangGraph Command objects update graph state, which agentkit "
            f"does not have); the tool must return content or a ToolMessage"
        )
    else:
        out = to_tool_output(result)
    if return_direct:
        meta = dict(out.metadata or {})
        meta["return_direct"] = True
        out = ToolOutput(kind=out.kind, value=out.value, metadata=meta)
    return out


def _check_injected(lc_tool: BaseTool, tool_name: str, injected: Injected | None, others: set[str]) -> None:
    """``injected`` is a mapping or a function of the context, names only injected
    arguments of the tool (``others``), and covers every required one a mapping must."""
    if injected is not None and not callable(injected) and not isinstance(injected, Mapping):
        raise ToolDefinitionError(
            f"LangChain tool {tool_name!r}: injected must be a mapping or a function of the "
            f"ToolContext, not {type(injected).__name__}"
        )
    if isinstance(injected, Mapping):
        unknown = sorted(set(injected) - others)
        if unknown:
            raise ToolDefinitionError(
                f"LangChain tool {tool_name!r}: injected names {', '.join(unknown)}, which are not "
                f"injected arguments of the tool (those are: {', '.join(sorted(others)) or 'none'})"
            )
    required = {n for n in others if _is_required(lc_tool.get_input_schema(), n)}
    if injected is None:
        provided: set[str] = set()
    elif isinstance(injected, Mapping):
        provided = set(injected)
    else:  # a function of the context: checked when the tool runs
        provided = required
    missing = sorted(required - provided)
    if missing:
        raise ToolDefinitionError(
            f"LangChain tool {tool_name!r} needs the injected argument(s) {', '.join(missing)}, "
            f"which a model never supplies; adapt it with "
            f"from_langchain_tool(tool, injected={{{', '.join(repr(m) + ': ...' for m in missing)}}}) "
            f"or injected=lambda ctx: {{...}}"
        )


def from_langchain_tool(
    tool: Any,
    *,
    name: str | None = None,
    injected: Injected | None = None,
    config: RunnableConfig | None = None,
    read_only: bool = False,
    timeout: float | None = None,
) -> Tool:
    """An agentkit :class:`~agentkit.Tool` that runs a LangChain ``BaseTool``.

    The tool keeps the name, description and argument JSON Schema a LangChain chat model
    would be shown. A call runs ``tool.invoke`` with the model's tool call
    (``{"name", "args", "id", "type": "tool_call"}``) as LangChain agents do, so:

    * a tool with a pydantic ``args_schema`` (``@tool``, ``StructuredTool``) has its input
      validated by LangChain, not by agentkit's JSON Schema check, so pydantic's
      coercion and constraints apply as before; an input it rejects is an error result
      (``handle_validation_error`` text when the tool sets one);
    * ``handle_tool_error`` turns a ``ToolException`` into an error result with the text
      LangChain would put in its ``ToolMessage``; an unhandled exception is an error
      result too;
    * ``response_format="content_and_artifact"``: the content goes to the model, the
      artifact to ``ToolOutput.metadata["artifact"]`` (made JSON-ready);
    * ``return_direct=True`` sets ``ToolOutput.metadata["return_direct"]`` on every
      result, visible in ``RunResult.tool_calls``;
    * ``InjectedToolCallId`` arguments receive agentkit's tool call id; other
      ``InjectedToolArg`` arguments are kept out of the schema and take their values
      from ``injected`` (a mapping, or a function of the :class:`~agentkit.ToolContext`);
    * a tool with only a coroutine runs on one background event-loop thread shared by all
      adapted tools, so neither a caller without a loop nor one already running a loop
      has to do anything.

    ``name`` renames the tool (agentkit names use ``A-Z a-z 0-9 _ -``); ``config`` is
    passed to every ``invoke`` (callbacks, tags, metadata).
    """
    require_langchain("from_langchain_tool")
    if not _is_base_tool(tool):
        raise ToolDefinitionError(
            f"from_langchain_tool needs a LangChain BaseTool, not {type(tool).__name__}; "
            f"for a plain function use agentkit's @tool"
        )
    lc_tool: BaseTool = tool
    tool_name = name or lc_tool.name
    if name is None and not _NAME_RE.match(tool_name):
        fixed = re.sub(r"[^A-Za-z0-9_-]", "_", tool_name)[:128] or "tool"
        raise ToolDefinitionError(
            f"LangChain tool {tool_name!r}: agentkit tool names use 1-128 characters from "
            f"A-Z a-z 0-9 _ -; rename it with from_langchain_tool(tool, name={fixed!r})"
        )
    schema, description = _schema_of(lc_tool, tool_name)
    call_ids, others = _injected_fields(lc_tool)
    hidden = call_ids | others  # never taken from the model, even if it sends them
    _check_injected(lc_tool, tool_name, injected, others)
    async_only = getattr(lc_tool, "func", False) is None and getattr(lc_tool, "coroutine", None) is not None
    can_async = async_only or _overrides_arun(lc_tool)
    return_direct = bool(lc_tool.return_direct)
    invalid_input = _validation_errors()

    def run(**kwargs: Any) -> ToolOutput:
        ctx = kwargs.pop(_CTX, None)
        if not isinstance(ctx, ToolContext):
            ctx = ToolContext(tool_call_id=f"call_{uuid.uuid4().hex}", tool_name=tool_name, cancel=CancelToken())
        args = {k: v for k, v in kwargs.items() if k not in hidden}
        if injected is not None:
            args.update(injected(ctx) if callable(injected) else injected)
        call = {"name": lc_tool.name, "args": args, "id": ctx.tool_call_id, "type": "tool_call"}
        ctx.cancel.raise_if_cancelled()
        try:
            if async_only:
                result = _run_async(lc_tool.ainvoke, call, config=config, cancel=ctx.cancel)
            else:
                try:
                    result = lc_tool.invoke(call, config=config)
                except NotImplementedError:
                    if not can_async:
                        raise
                    result = _run_async(lc_tool.ainvoke, call, config=config, cancel=ctx.cancel)
        except invalid_input as exc:  # not handled by the tool's handle_validation_error
            if not _about_schema(exc, lc_tool.args_schema):
                raise  # raised inside the tool: reported as the tool failing
            return ToolOutput.error(f"invalid input for tool {tool_name!r}: {exc}")
        return _as_output(result, tool_name, return_direct)

    run.__name__ = tool_name
    run.__doc__ = description
    return _LangChainTool(
        name=tool_name,
        description=description,
        input_schema=schema,
        fn=run,
        read_only=read_only,
        timeout=timeout,
        context_param=_CTX,
        validated_by_langchain=_validates_itself(lc_tool),
    )


def from_langchain_tools(
    tools: Iterable[Any],
    *,
    injected: Mapping[str, Injected] | None = None,
    config: RunnableConfig | None = None,
    read_only: bool = False,
    timeout: float | None = None,
) -> list[Tool]:
    """Adapt several LangChain tools, or a toolkit (anything with ``get_tools()``).

    ``injected`` maps a tool name to that tool's injected values.
    """
    require_langchain("from_langchain_tools")
    get_tools = getattr(tools, "get_tools", None)
    items = list(get_tools() if callable(get_tools) else tools)
    per_tool = dict(injected or {})
    names = {getattr(t, "name", None) for t in items}
    unknown = sorted(str(k) for k in per_tool if k not in names)
    if unknown:
        raise ToolDefinitionError(f"injected names tools that are not in the list: {', '.join(unknown)}")
    out: list[Tool] = []
    seen: set[str] = set()
    for t in items:
        adapted = from_langchain_tool(
            t,
            injected=per_tool.get(getattr(t, "name", "")),
            config=config,
            read_only=read_only,
            timeout=timeout,
        )
        if adapted.name in seen:
            raise ToolDefinitionError(f"two LangChain tools are named {adapted.name!r}; tool names must be unique")
        seen.add(adapted.name)
        out.append(adapted)
    return out


# -- agentkit -> LangChain -------------------------------------------------------------


@lru_cache(maxsize=1)
def _structured_tool_class() -> type[StructuredTool]:
    from langchain_core.tools import StructuredTool

    class AgentkitStructuredTool(StructuredTool):
        """A StructuredTool running an agentkit Tool; it hands the LangChain tool call id
        to the agentkit tool's ToolContext."""

        def _to_args_and_kwargs(self, tool_input: Any, tool_call_id: str | None) -> Any:
            args, kwargs = super()._to_args_and_kwargs(tool_input, tool_call_id)
            if isinstance(kwargs, dict):
                kwargs[_CALL_ID] = tool_call_id
            return args, kwargs

    return AgentkitStructuredTool


def _reads_as_content(value: Any) -> bool:
    """LangChain puts a str, or a list of str / typed dicts, into a ToolMessage as message
    content blocks instead of serialising it (``tools.base._normalize_message_content``)."""
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(v, str) or (isinstance(v, dict) and "type" in v) for v in value)
    )


def _lc_value(out: ToolOutput) -> Any:
    if out.kind == "content":
        return [block_from_part(p) for p in out.value]
    if out.kind == "json":
        value = jsonable(out.value)
        # JSON data stays data: the JSON text, as agentkit's own models read it
        return out.as_text() if _reads_as_content(value) else value
    return out.as_text()


def to_langchain_tool(tool: Any) -> StructuredTool:
    """An agentkit :class:`~agentkit.Tool` (or a function ``@tool`` accepts) as a LangChain
    ``StructuredTool``: same name, description and JSON Schema (``args_schema`` is the
    schema dict). Calling it validates the input against the schema and runs the agentkit
    tool with a :class:`~agentkit.ToolContext` carrying the LangChain tool call id; a
    validation error or failure is raised as ``ToolException`` (set
    ``handle_tool_error=True`` on the result to hand it to the model instead).

    Invoked with a tool call, it returns the ``ToolMessage`` LangChain builds: text and
    content parts as content, JSON output as its JSON text, and
    ``ToolOutput.metadata["artifact"]`` as the message's ``artifact``
    (``response_format="content_and_artifact"``). Invoked with plain arguments, it
    returns the content (JSON output as the value itself when LangChain would not
    mistake it for content blocks).
    """
    require_langchain("to_langchain_tool")
    from langchain_core.tools import ToolException

    if _is_base_tool(tool):
        raise ToolDefinitionError(f"{tool.name!r} is already a LangChain tool")
    ak_tool = coerce_tool(tool)
    schema = dict(ak_tool.input_schema)
    schema.setdefault("properties", {})

    def run(**kwargs: Any) -> tuple[Any, Any]:
        call_id = kwargs.pop(_CALL_ID, None) or f"call_{uuid.uuid4().hex}"
        ctx = ToolContext(tool_call_id=call_id, tool_name=ak_tool.name, cancel=CancelToken())
        call = ToolCallPart(tool_call_id=call_id, tool_name=ak_tool.name, input=kwargs)
        out = run_tool_call(ak_tool, call, ctx, (ak_tool.name,))
        if out.is_error:
            raise ToolException(out.as_text())
        return _lc_value(out), (out.metadata or {}).get("artifact")

    return _structured_tool_class()(
        name=ak_tool.name,
        description=ak_tool.description or ak_tool.name,
        args_schema=schema,
        func=run,
        response_format="content_and_artifact",
    )
