"""Qwen-Agent's model interface (`qwen_agent.llm`), on parley's chat models.

`from qwen_agent.llm import get_chat_model` becomes `from parley.compat.qwen.llm import
get_chat_model`::

    llm = get_chat_model({"model": "Qwen/Qwen3-8B", "model_server": "http://localhost:8000/v1"})
    for responses in llm.chat(messages=[{"role": "user", "content": "Hi"}], functions=functions):
        print(responses)                 # the whole response so far, as Qwen-Agent yields it

`get_chat_model(cfg)` takes a config dict or a model name and picks the class as Qwen-Agent
does: the given `model_type` from `LLM_REGISTRY` (a class registered with `register_llm`
included), else deduced (`azure_endpoint`: `azure`; a URL `model_server`: `oai`; a model
name with `-vl`: `qwenvl_dashscope`, `-audio`: `qwenaudio_dashscope`, `qwen`:
`qwen_dashscope`). A parley provider's type (`local`, `openai`, `deepseek`, ...) is a parley
extension. The built-in types run on parley's chat models (see
`parley.compat.qwen._llm_config` for the mapping and `base` for `chat`); `azure` runs on
`AzureOpenAIChatModel` (the SDK's `AsyncAzureOpenAI`, `model` the deployment, `api_version`
2024-06-01 unless given), its functions in the prompt as `oai`'s.

Functions go in the prompt, as in Qwen-Agent: in the `nous` format unless
`generate_cfg.fncall_prompt_type` is `qwen`, so an OpenAI-compatible server that takes no
`tools` works; `use_raw_api=True` (the default of `qwen_dashscope`, as in Qwen-Agent) sends
them as the provider's native tools. Calls are read while the answer streams;
`thought_in_content` reads `<think>...</think>` text as `reasoning_content`;
`parallel_function_calls`, `function_choice`, `max_input_tokens`, `max_retries` (default 0)
and `seed` are read as Qwen-Agent reads them.

Deliberate differences from Qwen-Agent 0.0.34:

- `transformers` and `openvino` raise `ConfigurationError` (no such model here).
- `max_input_tokens` trims with parley's context budget (token counts of parley's counter,
  tool descriptions included); without it the model's context bounds the prompt.
- No random `seed` is added to calls that set none; retries back off as parley's models do.
- A function choice naming a function works in both formats (the `nous` prompt asks for the
  call; Qwen-Agent raises `NotImplementedError` there); a `function_choice` in the llm
  config forces the first call after the latest user message only.
- A response's completed messages carry parley's record (id, time, usage) in `extra`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parley.compat.qwen._llm_config import deduce_model_type
from parley.compat.qwen.llm.base import (
    LLM_REGISTRY,
    BaseChatModel,
    ModelServiceError,
    ParleyChatModel,
    register_llm,
)
from parley.compat.qwen.llm.function_calling import BaseFnCallModel
from parley.compat.qwen.llm.models import (
    QwenAudioChatAtDS,
    QwenChatAtDS,
    QwenOmniChatAtOAI,
    QwenVLChatAtDS,
    QwenVLChatAtOAI,
    QwenVLoChatAtDS,
    TextChatAtAzure,
    TextChatAtOAI,
)

__all__ = [
    "LLM_REGISTRY",
    "BaseChatModel",
    "BaseFnCallModel",
    "ModelServiceError",
    "ParleyChatModel",
    "QwenAudioChatAtDS",
    "QwenChatAtDS",
    "QwenOmniChatAtOAI",
    "QwenVLChatAtDS",
    "QwenVLChatAtOAI",
    "QwenVLoChatAtDS",
    "TextChatAtAzure",
    "TextChatAtOAI",
    "get_chat_model",
    "register_llm",
]


def get_chat_model(cfg: Mapping[str, Any] | str = "qwen-plus") -> BaseChatModel:
    """The model an llm config (or a model name) describes, of the class Qwen-Agent picks.

    Raises:
        ConfigurationError: An unknown `model_type`, a config nothing can be deduced from,
            or one parley cannot honour (a `ValueError`, as Qwen-Agent raises).
    """
    config: dict[str, Any] = {"model": cfg} if isinstance(cfg, str) else dict(cfg)
    if not config.get("model_type"):
        config["model_type"] = deduce_model_type(config)
    model_type = str(config["model_type"])
    if model_type in LLM_REGISTRY:
        return LLM_REGISTRY[model_type](config)
    # A parley provider (a parley extension); any other type is refused there, saying why.
    return ParleyChatModel(config)
