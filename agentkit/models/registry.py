"""Resolve a model spec string (``"openai:gpt-4.1-mini"``) to a ChatModel."""

from __future__ import annotations

import importlib
import re
from typing import Any

from ..errors import ConfigurationError, MissingDependencyError
from .base import ChatModel

_AT_URL = re.compile(r"^(.*)@(https?://\S+)$")

# The one provider table: spec prefix -> (module, adapter class, SDK package, extra).
# agentkit.models also loads the adapter classes lazily from it.
_PROVIDERS: dict[str, tuple[str, str, str, str]] = {
    "openai": ("agentkit.models.openai", "OpenAIChatModel", "openai", "openai"),
    "openai-compatible": ("agentkit.models.openai", "OpenAIChatModel", "openai", "openai"),
    "anthropic": ("agentkit.models.anthropic", "AnthropicModel", "anthropic", "anthropic"),
    "openai-responses": ("agentkit.models.openai_responses", "OpenAIResponsesModel", "openai", "openai"),
    "bedrock": ("agentkit.models.bedrock", "BedrockModel", "boto3", "bedrock"),
    "google": ("agentkit.models.gemini", "GeminiModel", "google.genai", "gemini"),
    # the offline demo model: no SDK (its "package" is agentkit itself), no extra
    "echo": ("agentkit.models.echo", "EchoModel", "agentkit", ""),
}

_SPEC_FORMS = (
    ("openai:<model>", "OpenAI, e.g. openai:gpt-4.1-mini (needs OPENAI_API_KEY)"),
    ("anthropic:<model>", "Anthropic, e.g. anthropic:claude-sonnet-4-5 (needs ANTHROPIC_API_KEY)"),
    ("openai-responses:<model>", "OpenAI's Responses API, e.g. openai-responses:gpt-5-mini (needs OPENAI_API_KEY)"),
    ("bedrock:<model-id>", "AWS Bedrock (Converse API), e.g. bedrock:us.amazon.nova-lite-v1:0 "
     "(AWS credentials and region from boto3's usual chain)"),
    ("google:<model>", "Google Gemini, e.g. google:gemini-2.5-flash (needs GOOGLE_API_KEY or GEMINI_API_KEY)"),
    ("openai-compatible:<model>@<url>",
     "any OpenAI-compatible server, e.g. openai-compatible:llama3@http://127.0.0.1:11434/v1"),
    ("echo", "the offline demo model: echoes, calls tools on 'call <tool> {json}', counts on 'count <n>'"),
)
"""The model spec forms ``get_model`` accepts, with a line each (the CLI's ``--model`` help)."""
_ADAPTERS = {class_name: (module, package, extra) for module, class_name, package, extra in _PROVIDERS.values()}


def _adapter_class(class_name: str, feature: str | None = None) -> Any:
    """The adapter class ``class_name`` from the provider table, importing its module;
    a missing SDK is a :class:`MissingDependencyError` naming the extra."""
    module_name, package, extra = _ADAPTERS[class_name]
    try:
        importlib.import_module(package)
    except ImportError:
        raise MissingDependencyError(package, extra, feature or class_name) from None
    return getattr(importlib.import_module(module_name), class_name)


# model name prefixes -> the provider that serves them (for "did you mean" only)
_KNOWN_PREFIXES = (
    (re.compile(r"^(gpt-|chatgpt-|o[1-9](-|$)|text-embedding-)"), "openai"),
    (re.compile(r"^claude-"), "anthropic"),
    (re.compile(r"^gemini-"), "google"),
)


def _did_you_mean(spec: object) -> str:
    """``"; did you mean 'openai:gpt-4o'?"`` for a bare model name a provider is known
    for, else ''."""
    if not isinstance(spec, str):
        return ""
    for pattern, provider in _KNOWN_PREFIXES:
        if pattern.match(spec):
            return f" (did you mean {provider + ':' + spec!r}?)"
    return ""


def get_model(spec: str, **kwargs: Any) -> ChatModel:
    """Build a model from ``"<provider>:<model>"``.

    Providers: ``openai`` (``OPENAI_API_KEY``), ``openai-responses`` (OpenAI's Responses
    API, :class:`~agentkit.models.openai_responses.OpenAIResponsesModel`), ``anthropic``
    (``ANTHROPIC_API_KEY``), ``google`` (Gemini; ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY``) and
    ``openai-compatible`` (any OpenAI-compatible server; pass ``base_url=`` or write
    ``"openai-compatible:<model>@<base_url>"``). ``echo`` (or ``echo:<name>``) is the
    offline demo model :class:`~agentkit.models.echo.EchoModel`. ``scripted`` gives an
    empty :class:`~agentkit.ScriptedModel`. Keyword arguments go to the adapter.
    """
    if spec == "echo":
        spec = "echo:echo"
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigurationError(
            f"invalid model spec {spec!r}: write '<provider>:<model>'{_did_you_mean(spec)}, e.g. "
            f"'openai:gpt-4.1-mini' or 'anthropic:claude-sonnet-4-5' (or 'echo', the offline demo)"
        )
    provider, _, name = spec.partition(":")
    if provider == "scripted":
        from .scripted import ScriptedModel

        return ScriptedModel(**kwargs)
    entry = _PROVIDERS.get(provider)
    if entry is None:
        raise ConfigurationError(
            f"unknown model provider {provider!r} in {spec!r}{_did_you_mean(spec)}; known: "
            f"{', '.join(sorted(_PROVIDERS))}"
        )
    if not name:
        raise ConfigurationError(f"model spec {spec!r} names no model after the ':'")
    class_name = entry[1]
    if provider == "openai-compatible":
        # "<model>@<url>": split before the URL only, since model names may hold an "@"
        # themselves (Cloudflare's "@cf/meta/llama-3.1-8b-instruct")
        match = _AT_URL.match(name)
        if match is not None:
            name, base_url = match.group(1), match.group(2)
            if kwargs.get("base_url") not in (None, base_url):
                raise ConfigurationError(
                    f"model spec {spec!r} names the server {base_url!r} but base_url= says "
                    f"{kwargs['base_url']!r}; give the server once"
                )
            kwargs["base_url"] = base_url
            if not name:
                raise ConfigurationError(f"model spec {spec!r} names no model before the '@'")
    if provider == "openai-compatible" and not kwargs.get("base_url"):
        raise ConfigurationError(
            "an openai-compatible model needs a server: pass base_url= or write "
            "'openai-compatible:<model>@<base_url>'"
        )
    adapter = _adapter_class(class_name, f"the {provider!r} provider")
    return adapter(name, **kwargs)  # type: ignore[no-any-return]
