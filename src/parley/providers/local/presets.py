"""Presets: GGUF chat models on the Hugging Face Hub that `parley models pull NAME` fetches.

Each preset names the Hub repository and file, the file's size and sha256 (its Git LFS
object id, as the Hub lists it), its licence, the context window parley allocates for it, and
the format its tool calls take. Sizes and checksums come from the Hub's LFS metadata for each
file, as quoted by public model catalogs (see docs/how-to/local-models.md).

Any other GGUF file on the Hub is named `OWNER/REPO/FILE.gguf` (checked against the sha256 the
Hub sends for it); `preset_for` finds the preset behind either form.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_PRESET_CONTEXT",
    "PRESETS",
    "Preset",
    "ToolFormat",
    "close_names",
    "preset_for",
    "split_hub_name",
]

ToolFormat = Literal["hermes", "llama3", "phi4", "gemma", "chatml-function-calling"]
"""How a model writes tool calls.

- `hermes`: Qwen2.5, Qwen3, SmolLM3 (and Hermes): `<tool_call>{"name": .., "arguments": ..}
  </tool_call>`.
- `llama3`: Llama 3.x: JSON `{"name": .., "parameters": ..}`, after `<|python_tag|>` or bare.
- `phi4`: Phi-4-mini: `<|tool_call|>[{...}]<|/tool_call|>`.
- `gemma`: Gemma 3: JSON asked for in the prompt (it has no tool tokens).
- `chatml-function-calling`: llama-cpp-python's grammar-driven format (the embedded SmolLM2).
"""

DEFAULT_PRESET_CONTEXT = 8192
"""The context window parley allocates for a preset unless told otherwise: the KV cache grows
with it (Qwen3-1.7B needs ~0.9 GB at 8192 tokens, ~3.5 GB at 32768), and a CPU run rarely
fills more. `LocalChatModel(..., context_size=N)` allocates up to the model's `max_context`."""


@dataclass(frozen=True)
class Preset:
    """A GGUF chat model on the Hub that `parley models pull` knows by a short name.

    Args:
        name: The short name (`local:NAME`, `LocalChatModel(NAME)`, `parley models pull NAME`).
        repo: The Hub repository, `OWNER/NAME`.
        filename: The GGUF file in it.
        sha256: The file's sha256 as the Hub lists it (its LFS object id); None: checked
            against the sha256 the Hub sends when downloading.
        size: The file's size in bytes.
        licence: The licence's id on the Hub (`apache-2.0`, `llama3.2`, `gemma`, `mit`).
        context_size: The context window parley allocates, in tokens.
        tool_format: How the model writes tool calls.
        chat_template: `gguf`: the chat template in the file's metadata.
        label: A name for people.
        max_context: The longest context the model was trained for.
    """

    name: str
    repo: str
    filename: str
    sha256: str | None
    size: int
    licence: str
    context_size: int
    tool_format: ToolFormat
    chat_template: str = "gguf"
    label: str = ""
    max_context: int = 0

    @property
    def hub_name(self) -> str:
        """`OWNER/REPO/FILE.gguf`: the file's full name on the Hub."""
        return f"{self.repo}/{self.filename}"

    @property
    def url(self) -> str:
        """The repository's page on the Hub (its licence, its files)."""
        return f"https://huggingface.co/{self.repo}"


def _preset(
    name: str,
    repo: str,
    filename: str,
    size: int,
    sha256: str | None,
    licence: str,
    tool_format: ToolFormat,
    label: str,
    max_context: int,
) -> Preset:
    return Preset(
        name=name,
        repo=repo,
        filename=filename,
        sha256=sha256,
        size=size,
        licence=licence,
        context_size=min(DEFAULT_PRESET_CONTEXT, max_context),
        tool_format=tool_format,
        label=label,
        max_context=max_context,
    )


# Files: the publisher's own GGUF where it ships one file per quantization (Qwen3, Qwen2.5
# 1.5B, ggml-org's Gemma 3), else a widely used single-file conversion (Qwen's own 7B Q4_K_M is
# split in two; Meta's and Microsoft's repositories hold no GGUF; Meta's are gated).
_ALL = [
    _preset(
        "qwen3-0.6b",
        "Qwen/Qwen3-0.6B-GGUF",
        "Qwen3-0.6B-Q8_0.gguf",
        639_446_688,
        "9465e63a22add5354d9bb4b99e90117043c7124007664907259bd16d043bb031",
        "apache-2.0",
        "hermes",
        "Qwen3 0.6B (Q8_0)",
        32_768,
    ),
    _preset(
        "qwen3-1.7b",
        "Qwen/Qwen3-1.7B-GGUF",
        "Qwen3-1.7B-Q8_0.gguf",
        1_834_426_016,
        "061b54daade076b5d3362dac252678d17da8c68f07560be70818cace6590cb1a",
        "apache-2.0",
        "hermes",
        "Qwen3 1.7B (Q8_0)",
        32_768,
    ),
    _preset(
        "qwen3-4b",
        "Qwen/Qwen3-4B-GGUF",
        "Qwen3-4B-Q4_K_M.gguf",
        2_497_280_256,
        "7485fe6f11af29433bc51cab58009521f205840f5b4ae3a32fa7f92e8534fdf5",
        "apache-2.0",
        "hermes",
        "Qwen3 4B (Q4_K_M)",
        32_768,
    ),
    _preset(
        "qwen2.5-1.5b-instruct",
        "Qwen/Qwen2.5-1.5B-Instruct-GGUF",
        "qwen2.5-1.5b-instruct-q4_k_m.gguf",
        1_117_320_736,
        "6a1a2eb6d15622bf3c96857206351ba97e1af16c30d7a74ee38970e434e9407e",
        "apache-2.0",
        "hermes",
        "Qwen2.5 1.5B Instruct (Q4_K_M)",
        32_768,
    ),
    _preset(
        "qwen2.5-7b-instruct",
        "bartowski/Qwen2.5-7B-Instruct-GGUF",
        "Qwen2.5-7B-Instruct-Q4_K_M.gguf",
        4_683_074_240,
        "65b8fcd92af6b4fefa935c625d1ac27ea29dcb6ee14589c55a8f115ceaaa1423",
        "apache-2.0",
        "hermes",
        "Qwen2.5 7B Instruct (Q4_K_M)",
        32_768,
    ),
    _preset(
        "llama3.2-1b-instruct",
        "hugging-quants/Llama-3.2-1B-Instruct-Q4_K_M-GGUF",
        "llama-3.2-1b-instruct-q4_k_m.gguf",
        807_690_656,
        "1d0e9419ec4e12aef73ccf4ffd122703e94c48344a96bc7c5f0f2772c2152ce3",
        "llama3.2",
        "llama3",
        "Llama 3.2 1B Instruct (Q4_K_M)",
        131_072,
    ),
    _preset(
        "llama3.2-3b-instruct",
        "hugging-quants/Llama-3.2-3B-Instruct-Q4_K_M-GGUF",
        "llama-3.2-3b-instruct-q4_k_m.gguf",
        2_019_373_920,
        "c55a83bfb6396799337853ca69918a0b9bbb2917621078c34570bc17d20fd7a1",
        "llama3.2",
        "llama3",
        "Llama 3.2 3B Instruct (Q4_K_M)",
        131_072,
    ),
    _preset(
        "phi-4-mini",
        "unsloth/Phi-4-mini-instruct-GGUF",
        "Phi-4-mini-instruct-Q4_K_M.gguf",
        2_491_874_272,
        "88c00229914083cd112853aab84ed51b87bdf6b9ce42f532d8c85c7c63b1730a",
        "mit",
        "phi4",
        "Phi-4-mini Instruct 3.8B (Q4_K_M)",
        131_072,
    ),
    _preset(
        "gemma3-1b",
        "ggml-org/gemma-3-1b-it-GGUF",
        "gemma-3-1b-it-Q4_K_M.gguf",
        806_058_240,
        "8ccc5cd1f1b3602548715ae25a66ed73fd5dc68a210412eea643eb20eb75a135",
        "gemma",
        "gemma",
        "Gemma 3 1B Instruct (Q4_K_M)",
        32_768,
    ),
    _preset(
        "gemma3-4b",
        "ggml-org/gemma-3-4b-it-GGUF",
        "gemma-3-4b-it-Q4_K_M.gguf",
        2_489_757_856,
        "882e8d2db44dc554fb0ea5077cb7e4bc49e7342a1f0da57901c0802ea21a0863",
        "gemma",
        "gemma",
        "Gemma 3 4B Instruct (Q4_K_M)",
        131_072,
    ),
    _preset(
        "smollm3-3b",
        "bartowski/HuggingFaceTB_SmolLM3-3B-GGUF",
        "HuggingFaceTB_SmolLM3-3B-Q4_K_M.gguf",
        1_915_305_792,
        "519732558d5fa7420ab058e1b776dcfe73da78013c2fe59c7ca43c325ef89132",
        "apache-2.0",
        "hermes",
        "SmolLM3 3B (Q4_K_M)",
        65_536,
    ),
]

PRESETS: dict[str, Preset] = {preset.name: preset for preset in _ALL}
"""The presets by name, smallest first within each family."""


def split_hub_name(model: str) -> tuple[str, str] | None:
    """`(repo, filename)` of a name `OWNER/REPO/FILE.gguf` (the file may sit in folders).

    None when `model` does not have that form.
    """
    parts = model.split("/")
    if len(parts) < 3 or not model.lower().endswith(".gguf") or not all(parts):
        return None
    if any(part in {".", ".."} for part in parts):
        return None
    return "/".join(parts[:2]), "/".join(parts[2:])


def preset_for(model: str) -> Preset | None:
    """The preset `model` names: by its name, or by its file as `OWNER/REPO/FILE.gguf`."""
    found = PRESETS.get(model)
    if found is not None:
        return found
    hub = split_hub_name(model)
    if hub is None:
        return None
    return next((p for p in PRESETS.values() if (p.repo, p.filename) == hub), None)


def close_names(name: str) -> list[str]:
    """The preset names closest to `name` (for a "did you mean" hint)."""
    lowered = name.lower()
    names = list(PRESETS)
    close = difflib.get_close_matches(lowered, names, n=3, cutoff=0.5)
    return close or [n for n in names if lowered and lowered in n][:3]
