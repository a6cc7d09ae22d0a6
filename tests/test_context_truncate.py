from __future__ import annotations

import pytest

from agentkit import ConfigurationError
from agentkit.context import truncate_output


def test_short_text_is_untouched():
    out = truncate_output("a\nb\n", max_lines=5, max_bytes=100)
    assert out.content == "a\nb\n" and not out.truncated and out.notice == "" and out.text() == "a\nb\n"
    assert out.total_lines == 2 and out.total_bytes == 4


def test_line_limit_keeps_the_head_and_says_so():
    text = "".join(f"line {i}\n" for i in range(100))
    out = truncate_output(text, max_lines=10, max_bytes=10_000)
    assert out.truncated
    assert out.content.splitlines() == [f"line {i}" for i in range(10)]
    assert "first 10 of 100 lines" in out.notice
    assert out.text().endswith(out.notice)


def test_tail_mode_keeps_the_end():
    text = "".join(f"line {i}\n" for i in range(100))
    out = truncate_output(text, max_lines=3, max_bytes=10_000, keep="tail")
    assert out.content.splitlines() == ["line 97", "line 98", "line 99"]
    assert "last 3 of 100 lines" in out.notice


@pytest.mark.parametrize("keep", ["head", "tail"])
def test_byte_limit_never_splits_a_code_point(keep):
    text = "é" * 1000  # two bytes each
    out = truncate_output(text, max_lines=10, max_bytes=101, keep=keep)
    assert out.truncated
    assert set(out.content) == {"é"}
    assert len(out.content.encode("utf-8")) <= 101
    assert out.total_bytes == 2000


@pytest.mark.parametrize(
    "kwargs",
    [{"max_lines": 0}, {"max_bytes": -1}, {"keep": "middle"}, {"max_lines": "10"}],
)
def test_bad_limits_are_rejected(kwargs):
    with pytest.raises(ConfigurationError):
        truncate_output("x", **kwargs)


def test_non_text_is_rejected():
    with pytest.raises(ConfigurationError, match="str"):
        truncate_output(b"bytes")  # type: ignore[arg-type]
