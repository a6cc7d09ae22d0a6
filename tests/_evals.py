"""What the agentkit.evals tests share: the evals extra's check (a test module without
pydantic-evals skips, saying what to install; in CI, AGENTKIT_CI=1, it fails), and an
EvaluatorContext for calling an evaluator directly."""

from __future__ import annotations

from typing import Any

import pytest
from _env import TAG, in_ci

HOW_TO = "missing the Python package 'pydantic-evals' (the evals extra): pip install -e '.[evals]'"


def require_evals() -> None:
    """Call at the top of a test module, before importing agentkit.evals' names."""
    try:
        import pydantic_evals  # noqa: F401
    except ImportError:
        if in_ci():
            pytest.fail(f"{HOW_TO} (AGENTKIT_CI=1: CI must run these tests)", pytrace=False)
        pytest.skip(TAG + HOW_TO, allow_module_level=True)


def context(output: Any, expected: Any = None) -> Any:
    """The EvaluatorContext pydantic-evals gives an evaluator for one case."""
    from pydantic_evals.evaluators import EvaluatorContext
    from pydantic_evals.otel._errors import SpanTreeRecordingError

    return EvaluatorContext(name="case", inputs="prompt", metadata=None, expected_output=expected, output=output,
                            duration=0.0, _span_tree=SpanTreeRecordingError("not recorded"), attributes={},
                            metrics={})
