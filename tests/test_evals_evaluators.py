"""agentkit's pydantic-evals evaluators, each passing and failing (agentkit/evals/_evaluators.py)."""

from __future__ import annotations

import dataclasses

import pydantic
import pytest
from _evals import context, require_evals

from agentkit import ConfigurationError, Step, ToolCallRecord, Usage
from agentkit.messages import ToolOutput

require_evals()

from agentkit.evals import (  # noqa: E402
    AgentOutput,
    AnswerMatches,
    MaxSteps,
    MaxTokens,
    OutputValidates,
    ToolCalled,
    ToolCallsMatch,
    ToolNotCalled,
)


def _call(name, **inp):
    return ToolCallRecord(tool_call_id=f"c-{name}", tool_name=name, input=inp, output=ToolOutput.text("ok"))


def _run(*calls, text="done", steps=1, tokens=(10, 5), output=None):
    step = Step(index=0, text="", tool_calls=(), usage=Usage(), finish_reason="stop")
    usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1], total_tokens=sum(tokens))
    return AgentOutput(text=text, tool_calls=calls, usage=usage, steps=(step,) * steps, output=output)


def _verdict(evaluator, output, expected=None):
    result = evaluator.evaluate(context(output, expected))
    return result.value, result.reason


RUN = _run(_call("lookup", order="A1", verbose=True), _call("email", to="bo"))


def test_tool_called_passes_when_called_with_the_given_arguments_and_fails_otherwise():
    assert _verdict(ToolCalled("lookup"), RUN) == (True, "lookup was called")
    assert _verdict(ToolCalled("lookup", {"order": "A1"}), RUN)[0] is True  # the given keys only
    assert _verdict(ToolCalled("refund"), RUN) == (
        False, 'refund was not called; the calls: lookup({"order": "A1", "verbose": true}), email({"to": "bo"})')
    assert _verdict(ToolCalled("lookup", {"order": "B2"}), RUN)[0] is False
    assert _verdict(ToolCalled("lookup", {"missing": None}), RUN)[0] is False  # a key the call lacks
    assert ToolCalled("lookup").get_default_evaluation_name() == "ToolCalled(lookup)"


def test_tool_not_called_passes_when_no_call_matches_and_fails_naming_the_calls():
    assert _verdict(ToolNotCalled("refund"), RUN) == (True, "refund was not called")
    assert _verdict(ToolNotCalled("lookup", {"order": "B2"}), RUN)[0] is True
    assert _verdict(ToolNotCalled("email"), RUN) == (False, 'email was called: email({"to": "bo"})')


def test_tool_calls_match_compares_names_inputs_and_order_with_the_expected_run():
    same = _run(_call("lookup", order="A1", verbose=True), _call("email", to="bo"))
    assert _verdict(ToolCallsMatch(), RUN, same)[0] is True
    swapped = _run(_call("email", to="bo"), _call("lookup", order="A1", verbose=True))
    value, reason = _verdict(ToolCallsMatch(), RUN, swapped)
    assert value is False and reason.startswith('expected email({"to": "bo"}), lookup(')
    other_inputs = _run(_call("lookup", order="Z9"), _call("email", to="al"))
    assert _verdict(ToolCallsMatch(), RUN, other_inputs)[0] is False
    assert _verdict(ToolCallsMatch(inputs=False), RUN, other_inputs) == (True, "the calls match: lookup, email")
    assert _verdict(ToolCallsMatch(), RUN, None) == (
        False, "the case has no expected output to compare the tool calls with")


def test_answer_matches_compares_the_final_text_with_the_expected_one():
    assert _verdict(AnswerMatches(), RUN, _run(text="done")) == (True, "the answer matches")
    assert _verdict(AnswerMatches(), RUN, "done")[0] is True  # a plain string, as a YAML file holds it
    assert _verdict(AnswerMatches(), RUN, "Done.") == (False, "expected 'Done.'; got 'done'")
    assert _verdict(AnswerMatches(), RUN, " done\n")[0] is False
    assert _verdict(AnswerMatches(strip=True), RUN, " done\n")[0] is True
    assert _verdict(AnswerMatches(), RUN, None)[0] is False


class Ticket(pydantic.BaseModel):
    order: str
    urgent: bool


@dataclasses.dataclass
class Loose:
    order: str
    urgent: str


def test_output_validates_checks_the_structured_output_or_the_answer_as_json():
    assert _verdict(OutputValidates(Ticket), _run(output=Ticket(order="A1", urgent=True))) == (True, "a valid Ticket")
    assert _verdict(OutputValidates(Ticket), _run(text='{"order": "A1", "urgent": false}'))[0] is True
    value, reason = _verdict(OutputValidates(Ticket), _run(text='{"order": "A1"}'))
    assert value is False and reason == "the answer text is not a valid Ticket: urgent: Field required"
    value, reason = _verdict(OutputValidates(Ticket), _run(output=Loose(order="A1", urgent="maybe")))
    assert value is False and reason.startswith("the structured output is not a valid Ticket: urgent:")
    assert _verdict(OutputValidates(list[int]), _run(text="[1, 2]"))[0] is True
    assert _verdict(OutputValidates(list[int]), _run(text="not json"))[0] is False


def test_max_tokens_and_max_steps_pass_within_the_budget_and_fail_over_it():
    assert _verdict(MaxTokens(15), RUN) == (True, "15 total tokens, within the budget of 15")
    assert _verdict(MaxTokens(14), RUN) == (False, "15 total tokens, over the budget of 14")
    assert _verdict(MaxTokens(5, kind="output"), RUN)[0] is True
    assert _verdict(MaxTokens(9, kind="input"), RUN) == (False, "10 input tokens, over the budget of 9")
    assert _verdict(MaxSteps(3), _run(steps=3)) == (True, "3 steps, within the budget of 3")
    assert _verdict(MaxSteps(2), _run(steps=3)) == (False, "3 steps, over the budget of 2")


def test_bad_arguments_are_refused_when_the_evaluator_is_built():
    for build, message in [
        (lambda: ToolCalled(""), "needs the tool's name"),
        (lambda: ToolNotCalled("x", arguments=["a"]), "arguments must be a mapping"),  # type: ignore[arg-type]
        (lambda: MaxTokens(-1), "max_tokens, a whole number >= 0"),
        (lambda: MaxTokens(10, kind="cached"), "kind must be one of total, input, output"),  # type: ignore[arg-type]
        (lambda: MaxSteps(0), "max_steps, a whole number >= 1"),
        (lambda: OutputValidates(object()), "pydantic cannot validate"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            build()


def test_an_output_that_is_not_a_run_is_an_error_naming_what_the_task_must_return():
    from agentkit import RunResult

    with pytest.raises(ConfigurationError, match="must be an agentkit.evals.AgentOutput .* got str"):
        ToolCalled("lookup").evaluate(context("just text"))
    result = RunResult(text="done", finish_reason="stop", steps=(), messages=(), usage=Usage(),
                       tool_calls=(_call("lookup"),))
    assert _verdict(ToolCalled("lookup"), result)[0] is True  # a RunResult is taken too
