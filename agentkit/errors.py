"""The agentkit exception hierarchy.

Every error agentkit raises derives from :class:`AgentkitError`. Where a built-in
exception describes the same failure, the agentkit error also inherits from it, so
ordinary ``except ValueError`` / ``except TimeoutError`` handlers keep working::

    AgentkitError
    ├── ConfigurationError (ValueError)        bad arguments, caught before any side effect
    │   └── MissingDependencyError (ImportError) an optional extra is not installed
    ├── CancelledError                          a CancelToken was cancelled
    ├── ModelError                              the model call failed
    │   ├── ContextOverflowError                the prompt exceeds the context window
    │   ├── ScriptExhaustedError                a ScriptedModel ran out of turns
    │   └── ProviderError                       a provider API answered with an error
    │       ├── AuthenticationError
    │       ├── RateLimitError
    │       └── ProviderUnavailableError        5xx / overloaded / connection failures
    ├── ToolDefinitionError (ValueError)        a tool is defined wrongly (duplicate name, bad schema)
    ├── CompletionValidationError               validate_completion retries were exhausted
    ├── OutputValidationError                   the structured output stayed invalid after all retries
    ├── HookError                               a hook raised or returned something unusable
    ├── GuardrailTripped                        a guardrail tripped and ended the generation
    ├── SessionError
    │   ├── SessionClosedError                  the session was closed or aborted
    │   ├── SessionFailedError                  a previous append failed; the session refuses work
    │   ├── ApprovalError                       an approval request cannot be decided (unknown, already decided)
    │   ├── InputError                          a human-input request cannot be answered (unknown, settled, schema)
    │   └── TransactionError                    an illegal transaction step or intent reconciliation
    ├── StoreError
    │   ├── StoreConflictError                  compare-and-swap: the expected revision is stale
    │   ├── StoreCorruptionError                a record in the middle of a log is damaged
    │   ├── SchemaVersionError                  a record was written by a newer agentkit
    │   ├── StoreLockTimeout (TimeoutError)     a store lock stayed held past the timeout
    │   ├── StoreUnavailableError               the database server could not be reached
    │   └── TurnLockLostError                   a turn lock's holder lost it; its append was refused
    ├── AccessDenied (PermissionError)          an execution context refused an operation
    ├── JobNotFoundError (LookupError)          no background job has this execution id
    ├── BrokerUnavailableError (ConnectionError) a task queue's broker could not take a task
    ├── McpError                                an MCP server could not be connected or used
    ├── BrowserError                            a browser could not be started or could not do an action
    ├── RunLimitTimeout (TimeoutError)          a run waited queue_timeout for a max_concurrent_runs slot
    └── AgentClosedError                        the agent was closed: it starts no more runs
"""

from __future__ import annotations

from typing import Any


class AgentkitError(Exception):
    """Base class of every error agentkit raises.

    Every agentkit error pickles with its attributes (``GuardrailTripped.output``,
    ``HookError.hook``...), so it crosses a process boundary (multiprocessing, a Celery
    result) whole, although most take keyword-only arguments."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args, self.__dict__), None, None, None)


def _rebuilt(cls: type[AgentkitError], args: tuple[Any, ...], state: dict[str, Any]) -> AgentkitError:
    """An unpickled error: its message and attributes set without calling its ``__init__``."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class ConfigurationError(AgentkitError, ValueError):
    """An argument or setting is invalid. Raised before any side effect."""


_DISTRIBUTION = "sync-agentkit"
"""The name agentkit is published under on the package index (the import name is
``agentkit``; the index name ``agentkit`` belongs to an unrelated project)."""


def _install_hint(extra: str) -> str:
    """The commands that install ``extra``: from the package index, and in a checkout."""
    return f"pip install '{_DISTRIBUTION}[{extra}]' (in a checkout of agentkit: pip install -e '.[{extra}]')"


class MissingDependencyError(ConfigurationError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, package: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the '{package}' package, which is not installed. "
            f"Install it with: {_install_hint(extra)}"
        )
        self.package = package
        self.extra = extra


class CancelledError(AgentkitError):
    """Work stopped because its :class:`~agentkit.CancelToken` was cancelled."""

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason or "cancelled")
        self.reason = reason


class ModelError(AgentkitError):
    """A model call failed.

    ``provider`` names the API that failed (``"openai"``, ``"anthropic"``, a LangChain
    model's type; empty when no provider was involved) and ``status_code`` is the HTTP
    status when there was one.
    """

    def __init__(self, message: str = "", *, provider: str = "", status_code: int | None = None) -> None:
        super().__init__(message)
        self.provider: str = provider
        self.status_code: int | None = status_code


class ContextOverflowError(ModelError):
    """The request does not fit the model's context window."""


class ScriptExhaustedError(ModelError):
    """A :class:`~agentkit.ScriptedModel` received more requests than it has turns."""


class ProviderError(ModelError):
    """A provider API answered with an error (or with something that is not its API).

    ``status_code`` is the HTTP status when there was one; ``provider`` names the API.
    """


class AuthenticationError(ProviderError):
    """The provider rejected the credentials. Not retried."""


class RateLimitError(ProviderError):
    """The provider rate-limited the request and retries were exhausted."""


class ProviderUnavailableError(ProviderError):
    """The provider was overloaded, failed with a 5xx or could not be reached, after retries."""


class ToolDefinitionError(AgentkitError, ValueError):
    """A tool is defined wrongly: a duplicate name, an invalid schema or signature."""


class CompletionValidationError(AgentkitError):
    """``validate_completion`` kept rejecting the answer after all allowed retries."""

    def __init__(self, message: str, *, feedback: str, attempts: int) -> None:
        super().__init__(message)
        self.feedback = feedback
        self.attempts = attempts


class OutputValidationError(AgentkitError):
    """The model's structured output (``output_type=``) was still invalid after
    ``max_validation_retries`` retries. ``raw`` is the last output as the model gave it
    (the JSON text, or the output tool's input), ``errors`` what was wrong with it."""

    def __init__(self, message: str, *, raw: Any, errors: str, attempts: int) -> None:
        super().__init__(message)
        self.raw = raw
        self.errors = errors
        self.attempts = attempts


class SessionError(AgentkitError):
    """A session cannot do what was asked."""


class SessionClosedError(SessionError):
    """The session was closed (or aborted) and accepts no more work."""


class SessionFailedError(SessionError):
    """An earlier append to the event store failed, so this session object refuses work.

    Reopen the session with ``Session.open`` to continue from what is durable.
    """


class ApprovalError(SessionError):
    """An approval request cannot be decided: its id is unknown, it was already decided,
    or the conversation moved on without it. ``request_id`` names it."""

    def __init__(self, message: str, *, request_id: object = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class TransactionError(SessionError):
    """A transactional generation or an execution intent refused a step: a wrong or stale
    claim token, a second execution claim, a transition its state does not allow, a
    different outcome or reconciliation than the one already recorded. Nothing was run
    or committed."""


class InputError(SessionError):
    """A human-input request cannot be answered or cancelled. ``request_id`` names it;
    ``kind`` says why: ``"unknown"`` (no such request), ``"answered"``, ``"closed"``
    (cancelled, or its call was closed otherwise), ``"expired"``, or ``"invalid"`` (the
    answer breaks the request's schema or is not JSON: the request stays pending)."""

    def __init__(self, message: str, *, request_id: object = None, kind: str = "invalid") -> None:
        super().__init__(message)
        self.request_id = request_id
        self.kind = kind


class StoreError(AgentkitError):
    """An event store operation failed."""


class StoreConflictError(StoreError):
    """Compare-and-swap failed: another writer appended first. Nothing was written."""

    def __init__(self, message: str, *, expected_revision: int, actual_revision: int) -> None:
        super().__init__(message)
        self.expected_revision = expected_revision
        self.actual_revision = actual_revision


class StoreCorruptionError(StoreError):
    """A stored record that is not the tail of its log is damaged."""


class SchemaVersionError(StoreError):
    """A stored record has a schema version newer than this agentkit understands."""


class StoreLockTimeout(StoreError, TimeoutError):
    """A store lock stayed held longer than the configured timeout. Locks are never stolen."""


class StoreUnavailableError(StoreError):
    """A database store could not be reached (a lost connection, a server restart).

    ``written`` says what became of the write that failed: ``False`` (checked: nothing was
    written), ``True`` (checked: it was written) or ``None`` (unknown: the server could not
    be asked). A session that meets this error stays usable: call
    :meth:`~agentkit.Session.refresh` once the server is back, then retry."""

    def __init__(self, message: str, *, written: bool | None = False) -> None:
        super().__init__(message)
        self.written = written


class TurnLockLostError(StoreError):
    """An append made under a turn lock (:meth:`EventStore.turn_lock`) that its holder no
    longer holds (its lock connection died, or another process was granted the lock since):
    nothing was written. Another process may be running this conversation's turn now;
    this one must stop. Reopen or refresh the session and start a new turn."""


class AccessDenied(AgentkitError, PermissionError):
    """An execution context refused an operation (path escape, read-only root, veto)."""


class JobNotFoundError(AgentkitError, LookupError):
    """No job with this execution id is known (it may have been pruned)."""


class BrokerUnavailableError(AgentkitError, ConnectionError):
    """A task queue's broker (Redis, for :mod:`agentkit.celery`) could not take a task:
    nothing was started and nothing was recorded. ``broker`` is the broker's URL (its
    password masked). Start the broker (or fix its URL) and try again."""

    def __init__(self, message: str, *, broker: str = "") -> None:
        super().__init__(message)
        self.broker = broker


class McpError(AgentkitError):
    """An MCP server could not be connected or used (raised by :mod:`agentkit.mcp`).

    A failing server never crashes an agent loop: tool calls report failures as error
    results. This error is raised by the toolset itself, for example when
    ``fail_on_no_tools=True`` and no server mounted a tool, or on use after ``close()``.
    """


class HookError(AgentkitError):
    """A hook (see :class:`agentkit.Hooks`) raised or returned something it may not.

    The generation ends with this error; ``hook`` names the hook point
    (``before_model_request``, ``before_tool_call``, ``after_tool_call``,
    ``on_generation_end``) and ``__cause__`` holds what the hook raised."""

    def __init__(self, message: str, *, hook: str) -> None:
        super().__init__(message)
        self.hook = hook


class BrowserError(AgentkitError):
    """A browser could not be started, or could not do what was asked (a page that did
    not load in time, an element reference that matches nothing, a browser that exited).

    The browser tools report it to the model as an error result; it reaches the host only
    from :class:`~agentkit.browser.ChromiumBrowser` itself (start-up, use after close)."""


class RunLimitTimeout(AgentkitError, TimeoutError):
    """A run waited ``queue_timeout`` seconds for a slot under ``max_concurrent_runs`` and
    got none (see :class:`~agentkit.Agent`): it did not start, nothing was committed.
    ``limit`` is the cap, ``waited`` the seconds it waited. Retry later, or raise the cap
    or the timeout."""

    def __init__(self, message: str, *, limit: int | None, waited: float | None) -> None:
        super().__init__(message)
        self.limit = limit
        self.waited = waited


class AgentClosedError(AgentkitError):
    """The agent was closed (:meth:`~agentkit.Agent.close`): it starts no more runs, and
    a run that was still waiting for a slot did not start. Make a new Agent to run again."""


class GuardrailTripped(AgentkitError):
    """A guardrail (``guardrails=``, see :mod:`agentkit.guardrails`) tripped and ended the
    generation. ``guardrail`` is its name, ``kind`` its kind (``input``, ``output``,
    ``tool-input``, ``tool-output``) and ``output`` what its function returned (truthy).
    The session's log records it as a ``guardrail-tripped`` control event."""

    def __init__(self, message: str, *, guardrail: str, output: Any, kind: str) -> None:
        super().__init__(message)
        self.guardrail = guardrail
        self.output = output
        self.kind = kind
