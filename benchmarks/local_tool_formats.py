"""How often the embedded SmolLM2-135M makes a useful tool call in each tool-call format.

Every format `LocalChatModel` speaks (`chatml-function-calling`, SmolLM2's default, and the
template-native `hermes`, `llama3`, `phi4`, `gemma`, each rendered with the minimal family
template of tests/providers/local/tool_templates.py) gets the same prompts and two tools: a
Python runner (arithmetic questions that say to use Python) and a weather lookup (weather
questions). Two tool choices:

- `auto`: did the model call a tool; the right one; with arguments valid for its schema
  (`jsonschema`); and useful ones (the code evaluates to the answer / the city is named);
- `required`: the same, with a call forced (the grammar makes every call parse, so what is
  measured is whether the model picks the right tool and writes useful arguments).

Greedy decoding (the local model's default) with a fixed seed: a run repeats exactly.

Run: `python benchmarks/local_tool_formats.py [--formats hermes,llama3] [--limit N]`.
"""

from __future__ import annotations

import argparse
import ast
import operator
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.providers.local.tool_templates import TEMPLATES

from parley import Msg
from parley.providers.local import LocalChatModel


def _tool(name: str, description: str, parameter: str, about: str) -> dict[str, Any]:
    """A tool's schema: one required string `parameter`, described as `about`."""
    properties = {parameter: {"type": "string", "description": about}}
    schema = {"type": "object", "properties": properties, "required": [parameter]}
    return {"name": name, "description": description, "parameters": schema}


PYTHON = _tool(
    "run_python", "Run Python code and return what it prints.", "code", "The Python code to run"
)
WEATHER = _tool("get_weather", "Get the current weather for a city.", "city", "The city name")
TOOLS = [PYTHON, WEATHER]

ARITHMETIC = [
    ("What is 12*7? Use Python to compute it.", 84),
    ("Compute 345 + 678 with Python.", 1023),
    ("Use Python to find 2 to the power of 10.", 1024),
    ("What is 1000 - 387? Run Python to check.", 613),
    ("Use Python: what is 81 divided by 9?", 9),
    ("What is 15 * 15? Compute it with Python.", 225),
    ("Run Python to add 17, 23 and 42.", 82),
    ("Calculate 7 * 8 * 9 using Python.", 504),
    ("Use Python to compute 123 * 4.", 492),
    ("What is 999 + 1? Use Python.", 1000),
]
WEATHER_ASKS = [
    ("What is the weather in Paris?", "paris"),
    ("Is it raining in London right now?", "london"),
    ("How warm is it in Tokyo today?", "tokyo"),
    ("Tell me the current weather in Berlin.", "berlin"),
    ("What's the weather like in Madrid?", "madrid"),
    ("Check the weather in Rome for me.", "rome"),
]

_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


def _arith(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_arith(node.left), _arith(node.right)))
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") in {"print", "sum"}:
        args = [_arith(a) for a in node.args]
        return args[0] if node.func.id == "print" else sum(args)  # type: ignore[attr-defined]
    if isinstance(node, ast.List | ast.Tuple):
        raise ValueError("a list")
    raise ValueError(f"not arithmetic: {ast.dump(node)[:40]}")


def code_value(code: str) -> float | None:
    """What simple arithmetic code prints (its last expression), or None."""
    try:
        tree = ast.parse(code.strip())
        last = tree.body[-1]
        if isinstance(last, ast.Expr):
            return _arith(last.value)
    except (SyntaxError, ValueError, IndexError, ZeroDivisionError, TypeError, OverflowError):
        return None
    return None


def judge(response: Any, tool: str, expected: Any) -> dict[str, bool]:
    calls = response.tool_calls
    called = bool(calls)
    right = called and calls[0].name == tool
    schema = {t["name"]: t["parameters"] for t in TOOLS}
    try:
        valid = called and all(
            c.raw_input is None and (jsonschema.validate(c.input, schema[c.name]) is None)
            for c in calls
        )
    except jsonschema.ValidationError:
        valid = False
    useful = False
    if right and valid:
        if tool == "run_python":
            useful = code_value(str(calls[0].input.get("code", ""))) == expected
        else:
            useful = expected in str(calls[0].input.get("city", "")).lower()
    return {"called": called, "right tool": right, "schema-valid": valid, "useful": useful}


def run(fmt: str, choice: str, cases: list[tuple[str, str, Any]]) -> dict[str, int]:
    template = TEMPLATES.get(fmt)
    model = LocalChatModel(parameters={"seed": 7}, tool_format=fmt, chat_template=template)
    totals = {"called": 0, "right tool": 0, "schema-valid": 0, "useful": 0}
    for question, tool, expected in cases:
        msgs = [Msg.system("You are a helpful assistant."), Msg.user(question)]
        response = model.chat_sync(msgs, tools=TOOLS, tool_choice=choice, max_tokens=80)
        for key, ok in judge(response, tool, expected).items():
            totals[key] += ok
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--formats", default="chatml-function-calling,hermes,llama3,phi4,gemma")
    parser.add_argument("--choices", default="auto,required")
    parser.add_argument("--limit", type=int, default=0, help="at most N prompts of each kind")
    args = parser.parse_args()
    arith = ARITHMETIC[: args.limit or None]
    weather = WEATHER_ASKS[: args.limit or None]
    cases = [(q, "run_python", v) for q, v in arith] + [(q, "get_weather", c) for q, c in weather]
    print(f"{len(cases)} prompts ({len(arith)} arithmetic, {len(weather)} weather), SmolLM2-135M")
    print(f"{'format':<25} {'choice':<9} called  right  valid  useful  seconds")
    for fmt in args.formats.split(","):
        for choice in args.choices.split(","):
            started = time.perf_counter()
            t = run(fmt, choice, cases)
            took = time.perf_counter() - started
            print(
                f"{fmt:<25} {choice:<9} {t['called']:>6} {t['right tool']:>6} "
                f"{t['schema-valid']:>6} {t['useful']:>7} {took:>8.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
