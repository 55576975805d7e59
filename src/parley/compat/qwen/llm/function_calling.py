"""Qwen-Agent's `BaseFnCallModel` (`qwen_agent.llm.function_calling`): functions in the prompt.

A model class a user writes on it implements only `_chat_stream` and `_chat_no_stream` (text
in, text out); `_chat_with_functions` writes the functions, past calls and results into the
messages in the config's `fncall_prompt_type` (`nous`, the default, or `qwen`) and reads the
calls back out of the text, with parley's formats (`parley.agents.prompted.NousFormat`,
`fncall_prompts.QwenFormat`): the same prompts the built-in model types send.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

from parley.agents._nous import ThinkSplitter
from parley.agents.prompted import NousFormat, ToolPromptFormat
from parley.compat.qwen._llm import function_specs
from parley.compat.qwen.convert import from_msgs, to_msgs
from parley.compat.qwen.llm.base import BaseChatModel
from parley.compat.qwen.schema import ASSISTANT, FunctionCall, Message
from parley.errors import ConfigurationError
from parley.models.accumulator import TextDelta, ThinkingDelta, ToolCallDelta
from parley.models.parameters import Parameters

__all__ = ["BaseFnCallModel", "prompt_format"]


def prompt_format(kind: str) -> ToolPromptFormat:
    """The format of a `fncall_prompt_type`.

    Raises:
        ConfigurationError: It is neither `nous` nor `qwen`.
    """
    if kind == "nous":
        return NousFormat()
    if kind == "qwen":
        from parley.compat.qwen.llm.fncall_prompts import QwenFormat  # noqa: PLC0415

        return QwenFormat()
    raise ConfigurationError(f"fncall_prompt_type {kind!r} is unknown; use 'nous' or 'qwen'")


class BaseFnCallModel(BaseChatModel):
    """A model that is given functions in its prompt (see the module docs).

    Args:
        cfg: The llm config; `generate_cfg.fncall_prompt_type` picks the format.
    """

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        super().__init__(cfg)
        kind = self.generate_cfg.pop("fncall_prompt_type", "nous")
        self.fncall_prompt = prompt_format(kind)
        stop = list(self.generate_cfg.get("stop") or [])
        if self.fncall_prompt.stop:
            self.generate_cfg["stop"] = stop + [s for s in self.fncall_prompt.stop if s not in stop]

    def _chat_with_functions(
        self,
        messages: list[Message],
        functions: list[dict[str, Any]],
        stream: bool,
        delta_stream: bool,
        generate_cfg: dict[str, Any],
        lang: str,
    ) -> Iterator[list[Message]] | list[Message]:
        cfg = dict(generate_cfg)
        choice = cfg.pop("function_choice", "auto")
        parallel = bool(cfg.pop("parallel_function_calls", False))
        thought = bool(cfg.pop("thought_in_content", False))
        parameters = Parameters(parallel_tool_calls=parallel)
        written = self.fncall_prompt.write(
            to_msgs(messages), function_specs(functions), choice, parameters
        )
        prompt = from_msgs(written)
        if not stream:
            answer = self._chat_no_stream(prompt, cfg)
            return self._read(answer, choice, parameters, thought)
        return (
            self._read(step, choice, parameters, thought)
            for step in self._chat_stream(prompt, False, cfg)
        )

    def _read(
        self, answer: list[Message], choice: str, parameters: Parameters, thought: bool
    ) -> list[Message]:
        """The answer's text read again: reasoning, text and the calls written in it."""
        text = "".join(str(m.content) for m in answer if isinstance(m.content, str))
        reasoning = "".join(str(m.reasoning_content or "") for m in answer)
        splitter = ThinkSplitter(expected=thought)
        parser = self.fncall_prompt.parser(choice, parameters)
        content, out = "", cast("list[Message]", [])
        for delta in [*splitter.feed(text), *splitter.close()]:
            if isinstance(delta, ThinkingDelta):
                reasoning += delta.thinking
            elif isinstance(delta, TextDelta):
                for parsed in [*parser.feed(delta.text)]:
                    content, out = _add(parsed, content, out)
        for parsed in parser.close():
            content, out = _add(parsed, content, out)
        head = [Message(ASSISTANT, "", reasoning_content=reasoning)] if reasoning else []
        body = [Message(ASSISTANT, content)] if content else []
        return head + body + out


def _add(delta: Any, content: str, calls: list[Message]) -> tuple[str, list[Message]]:
    if isinstance(delta, TextDelta):
        return content + delta.text, calls
    if isinstance(delta, ToolCallDelta) and delta.name:
        call = FunctionCall.partial(delta.name, delta.arguments or "")
        number = str(len(calls) + 1)
        calls = [*calls, Message(ASSISTANT, "", function_call=call, extra={"function_id": number})]
    return content, calls
