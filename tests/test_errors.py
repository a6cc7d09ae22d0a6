"""agentkit's errors cross process boundaries whole: most take keyword-only arguments
(``GuardrailTripped(message, guardrail=..., output=..., kind=...)``), which the default
exception pickling (``cls(*args)``) cannot rebuild, so a multiprocessing pool or a Celery
result would fail on them, or lose their attributes."""

from __future__ import annotations

import inspect
import multiprocessing
import pickle

import pytest

import agentkit.errors as errors
from agentkit import GuardrailTripped
from agentkit.errors import ConfigurationError, HookError, StoreConflictError

ERRORS = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.AgentkitError)]


@pytest.mark.parametrize("cls", ERRORS, ids=[c.__name__ for c in ERRORS])
def test_every_error_pickles_with_its_message_and_attributes(cls):
    error = cls.__new__(cls)
    Exception.__init__(error, "what went wrong")
    error.detail = {"a": [1, 2]}
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls and str(back) == "what went wrong" and back.detail == {"a": [1, 2]}


def test_a_tripped_guardrail_keeps_its_name_kind_and_output():
    tripped = GuardrailTripped("input guardrail 'no_secrets' tripped", guardrail="no_secrets",
                               output={"found": "password"}, kind="input")
    back = pickle.loads(pickle.dumps(tripped))
    assert (back.guardrail, back.kind, back.output) == ("no_secrets", "input", {"found": "password"})
    assert str(back) == str(tripped)


def _raise_in_child(which: str) -> None:
    if which == "guardrail":
        raise GuardrailTripped("tripped", guardrail="g", output="why", kind="output")
    raise HookError("before_tool_call hook 'f' raised ValueError: x", hook="before_tool_call")


@pytest.mark.parametrize("which", ["guardrail", "hook"])
def test_an_error_raised_in_a_worker_process_reaches_the_parent_whole(which):
    # (before: the pool's result thread died unpickling it, and apply() waited forever)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        with pytest.raises((GuardrailTripped, HookError)) as caught:
            pool.apply(_raise_in_child, (which,))
    if which == "guardrail":
        assert (caught.value.guardrail, caught.value.output, caught.value.kind) == ("g", "why", "output")
    else:
        assert caught.value.hook == "before_tool_call"


def test_errors_built_as_agentkit_raises_them_round_trip():
    conflict = pickle.loads(pickle.dumps(StoreConflictError("the log moved on", expected_revision=3,
                                                            actual_revision=5)))
    assert (conflict.expected_revision, conflict.actual_revision, str(conflict)) == (3, 5, "the log moved on")
    plain = pickle.loads(pickle.dumps(ConfigurationError("max_steps must be at least 1")))
    assert type(plain) is ConfigurationError and isinstance(plain, ValueError)
