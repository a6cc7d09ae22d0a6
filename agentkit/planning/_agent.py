"""``PlanningAgent``: plan, execute each step with tools, replan, synthesize.

The planner writes a structured plan (a thought and ordered steps with suggested
tools); each step runs as a tool-using generation of the executor, in a child session
of its own; after a failed step (or after every step, ``replan_after="always"``) the
replanner decides to continue, revise the remaining steps or finish; the synthesizer
writes the answer. Every stage is recorded in the run's session as a control event (see
:mod:`agentkit._planlog`), so a run in a durable session that a crash interrupted
continues from its saved plan: ``run(goal, session=reopened)`` neither plans again nor
re-runs a finished step. See docs/planning.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..agent import Agent
from ..cancel import CancelToken
from ..context._budget import Budget, BudgetBreach, Limits
from ..errors import CancelledError, ConfigurationError
from ..events import AssistantMessageEvent, ControlEvent, UserMessageEvent
from ..hooks import HookChain, Hooks
from ..messages import TextPart, text_of
from ..options import GenerationOptions
from ..results import RunResult
from ..session._foreign import model_from, tools_from
from ..session._session import Session
from ..streaming._events import Emit
from ..streaming._stream import AgentStream
from ..tools._subagents import derived_session_id
from ..tools.base import Tool, ToolRegistry
from ..usage import Usage
from . import _planlog as log
from ._planlog import (
    Plan,
    PlanOutput,
    PlanResult,
    PlanStep,
    ReplanAfter,
    ReplanDecision,
    RunState,
    Spend,
    StepOutcome,
    StepResult,
)
from ._stream import PlanCreatedEvent, plan_stream, progress_event

__all__ = ["Plan", "PlanResult", "PlanStep", "PlanningAgent", "Stage", "StepResult"]

_STAGES = ("planner", "executor", "replanner", "synthesizer")
_REPLAN_AFTER = ("failure", "always", "never")
_OURS = ("output_type", "tools")
"""Generation options a stage may not set: the planning agent sets them."""


@dataclass(frozen=True, kw_only=True)
class Stage:
    """How one stage of a :class:`PlanningAgent` runs: its ``model`` (None: the agent's),
    extra ``system`` instructions (added after the stage's own) and other generation
    ``options`` (``settings=ModelSettings(reasoning_budget=2048)`` to think in the
    executor, ``max_steps``, ``hooks``, ``provider_options``...).

    A stage may also be given as a model (or spec string), as an :class:`~agentkit.Agent`
    without tools (its model, system prompt and options), or as a dict of these keys where
    any key besides ``model`` and ``system`` is an option:
    ``{"model": "openai:gpt-4.1", "settings": ModelSettings(temperature=0)}``.
    """

    model: Any = None
    system: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.system is not None and not isinstance(self.system, str):
            raise ConfigurationError(f"Stage system must be a str or None, not {type(self.system).__name__}")
        if not isinstance(self.options, Mapping):
            raise ConfigurationError(f"Stage options must be a dict, not {type(self.options).__name__}")
        taken = [k for k in _OURS if k in self.options]
        if taken:
            raise ConfigurationError(
                f"a planning stage may not set {', '.join(taken)}: the planning agent sets them "
                f"(tools= of PlanningAgent reach the executor)"
            )
        if "system" in self.options:
            raise ConfigurationError("give a stage's system prompt as Stage(system=...), not in options")
        GenerationOptions.build(self.options)  # unknown or bad options fail here


def _agent_stage(name: str, agent: Agent[Any, Any]) -> Stage:
    """An Agent given as a stage: its model, system prompt and the options it sets."""
    if agent.tools:
        raise ConfigurationError(
            f"{name}: an Agent given as a stage brings its model and options, not tools; "
            f"give the executor's tools to PlanningAgent(tools=...)"
        )
    default = GenerationOptions()
    options: dict[str, Any] = {}
    for f in fields(GenerationOptions):
        value = getattr(agent.options, f.name)
        if f.name == "system":
            continue
        if f.name == "hooks":
            if value:  # the chain back as the Hooks it was built from (one per function)
                options["hooks"] = [Hooks(**{point: fn}) for point in HookChain.__slots__
                                    for fn in getattr(value, point)]
        elif value != getattr(default, f.name):
            options[f.name] = value
    return Stage(model=agent.model, system=agent.options.system, options=options)


def _stage(name: str, value: Any, default_model: Any) -> Stage:
    """A stage argument as a Stage with its model resolved."""
    if value is None:
        stage = Stage()
    elif isinstance(value, Agent):
        stage = _agent_stage(name, value)
    elif isinstance(value, Stage):
        stage = value
    elif isinstance(value, Mapping):
        known = {f.name for f in fields(Stage)} - {"options"}
        stage = Stage(**{k: v for k, v in value.items() if k in known},
                      options={k: v for k, v in value.items() if k not in known})
    else:
        stage = Stage(model=value)
    try:
        model = model_from(stage.model) if stage.model is not None else default_model
    except ConfigurationError as exc:
        raise ConfigurationError(f"{name}: {exc}") from None
    if not hasattr(model, "stream"):
        raise ConfigurationError(
            f"{name} must be a ChatModel, a model spec string, a Stage or a dict with 'model', "
            f"not {type(value).__name__}"
        )
    return Stage(model=model, system=stage.system, options=dict(stage.options))


def _positive(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


class PlanningAgent:
    """A plan → execute → replan → synthesize agent over ``tools``.

    ``model`` is the default of every stage; ``planner``, ``executor``, ``replanner``
    and ``synthesizer`` override it per stage (a model, a spec string, a :class:`Stage`
    or a dict). The planner writes at most ``max_plan_steps`` steps; the replanner runs
    after a failed step (``replan_after="failure"``), after every step (``"always"``) or
    never (``"never"``), and may revise the plan at most ``max_revisions`` times (after
    that it is not asked again). ``limits`` bound the whole run (every stage's tokens,
    model calls and tool calls): once one is reached no further step runs and the
    synthesizer answers from what was done. It holds no run state: one agent may run
    many goals, on several threads at once.
    """

    def __init__(
        self,
        model: Any,
        *,
        tools: Iterable[Any] = (),
        planner: Any = None,
        executor: Any = None,
        replanner: Any = None,
        synthesizer: Any = None,
        max_plan_steps: int = 8,
        max_revisions: int = 2,
        replan_after: ReplanAfter = "failure",
        limits: Limits | None = None,
    ) -> None:
        default = model_from(model)
        if not hasattr(default, "stream"):
            raise ConfigurationError(
                f"model must be a ChatModel or a spec string like 'openai:gpt-4.1-mini', not {type(model).__name__}"
            )
        self._tools: tuple[Tool, ...] = tuple(ToolRegistry(tools_from(tools)).values())
        stages = {"planner": planner, "executor": executor, "replanner": replanner, "synthesizer": synthesizer}
        self._stages = {name: _stage(name, value, default) for name, value in stages.items()}
        self._max_steps = _positive("max_plan_steps", max_plan_steps, 1)
        self._max_revisions = _positive("max_revisions", max_revisions, 0)
        if replan_after not in _REPLAN_AFTER:
            raise ConfigurationError(f"replan_after must be one of {', '.join(_REPLAN_AFTER)}, got {replan_after!r}")
        self._replan_after: ReplanAfter = replan_after
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigurationError(f"limits must be a Limits or None, not {type(limits).__name__}")
        self._limits = limits

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The executor's tools."""
        return self._tools

    def stage(self, name: str) -> Stage:
        """The resolved :class:`Stage` ``name`` (``planner``, ``executor``, ``replanner``,
        ``synthesizer``)."""
        if name not in self._stages:
            raise ConfigurationError(f"unknown stage {name!r}; the stages are {', '.join(_STAGES)}")
        return self._stages[name]

    def run(self, goal: str, *, session: Session[Any, Any] | None = None, cancel: CancelToken | None = None,
            deps: Any = None) -> PlanResult:
        """Reach ``goal``: plan, execute, replan as needed, synthesize the answer.

        With ``session`` the run is recorded there: the goal as a user message, each
        stage as a control event, the answer as an assistant message. When that session
        holds an unfinished run (a crash interrupted it), this call continues it from
        the saved plan instead: finished steps are not run again and the planner is not
        asked again (``goal`` must then be the same goal). Without ``session`` the run
        is recorded in a new in-memory session. ``cancel`` stops the run (raises
        :class:`~agentkit.errors.CancelledError`); what it committed stays committed.
        ``deps`` reach the executor's tools as ``ToolContext.deps``. A run on a stored
        session holds its turn lock (``store.turn_lock``) throughout, so another process's
        run or turn of that session waits, then continues from what this one committed.
        """
        _check(goal, session)
        return self._run(goal, session, cancel or CancelToken(), deps, None, None)

    def stream(self, goal: str, *, session: Session[Any, Any] | None = None, cancel: CancelToken | None = None,
               deps: Any = None, max_buffer: int = 1000) -> AgentStream[PlanResult]:
        """:meth:`run` on a worker thread, as an :class:`~agentkit.AgentStream` of its
        events: the run's progress (``plan-created``, ``plan-step-start``, ``plan-step-end``,
        ``plan-replanned``, ``budget-exceeded``, ``plan-synthesized``) and every stage
        generation's events wrapped in ``plan-stage-event``, between ``generation-start``
        and one ``generation-end``. ``.result`` is a :class:`~agentkit.RunResult` with the
        answer as ``text`` and the :class:`PlanResult` as ``output`` (docs/streaming.md)."""
        _check(goal, session)
        return plan_stream(lambda stages, progress, token: self._run(goal, session, token, deps, stages, progress),
                           goal, None if session is None else session.session_id, max_buffer=max_buffer,
                           cancel=cancel)

    def _run(self, goal: str, session: Session[Any, Any] | None, token: CancelToken, deps: Any,
             stages: Callable[[str, int | None], Emit] | None, progress: Emit | None) -> PlanResult:
        own = session is None
        target = session if session is not None else Session()
        try:
            with target._turn(token):  # one run or turn of a stored session at a time, across processes
                return _Run(self, target, token, deps, stages, progress).run(goal)
        finally:
            if own:
                target.close()


def _check(goal: Any, session: Any) -> None:
    if not isinstance(goal, str) or not goal.strip():
        raise ConfigurationError("goal must be a non-empty str")
    if session is not None and not isinstance(session, Session):
        raise ConfigurationError(f"session must be a Session or None, not {type(session).__name__}")


class _Run:
    """One call of :meth:`PlanningAgent.run`."""

    def __init__(self, agent: PlanningAgent, session: Session[Any, Any], cancel: CancelToken, deps: Any,
                 stages: Callable[[str, int | None], Emit] | None = None, progress: Emit | None = None) -> None:
        self.agent = agent
        self.deps = deps
        self.stages = stages  # where each stage's events go, when the run streams
        self.progress = progress  # where the run's own events go
        self.session = session
        self.cancel = cancel
        self.durable = session.session_id is not None and session.store is not None

    # -- the run ---------------------------------------------------------------------

    def run(self, goal: str) -> PlanResult:
        state = log.find_run(self.session.events)
        if state is not None and state.answer is None:
            if state.goal != goal:
                raise ConfigurationError(
                    f"this session holds an unfinished planning run for another goal "
                    f"({_short(state.goal)!r}); run that goal to continue it, or use a new session"
                )
            state.resumed = True
            if self.progress is not None:
                self.progress(PlanCreatedEvent(run_id=state.run_id, goal=goal, plan=state.plan, resumed=True))
        else:
            state = self._plan(goal)
        a = self.agent
        while state.stop is None:
            more = state.replan_due(a._replan_after, a._max_revisions) or state.next_index < len(state.plan.steps)
            if not more:
                break
            breach = self._breach(state)
            if breach is not None:
                self._record(state, log.event(log.BUDGET_EXCEEDED, state.run_id, **breach.data()))
                continue
            if state.replan_due(a._replan_after, a._max_revisions):
                self._replan(state)
            else:
                self._step(state, state.next_index)
        if state.answer is None:
            self._synthesize(state)
        assert state.answer is not None
        return PlanResult(
            plan=state.plan, steps=tuple(state.results), text=state.answer, usage=state.spent.usage,
            revisions=state.revisions, finish_reason=state.stop or "completed", run_id=state.run_id,
            resumed=state.resumed,
        )

    def _record(self, state: RunState, event: Any) -> None:
        self.session.push_event(event)
        state.apply(event)
        self._announce(event)

    def _announce(self, event: ControlEvent) -> None:
        if self.progress is not None:
            announced = progress_event(event)
            if announced is not None:
                self.progress(announced)

    def _emit(self, stage_name: str, index: int | None = None) -> Emit | None:
        return None if self.stages is None else self.stages(stage_name, index)

    # -- stages --------------------------------------------------------------------

    def _generate(self, stage_name: str, system: str, prompt: str, *, output_type: Any = None,
                  spent: Spend | None = None) -> RunResult:
        """One generation of a stage without tools, in a child session in memory."""
        with self._child(stage_name, system, output_type=output_type, spent=spent) as child:
            child.push_user_message(prompt)
            return child._generate(cancel=self.cancel, emit=self._emit(stage_name))

    def _child(self, stage_name: str, system: str, *, output_type: Any = None, tools: tuple[Tool, ...] = (),
               spent: Spend | None = None, session_id: str | None = None) -> Session:
        """A child session for one stage generation: in the run's store under
        ``session_id`` when given, else in memory. With ``spent``, the run's limits less
        that bound the generation."""
        stage = self.agent._stages[stage_name]
        options = dict(stage.options)
        if spent is not None and self.agent._limits is not None:
            options["limits"] = _remaining(self.agent._limits, spent, options.get("limits"))
        if output_type is not None:
            options["output_type"] = output_type
        store = self.session.store if session_id is not None else None
        full_system = system if not stage.system else f"{system}\n\n{stage.system}"
        return Session(stage.model, tools=tools, store=store, session_id=session_id, system=full_system, **options)

    def _plan(self, goal: str) -> RunState:
        events = self.session.events
        last = events[-1] if events else None
        if not (isinstance(last, UserMessageEvent) and text_of(last.content) == goal):
            self.session.push_user_message(goal)  # (a run stopped while planning already did)
        prompt = log.planner_prompt(goal, ((t.name, t.description) for t in self.agent._tools), self.agent._max_steps)
        result = self._generate("planner", log.PLANNER_SYSTEM, prompt, output_type=PlanOutput, spent=Spend())
        output = result.output
        if not isinstance(output, PlanOutput):  # the run's limits stopped it
            raise ConfigurationError(
                f"the planner gave no plan (finish_reason={result.finish_reason!r}): the run's limits "
                f"({self.agent._limits}) leave it no room to plan"
            )
        plan = log.plan_from(output, self.agent._max_steps)
        run_id = uuid.uuid4().hex
        spend = _spend(result)
        created = log.event(log.PLAN_CREATED, run_id, goal=goal, plan=log.plan_data(plan), **spend.data())
        self.session.push_event(created)
        self._announce(created)
        return RunState(run_id=run_id, goal=goal, plan=plan, spent=spend)

    def _step(self, state: RunState, index: int) -> None:
        attempt = state.attempts.get(index, 0) + 1
        sid = None
        if self.durable:
            assert self.session.session_id is not None
            sid = derived_session_id(self.session.session_id, "plan", f"{state.run_id[:12]}-{index + 1}-{attempt}")
        step = state.plan.steps[index]
        self._record(state, log.event(log.STEP_STARTED, state.run_id, index=index, attempt=attempt,
                                      description=step.description, session_id=sid))
        prompt = log.executor_prompt(state.goal, state.plan, state.results, index)
        with self._child("executor", log.EXECUTOR_SYSTEM, output_type=StepOutcome, tools=self.agent._tools,
                         spent=state.spent, session_id=sid) as child:
            child.push_user_message(prompt)
            try:
                result = child._generate(cancel=self.cancel, deps=self.deps, emit=self._emit("executor", index))
            except CancelledError:
                raise  # the run was cancelled: it stops here, and a later run() resumes this step
            except Exception as exc:  # noqa: BLE001 - a failed step; the replanner reads why
                spend = _spent_of(child)
                outcome = StepResult(index=index, description=step.description, ok=False, result="",
                                     error=f"{type(exc).__name__}: {exc}", usage=spend.usage,
                                     finish_reason="error", attempt=attempt, session_id=sid)
            else:
                spend = _spend(result)
                outcome = _outcome(result, index, step, attempt, sid, spend.usage)
        data = outcome.to_dict()
        data.update(spend.data())
        self._record(state, log.event(log.STEP_FINISHED, state.run_id, **data))

    def _replan(self, state: RunState) -> None:
        a = self.agent
        after = state.results[-1].index
        prompt = log.replanner_prompt(state.goal, state.plan, state.results, a._max_revisions - state.revisions)
        result = self._generate("replanner", log.REPLANNER_SYSTEM, prompt, output_type=ReplanDecision,
                                spent=state.spent)
        decision = result.output
        if not isinstance(decision, ReplanDecision):  # the run's limits stopped it: go on as planned
            decision = ReplanDecision(decision="continue",
                                      reason=f"the replanner gave no decision (finish_reason={result.finish_reason!r})")
        data: dict[str, Any] = {"after": after, "decision": decision.decision, "reason": decision.reason}
        if decision.decision == "revise":
            plan = log.revised(state.plan, state.next_index, decision, a._max_steps)
            data["plan"] = log.plan_data(plan)
            if len(plan.steps) == state.next_index:  # nothing left to do: the same as finish
                data["decision"] = "finish"
        data.update(_spend(result).data())
        self._record(state, log.event(log.REPLANNED, state.run_id, **data))

    def _synthesize(self, state: RunState) -> None:
        prompt = log.synthesizer_prompt(state.goal, state.plan, state.results, state.stop)
        result = self._generate("synthesizer", log.SYNTHESIZER_SYSTEM, prompt)
        spend = _spend(result)
        model = getattr(self.agent._stages["synthesizer"].model, "model_name", None)
        # the answer joins the run's conversation: the goal, then this
        self.session.push_event(AssistantMessageEvent(content=(TextPart(text=result.text),), usage=result.usage,
                                                      finish_reason=result.finish_reason, model=model))
        self._record(state, log.event(log.SYNTHESIZED, state.run_id, text=result.text, **spend.data()))

    def _breach(self, state: RunState) -> BudgetBreach | None:
        limits = self.agent._limits
        if limits is None:
            return None
        budget = Budget(limits)
        budget.usage = state.spent.usage
        budget.model_calls = state.spent.model_calls
        breach = budget.before_model_call()
        if breach is None and limits.tool_calls is not None and state.spent.tool_calls >= limits.tool_calls:
            breach = BudgetBreach(limit="tool_calls", maximum=limits.tool_calls, used=state.spent.tool_calls)
        return breach


# -- helpers -----------------------------------------------------------------------------


def _short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _spend(result: RunResult) -> Spend:
    return Spend(usage=result.usage, model_calls=len(result.steps), tool_calls=len(result.tool_calls))


def _spent_of(session: Session[Any, Any]) -> Spend:
    """What a stage session spent, read from its events (its generation raised)."""
    spend = Spend()
    for ev in session.events:
        if isinstance(ev, AssistantMessageEvent):
            spend.model_calls += 1
            if ev.usage is not None:
                spend.usage = spend.usage + ev.usage
            spend.tool_calls += len(ev.tool_calls)
    return spend


def _outcome(result: RunResult, index: int, step: PlanStep, attempt: int, sid: str | None,
             usage: Usage) -> StepResult:
    """The step's result: failed unless the executor reported success."""
    common: dict[str, Any] = {"index": index, "description": step.description, "usage": usage,
                              "finish_reason": result.finish_reason, "attempt": attempt, "session_id": sid}
    value = result.output
    if isinstance(value, StepOutcome):
        if value.success:
            return StepResult(ok=True, result=value.result, **common)
        return StepResult(ok=False, result=value.result, error=value.result or "the executor reported failure",
                          **common)
    return StepResult(ok=False, result=result.text,
                      error=f"the step ended without an outcome (finish_reason={result.finish_reason!r})", **common)


def _remaining(limits: Limits, spent: Spend, own: Any) -> Limits:
    """What is left of the run's ``limits`` after ``spent``, no looser than a stage's own."""
    left: dict[str, int | None] = {}
    used = {**{n: getattr(spent.usage, n) for n in ("input_tokens", "output_tokens", "total_tokens",
                                                     "reasoning_tokens")},
            "model_calls": spent.model_calls, "tool_calls": spent.tool_calls}
    for f in fields(Limits):
        mine = getattr(limits, f.name)
        value = None if mine is None else max(0, mine - used[f.name])
        theirs = getattr(own, f.name) if isinstance(own, Limits) else None
        if theirs is not None:
            value = theirs if value is None else min(value, theirs)
        left[f.name] = value
    return Limits(**left)
