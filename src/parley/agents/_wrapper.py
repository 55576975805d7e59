"""`WrapperModel`: the base of the agents' chat models that wrap another one."""

from __future__ import annotations

from parley.models.base import ChatModel

__all__ = ["WrapperModel"]


class WrapperModel(ChatModel):
    """A chat model over `inner`, which it reshapes requests or answers for.

    The name, parameters, stream setting, context size and default tool-choice policy are the
    inner model's. It makes no retries of its own: the inner model's stream retries before its
    first chunk.
    """

    def __init__(self, inner: ChatModel) -> None:
        super().__init__(
            None,
            inner.model,
            inner.parameters,
            stream=inner.stream,
            max_retries=0,
            context_size=inner.context_size,
        )
        self.inner = inner
        self.default_tool_choice = inner.default_tool_choice
