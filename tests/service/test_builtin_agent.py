"""The default agent's settings per model: the embedded 135M model gets no tool (issue 21).

Measured on the shipped `tools` set (benchmarks/evals.py): offered the code interpreter, the
135M model called it for nearly every question with code that fails, then explained an error;
without it, it answers plain questions right and at once. Any other model keeps the tool.
"""

from __future__ import annotations

import pytest

from parley.evals import CalledTool, Case, Contains, Dataset
from parley.models.testing import ScriptedModel
from parley.service.registry import BUILTIN_PROMPT, TINY_PROMPT, builtin_agent, embedded_model
from tests._requires import require_module


@pytest.fixture(scope="module")
def embedded() -> object:
    require_module("llama_cpp", "local")
    from parley.providers.local import LocalChatModel  # noqa: PLC0415

    return LocalChatModel()


def test_the_embedded_model_gets_a_plain_prompt_and_no_tool(embedded: object) -> None:
    agent = builtin_agent(embedded)  # type: ignore[arg-type]
    assert embedded_model(embedded)  # type: ignore[arg-type]
    assert agent.toolkit.specs() == []
    assert agent.system_prompt == TINY_PROMPT


def test_other_models_and_an_explicit_choice_keep_the_code_interpreter(embedded: object) -> None:
    for agent in (builtin_agent(ScriptedModel()), builtin_agent(embedded, tools=True)):  # type: ignore[arg-type]
        assert [s.name for s in agent.toolkit.specs()] == ["code_interpreter"]
        assert agent.system_prompt == BUILTIN_PROMPT
    assert not embedded_model(ScriptedModel())


async def test_the_embedded_default_agent_answers_a_plain_question_without_a_tool(
    embedded: object,
) -> None:
    dataset = Dataset(
        "plain",
        cases=[Case("capital", "What is the capital of France?", expected="Paris")],
        evaluators=[CalledTool("*", times=0), Contains()],
    )
    report = await dataset.evaluate(builtin_agent(embedded), concurrency=1, retries=0)  # type: ignore[arg-type]
    case = report.cases[0]
    # Greedy decoding: the same answer on every run ("The capital of France is Paris.").
    assert (case.error, case.tool_calls, case.passed) == (None, [], True), case.output
