"""What the live-configuration tests run in child processes (``multiprocessing``, spawn):
open a session of a shared store, configure it or ask it, and hand back what the model
was sent. ``reply`` is the model: it answers with the configuration it was called with,
so a test reads from an answer which model, system prompt and tools a turn used."""

from __future__ import annotations

from typing import Any

from _child import open_store

from agentkit import FunctionModel, Session, tool


@tool
def alpha() -> str:
    """The first tool."""
    return "a"


@tool
def beta() -> str:
    """The second tool."""
    return "b"


@tool
def gamma() -> str:
    """The third tool."""
    return "c"


TOOLS = {t.name: t for t in (alpha, beta, gamma)}


def reply(request: Any) -> str:
    """The configuration this call was made with, as the model's answer."""
    return f"system={request.system} tools={','.join(t.name for t in request.tools)}"


def model() -> FunctionModel:
    return FunctionModel(reply)


def open_session(spec: str, session_id: str, tools: str = "alpha,beta,gamma", **kwargs: Any) -> Session:
    """Session ``session_id`` of the store ``spec`` names, given the tools named."""
    chosen = [TOOLS[n] for n in tools.split(",") if n]
    return Session(model(), tools=chosen, store=open_store(spec), session_id=session_id, **kwargs)


def configure_and_ask(spec: str, session_id: str, system: str, tools: str, out: Any) -> None:
    """Configure the session (``tools``: names), then ask it; put the answer on ``out``."""
    with open_session(spec, session_id) as session:
        session.configure(system=system, tools=[TOOLS[n] for n in tools.split(",")])
        out.put(session.ask("from the child").text)


def configure_when_told(spec: str, session_id: str, system: str, go: Any, configured: Any, asked: Any,
                        out: Any) -> None:
    """Open the session, wait for ``go``, configure its system prompt, set
    ``configured``; wait for ``asked``, then ask and put the answer on ``out``."""
    with open_session(spec, session_id) as session:
        go.wait(60)
        session.configure(system=system)
        configured.set()
        asked.wait(60)
        out.put(session.ask("from the child").text)


def ask(spec: str, session_id: str, out: Any) -> None:
    """Reopen the session and ask it; put the answer on ``out``."""
    with open_session(spec, session_id) as session:
        out.put(session.ask("from the child").text)
