"""Test doubles for external services: local HTTP servers that speak a provider's wire format.

Shipped in the package so that tests of parley, and of code built on it, need no network.

- `parley.testing.openai_server`: OpenAI's Chat Completions and Responses APIs.
- `parley.testing.dashscope_server`: DashScope's native API (text and multimodal generation,
  and the SDK's uploads of local files).

Scripted chat models (no HTTP at all) are in `parley.models.testing`.
"""
