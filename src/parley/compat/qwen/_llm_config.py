"""Qwen-Agent's LLM config dicts, read into parley chat models.

`read_llm_config(cfg)` builds the parley model a Qwen-Agent `llm` dict describes, and
returns the settings Qwen-Agent keeps in `generate_cfg` that are the agent's business in
parley (parallel calls, the function choice, the input budget). The mapping:

| Qwen-Agent                                  | parley                                      |
|---------------------------------------------|---------------------------------------------|
| `model_type` `oai`, `qwenvl_oai`,           | `OpenAICompatibleChatModel` at              |
| `qwenomni_oai`, with `model_server` a URL   | `base_url=model_server` (key: `api_key`,    |
|                                             | else `OPENAI_API_KEY`, as Qwen-Agent)       |
| the same without `model_server`             | `OpenAIChatModel` (OpenAI's endpoint);      |
|                                             | `qwenomni_oai`: DashScope's compatible mode |
| the same with `model_server='dashscope'`    | `DashScopeCompatibleChatModel` (key:        |
|                                             | `api_key`, else `DASHSCOPE_API_KEY`)        |
| `qwen_dashscope`, `qwenvl_dashscope`,       | `DashScopeChatModel`, DashScope's native    |
| `qwenaudio_dashscope`, `qwenvlo_dashscope`  | API as Qwen-Agent's SDK calls it (URL:      |
|                                             | `base_http_api_url`, else `DASHSCOPE_HTTP_  |
|                                             | URL`, else parley's default)                |
| no `model_type`                             | deduced as Qwen-Agent does: a URL           |
|                                             | `model_server` is `oai`; a model name with  |
|                                             | `-vl`, `-audio`, `qwen` is DashScope        |
| `model_type` a parley provider (`local`,    | that provider's first chat model class;     |
| `openai`, `deepseek`, ...)                  | `model_server` as `base_url` (a parley      |
|                                             | extension)                                  |
| `azure` (or no `model_type` and an          | `AzureOpenAIChatModel`, `model` the         |
| `azure_endpoint`)                           | deployment; the endpoint `api_base`, else   |
|                                             | `base_url`, `model_server`,                 |
|                                             | `azure_endpoint`; key `api_key`, else       |
|                                             | `OPENAI_API_KEY`; `api_version`, else       |
|                                             | `2024-06-01` (as Qwen-Agent)                |
| `transformers`, `openvino`                  | `ConfigurationError` (no such model here)   |
| `api_base`, `base_url`                      | aliases of `model_server` (as `oai.py`)     |
| `cache_dir` (top level or `generate_cfg`)   | the model's `cache_dir` (response cache)    |
| `generate_cfg.max_retries`                  | the model's `max_retries` (0 when absent,   |
|                                             | as Qwen-Agent)                              |
| `generate_cfg.request_timeout`              | the model's `timeout`                       |
| `generate_cfg` `temperature`, `top_p`,      | `Parameters` of those names (`stop` as a    |
| `max_tokens`, `seed`, `stop`, and any field | list); checked by the model's parameter     |
| of the model's parameter class (`top_k`,    | class                                       |
| `presence_penalty`, `enable_thinking`, ...) |                                             |
| `generate_cfg.max_input_tokens`             | the agent's context budget: the prompt,     |
|                                             | tool descriptions included, is trimmed to   |
|                                             | it (0 or less: no trimming)                 |
| `generate_cfg.parallel_function_calls`      | the agent's `parallel_tool_calls`           |
| `generate_cfg.function_choice`              | the agent's `tool_choice` (first call)      |
| tools, by default                           | `PromptedToolsModel` around the model: the  |
|                                             | tools in the prompt, the model gets no      |
|                                             | `tools` (Qwen-Agent's default)              |
| `generate_cfg.fncall_prompt_type`           | its format: `nous` (default) or `qwen`      |
|                                             | (`compat.qwen.llm.fncall_prompts`)          |
| `generate_cfg.use_raw_api=True` (or         | the provider's native tool calling; the     |
| `QWEN_AGENT_USE_RAW_API=true`; the default  | model is not wrapped                        |
| of `qwen_dashscope`, as in Qwen-Agent, and  |                                             |
| of parley's providers)                      |                                             |
| `generate_cfg.thought_in_content`           | `<think>...</think>` in the model's text    |
|                                             | read as reasoning (`reasoning_content`)     |

Unknown keys: where Qwen-Agent would act on a key that parley cannot honour (a
`generate_cfg` key it would send to the API, which is no parameter of the parley model; an
unsupported model type; DashScope's native-SDK URLs) the config is refused with a
`ConfigurationError` that says what to use instead. Where Qwen-Agent ignores a key (unknown
top-level keys) or it only tunes Qwen-Agent's own prompts (`lang`), parley logs a warning
and goes on. `incremental_output` is dropped silently: parley always
streams increments.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from parley.agents.prompted import NousFormat, PromptedToolsModel, ToolPromptFormat
from parley.compat.qwen._oai_media import QwenOAIMediaFormatter
from parley.errors import ConfigurationError, UserError
from parley.models.base import ChatModel
from parley.models.credentials import Credential, CredentialFactory
from parley.models.spec import model_from_spec
from parley.providers.openai.chat import OpenAIChatModel

__all__ = [
    "LLMConfig",
    "config_for",
    "deduce_model_type",
    "pop_agent_settings",
    "read_llm_config",
]

logger = logging.getLogger("parley.compat.qwen")

DASHSCOPE_COMPATIBLE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"
"""Where Qwen-Agent sends `model_server='dashscope'` for its OpenAI-style model types."""

_OAI_TYPES = frozenset({"oai", "qwenvl_oai", "qwenomni_oai"})
# Qwen's multimodal services on the OpenAI wire take audio URLs and video frames.
_QWEN_MEDIA_OAI_TYPES = frozenset({"qwenvl_oai", "qwenomni_oai"})
_DASHSCOPE_TYPES = frozenset(
    {"qwen_dashscope", "qwenvl_dashscope", "qwenaudio_dashscope", "qwenvlo_dashscope"}
)
# Qwen-Agent's own types: tools go through the prompt unless said otherwise.
_QWEN_TYPES = _OAI_TYPES | _DASHSCOPE_TYPES | {"azure"}
_AZURE_API_VERSION = "2024-06-01"
"""Qwen-Agent's `api_version` for `azure` when the config gives none."""
_UNAVAILABLE = {
    "transformers": "parley runs no Hugging Face Transformers models; serve the model with "
    "an OpenAI-compatible server (vLLM, llama.cpp) and set `model_server`, or use "
    "model_type 'local' for a GGUF file",
    "openvino": "parley runs no OpenVINO models; serve the model with an OpenAI-compatible "
    "server and set `model_server`",
}
_TOP_LEVEL = frozenset(
    {
        "model",
        "model_type",
        "model_server",
        "api_base",
        "base_url",
        "api_key",
        "generate_cfg",
        "cache_dir",
        "use_raw_api",
        "azure_endpoint",
        "api_version",
    }
)
_NATIVE_DASHSCOPE_URLS = {
    "base_http_api_url": ("base_url", "DASHSCOPE_HTTP_URL"),
    "base_websocket_api_url": ("websocket_base_url", "DASHSCOPE_WEBSOCKET_URL"),
}
_MODEL_LEVEL = {
    "thought_in_content": "it is read from the llm config's generate_cfg only",
    "fncall_prompt_type": "it is read from the llm config's generate_cfg only",
    "use_raw_api": "it is read from the llm config's generate_cfg only",
}
_WARNED = {"lang": "parley's prompts have one language"}


@dataclass(frozen=True)
class LLMConfig:
    """What a Qwen-Agent `llm` dict comes to in parley.

    Attributes:
        model: The chat model (wrapped in `PromptedToolsModel` for prompt-based tools).
        parallel_tool_calls: `parallel_function_calls`, when given.
        function_choice: `function_choice`, when given.
        max_input_tokens: `max_input_tokens`, when given.
        model_type: Qwen-Agent's model type, given or deduced ('' for a model passed in).
        use_raw_api: Whether tools go to the provider natively (not through the prompt).
        generate_cfg: The config's `generate_cfg` as given (for `BaseChatModel`).
    """

    model: ChatModel
    parallel_tool_calls: bool | None = None
    function_choice: str | None = None
    max_input_tokens: int | None = None
    model_type: str = ""
    use_raw_api: bool = True
    generate_cfg: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class _Target:
    """Which parley provider serves the config, where, and the model's default name."""

    credential_type: str
    base_url: str | None
    api_key: str | None
    default_model: str | None
    extra: Mapping[str, str] | None = None


def _native_urls(cfg: Mapping[str, Any]) -> dict[str, str]:
    """DashScope's native URLs: the config's, else Qwen-Agent's environment variables."""
    urls = {}
    for key, (field, env) in _NATIVE_DASHSCOPE_URLS.items():
        value = cfg.get(key) or os.environ.get(env)
        if value:
            urls[field] = str(value).strip()
    return urls


def config_for(llm: ChatModel | Mapping[str, Any] | None) -> LLMConfig:
    """What an agent's `llm` argument comes to.

    A model as it is, a config read, or (None) the embedded local model.

    Raises:
        ConfigurationError: `llm` is none of those, or a config parley cannot honour.
    """
    if llm is None:
        return LLMConfig(model_from_spec())  # the embedded local model
    if isinstance(llm, ChatModel):
        return LLMConfig(llm)
    if isinstance(llm, Mapping):
        return read_llm_config(llm)
    raise ConfigurationError(
        f"llm must be a parley ChatModel or a Qwen-Agent llm config dict, got {llm!r}"
    )


def read_llm_config(cfg: Mapping[str, Any]) -> LLMConfig:
    """Build the parley model and agent settings a Qwen-Agent `llm` dict describes.

    See the module docstring for the mapping.

    Raises:
        ConfigurationError: The config names what parley cannot honour, or a bad value.
    """
    if not isinstance(cfg, Mapping):
        raise ConfigurationError(f"an llm config is a dict, got {type(cfg).__name__}")
    _check_top_level(cfg)
    generate = cfg.get("generate_cfg") or {}
    if not isinstance(generate, Mapping):
        raise ConfigurationError(f"llm generate_cfg must be a dict, got {generate!r}")
    generate = dict(generate)
    model_type = deduce_model_type(cfg)
    target = _target(model_type, cfg)
    credential = _credential(target)
    model_cls = _model_class(credential, model_type)
    name = str(cfg.get("model") or "").strip() or target.default_model or _first_card(model_cls)
    original = dict(generate)
    thought = bool(generate.pop("thought_in_content", False))
    agent_settings = pop_agent_settings(generate)
    fmt = _prompt_format(cfg, generate, model_type)
    options = _model_options(cfg, generate)
    if model_type in _QWEN_MEDIA_OAI_TYPES and issubclass(model_cls, OpenAIChatModel):
        options["formatter"] = QwenOAIMediaFormatter()
    parameters = _parameters(model_cls, generate)
    try:
        model = model_cls(credential, name, parameters, **options, **_continuation(model_type))
    except UserError as exc:
        raise ConfigurationError(f"llm config: {exc}") from None
    if fmt is not None:
        model = PromptedToolsModel(model, fmt, thought_in_content=thought)
    return LLMConfig(
        model,
        **agent_settings,
        model_type=model_type,
        use_raw_api=fmt is None,
        generate_cfg=original,
    )


# -- which provider -------------------------------------------------------------------------


def _check_top_level(cfg: Mapping[str, Any]) -> None:
    unknown = sorted(set(cfg) - _TOP_LEVEL - set(_NATIVE_DASHSCOPE_URLS))
    if unknown:
        logger.warning("llm config: ignoring %s (unknown, as Qwen-Agent ignores them)", unknown)


def deduce_model_type(cfg: Mapping[str, Any]) -> str:
    """The model type given, else deduced as Qwen-Agent's `get_chat_model` does.

    Raises:
        ConfigurationError: Nothing in the config tells.
    """
    given = cfg.get("model_type")
    if given:
        return str(given)
    if "azure_endpoint" in cfg:
        return "azure"
    server = _server(cfg)
    if server and server.startswith("http"):
        return "oai"
    model = str(cfg.get("model") or "").lower()
    if "-vl" in model:
        return "qwenvl_dashscope"
    if "-audio" in model:
        return "qwenaudio_dashscope"
    if "qwen" in model:
        return "qwen_dashscope"
    raise ConfigurationError(
        f"llm config: cannot tell the model type of {dict(cfg)!r}; set `model_type` (e.g. "
        "'oai' with a `model_server` URL) or a parley provider such as 'local'"
    )


def _server(cfg: Mapping[str, Any]) -> str | None:
    # Qwen-Agent's oai.py reads `api_base`, then `base_url`, then `model_server`.
    for key in ("api_base", "base_url", "model_server"):
        value = cfg.get(key)
        if value:
            return str(value).strip()
    return None


def _target(model_type: str, cfg: Mapping[str, Any]) -> _Target:
    server = _server(cfg)
    api_key = str(cfg["api_key"]).strip() if cfg.get("api_key") else None
    if model_type in _UNAVAILABLE:
        raise ConfigurationError(f"llm model_type {model_type!r}: {_UNAVAILABLE[model_type]}")
    if model_type in _OAI_TYPES:
        if model_type == "qwenomni_oai" and not server:
            server = "dashscope"  # Qwen-Agent's default for Qwen-Omni
        if server == "dashscope":
            return _Target("dashscope_compatible", DASHSCOPE_COMPATIBLE_URL, api_key, None)
        # Qwen-Agent's oai.py falls back on OPENAI_API_KEY, whatever the server.
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if server:
            return _Target("openai_compatible", server, api_key, "gpt-4o-mini")
        return _Target("openai", None, api_key, "gpt-4o-mini")
    if model_type == "azure":
        return _azure_target(cfg, server, api_key)
    if model_type in _DASHSCOPE_TYPES:
        # Qwen-Agent calls DashScope's SDK, which ignores `model_server`.
        return _Target("dashscope", None, api_key, "qwen-max", _native_urls(cfg))
    if model_type in CredentialFactory.known_types():
        return _Target(model_type, server, api_key, None)
    known = sorted(_QWEN_TYPES | set(CredentialFactory.known_types()))
    raise ConfigurationError(f"llm model_type {model_type!r} is unknown; known: {known}")


def _azure_target(cfg: Mapping[str, Any], server: str | None, api_key: str | None) -> _Target:
    # Qwen-Agent's azure.py reads the endpoint as oai.py reads the server, then
    # `azure_endpoint`; none given, parley's credential reads AZURE_OPENAI_ENDPOINT.
    server = server or (str(cfg["azure_endpoint"]).strip() if cfg.get("azure_endpoint") else None)
    # An `api_version` given empty leaves it to OPENAI_API_VERSION, as the SDK does.
    version = str(cfg.get("api_version", _AZURE_API_VERSION) or "").strip()
    api_key = api_key or os.environ.get("OPENAI_API_KEY")
    extra = {"api_version": version} if version else None
    return _Target("azure_openai", server, api_key, "gpt-4o-mini", extra)


def _credential(target: _Target) -> Credential:
    cls = CredentialFactory.credential_class(target.credential_type)
    data: dict[str, Any] = {"type": target.credential_type}
    fields = [("base_url", target.base_url), ("api_key", target.api_key)]
    for field, value in [*fields, *(target.extra or {}).items()]:
        if value is None:
            continue
        if field not in cls.model_fields:
            raise ConfigurationError(
                f"llm config: provider {target.credential_type!r} takes no {field}"
            )
        data[field] = value
    return CredentialFactory.from_dict(data)


def _model_class(credential: Credential, model_type: str) -> type[ChatModel]:
    classes = credential.chat_model_classes()
    if not classes:
        raise ConfigurationError(f"llm model_type {model_type!r} offers no chat model")
    return classes[0]


def _first_card(model_cls: type[ChatModel]) -> str:
    cards = model_cls.list_models()
    if not cards:
        raise ConfigurationError(f"llm config: name the `model` for {model_cls.__name__}")
    return cards[0].name


# -- generate_cfg ---------------------------------------------------------------------------


def pop_agent_settings(generate: dict[str, Any], where: str = "llm generate_cfg") -> dict[str, Any]:
    """Take the keys that are the agent's business out of a `generate_cfg` (`where` it is).

    Returns `LLMConfig`'s `parallel_tool_calls`, `function_choice` and `max_input_tokens`
    found; drops the keys parley ignores (with a warning for those that tune Qwen-Agent's
    own prompts).

    Raises:
        ConfigurationError: One of them has a bad value.
    """
    settings: dict[str, Any] = {}
    if "parallel_function_calls" in generate:
        settings["parallel_tool_calls"] = bool(generate.pop("parallel_function_calls"))
    if "function_choice" in generate:
        choice = generate.pop("function_choice")
        if not isinstance(choice, str) or not choice:
            raise ConfigurationError(f"{where}: bad function_choice {choice!r}")
        settings["function_choice"] = choice
    if "max_input_tokens" in generate:
        tokens = generate.pop("max_input_tokens")
        if not isinstance(tokens, int) or isinstance(tokens, bool):
            raise ConfigurationError(f"{where}: bad max_input_tokens {tokens!r}")
        settings["max_input_tokens"] = tokens
    warned = _WARNED if where == "llm generate_cfg" else {**_WARNED, **_MODEL_LEVEL}
    for key, why in warned.items():
        if generate.pop(key, None) is not None:
            logger.warning("%s: ignoring %s (%s)", where, key, why)
    generate.pop("incremental_output", None)
    return settings


def _prompt_format(
    cfg: Mapping[str, Any], generate: dict[str, Any], model_type: str
) -> ToolPromptFormat | None:
    """The format tools go through the prompt in, or None for the provider's native tools.

    As Qwen-Agent: `use_raw_api` (generate_cfg, else the top level, a parley extension, else
    `QWEN_AGENT_USE_RAW_API`) picks native tools; `qwen_dashscope` and parley's own providers
    use them by default.
    """
    raw = generate.pop("use_raw_api", cfg.get("use_raw_api"))
    kind = generate.pop("fncall_prompt_type", "nous")
    if raw is None:
        raw = os.environ.get("QWEN_AGENT_USE_RAW_API", "false").lower() == "true"
        # A parley provider (an extension) calls tools as parley's models do: natively.
        raw = raw or model_type == "qwen_dashscope" or model_type not in _QWEN_TYPES
    if kind == "qwen":
        from parley.compat.qwen.llm.fncall_prompts import QwenFormat  # noqa: PLC0415  (a cycle)

        fmt: ToolPromptFormat = QwenFormat()
    elif kind == "nous":
        fmt = NousFormat()
    else:
        raise ConfigurationError(
            f"llm generate_cfg: fncall_prompt_type {kind!r} is unknown; use 'nous' (the "
            "default) or 'qwen'"
        )
    return None if raw else fmt


def _continuation(model_type: str) -> dict[str, Any]:
    """The formatter options of a model type (DashScope's: continuing in partial mode).

    Qwen-Agent's DashScope models continue a conversation that ends on the model's text
    (TIRMathAgent's program output) in DashScope's partial mode.
    """
    if model_type not in _DASHSCOPE_TYPES:
        return {}
    from parley.providers.dashscope.formatter import DashScopeChatFormatter  # noqa: PLC0415

    return {"formatter": DashScopeChatFormatter(continue_final=True)}


def _model_options(cfg: Mapping[str, Any], generate: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    cache_dir = cfg.get("cache_dir", generate.pop("cache_dir", None))
    if cache_dir:
        options["cache_dir"] = cache_dir
    # Qwen-Agent retries only when asked to.
    options["max_retries"] = _number(generate.pop("max_retries", 0), "max_retries", int)
    if "request_timeout" in generate:
        options["timeout"] = _number(generate.pop("request_timeout"), "request_timeout", float)
    return options


def _number(value: Any, key: str, kind: type[int] | type[float]) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigurationError(f"llm generate_cfg: bad {key} {value!r}")
    return kind(value)


def _parameters(model_cls: type[ChatModel], generate: dict[str, Any]) -> dict[str, Any]:
    fields = model_cls.parameters_class.model_fields
    unknown = sorted(key for key in generate if key not in fields)
    if unknown:
        raise ConfigurationError(
            f"llm generate_cfg: {', '.join(map(repr, unknown))} is no parameter of "
            f"{model_cls.__name__} (Qwen-Agent would send it to the API as it is); known: "
            + ", ".join(sorted(fields))
        )
    parameters = dict(generate)
    if isinstance(parameters.get("stop"), str):
        parameters["stop"] = [parameters["stop"]]
    return parameters
