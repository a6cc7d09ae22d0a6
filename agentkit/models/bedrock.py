"""AWS Bedrock's Converse / ConverseStream API behind the ChatModel port.

Built on ``boto3``'s ``bedrock-runtime`` client. Install with
``pip install 'sync-agentkit[bedrock]'``. Credentials and region come from boto3's usual
chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``,
``AWS_PROFILE`` and ``~/.aws/config``, SSO, instance and container roles...).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._threads import run_and_wait
from ..errors import (
    AuthenticationError,
    ConfigurationError,
    ContextOverflowError,
    MissingDependencyError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from ._bedrock_messages import to_bedrock_messages
from ._bedrock_stream import StreamInterrupter, converse_events, stream_events
from ._common import check_tool_choice
from ._errors import _is_overflow, connection_failure, invalid_payload
from ._retry import RetryInfo, RetryPolicy, TranslatedError, parse_retry_after
from .adapter import ProviderModel
from .base import ModelRequest, OutputMode, StreamEvent

try:
    import boto3 as _boto3
    import botocore.config as _botocore_config
    import botocore.exceptions as _botocore_errors
except ImportError:  # pragma: no cover - exercised when the extra is missing
    _boto3 = None

__all__ = ["BedrockModel"]

# error codes (lower-cased: inside a stream they arrive as "throttlingException")
_AUTH = frozenset({
    "accessdeniedexception", "unrecognizedclientexception", "invalidsignatureexception",
    "expiredtokenexception", "expiredexception", "missingauthenticationtokenexception",
    "incompletesignatureexception", "invalidclienttokenid", "signaturedoesnotmatch",
})
_TRANSIENT = frozenset({
    "serviceunavailableexception", "internalserverexception", "modelnotreadyexception",
    "modeltimeoutexception", "modelstreamerrorexception",
})
_CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
# what Bedrock's models say about a prompt over their window, besides the shared markers
_OVERFLOW = ("too many input tokens", "input token count exceeds", "exceeds the maximum number of input tokens")


class BedrockModel(ProviderModel):
    """A model on AWS Bedrock, through the Converse API.

    ``BedrockModel("anthropic.claude-3-5-haiku-20241022-v1:0")`` (a model id, an
    inference profile such as ``"us.anthropic.claude-sonnet-4-20250514-v1:0"``, or an
    ARN) finds credentials and region the way boto3 does; ``region=`` and ``profile=``
    choose them, ``endpoint_url=`` sends the requests to another endpoint (a VPC endpoint,
    a test server). Pass ``client=`` to reuse a configured ``bedrock-runtime`` client
    (give it ``botocore.config.Config(retries={"total_max_attempts": 1})``: botocore's
    ``max_attempts`` counts retries, not attempts). The client agentkit builds makes one
    attempt per call, so throttling and server faults are retried by ``retry`` (a
    :class:`RetryPolicy`) alone, never by both.

    ``stream=False`` calls ``Converse`` instead of ``ConverseStream``. ``max_tokens`` is
    sent as ``inferenceConfig.maxTokens`` when ``ModelSettings.max_tokens`` is not set
    (None leaves the model's default). ``ModelSettings.reasoning_budget`` turns on
    extended thinking for Claude models (``additionalModelRequestFields.thinking``);
    ``reasoning_effort`` is sent as ``outputConfig.effort``. ``cache=True`` places
    ``cachePoint`` blocks after the system prompt (or the tools) and after the last user
    message, for the models that support prompt caching; it is off by default because the
    others reject them. ``provider_options`` are merged into the Converse request
    (``guardrailConfig``, ``additionalModelRequestFields``, ...).

    A structured output (``output_type=``) is the input of a tool the model is made to
    call (``toolChoice`` names it, or ``any`` when the model has other tools to call
    first): Converse has no JSON mode every model supports. Models that take no forced
    ``toolChoice`` (Meta Llama, Cohere Command R) need ``force_output_tool=False``: the
    choice then stays ``auto``, and agentkit sends the model back if it answers in text.
    """

    provider = "bedrock"
    output_mode: OutputMode = "tool"

    def __init__(
        self,
        model_id: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        stream: bool = True,
        profile: str | None = None,
        client: Any = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        on_retry: Callable[[RetryInfo], Any] | None = None,
        cache: bool = False,
        force_output_tool: bool = True,
    ) -> None:
        if _boto3 is None:
            raise MissingDependencyError("boto3", "bedrock", "BedrockModel")
        if not isinstance(model_id, str) or not model_id:
            raise ConfigurationError(
                "BedrockModel needs a model id, e.g. 'anthropic.claude-3-5-haiku-20241022-v1:0' "
                "or an inference profile such as 'us.amazon.nova-lite-v1:0'"
            )
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise ConfigurationError(f"max_tokens must be a positive int or None, got {max_tokens!r}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError("retry must be an agentkit.models.RetryPolicy")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if client is not None and (region or endpoint_url or profile or timeout):
            raise ConfigurationError(
                "BedrockModel: pass either client= or region=/endpoint_url=/profile=/timeout=, not both "
                "(a client keeps its own settings; configure it, or leave client= out)"
            )
        self.model_name = model_id
        self._client = client if client is not None else _make_client(region, endpoint_url, profile, timeout)
        self._stream = stream
        self._max_tokens = max_tokens
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self._cache = cache
        self._force_output_tool = force_output_tool

    def __repr__(self) -> str:
        return f"BedrockModel({self.model_name!r}, region={self._client.meta.region_name!r})"

    # -- the port (stream() comes from ProviderModel) ----------------------------------

    def prepare(self, request: ModelRequest) -> Callable[[], Iterator[StreamEvent]]:
        params = self.build_params(request)
        call = self._client.converse_stream if self._stream else self._client.converse
        cancel = request.cancel

        def attempt() -> Iterator[StreamEvent]:
            # on a helper thread, so a cancel ends the wait for the response headers too;
            # a call left behind closes its stream when it returns
            response = run_and_wait(lambda: call(**params), cancel=cancel, name="agentkit-model-call",
                                    abandoned=_close_stream)
            if not self._stream:
                yield from converse_events(response)
                return
            events = response["stream"]
            forget = cancel._on_cancel(StreamInterrupter(events))
            try:
                yield from stream_events(events, cancel)
            finally:
                forget()
                events.close()

        return attempt

    def translate_error(self, exc: Exception) -> TranslatedError | None:
        """botocore's exceptions (service errors, errors inside the stream, connection
        failures, missing credentials) as agentkit errors; None for anything else."""
        return _translate(exc, self._client.meta.endpoint_url)

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The Converse request agentkit would send (after ``provider_options``)."""
        check_tool_choice(request)
        params: dict[str, Any] = {"modelId": self.model_name, "messages": to_bedrock_messages(request.messages)}
        system_texts = [request.system] if request.system and request.system.strip() else []
        system_texts += [m.text for m in request.messages if m.role == "system" and m.text.strip()]
        system: list[dict[str, Any]] = [{"text": t} for t in system_texts]
        tools: list[dict[str, Any]] = [
            {"toolSpec": {"name": t.name, "inputSchema": {"json": dict(t.input_schema)},
                          **({"description": t.description} if t.description else {})}}
            for t in request.tools
        ]
        if self._cache and request.cache:
            _place_cache_points(system, tools, params["messages"])
        if system:
            params["system"] = system
        tool_config = _tool_config(request, tools, params["messages"], force_output=self._force_output_tool)
        if tool_config is not None:
            params["toolConfig"] = tool_config
        params.update(self._inference(request))
        options = dict(request.provider_options)
        if options.pop("stream", self._stream) is not self._stream:
            raise ConfigurationError(
                "BedrockModel: choose streaming with BedrockModel(..., stream=True/False), not provider_options"
            )
        unknown = sorted(set(options) - self._converse_fields())
        if unknown:
            raise ConfigurationError(
                f"provider_options {', '.join(map(repr, unknown))}: not a field of the Converse API "
                f"(it takes {', '.join(sorted(self._converse_fields()))}); a model's own fields, such as "
                f"top_k, go in provider_options={{'additionalModelRequestFields': {{...}}}}"
            )
        params.update(options)
        return params

    def _converse_fields(self) -> set[str]:
        operation = "ConverseStream" if self._stream else "Converse"
        return set(self._client.meta.service_model.operation_model(operation).input_shape.members)

    def _inference(self, request: ModelRequest) -> dict[str, Any]:
        s = request.settings
        inference: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        max_tokens = s.max_tokens if s.max_tokens is not None else self._max_tokens
        if s.reasoning_budget is not None:
            budget = s.reasoning_budget
            if max_tokens is None:
                max_tokens = budget + 4096
            elif max_tokens <= budget:
                raise ConfigurationError(
                    f"max_tokens ({max_tokens}) must be greater than reasoning_budget ({budget}): "
                    f"the thinking budget is part of max_tokens"
                )
            extra["additionalModelRequestFields"] = {"thinking": {"type": "enabled", "budget_tokens": budget}}
        if max_tokens is not None:
            inference["maxTokens"] = max_tokens
        if s.temperature is not None:
            inference["temperature"] = s.temperature
        if s.top_p is not None:
            inference["topP"] = s.top_p
        if s.stop:
            inference["stopSequences"] = list(s.stop)
        if inference:
            extra["inferenceConfig"] = inference
        if s.reasoning_effort is not None:
            extra["outputConfig"] = {"effort": s.reasoning_effort}
        return extra


def _close_stream(response: Any) -> None:
    stream = response.get("stream") if isinstance(response, Mapping) else None
    if stream is not None:
        stream.close()


def _make_client(region: str | None, endpoint_url: str | None, profile: str | None, timeout: float | None) -> Any:
    """A ``bedrock-runtime`` client with botocore's retries off (one attempt)."""
    config = _botocore_config.Config(
        retries={"total_max_attempts": 1, "mode": "standard"},  # "max_attempts" counts retries
        **({"read_timeout": timeout, "connect_timeout": timeout} if timeout is not None else {}),
    )
    try:
        session = _boto3.session.Session(profile_name=profile)
        return session.client("bedrock-runtime", region_name=region, endpoint_url=endpoint_url, config=config)
    except _botocore_errors.ProfileNotFound as exc:
        raise ConfigurationError(
            f"BedrockModel: {exc}; name a profile of ~/.aws/config, or leave profile= out"
        ) from None
    except _botocore_errors.NoRegionError:
        raise ConfigurationError(
            "BedrockModel needs an AWS region: pass region= (e.g. 'us-east-1'), or set AWS_REGION / "
            "AWS_DEFAULT_REGION, or a region in your AWS profile"
        ) from None
    except ValueError as exc:  # a malformed endpoint_url or region
        raise ConfigurationError(f"BedrockModel: {exc}") from None


def _tool_config(
    request: ModelRequest, tools: list[dict[str, Any]], messages: list[dict[str, Any]], *, force_output: bool
) -> dict[str, Any] | None:
    """``toolConfig``: the tools and the tool choice. Converse has no ``none`` choice:
    then the tools are left out, unless the history holds tool blocks (the service wants
    ``toolConfig`` whenever it does)."""
    specs = [t for t in tools if "toolSpec" in t]
    if not specs:
        return None
    choice = request.tool_choice
    if choice == "none":
        has_tool_blocks = any("toolUse" in b or "toolResult" in b for m in messages for b in m["content"])
        return {"tools": tools} if has_tool_blocks else None
    config: dict[str, Any] = {"tools": tools}
    if choice == "required":
        config["toolChoice"] = {"any": {}}
    elif choice != "auto":
        config["toolChoice"] = {"tool": {"name": choice}}
    elif request.output is not None and force_output and request.settings.reasoning_budget is None:
        # the structured output is a tool the model must call (Claude refuses forced tool
        # use with extended thinking: then agentkit sends it back if it answers in text)
        only = len(specs) == 1 and specs[0]["toolSpec"]["name"] == request.output.name
        config["toolChoice"] = {"tool": {"name": request.output.name}} if only else {"any": {}}
    return config


def _place_cache_points(system: list[dict[str, Any]], tools: list[dict[str, Any]],
                        messages: list[dict[str, Any]]) -> None:
    """A cache point after the prefix (the system prompt, else the tools) and one after
    the last user message."""
    if system:
        system.append(dict(_CACHE_POINT))
    elif tools:
        tools.append(dict(_CACHE_POINT))
    for message in reversed(messages):
        if message["role"] == "user":
            message["content"].append(dict(_CACHE_POINT))
            break


# -- errors ----------------------------------------------------------------------------


def _translate(exc: Exception, endpoint: str | None) -> TranslatedError | None:
    errors = _botocore_errors
    if isinstance(exc, errors.ClientError):
        return _service_error(exc)
    if isinstance(exc, (errors.NoCredentialsError, errors.PartialCredentialsError, errors.CredentialRetrievalError)):
        return TranslatedError(error=AuthenticationError(
            f"no usable AWS credentials for Bedrock ({exc}): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            f"or AWS_PROFILE, or log in with `aws sso login`", provider="bedrock"))
    if isinstance(exc, (errors.ConnectTimeoutError, errors.ReadTimeoutError)):
        return connection_failure(exc, "bedrock", "Bedrock", timed_out=True, server=endpoint)
    if isinstance(exc, (errors.EndpointConnectionError, errors.ConnectionError)):
        return connection_failure(exc, "bedrock", "Bedrock", timed_out=False, server=endpoint)
    if isinstance(exc, (errors.ConnectionClosedError, errors.ResponseStreamingError)):
        return TranslatedError(error=ProviderUnavailableError(
            f"the Bedrock API dropped the connection while streaming: {exc}", provider="bedrock"), retryable=True)
    if type(exc).__module__.startswith("urllib3.") or _is_event_stream_fault(exc):
        # urllib3 and event-stream framing errors reach the reader of the stream unwrapped
        return TranslatedError(error=ProviderUnavailableError(
            f"the Bedrock stream broke off: {type(exc).__name__}: {exc}", provider="bedrock"), retryable=True)
    if isinstance(exc, json.JSONDecodeError):
        return invalid_payload(exc, "bedrock", "Bedrock")
    return None


def _is_event_stream_fault(exc: Exception) -> bool:
    return type(exc).__module__ == "botocore.eventstream"


def _service_error(exc: Any) -> TranslatedError:
    """A service error, before the stream (HTTP status, ``x-amzn-ErrorType``) or inside it
    (an exception event, which has no status)."""
    response = exc.response or {}
    details = response.get("Error") or {}
    code = str(details.get("Code") or "")
    message = str(details.get("Message") or exc)
    meta = response.get("ResponseMetadata") or {}
    status: int | None = meta.get("HTTPStatusCode")
    headers = meta.get("HTTPHeaders")
    if isinstance(exc, _botocore_errors.EventStreamError):
        status = None
    key = code.lower()
    text = f"Bedrock API error {status if status is not None else 'in stream'} ({code}): {message}"
    fields: dict[str, Any] = {"provider": "bedrock", "status_code": status}
    retry_after = parse_retry_after(headers if isinstance(headers, Mapping) else None)
    if key in _AUTH or status in (401, 403):
        return TranslatedError(error=AuthenticationError(
            f"{text}; check the AWS credentials (and that the account has access to this model in "
            f"the region)", **fields))
    if key == "validationexception" and (_is_overflow(400, message, None, None)
                                         or any(m in message.lower() for m in _OVERFLOW)):
        return TranslatedError(error=ContextOverflowError(text, **fields))
    if key == "throttlingexception" or (status == 429 and key not in _TRANSIENT):
        return TranslatedError(error=RateLimitError(text, **fields), retryable=True, retry_after=retry_after)
    if key == "servicequotaexceededexception":
        return TranslatedError(error=RateLimitError(text, **fields))  # a quota: retrying cannot help
    if key in _TRANSIENT or (status is not None and status >= 500):
        return TranslatedError(error=ProviderUnavailableError(text, **fields), retryable=True,
                               retry_after=retry_after)
    if key == "resourcenotfoundexception":
        text += "; check the model id (and that the model is offered in this region)"
    return TranslatedError(error=ProviderError(text, **fields))
