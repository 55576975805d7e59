"""`OllamaParameters`: Ollama's request fields (`think`, `keep_alive`) and model `options`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from parley.models.parameters import Parameters

__all__ = ["OllamaParameters", "ThinkLevel"]

ThinkLevel = Literal["low", "medium", "high", "max"]
"""How hard a thinking model thinks (gpt-oss takes levels only; `max` is newer servers')."""

_TOP_LEVEL = frozenset({"think", "keep_alive"})
# Not sent: Ollama has no such switch (the model decides how many calls to make).
_NOT_SENT = frozenset({"parallel_tool_calls", "options"})


class OllamaParameters(Parameters):
    """Parameters of Ollama's `/api/chat`.

    `think` and `keep_alive` are request fields; every other parameter is one of the model
    `options` (`max_tokens` as `num_predict`). `options` passes others as they are; the named
    fields win over it. `parallel_tool_calls` is accepted (agents set it) but not sent:
    Ollama has no such switch. Sources: Ollama's API reference (`docs/api.md`) and
    `api/types.go` (`Options`, `Runner`, `ThinkValue`).
    """

    parallel_tool_calls: SkipJsonSchema[bool | None] = Field(
        default=None, description="Accepted for agents' sake; Ollama has no such switch."
    )
    think: bool | ThinkLevel | None = Field(
        default=None,
        description="Thinking models: think before answering (true/false), or how hard.",
    )
    keep_alive: float | str | None = Field(
        default=None,
        description="How long the model stays loaded after the call: seconds or a duration "
        "such as '5m'; 0 unloads it at once, -1 keeps it loaded.",
    )
    num_ctx: int | None = Field(default=None, ge=1, description="The context window to load.")
    top_k: int | None = Field(default=None, ge=0, description="Sample from the top k tokens.")
    min_p: float | None = Field(
        default=None, ge=0, le=1, description="Least probability, relative to the top token."
    )
    typical_p: float | None = Field(
        default=None, gt=0, le=1, description="Locally typical sampling."
    )
    repeat_penalty: float | None = Field(
        default=None, ge=0, description="Penalize repeated tokens (1 is none)."
    )
    repeat_last_n: int | None = Field(
        default=None, ge=-1, description="How far back repeats count (-1: the whole context)."
    )
    presence_penalty: float | None = Field(
        default=None, description="Penalize tokens that appeared at all."
    )
    frequency_penalty: float | None = Field(
        default=None, description="Penalize tokens by how often they appeared."
    )
    num_keep: int | None = Field(
        default=None, ge=-1, description="Prompt tokens kept when the context shifts."
    )
    num_batch: int | None = Field(default=None, ge=1, description="Prompt tokens per batch.")
    num_gpu: int | None = Field(default=None, ge=0, description="Layers to offload to GPUs.")
    main_gpu: int | None = Field(default=None, ge=0, description="The GPU for small tensors.")
    num_thread: int | None = Field(default=None, ge=1, description="CPU threads to use.")
    use_mmap: bool | None = Field(default=None, description="Memory-map the model's file.")
    options: dict[str, Any] | None = Field(
        default=None, description="Other model options, sent as they are."
    )

    def wire_fields(self) -> dict[str, Any]:
        """The request fields these parameters make: `think`, `keep_alive` and `options`."""
        fields = self.to_kwargs()
        body = {name: fields.pop(name) for name in _TOP_LEVEL & fields.keys()}
        options = dict(self.options or {})
        for name in _NOT_SENT:
            fields.pop(name, None)
        if "max_tokens" in fields:
            fields["num_predict"] = fields.pop("max_tokens")
        options.update(fields)
        if options:
            body["options"] = options
        return body
