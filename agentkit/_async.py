"""The async front doors' one bridge to the sync runtime (private).

Async callers (ASGI views) await sync work run on a worker thread through
``anyio.to_thread`` -- never a second runtime, never an event loop of agentkit's own.
Cancelling the awaiting task cancels the work through its :class:`~agentkit.CancelToken`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

from .cancel import CancelToken
from .errors import ConfigurationError

__all__ = ["anyio_module", "run_sync_cancellable"]

T = TypeVar("T")


def anyio_module() -> ModuleType:
    """anyio, or a ConfigurationError naming the extra that installs it."""
    try:
        import anyio
        import anyio.to_thread  # noqa: F401 - the submodule the callers use
    except ImportError as exc:  # pragma: no cover - anyio comes with every ASGI framework
        raise ConfigurationError(
            "agentkit's async front doors (ask_async, async for over a stream, agentkit.web) "
            "need anyio: pip install 'sync-agentkit[web]'"
        ) from exc
    return anyio


async def run_sync_cancellable(fn: Callable[[CancelToken], T], cancel: CancelToken | None = None) -> T:
    """``fn(token)`` on a worker thread; ``token`` is cancelled when the awaiting task is
    cancelled (or when ``cancel`` is)."""
    anyio = anyio_module()
    token = CancelToken()
    if cancel is not None:
        cancel.link(token)
    try:
        result: T = await anyio.to_thread.run_sync(fn, token, abandon_on_cancel=True)
        return result
    except BaseException:
        token.cancel("the awaiting task was cancelled")  # a no-op when fn itself ended it
        raise
