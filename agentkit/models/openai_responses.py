"""The OpenAI Responses API behind the ChatModel port.

Built on the official ``openai`` SDK's ``client.responses``. Install with
``pip install 'sync-agentkit[openai]'``; the spec is ``"openai-responses:<model>"``.
Function tools, reasoning items carried across turns (encrypted with ``store=False``),
structured output through ``text.format``, usage with reasoning and cached tokens, and
optional server-side conversation state (``server_state=True``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..cancel import CancelToken
from ..errors import ConfigurationError, MissingDependencyError
from ._common import check_tool_choice, function_tools, sdk_call_kwargs
from ._errors import api_failure, translate_sdk_error
from ._responses_events import ResponseFailed, ResponseReader
from ._responses_items import chain_digest, receipt_of, to_input_items
from ._retry import RetryInfo, RetryPolicy, TranslatedError
from ._sdk import SDKModel, _Interrupter
from .base import ModelRequest, OutputMode, OutputSpec, StreamEvent
from .openai import _openai_client, _response_format

try:
    import openai as _openai
except ImportError:  # pragma: no cover - exercised when the extra is missing
    _openai = None  # type: ignore[assignment]

__all__ = ["OpenAIResponsesModel"]

_SUMMARIES = (None, "auto", "concise", "detailed")
_FORGOTTEN = re.compile(r"previous.response.*not found", re.IGNORECASE)


@dataclass(frozen=True)
class _Plan:
    """One request, twice: with the whole history, and (server-side state) with the new
    input only after ``previous_response_id``; ``chain`` digests the whole input."""

    full: dict[str, Any]
    chained: dict[str, Any] | None
    chain: str | None


class OpenAIResponsesModel(SDKModel):
    """A model on the OpenAI Responses API (``POST /v1/responses``).

    ``OpenAIResponsesModel("gpt-5-mini")`` reads ``OPENAI_API_KEY``; ``base_url`` (with
    ``/v1``) names a compatible server (``OPENAI_API_KEY`` is never sent to one: pass
    ``api_key=``). ``client=`` reuses a configured ``openai.OpenAI``; its own retries are
    off, ``retry`` (a :class:`RetryPolicy`) is the only retry loop. ``stream=False``
    asks for whole responses.

    Reasoning items come back as :class:`~agentkit.messages.ReasoningPart`\\ s whose
    ``signature`` holds the item (id, summary, encrypted content), and are sent back in
    front of what followed them on the next turn, also from a stored session.
    ``store=False`` keeps nothing on OpenAI's side: the encrypted reasoning is then
    asked for (``include=["reasoning.encrypted_content"]``) and carried instead.
    ``reasoning_summary`` (``"auto"``, ``"concise"``, ``"detailed"``) asks for reasoning
    summaries; ``ModelSettings.reasoning_effort`` becomes ``reasoning.effort``.

    ``server_state=True`` uses the server's copy of the conversation: when the history
    ends with new messages after a response this model produced (its id is kept on the
    assistant message) and the history before that response is unchanged, only the new
    messages are sent, with ``previous_response_id``. When the server no longer knows
    that response (expired, deleted, another project), the same request is sent again
    with the whole history. Needs ``store`` left on.

    A structured output (``output_type=``) is asked for as a ``json_schema`` text format
    (``text.format``, ``strict`` when the schema meets strict mode's rules).
    """

    provider = "openai"
    output_mode: OutputMode = "json-schema"

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        api_key: str | Callable[[], str] | None = None,
        base_url: str | None = None,
        stream: bool = True,
        store: bool | None = None,
        server_state: bool = False,
        reasoning_summary: Literal["auto", "concise", "detailed"] | None = None,
        organization: str | None = None,
        timeout: float | None = None,
        default_headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        on_retry: Callable[[RetryInfo], Any] | None = None,
        cache: bool | None = None,
        system_role: Literal["system", "developer"] = "system",
    ) -> None:
        if _openai is None:
            raise MissingDependencyError("openai", "openai", "OpenAIResponsesModel")
        if not isinstance(model, str) or not model:
            raise ConfigurationError("OpenAIResponsesModel needs a model name, e.g. 'gpt-5-mini'")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError("retry must be an agentkit.models.RetryPolicy")
        if store not in (None, True, False):
            raise ConfigurationError(f"store must be True, False or None (the server's default), not {store!r}")
        if server_state and store is False:
            raise ConfigurationError(
                "server_state=True continues from responses the server stored, so it cannot be combined "
                "with store=False; leave store on, or turn server_state off to send the whole history"
            )
        if reasoning_summary not in _SUMMARIES:
            raise ConfigurationError(
                f"reasoning_summary must be 'auto', 'concise', 'detailed' or None, not {reasoning_summary!r}"
            )
        if system_role not in ("system", "developer"):
            raise ConfigurationError("system_role must be 'system' or 'developer'")
        self.model_name = model
        self._api_key = api_key if callable(api_key) else None
        self._client, official = _openai_client(client, api_key, base_url, timeout, default_headers, organization)
        self._stream = bool(stream)
        self._store = store
        self.server_state = bool(server_state)
        self._summary = reasoning_summary
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self._cache = official if cache is None else bool(cache)
        self._system_role = system_role

    def __repr__(self) -> str:
        return f"OpenAIResponsesModel({self.model_name!r}, base_url={str(self._client.base_url)!r})"

    # -- the port (stream() comes from ProviderModel) ------------------------------------

    def translate_error(self, exc: Exception) -> TranslatedError | None:
        """The openai SDK's exceptions (and raw transport or JSON errors it lets through),
        and failed responses, as agentkit errors; None for anything else."""
        if isinstance(exc, ResponseFailed):
            return api_failure(exc, "openai", "OpenAI Responses")
        return translate_sdk_error(exc, _openai, "openai", "OpenAI Responses", str(self._client.base_url))

    def _create(self) -> Callable[..., Any]:
        return self._client.responses.create  # type: ignore[no-any-return]

    def _events(self, response: Any, kwargs: dict[str, Any], cancel: CancelToken,
                chain: str | None = None) -> Iterator[StreamEvent]:
        reader = ResponseReader(chain)
        if kwargs.get("stream"):
            return reader.read_stream(response, cancel)
        return reader.read_response(response)

    def prepare(self, request: ModelRequest) -> Callable[[], Iterator[StreamEvent]]:
        plan = self._plan(request)
        create = self._create()
        full = sdk_call_kwargs(create, plan.full)
        chained = [sdk_call_kwargs(create, plan.chained)] if plan.chained is not None else []
        cancel = request.cancel

        def attempt() -> Iterator[StreamEvent]:
            kwargs = chained[0] if chained else full
            try:
                response = self._open(create, kwargs, cancel)
            except Exception as exc:
                if kwargs is full or not _forgot_previous(exc):
                    raise
                chained.clear()  # the server forgot that response: the whole history, from now on
                kwargs = full
                response = self._open(create, full, cancel)
            forget = cancel._on_cancel(_Interrupter(response))
            try:
                yield from self._events(response, kwargs, cancel, plan.chain)
            finally:
                forget()

        return attempt

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The request body agentkit would send first (after ``provider_options``): with
        server-side state and a response to continue from, only the new input."""
        plan = self._plan(request)
        return plan.chained if plan.chained is not None else plan.full

    def _plan(self, request: ModelRequest) -> _Plan:
        check_tool_choice(request)
        groups = to_input_items(request.messages, self._system_role, stored=self._store is not False)
        params = self._body(request)
        full = {**params, "input": [i for g in groups for i in g]}
        _apply_options(full, request.provider_options)
        if not self.server_state or "previous_response_id" in request.provider_options:
            return _Plan(full, None, None)
        chain = chain_digest(groups)
        for index in range(len(request.messages) - 1, -1, -1):
            message = request.messages[index]
            receipt = receipt_of(message) if message.role == "assistant" else None
            if receipt is None or "chain" not in receipt:
                continue
            if receipt["chain"] != chain_digest(groups[:index]):
                break  # the history before that response changed (compaction, an edit)
            new = [i for g in groups[index + 1:] for i in g]
            if not new:
                break
            chained = {**params, "input": new, "previous_response_id": receipt["response_id"]}
            _apply_options(chained, request.provider_options)
            return _Plan(full, chained, chain)
        return _Plan(full, None, chain)

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        """Everything but the input."""
        params: dict[str, Any] = {"model": self.model_name}
        if request.system:
            params["instructions"] = request.system
        if request.tools:
            # the Chat Completions function tool, flat; not strict (the API's default is)
            params["tools"] = [{"type": "function", **t["function"], "strict": False}
                               for t in function_tools(request.tools)]
            choice = request.tool_choice
            params["tool_choice"] = (choice if choice in ("auto", "none", "required")
                                     else {"type": "function", "name": choice})
        s = request.settings
        if s.temperature is not None:
            params["temperature"] = s.temperature
        if s.top_p is not None:
            params["top_p"] = s.top_p
        if s.max_tokens is not None:
            params["max_output_tokens"] = s.max_tokens
        for name, given in (("stop", bool(s.stop)), ("seed", s.seed is not None),
                            ("reasoning_budget", s.reasoning_budget is not None)):
            if given:
                raise ConfigurationError(
                    f"OpenAIResponsesModel cannot apply ModelSettings.{name}: the Responses API has no such "
                    f"setting. Leave it unset (for reasoning, use ModelSettings(reasoning_effort=...))"
                )
        reasoning: dict[str, Any] = {}
        if s.reasoning_effort is not None:
            reasoning["effort"] = s.reasoning_effort
        if self._summary is not None:
            reasoning["summary"] = self._summary
        if reasoning:
            params["reasoning"] = reasoning
        if self._store is not None:
            params["store"] = self._store
        if self._store is False:
            params["include"] = ["reasoning.encrypted_content"]
        if self._stream:
            params["stream"] = True
        if request.output is not None and request.output.mode == "json-schema":
            params["text"] = {"format": _text_format(request.output)}
        if request.cache and self._cache and request.session_id:
            params["prompt_cache_key"] = request.session_id
        return params


def _apply_options(params: dict[str, Any], options: Mapping[str, Any]) -> None:
    """The caller's ``provider_options`` over agentkit's body; ``text`` and
    ``reasoning`` are merged key by key (``text.verbosity`` beside a ``text.format``)."""
    for key, value in options.items():
        if key in ("text", "reasoning") and isinstance(value, Mapping) and isinstance(params.get(key), Mapping):
            params[key] = {**params[key], **value}
        else:
            params[key] = value


def _text_format(output: OutputSpec) -> dict[str, Any]:
    """A structured output as a Responses ``json_schema`` text format: the Chat
    Completions ``json_schema`` spec, flat."""
    return {"type": "json_schema", **_response_format(output)["json_schema"]}


def _forgot_previous(exc: Exception) -> bool:
    """Whether ``exc`` is the server saying it does not know ``previous_response_id``."""
    if _openai is None or not isinstance(exc, _openai.APIStatusError) or exc.status_code not in (400, 404):
        return False
    body = exc.body if isinstance(exc.body, Mapping) else {}
    error = body.get("error", body)
    if not isinstance(error, Mapping):
        return False
    if error.get("code") == "previous_response_not_found":
        return True
    return error.get("param") == "previous_response_id" and bool(_FORGOTTEN.search(str(error.get("message", ""))))
