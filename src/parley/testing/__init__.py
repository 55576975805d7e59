"""Test doubles for external services: local HTTP servers that speak a provider's wire format.

Shipped in the package so that tests of parley, and of code built on it, need no network.

- `parley.testing.openai_server`: OpenAI's Chat Completions and Responses APIs.
- `parley.testing.anthropic_server`: Anthropic's Messages API.

Scripted chat models (no HTTP at all) are in `parley.models.testing`.
"""
