"""Alibaba Cloud Model Studio (DashScope) through the `dashscope` SDK's native API.

- `DashScopeChatModel`: Qwen models on text generation
  (`/api/v1/services/aigc/text-generation/generation`, `Generation.call` in the SDK's 1.x
  names) and multimodal generation (`/api/v1/services/aigc/multimodal-generation/generation`,
  `MultiModalConversation.call`) for Qwen-VL, Qwen-Omni, QVQ and the Qwen3.5 series: text,
  images, audio and video (URLs, base64, local files inlined or uploaded), thinking
  (`enable_thinking`, `thinking_budget`, `reasoning_content`), tool calls, JSON output,
  incremental and cumulative streams;
- `DashScopeCredential` (type `dashscope`): the key (`DASHSCOPE_API_KEY`) and the region's
  endpoint (`BEIJING_URL`, `INTERNATIONAL_URL`), per model, never process-wide;
- `DashScopeChatParameters`, `DashScopeChatFormatter`, `DashScopeMultiAgentFormatter`.

The same models speak OpenAI's wire format in DashScope's compatible mode:
`parley.providers.openai.DashScopeCompatibleChatModel` (type `dashscope_compatible`).

The SDK is imported on first use (`pip install 'parley[dashscope]'`), not with this package;
it sends through httpx-aiohttp's client (httpx's interface on aiohttp; see `_sdk`).
Sources: Model Studio's API reference (Qwen, DashScope), its deep-thinking, function-calling,
structured-output, vision and Qwen-Omni guides, its error-code list, and the SDK's source.
"""

from parley.providers.dashscope.chat import DashScopeChatModel
from parley.providers.dashscope.credentials import (
    BEIJING_URL,
    INTERNATIONAL_URL,
    DashScopeCredential,
)
from parley.providers.dashscope.formatter import (
    DashScopeChatFormatter,
    DashScopeMultiAgentFormatter,
)
from parley.providers.dashscope.parameters import DashScopeChatParameters

__all__ = [
    "BEIJING_URL",
    "INTERNATIONAL_URL",
    "DashScopeChatFormatter",
    "DashScopeChatModel",
    "DashScopeChatParameters",
    "DashScopeCredential",
    "DashScopeMultiAgentFormatter",
]
