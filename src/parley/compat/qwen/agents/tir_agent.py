"""Qwen-Agent's `TIRMathAgent`: tool-integrated reasoning, for math models such as Qwen2.5-Math.

The model reasons in text and writes Python in fenced blocks (` ```python `); it stops at
` ```output ` (a stop word). The agent runs the last complete program of the reply in
parley's sandboxed `code_interpreter` (Qwen-Agent: its `python_executor`), writes the
result after the reply as a fenced ` ```output ` block, and lets the model go on from
there (the grown reply is the last, assistant, message of its prompt), until a reply has no
program, or after `MAX_LLM_CALL_PER_RUN` model calls. The response is one assistant message
holding the whole reasoning with its outputs.

The observation is what the program printed (or its last expression's value); a failing
program's error. The programs of one agent share a session (variables stay), apart from
other conversations.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agents.fncall_agent import FnCallAgent
from parley.compat.qwen.schema import ASSISTANT, DEFAULT_SYSTEM_MESSAGE, Message
from parley.compat.qwen.utils.utils import format_as_text_message, merge_generate_cfgs
from parley.models.base import ChatModel
from parley.tools.builtin.code_interpreter import CodeInterpreter

__all__ = ["MAX_LLM_CALL_PER_RUN", "OBS_END", "OBS_START", "TIRMathAgent", "extract_program"]

OBS_START = "```output"
OBS_END = "\n```\n"
MAX_LLM_CALL_PER_RUN = 10
"""Model calls per run (Qwen-Agent's TIR agent has its own limit)."""


def extract_program(result: str, last_only: bool = True) -> str:
    """The Python of the text's ` ```python ` blocks: the last one, or all of them joined.

    An unclosed last block is a program cut off mid-way: then there is no program ("").
    """
    program = ""
    inside = False
    for line in result.split("\n"):
        if line.startswith("```python") or line.endswith("```python"):
            program = "" if last_only else program + "\n# ========\n"
            inside = True
        elif line.startswith("```"):
            inside = False
        elif inside:
            program += line + "\n"
    return "" if inside else program


class TIRMathAgent(FnCallAgent):
    """Tool-integrated reasoning with Python (see the module docs).

    Args:
        llm: The model.
        system_message: The system message (e.g. how to present the answer).
        name: The agent's name.
        description: What it does.
        **kwargs: `FnCallAgent`'s other arguments.
    """

    def __init__(
        self,
        llm: ChatModel | Mapping[str, Any] | None = None,
        system_message: str | None = DEFAULT_SYSTEM_MESSAGE,
        name: str | None = None,
        description: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            function_list=["code_interpreter"],
            llm=llm,
            system_message=system_message,
            name=name,
            description=description,
            **kwargs,
        )
        self.extra_generate_cfg = merge_generate_cfgs(
            self.extra_generate_cfg, {"stop": [OBS_START]}
        )
        self._session = f"tir-{uuid.uuid4().hex}"

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        """Reason, run the program, show its output, go on."""
        prompt = [format_as_text_message(m, add_upload_info=False) for m in messages]
        response = ""
        for _ in range(MAX_LLM_CALL_PER_RUN):
            output: list[Message] = []
            for output in self._call_llm(messages=prompt):  # type: ignore[assignment]
                if output:
                    last = output[-1]
                    yield [Message(ASSISTANT, response + _text(last), extra=last.extra)]
            if not output:
                break
            said = _text(output[-1])
            response += said
            has_program, _, program, _ = self._detect_tool(said)
            if not has_program:
                break
            if not response.endswith("\n"):
                response += "\n"
            response += f"{OBS_START}\n{self._execute(program)}{OBS_END}"
            current = Message(ASSISTANT, response, extra=output[-1].extra)
            yield [current]
            if prompt[-1].role == ASSISTANT:
                prompt[-1] = current
            else:
                prompt.append(current)

    def _execute(self, program: str) -> str:
        """What the program printed or evaluated to, or its error."""
        interpreter = self.function_map["code_interpreter"]
        assert isinstance(interpreter, CodeInterpreter)
        execution = interpreter.run_code(program, session=self._session)
        if execution.error:
            return execution.error.strip()
        return (execution.stdout or execution.result or "").strip()

    def _detect_tool(  # type: ignore[override]
        self, text: str
    ) -> tuple[bool, str, str, str]:
        """`(has a program, the tool, the program, the text)` of a reply."""
        program = extract_program(text)
        return bool(program), "code_interpreter", program, text


def _text(message: Message) -> str:
    return message.get_text_content()
