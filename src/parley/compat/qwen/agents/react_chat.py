"""Qwen-Agent's `ReActChat`: tools called through ReAct text, not function calling.

The model gets the tools described in the last user message and writes plain text in the
ReAct form::

    Thought: what to do next
    Action: the tool's name
    Action Input: the tool's arguments
    Observation: (the agent writes the tool's result here)
    ... (repeated as needed)
    Thought: the answer is known
    Final Answer: the answer

`Observation:` is a stop word, so the model stops after `Action Input`; the agent runs the
tool, writes the observation and `Thought: ` after the model's text, and calls the model
again on the grown prompt, until a reply has no action (or `MAX_LLM_CALL_PER_RUN` calls).
The response is one assistant message holding the whole transcript, from `Thought: `, as
Qwen-Agent yields it; it grows as the model streams.

Tools with file access (`code_interpreter`) get the files of the user messages (`files=`),
and the model sees those files by name (`[file](name)`), so code can open them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agents.fncall_agent import MAX_LLM_CALL_PER_RUN, FnCallAgent
from parley.compat.qwen.schema import ASSISTANT, USER, ContentItem, Message
from parley.compat.qwen.utils.utils import (
    extract_files_from_messages,
    format_as_text_message,
    merge_generate_cfgs,
)

__all__ = ["ReActChat"]

STOP_WORDS = ["Observation:", "Observation:\n"]
"""Where the model must stop: the agent, not the model, writes each observation."""

_TOOL = "{name}: the {human} tool. {description} Arguments (JSON Schema): {parameters} {hint}"

_PROMPT = """Work out the answer to the question below. These tools are available:

{tools}

Write in exactly this form:

Question: the question to answer
Thought: your reasoning about what to do next
Action: one tool name from [{names}]
Action Input: the tool's input
Observation: the tool's result
(Thought, Action, Action Input and Observation may repeat as often as needed)
Thought: I now know the final answer
Final Answer: the answer to the question

Begin!

Question: {query}
Thought: """


class ReActChat(FnCallAgent):
    """An agent that calls tools through ReAct text (see the module docs).

    Takes `FnCallAgent`'s arguments (`function_list`, `llm`, `system_message`, `name`,
    `description`, `files`, ...); every model call stops at `Observation:`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.extra_generate_cfg = merge_generate_cfgs(self.extra_generate_cfg, {"stop": STOP_WORDS})

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        """The ReAct loop: model text, a tool's observation, again, until no action."""
        prompt = self._prepend_react_prompt(messages, lang)
        files = extract_files_from_messages([m for m in messages if m.role == USER], False)
        response = "Thought: "
        for _ in range(MAX_LLM_CALL_PER_RUN):
            output: list[Message] = []
            for output in self._call_llm(messages=prompt):  # type: ignore[assignment]
                if output:
                    yield [Message(ASSISTANT, response + _text(output[-1]))]
            said = _text(output[-1]) if output else ""
            response += said
            has_action, action, action_input, thought = self._detect_tool(said)
            if not has_action:
                break
            observation = self._observe(action, action_input, messages, files, kwargs)
            step = f"\nObservation: {observation}\nThought: "
            response += step
            yield [Message(ASSISTANT, response)]
            self._extend_prompt(prompt[-1], thought, action, action_input, step)

    def _observe(
        self,
        action: str,
        action_input: str,
        messages: list[Message],
        files: list[str],
        kwargs: dict[str, Any],
    ) -> str:
        tool = self.function_map.get(action)
        extra = dict(kwargs)
        if files and getattr(tool, "file_access", False):
            extra["files"] = files
        arguments = _arguments(tool.function if tool is not None else {}, action_input)
        result = self._call_tool(action, arguments, messages=messages, **extra)
        if isinstance(result, str):
            return result
        return "\n".join(_observed(item) for item in result)

    @staticmethod
    def _extend_prompt(last: Message, thought: str, action: str, args: str, step: str) -> None:
        """Write the model's step and its observation after the prompt, as the model saw it."""
        text = str(last.content)
        if not text.endswith("\nThought: ") and not thought.startswith("\n"):
            text += "\n"
        if args.startswith("```"):
            args = "\n" + args  # a fenced block starts on its own line
        last.content = f"{text}{thought}\nAction: {action}\nAction Input: {args}{step}"

    def _prepend_react_prompt(self, messages: list[Message], lang: str) -> list[Message]:
        """The conversation as text, the last message wrapped in the ReAct prompt."""
        descriptions = []
        for tool in self.function_map.values():
            function = tool.function
            name = function.get("name_for_model") or function["name"]
            descriptions.append(
                _TOOL.format(
                    name=name,
                    human=function.get("name_for_human") or name,
                    description=function.get("description", ""),
                    parameters=json.dumps(function.get("parameters", {}), ensure_ascii=False),
                    hint=function.get("args_format", ""),
                ).rstrip()
            )
        texts = [format_as_text_message(m, add_upload_info=True, lang=lang) for m in messages]
        texts[-1].content = _PROMPT.format(
            tools="\n\n".join(descriptions),
            names=",".join(self.function_map),
            query=texts[-1].content,
        )
        return texts

    def _detect_tool(  # type: ignore[override]
        self, text: str
    ) -> tuple[bool, str, str, str]:
        """`(has an action, the tool, its input, the text before the action)` of a reply.

        The last `Action:` followed by an `Action Input:` is the call; its input runs to
        `Observation:`, or to the end when the stop word cut it off.
        """
        action_at = text.rfind("\nAction:")
        input_at = text.rfind("\nAction Input:")
        if not 0 <= action_at < input_at:
            return False, "", "", text
        end = text.rfind("\nObservation:")
        if end < input_at:
            text, end = text.rstrip(), len(text.rstrip())
        name = text[action_at + len("\nAction:") : input_at].strip()
        arguments = text[input_at + len("\nAction Input:") : end].strip()
        return True, name, arguments, text[:action_at]


def _arguments(function: dict[str, Any], action_input: str) -> str | dict[str, Any]:
    """The tool's arguments: the JSON object written, or else the text as its one argument.

    Models often write a code tool's input as bare or fenced code (Qwen-Agent's
    `code_interpreter` reads it so): text that is no JSON object goes to the tool's only
    required argument.
    """
    try:
        if isinstance(json.loads(action_input), dict):
            return action_input
    except json.JSONDecodeError:
        pass
    parameters = function.get("parameters") or {}
    required = parameters.get("required") if isinstance(parameters, dict) else None
    if isinstance(required, list) and len(required) == 1:
        return {str(required[0]): action_input}
    return action_input


def _observed(item: ContentItem) -> str:
    """A result item as ReAct text: its text, a media URL, or `[image]` for inline data."""
    if item.text is not None:
        return item.text
    value = item.value
    if isinstance(value, str) and not value.startswith("data:"):
        return value
    return f"[{item.type}]"  # inline bytes would flood the prompt


def _text(message: Message) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(item.text or "" for item in content if isinstance(item, ContentItem))
