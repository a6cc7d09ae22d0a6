"""A live Session's configuration (private): :meth:`Session.configure
<agentkit.Session.configure>` and applying what the log records.

``configure(model=, system=, tools=)`` commits one ``session-configured`` control event
(through the log's fenced commit, like every command) holding what changed:

- ``model``: ``{"spec": "openai:gpt-4.1-mini"}`` for a spec string, or
  ``{"object": "<label>"}`` for a ChatModel object, which a log cannot hold: its label is
  its class and ``model_name``; a process applying the record must have been given a
  model with that label (as the Session's ``model=``, or to ``configure``), else
  :class:`~agentkit.errors.ConfigurationError` says which to pass;
- ``system``: the text as it is (or None: no system prompt);
- ``tools``: the tools' names; a process applying the record must have been given tools
  of those names (the Session's ``tools=``, or ``configure``), else the error names
  the missing ones. Tools given but not named are not offered.

The configuration of a session is its constructor's, then every record in log order
(the latest value of each field wins), so every process reading the log agrees on it.
It is applied when the session is opened (a reopened session is configured as it was
left), at the start of each turn (after catching up with what other processes
committed) and at once in the process that configured it. A generation already running
keeps what it started with; the next one uses the new configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..events import ControlEvent, Event
from ..models.base import ChatModel
from ..options import NOT_GIVEN, LoopOptions
from ..tools.base import Tool, ToolRegistry
from ._foreign import model_from, tools_from

if TYPE_CHECKING:
    from ._session import Session

__all__ = [
    "CONFIGURED", "Configuration", "adopt_configuration", "apply_recorded", "carried_configuration", "configure",
    "model_label", "setup", "tell_tools",
]

CONFIGURED = "session-configured"
"""The control action of a configuration record."""

_FIELDS = ("model", "system", "tools")


def model_label(model: ChatModel) -> str:
    """What a record names a model object by: its class, and its ``model_name`` if any."""
    name = getattr(model, "model_name", None)
    cls = type(model).__qualname__
    return f"{cls}:{name}" if isinstance(name, str) and name else cls


@dataclass
class Configuration:
    """What a session object knows to configure itself from the log: the models and
    tools it was given (by label, by name), and the last record it applied."""

    models: dict[str, ChatModel] = field(default_factory=dict)
    tools: dict[str, Tool] = field(default_factory=dict)
    seen: int = 0  # the seq of the last event scanned for records
    version: int = 0  # how many records were applied: a generation rebuilds its options when it moved

    def know(self, model: ChatModel | None, tools: Iterable[Tool]) -> None:
        if model is not None:
            self.models.setdefault(model_label(model), model)
        for tool in tools:
            self.tools[tool.name] = tool


def setup(session: Session[Any, Any]) -> None:
    """Give a new session object its configuration state, then apply what its log
    records (a reopened session is configured as it was left)."""
    session._config = Configuration()
    session._config.know(session._model, session._registry.values())
    apply_recorded(session)


def adopt_configuration(forked: Session[Any, Any], source: Session[Any, Any]) -> None:
    """A fork's configuration: what the records in its copied prefix say, applied from
    every model and tool its source was given (without a record: the source's current
    configuration, which the fork was built with)."""
    forked._config.models.update(source._config.models)
    forked._config.tools.update(source._config.tools)
    apply_recorded(forked)


def configure(session: Session[Any, Any], *, model: Any = NOT_GIVEN, system: Any = NOT_GIVEN,
              tools: Any = NOT_GIVEN) -> Event:
    """:meth:`Session.configure`: check, commit the record, apply it here."""
    data: dict[str, Any] = {}
    new_model, new_tools = session._model, None
    if model is not NOT_GIVEN:
        new_model = model_from(model)
        if new_model is None:
            raise ConfigurationError("configure(model=None): pass a ChatModel or a spec such as 'openai:gpt-4.1-mini'")
        data["model"] = {"spec": model} if isinstance(model, str) else {"object": model_label(new_model)}
    if system is not NOT_GIVEN:
        if system is not None and not isinstance(system, str):
            raise ConfigurationError(f"configure(system=...) takes a text or None, not {type(system).__name__}")
        data["system"] = system
    if tools is not NOT_GIVEN:
        if isinstance(tools, (str, Tool)) or not isinstance(tools, Iterable):
            raise ConfigurationError("configure(tools=...) takes the full list of the session's tools")
        new_tools = ToolRegistry(tools_from(tools))  # duplicate names fail here
        data["tools"] = list(new_tools)
    if not data:
        raise ConfigurationError("configure() needs at least one of model=, system=, tools=")
    options = session._options if "system" not in data else replace(session._options, system=data["system"])
    if new_model is not None:  # the rest as a generation checks it (without a model, the generation does)
        LoopOptions.of(options, model=new_model, tools=new_tools if new_tools is not None else session._registry,
                       execution_context=session.execution_context).check()
    session._log.check_usable()
    event = session._log.commit([ControlEvent(action=CONFIGURED, data=data)])[0]
    new = [t for t in new_tools.values() if t.name not in session._config.tools] if new_tools else []
    session._config.know(new_model if "model" in data else None, new_tools.values() if new_tools else ())
    apply_recorded(session)
    tell_tools(session, new)  # tools this session object had not been given learn their session
    return event


def apply_recorded(session: Session[Any, Any]) -> int:
    """Apply the records committed since the last one this object applied (its own,
    another process's, or the stored log's at open); returns the configuration's
    version (it changes when something was applied). A record this process cannot
    apply (a model object or tools it was not given) is a ConfigurationError naming what
    to pass; nothing is changed then."""
    config: Configuration = session._config
    log = session._log
    with log.lock:  # one applier at a time, and no commit between the scan and the change
        events = log._events
        top = events[-1].seq if events else 0
        latest = _latest(events, above=config.seen)
        changes: dict[str, Any] = {}
        if "model" in latest:
            changes["_model"] = _recorded_model(session, *latest["model"])
        if "tools" in latest:
            changes["_registry"] = _recorded_tools(session, *latest["tools"])
        if "system" in latest:
            changes["_options"] = replace(session._options, system=latest["system"][0])
        for name, value in changes.items():  # all or nothing: every record was understood
            setattr(session, name, value)
        config.seen = max(config.seen, top)
        config.version += bool(changes)
        return config.version


def _latest(events: list[Event], *, above: int) -> dict[str, tuple[Any, Event]]:
    """The latest recorded value of each field among ``events`` after seq ``above``, with
    the record holding it (a scan from the newest that stops once every field is found)."""
    latest: dict[str, tuple[Any, Event]] = {}
    for event in reversed(events):  # the newest first: the first value of a field wins
        if event.seq <= above or len(latest) == len(_FIELDS):
            break
        if isinstance(event, ControlEvent) and event.action == CONFIGURED:
            for name in _FIELDS:
                if name in event.data and name not in latest:
                    latest[name] = (event.data[name], event)
    return latest


def carried_configuration(events: list[Event], through: int) -> list[Event]:
    """What a compaction covering ``events`` up to seq ``through`` commits with it so the
    configuration stays in the active log once retention removes what it covers: one
    record holding every field whose latest value only a covered record holds (or
    nothing). A session reopened after retention is configured as it was left."""
    moved = {name: value for name, (value, event) in _latest(events, above=0).items() if event.seq <= through}
    return [ControlEvent(action=CONFIGURED, data=moved)] if moved else []


def _recorded_model(session: Session[Any, Any], record: Any, event: Event) -> ChatModel:
    config: Configuration = session._config
    if isinstance(record, dict) and isinstance(record.get("spec"), str):
        spec = record["spec"]
        if spec not in config.models:
            resolved = model_from(spec)
            assert resolved is not None
            config.models[spec] = resolved
        return config.models[spec]
    label = record.get("object") if isinstance(record, dict) else None
    known = config.models.get(label) if isinstance(label, str) else None
    if known is None:
        raise ConfigurationError(
            f"session {session.session_id!r} was configured (event {event.id}, seq {event.seq}) with the model "
            f"object {label!r}, which has no spec string to rebuild it from; pass that model as model= when "
            f"opening the session (this process was given: {sorted(config.models) or 'none'})"
        )
    return known


def _recorded_tools(session: Session[Any, Any], names: Any, event: Event) -> ToolRegistry:
    config: Configuration = session._config
    missing = [n for n in names if n not in config.tools]
    if missing:
        raise ConfigurationError(
            f"session {session.session_id!r} was configured (event {event.id}, seq {event.seq}) with the tools "
            f"{list(names)}, and this process was not given {missing}: pass tools=[...] including them when "
            f"opening the session"
        )
    return ToolRegistry([config.tools[n] for n in names])


def tell_tools(session: Session[Any, Any], tools: Iterable[Tool]) -> None:
    """Give each distinct ``Tool.on_session`` the session (a failure is logged: the tools
    stay usable, only what they would have learned from the session is missing)."""
    seen: set[int] = set()
    for tool in tools:
        hook = tool.on_session
        if hook is None or id(hook) in seen:
            continue
        seen.add(id(hook))
        try:
            hook(session)
        except Exception:  # noqa: BLE001 - reported, not fatal
            logging.getLogger("agentkit").warning("tool %r could not bind to the session", tool.name,
                                                  exc_info=True)
