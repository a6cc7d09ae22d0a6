"""One definition of the per-generation options for run_agent, Session and generate."""

from __future__ import annotations

from dataclasses import fields

import pytest

from agentkit import (
    Agent,
    ApprovalPolicy,
    ConfigurationError,
    FunctionModel,
    Hooks,
    Limits,
    ScriptedModel,
    Session,
    Threshold,
    ToolCall,
    ToolResultClearing,
    ToolSearch,
    run_agent,
)
from agentkit.context import build_model_messages
from agentkit.guardrails import output_guardrail
from agentkit.models import ModelSettings
from agentkit.options import GenerationOptions, option_names
from agentkit.tools import Skills


def test_every_option_is_a_keyword_of_run_agent_session_and_generate():
    # a value per option that differs from its default and is valid everywhere
    values = {
        "system": "be brief", "max_steps": 3, "tool_execution": "sequential", "tool_choice": "none",
        "settings": ModelSettings(temperature=0.5), "provider_options": {"x": 1}, "cache": False,
        "hooks": Hooks(), "on_token": print, "on_reasoning": print, "on_tool_call_start": print,
        "on_tool_call_update": print, "on_tool_call_finish": print,
        "validate_completion": lambda r: None, "max_validation_retries": 2,
        "on_context_overflow": lambda m, c: m, "max_context_overflow_retries": 1,
        "approval": ApprovalPolicy(mode="autopilot"), "approver": lambda r: True, "redact": r"sk-\w+",
        "limits": Limits(model_calls=5), "compactor": lambda m, *, reason, cancel: "s",
        "auto_compact": Threshold(tokens=10**6), "context_builder": build_model_messages,
        "clear_tool_results": ToolResultClearing(), "max_tool_output_chars": 1000,
        "output_type": int,
        "skills": Skills(), "tool_search": ToolSearch(),  # no skills, few tools: nothing added
        "guardrails": [output_guardrail(lambda output, ctx: None)],
        "name": "helper", "handoffs": [Agent(ScriptedModel([]), name="other")],  # offered, never called
    }
    assert set(values) == set(option_names())  # a new option needs a value here
    seen = []
    model = FunctionModel(lambda r: (seen.append(r), ToolCall(name="final_answer", input={"response": 7}))[1])
    run_agent(model, "hi", **values)
    with Session(model, **values) as s:
        s.push_user_message("hi")
        s.generate()
    with Session(model) as s:
        s.push_user_message("hi")
        s.generate(**values)
    for request in seen:
        # tool_choice "none" with an output_type: the model may call only the output tool
        assert (request.system, request.tool_choice, request.cache) == ("be brief", "final_answer", False)
        assert request.output is not None and request.output.name == "final_answer"
        assert request.settings.temperature == 0.5 and request.provider_options == {"x": 1}


@pytest.mark.parametrize("front_door", ["run_agent", "Session", "generate"])
def test_an_unknown_option_is_a_configuration_error_that_suggests_the_right_name(front_door):
    model = ScriptedModel(["never"])
    with pytest.raises(ConfigurationError, match="unknown option 'max_step'. Did you mean 'max_steps'"):
        if front_door == "run_agent":
            run_agent(model, "hi", max_step=3)
        elif front_door == "Session":
            Session(model, max_step=3)
        else:
            with Session(model) as s:
                s.push_user_message("hi")
                s.generate(max_step=3)
    assert model.requests == []


def test_generate_overrides_session_defaults_for_one_call():
    model = FunctionModel(lambda r: "ok")
    with Session(model, system="default", provider_options={"a": 1, "b": 1}, max_steps=5) as s:
        s.push_user_message("one")
        s.generate(system="override", provider_options={"b": 2}, max_steps=None)
        s.push_user_message("two")
        s.generate()
        s.push_user_message("three")
        s.generate(system=None)  # None is a value for system: no system prompt
    first, second, third = model.requests
    assert first.system == "override" and first.provider_options == {"a": 1, "b": 2}
    assert second.system == "default" and second.provider_options == {"a": 1, "b": 1}
    assert third.system is None


def test_callbacks_can_be_session_defaults_and_hooks_compose():
    tokens: list[str] = []
    order: list[str] = []
    session_hooks = Hooks(before_model_request=lambda r: order.append("session"))
    with Session(ScriptedModel(["ab", "cd"], chunk_size=1), on_token=tokens.append, hooks=session_hooks) as s:
        s.push_user_message("x")
        s.generate()
        s.push_user_message("y")
        s.generate(hooks=Hooks(before_model_request=lambda r: order.append("call")))
    assert tokens == ["a", "b", "c", "d"]
    assert order == ["session", "session", "call"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_steps": 0}, "max_steps must be a positive int"),
        ({"max_steps": True}, "max_steps must be a positive int"),
        ({"tool_execution": "eager"}, "tool_execution must be"),
        ({"on_token": "print"}, "on_token must be a callable"),
        ({"settings": {"temperature": 1}}, "settings must be a ModelSettings"),
        ({"provider_options": [1]}, "provider_options must be a dict"),
        ({"max_validation_retries": -1}, "max_validation_retries must be an int >= 0"),
        ({"system": 3}, "system must be a str"),
        ({"hooks": "x"}, "hooks must be a Hooks object"),
        ({"tool_choice": "nope"}, "tool_choice 'nope' is neither"),
    ],
)
def test_bad_option_values_are_refused_before_any_model_call(options, message):
    model = ScriptedModel(["never"])
    with pytest.raises(ConfigurationError, match=message):
        run_agent(model, "hi", **options)
    assert model.requests == []


def test_the_options_dataclass_documents_every_field():
    import inspect

    source = inspect.getsource(GenerationOptions)
    for f in fields(GenerationOptions):
        assert f.metadata["merge"] in ("replace", "compose", "update")
        after = source.split(f"    {f.name}:", 1)[1].splitlines()[1].strip()
        assert after.startswith('"""'), f"GenerationOptions.{f.name} has no docstring"


# What a caller may pass where it differs from the field's own type (the field holds the
# normalised value), and the options a front door takes as a parameter of its own.
_KWARG_TYPE_DIFFERS = {"hooks": ("HookChain", "Hooks | Sequence[Hooks] | None"),
                       "guardrails": ("Guardrails", "Guardrail | Sequence[Guardrail] | None"),
                       "handoffs": ("tuple[Handoff, ...]", "Sequence[Agent[Any, Any] | Handoff] | None")}
_OWN_PARAMETER = {"output_type"}  # decides the result's type: each front door's own parameter


def test_generation_kwargs_has_one_key_per_option_annotated_as_the_field_is():
    """GenerationKwargs (the typed keywords of every front door) and GenerationOptions stay
    one definition: a field added to one and not the other, or annotated differently,
    fails here."""
    from agentkit.options import _NONE_KEEPS, GenerationKwargs, GenerationOptions

    annotations = {
        name: getattr(kind, "__forward_arg__", kind) for name, kind in GenerationKwargs.__annotations__.items()
    }
    options = {f.name: f.type for f in fields(GenerationOptions)}
    assert set(annotations) == set(options) - _OWN_PARAMETER
    assert GenerationKwargs.__required_keys__ == frozenset()  # total=False: every option optional
    for name, kind in annotations.items():
        field_type, kwarg_type = _KWARG_TYPE_DIFFERS.get(name, (options[name], options[name]))
        if name in _NONE_KEEPS:  # None passed means "the defaults' value"
            kwarg_type = f"{kwarg_type} | None"
        assert options[name] == field_type, name
        assert kind == kwarg_type, f"GenerationKwargs[{name!r}] is {kind}, the field is {options[name]}"
