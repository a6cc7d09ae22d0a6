"""CancelToken: flags, waiting, parents and children across threads."""

from __future__ import annotations

import threading
import time

import pytest

from agentkit import CancelledError, CancelToken


def test_cancel_sets_flag_reason_and_raises():
    t = CancelToken()
    assert not t.cancelled and t.reason is None
    t.raise_if_cancelled()
    t.cancel("stop now")
    t.cancel("second reason is ignored")
    assert t.cancelled and t.is_set() and t.reason == "stop now"
    with pytest.raises(CancelledError, match="stop now"):
        t.raise_if_cancelled()


def test_wait_returns_false_on_timeout_and_true_when_cancelled_from_another_thread():
    t = CancelToken()
    assert t.wait(0.01) is False
    threading.Timer(0.05, t.cancel, args=("later",)).start()
    start = time.monotonic()
    assert t.wait(10) is True
    assert time.monotonic() - start < 9


def test_parent_cancels_children_but_not_the_reverse():
    parent = CancelToken()
    child = parent.child()
    grandchild = child.child()
    sibling = parent.child()
    sibling.cancel("only me")
    assert not parent.cancelled and not child.cancelled
    parent.cancel("all")
    assert child.cancelled and grandchild.cancelled and grandchild.reason == "all"


def test_child_of_cancelled_parent_starts_cancelled_and_link_adds_a_second_parent():
    parent = CancelToken()
    parent.cancel("gone")
    assert parent.child().cancelled
    a, b = CancelToken(), CancelToken()
    shared = a.child()
    b.link(shared)
    b.cancel("via b")
    assert shared.cancelled and not a.cancelled
