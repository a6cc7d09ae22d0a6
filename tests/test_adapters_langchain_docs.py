"""docs/langchain.md: its Python examples run, in order, offline, with real LangChain
tools, messages and toolkit."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import Field

import agentkit

DOC = Path(__file__).resolve().parents[1] / "docs" / "langchain.md"


_WRITE = AIMessage("", additional_kwargs={"tool_calls": [{
    "id": "call_w", "type": "function",
    "function": {"name": "write_file", "arguments": '{"file_path": "answer.txt", "text": "42"}'}}]})


class ChatOpenAI(GenericFakeChatModel):
    """Stands in for langchain_openai.ChatOpenAI, which needs the network: a real
    LangChain chat model class that streams scripted replies and binds tools."""

    model: str = ""
    messages: Iterator[Any] = Field(default_factory=lambda: iter([_WRITE, "The answer is in answer.txt.", "56."]))

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=tools, **kwargs)


def _examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


@pytest.mark.filterwarnings("ignore:`langchain-community` is being sunset:DeprecationWarning")
def test_the_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "langchain_openai", types.SimpleNamespace(ChatOpenAI=ChatOpenAI))
    namespace: dict[str, Any] = {"current_user": lambda: "ada"}
    examples = _examples()
    assert len(examples) >= 4
    try:
        for code in examples:
            exec(compile(code, str(DOC), "exec"), namespace)  # the page's own code
    finally:
        session = namespace.get("session")
        if isinstance(session, agentkit.Session):
            session.close()
    assert namespace["result"].text == "The answer is in answer.txt."
    assert (tmp_path / "notes" / "answer.txt").read_text() == "42"  # the toolkit's write_file ran
    history = namespace["history"]
    assert all(isinstance(m, BaseMessage) for m in history) and history[-1] == AIMessage(
        "The answer is in answer.txt."
    )
    assert namespace["imported"].system == "You keep the user's notes."
    assert len(namespace["imported"].events) == len(history) - 1
    assert namespace["orders"].name == "my_orders" and "user_id" not in namespace["orders"].input_schema["properties"]
    assert (tmp_path / "sessions").is_dir()


@pytest.mark.filterwarnings("ignore:`langchain-community` is being sunset:DeprecationWarning")
def test_the_durable_example_continues_the_stored_session_when_run_again(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "langchain_openai", types.SimpleNamespace(ChatOpenAI=ChatOpenAI))
    namespace: dict[str, Any] = {"current_user": lambda: "ada"}
    durable = next(code for code in _examples() if "FileEventStore" in code)
    runs = []
    for code in _examples():
        exec(compile(code, str(DOC), "exec"), namespace)
        if code == durable:
            break
    try:
        for reply in ("56 again.", "Still 56."):  # the script runs again, twice
            runs.append(namespace["session"].events)
            namespace["session"].close()
            namespace["model"] = agentkit.ScriptedModel([reply])
            exec(compile(durable, str(DOC), "exec"), namespace)
    finally:
        namespace["session"].close()
    runs.append(namespace["session"].events)
    first, second, third = runs
    assert len(first) == len(namespace["imported"].events) + 2  # seeded, then one question
    assert second[: len(first)] == first and len(second) == len(first) + 2
    assert third[: len(second)] == second and third[-1].content[0].text == "Still 56."
    assert [e.seq for e in third] == list(range(1, len(third) + 1))
