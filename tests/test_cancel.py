"""CancelToken: flags, waiting, parents and children across threads."""

from __future__ import annotations

import gc
import threading
import time
import weakref

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


def test_link_to_an_active_parent_cancels_the_child_later_with_the_parents_reason():
    parent, child = CancelToken(), CancelToken()
    parent.link(child)
    assert not child.cancelled
    parent.cancel("parent stopped")
    assert child.cancelled and child.reason == "parent stopped"


def test_link_to_a_cancelled_parent_cancels_the_child_at_once():
    parent, child = CancelToken(), CancelToken()
    parent.cancel("already gone")
    parent.link(child)
    assert child.cancelled and child.reason == "already gone"
    assert parent.child().reason == "already gone"


def test_cancel_without_a_reason_says_cancelled_everywhere():
    parent = CancelToken()
    child = parent.child()
    parent.cancel()
    assert parent.reason == child.reason == "cancelled"
    with pytest.raises(CancelledError, match="cancelled"):
        child.raise_if_cancelled()
    assert repr(parent) == "<CancelToken cancelled: cancelled>"
    assert repr(CancelToken()) == "<CancelToken active>"


def test_a_cancelled_child_does_not_cancel_its_parent_or_siblings_and_wait_returns_at_once():
    parent = CancelToken()
    a, b = parent.child(), parent.child()
    a.cancel("a only")
    assert a.wait(0) is True and a.wait(None) is True
    assert not parent.cancelled and not b.cancelled and b.wait(0) is False


def test_children_are_not_kept_alive_by_their_parent():
    parent = CancelToken()
    ref = weakref.ref(parent.child())
    gc.collect()
    assert ref() is None
    parent.cancel("nothing left to reach")


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def test_cancel_callbacks_run_once_when_cancelled_and_at_once_when_already_cancelled():
    token = CancelToken()
    first, second = Counter(), Counter()
    token._on_cancel(first)
    token._on_cancel(second)
    assert (first.calls, second.calls) == (0, 0)
    token.cancel("x")
    token.cancel("y")
    assert (first.calls, second.calls) == (1, 1)
    late = Counter()
    remove = token._on_cancel(late)
    assert late.calls == 1
    remove()  # harmless
    assert late.calls == 1


def test_a_removed_cancel_callback_is_forgotten_not_called_and_not_kept():
    """Long-lived tokens (a session's) get a callback per wait; removed ones must not pile up."""
    token = CancelToken()
    kept = Counter()
    token._on_cancel(kept)
    refs = []
    for _ in range(100):
        cb = Counter()
        refs.append(weakref.ref(cb))
        remove = token._on_cancel(cb)
        remove()
        remove()  # twice is harmless
        del cb, remove
    gc.collect()
    assert all(r() is None for r in refs)
    token.cancel("done")
    assert kept.calls == 1


def test_callbacks_run_without_the_tokens_lock_held():
    token = CancelToken()
    seen = []
    # a callback that uses the token again would deadlock if the lock were held
    token._on_cancel(lambda: seen.append((token.cancelled, token.child().cancelled, repr(token))))
    worker = threading.Thread(target=token.cancel, args=("go",), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "cancel() deadlocked in its callback"
    assert seen == [(True, True, "<CancelToken cancelled: go>")]


def test_concurrent_cancels_agree_on_one_reason_and_run_callbacks_once():
    for _ in range(20):
        token = CancelToken()
        child = token.child()
        calls = Counter()
        token._on_cancel(calls)
        barrier = threading.Barrier(8)

        def cancel(n: int, token: CancelToken = token, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            token.cancel(f"r{n}")

        threads = [threading.Thread(target=cancel, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert calls.calls == 1
        assert token.reason in {f"r{n}" for n in range(8)} and child.reason == token.reason
