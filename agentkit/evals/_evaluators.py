"""The pydantic-evals evaluators agents need: tool-call expectations, the answer and the
tool calls against the recorded ones, structured-output validity, token and step budgets
(private module; import them from :mod:`agentkit.evals`).

Each reads the task's output, an :class:`AgentOutput` (what :func:`agent_task` returns;
a :class:`~agentkit.RunResult` is taken too), and returns a pass/fail with a reason the
report shows (``report.print(include_reasons=True)``). They are pydantic-evals
``Evaluator`` dataclasses, so a YAML or JSON dataset names them
(``Dataset.from_file(path, custom_evaluator_types=EVALUATORS)``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from . import _require  # noqa: F401 - pydantic-evals, or MissingDependencyError naming the extra

from pydantic_evals.evaluators import EvaluationReason, Evaluator, EvaluatorContext  # isort: skip

from ..errors import ConfigurationError
from ..results import RunResult, ToolCallRecord
from ._output import AgentOutput

__all__ = [
    "EVALUATORS", "AnswerMatches", "MaxSteps", "MaxTokens", "OutputValidates", "ToolCalled", "ToolCallsMatch",
    "ToolNotCalled",
]

Context = EvaluatorContext[object, object, object]


def _run_of(value: object, what: str) -> AgentOutput:
    if isinstance(value, AgentOutput):
        return value
    if isinstance(value, RunResult):
        return AgentOutput.from_result(value)
    raise ConfigurationError(
        f"{what} must be an agentkit.evals.AgentOutput (what agent_task returns) or a RunResult, "
        f"got {type(value).__name__}"
    )


def _expected(ctx: Context, evaluator: str) -> AgentOutput | None:
    if ctx.expected_output is None:
        return None
    return _run_of(ctx.expected_output, f"{evaluator}: the case's expected_output")


def _calls(calls: tuple[ToolCallRecord, ...]) -> list[tuple[str, Any]]:
    return [(c.tool_name, c.input) for c in calls]


def _show(calls: list[tuple[str, Any]]) -> str:
    return ", ".join(f"{name}({json.dumps(inp, sort_keys=True, default=str)})" for name, inp in calls) or "none"


def _matches(call: ToolCallRecord, tool: str, arguments: Mapping[str, Any] | None) -> bool:
    if call.tool_name != tool:
        return False
    if arguments is None:
        return True
    return isinstance(call.input, Mapping) and all(k in call.input and call.input[k] == v
                                                   for k, v in arguments.items())


def _check_tool(evaluator: str, tool: object, arguments: object) -> None:
    if not isinstance(tool, str) or not tool:
        raise ConfigurationError(f"{evaluator} needs the tool's name (a non-empty string), got {tool!r}")
    if arguments is not None and not isinstance(arguments, Mapping):
        raise ConfigurationError(f"{evaluator}: arguments must be a mapping of input keys to values, got {arguments!r}")


@dataclass(repr=False)
class ToolCalled(Evaluator[object, object, object]):
    """Passes when the run called ``tool``; with ``arguments``, when one of its calls had
    each of those input keys with that value (other keys may differ)."""

    tool: str
    arguments: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_tool("ToolCalled", self.tool, self.arguments)

    def evaluate(self, ctx: Context) -> EvaluationReason:
        run = _run_of(ctx.output, "ToolCalled: the task's output")
        if any(_matches(c, self.tool, self.arguments) for c in run.tool_calls):
            return EvaluationReason(True, f"{self.tool} was called")
        wanted = self.tool if self.arguments is None else f"{self.tool} with {json.dumps(self.arguments)}"
        return EvaluationReason(False, f"{wanted} was not called; the calls: {_show(_calls(run.tool_calls))}")

    def get_default_evaluation_name(self) -> str:
        return f"ToolCalled({self.tool})"


@dataclass(repr=False)
class ToolNotCalled(Evaluator[object, object, object]):
    """Passes when the run never called ``tool``; with ``arguments``, when none of its
    calls of ``tool`` had all of those input values."""

    tool: str
    arguments: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_tool("ToolNotCalled", self.tool, self.arguments)

    def evaluate(self, ctx: Context) -> EvaluationReason:
        run = _run_of(ctx.output, "ToolNotCalled: the task's output")
        hits = [c for c in run.tool_calls if _matches(c, self.tool, self.arguments)]
        if not hits:
            return EvaluationReason(True, f"{self.tool} was not called")
        return EvaluationReason(False, f"{self.tool} was called: {_show(_calls(tuple(hits)))}")

    def get_default_evaluation_name(self) -> str:
        return f"ToolNotCalled({self.tool})"


@dataclass(repr=False)
class ToolCallsMatch(Evaluator[object, object, object]):
    """Passes when the run's tool calls equal the case's expected ones (the recorded calls
    of a case from :func:`dataset_from_sessions`): the same tools, in the same order, with
    the same inputs (``inputs=False``: the names only). Fails when the case has no
    expected output."""

    inputs: bool = True

    def evaluate(self, ctx: Context) -> EvaluationReason:
        run = _run_of(ctx.output, "ToolCallsMatch: the task's output")
        expected = _expected(ctx, "ToolCallsMatch")
        if expected is None:
            return EvaluationReason(False, "the case has no expected output to compare the tool calls with")
        got, want = _calls(run.tool_calls), _calls(expected.tool_calls)
        if not self.inputs:
            got, want = [(n, None) for n, _ in got], [(n, None) for n, _ in want]
        if got == want:
            return EvaluationReason(True, f"the calls match: {_show(got) if self.inputs else _names(got)}")
        shown = _show if self.inputs else _names
        return EvaluationReason(False, f"expected {shown(want)}; got {shown(got)}")

    def get_default_evaluation_name(self) -> str:
        return "ToolCallsMatch"


def _names(calls: list[tuple[str, Any]]) -> str:
    return ", ".join(name for name, _ in calls) or "none"


@dataclass(repr=False)
class AnswerMatches(Evaluator[object, object, object]):
    """Passes when the run's final answer text equals the expected one: the case's
    ``expected_output`` text (an :class:`AgentOutput`'s, as a case from
    :func:`dataset_from_sessions` has, or a plain string), compared exactly
    (``strip=True``: without leading and trailing whitespace)."""

    strip: bool = False

    def evaluate(self, ctx: Context) -> EvaluationReason:
        run = _run_of(ctx.output, "AnswerMatches: the task's output")
        if ctx.expected_output is None:
            return EvaluationReason(False, "the case has no expected output to compare the answer with")
        raw = ctx.expected_output
        want = raw if isinstance(raw, str) else _run_of(raw, "AnswerMatches: the case's expected_output").text
        got = run.text
        if self.strip:
            got, want = got.strip(), want.strip()
        if got == want:
            return EvaluationReason(True, "the answer matches")
        return EvaluationReason(False, f"expected {want!r:.200}; got {got!r:.200}")

    def get_default_evaluation_name(self) -> str:
        return "AnswerMatches"


@dataclass(repr=False)
class OutputValidates(Evaluator[object, object, object]):
    """Passes when the run's structured output validates against ``output_type`` (a
    pydantic model, dataclass, TypedDict or plain type: anything pydantic's
    ``TypeAdapter`` takes); a run without one is checked on its answer text, parsed as
    JSON. The reason names the first errors."""

    output_type: Any
    _adapter: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from pydantic import PydanticSchemaGenerationError, TypeAdapter

        try:
            self._adapter = TypeAdapter(self.output_type)
        except (PydanticSchemaGenerationError, TypeError) as exc:
            raise ConfigurationError(f"OutputValidates: pydantic cannot validate {self.output_type!r}: {exc}") from None

    def evaluate(self, ctx: Context) -> EvaluationReason:
        from pydantic import ValidationError

        run = _run_of(ctx.output, "OutputValidates: the task's output")
        name = getattr(self.output_type, "__name__", repr(self.output_type))
        try:
            if run.output is not None:
                value = run.output
                if hasattr(value, "model_dump"):  # a model instance: validate its data, not its class
                    value = value.model_dump()
                elif dataclasses.is_dataclass(value) and not isinstance(value, type):
                    value = dataclasses.asdict(value)
                self._adapter.validate_python(value)
            else:
                self._adapter.validate_json(run.text)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()[:3])
            source = "the structured output" if run.output is not None else "the answer text"
            return EvaluationReason(False, f"{source} is not a valid {name}: {problems}")
        return EvaluationReason(True, f"a valid {name}")

    def build_serialization_arguments(self) -> dict[str, Any]:
        return {"output_type": getattr(self.output_type, "__name__", repr(self.output_type))}

    def get_default_evaluation_name(self) -> str:
        return "OutputValidates"


_TOKEN_KINDS = ("total", "input", "output")


@dataclass(repr=False)
class MaxTokens(Evaluator[object, object, object]):
    """Passes when the run used at most ``max_tokens`` tokens, summed over its model calls
    (``kind``: ``"total"``, ``"input"`` or ``"output"`` tokens)."""

    max_tokens: int
    kind: Literal["total", "input", "output"] = "total"

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 0:
            raise ConfigurationError(f"MaxTokens needs max_tokens, a whole number >= 0, got {self.max_tokens!r}")
        if self.kind not in _TOKEN_KINDS:
            raise ConfigurationError(f"MaxTokens: kind must be one of {', '.join(_TOKEN_KINDS)}, got {self.kind!r}")

    def evaluate(self, ctx: Context) -> EvaluationReason:
        run = _run_of(ctx.output, "MaxTokens: the task's output")
        used = int(getattr(run.usage, f"{self.kind}_tokens"))
        verdict = "within" if used <= self.max_tokens else "over"
        return EvaluationReason(used <= self.max_tokens,
                                f"{used} {self.kind} tokens, {verdict} the budget of {self.max_tokens}")

    def get_default_evaluation_name(self) -> str:
        return "MaxTokens"


@dataclass(repr=False)
class MaxSteps(Evaluator[object, object, object]):
    """Passes when the run made at most ``max_steps`` model calls."""

    max_steps: int

    def __post_init__(self) -> None:
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ConfigurationError(f"MaxSteps needs max_steps, a whole number >= 1, got {self.max_steps!r}")

    def evaluate(self, ctx: Context) -> EvaluationReason:
        run = _run_of(ctx.output, "MaxSteps: the task's output")
        steps = len(run.steps)
        verdict = "within" if steps <= self.max_steps else "over"
        return EvaluationReason(steps <= self.max_steps, f"{steps} steps, {verdict} the budget of {self.max_steps}")

    def get_default_evaluation_name(self) -> str:
        return "MaxSteps"


EVALUATORS: tuple[type[Evaluator[object, object, object]], ...] = (
    ToolCalled, ToolNotCalled, ToolCallsMatch, AnswerMatches, MaxTokens, MaxSteps,
)
"""agentkit's evaluators a YAML or JSON dataset may name (pass them as
``Dataset.from_file(path, custom_evaluator_types=EVALUATORS)``); ``OutputValidates`` is
left out, as a file cannot name a Python type."""
