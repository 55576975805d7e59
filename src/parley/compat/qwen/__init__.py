"""Qwen-Agent's message API and agents, and exact conversions between its messages and `Msg`.

`Message`, `ContentItem`, `FunctionCall` and the constants behave as in Qwen-Agent 0.0.34
(`qwen_agent.llm.schema`; see `schema` for the few deliberate differences). `Agent` is
Qwen-Agent's agent base class (`qwen_agent.agent.Agent`): a custom agent's `_run`, calling
`_call_llm` and `_call_tool`, runs unchanged on parley's models and tools (see `agent` for
its interface and deliberate differences); `BasicAgent` calls the model alone, and
`FnCallAgent` (`agents`) runs parley's agent loop, and `Assistant` (`assistant`) answers
from `files` with knowledge retrieved for each question. `BaseTool`, `register_tool` and
`TOOL_REGISTRY` are parley's tools, in Qwen-Agent's shape. `to_msgs` and `from_msgs` convert
lists both ways, and `as_dicts_like` answers dicts with dicts::

    msgs = to_msgs(messages)                # Messages or dicts, mixed
    back = from_msgs(msgs, as_dicts=as_dicts_like(messages))

Mapping, `Msg` → Qwen (one `Msg` may become several Qwen messages):

- system and user: one message; `name` → `name`.
- assistant: Qwen-Agent's response layout, each part only when present: a reasoning message
  (`content=""`, `reasoning_content`: one thinking block as a string, several as a list of
  text items), a content message, then one message per tool call with
  `function_call=FunctionCall(name, arguments)` and `extra={"function_id": id}`. The `Msg`'s
  `name` goes on each of them. An empty `Msg` is one message with `content=""`.
- tool: one `function` message per tool result: `name` = the tool's name, `content` = the
  output (a string, or a list of items), `extra={"function_id": tool_call_id}`.
- content: no blocks → `""`; one non-empty text block → its text; otherwise a list of
  `ContentItem`s. Media blocks become their URL (storage locations such as `oss://`
  included), or a `data:<media type>;base64,...` URL; a video given by its frames becomes the
  list of its frames, each a URL or a `data:` URL.
- tool call input → `arguments`: the kept `raw_input`, else `json.dumps(input,
  ensure_ascii=False)` (Qwen-Agent's own form).
- `metadata` → every message's `extra`, next to `function_id`.
- Everything else (id, created_at, usage, a tool message's name, metadata keys named
  `function_id` or `parley`, block order, block fields such as a URL's media type, a file
  name, a thinking signature, `is_error`, `raw_input` that the arguments do not reproduce)
  → the first message's `extra["parley"]`, holding only what the plain mapping loses.

Qwen → `Msg` reads the same back. Consecutive assistant messages that keep to the response
order (reasoning, content, calls) and share a `name` form one assistant `Msg`, so tool results
follow the message holding their calls; consecutive function messages form one tool `Msg`; a
message carrying `extra["parley"]` always starts a new `Msg`. A function call without a
`function_id` gets a generated id (`call_qwen_<position>`), not written back; a function
message pairs with the pending call of its `function_id`, else (as Qwen-Agent's default id
`"1"` intends) with a pending call that had none, preferring its name; without a
`function_id`, with the first pending call of its name.

Media, in every form Qwen-Agent's schema takes: a string is a URL (`http(s)://`, `file://`,
or a storage location: DashScope's `oss://` uploads, `s3://`, `gs://`, kept as they are), a
`data:` URL, or a local path or bare file name (a `file://` URL, resolved against the working
directory). An audio dict holds the media under `data` (Qwen-Agent's key) or `url` (the
Qwen-Agent notes' form); its `format` (`wav`, `mp3`) gives the media type `audio/<format>`,
and with a `format`, bare base64 in `data` is inline data (OpenAI's `input_audio` form). A
video list of strings is the video's frames (`VideoBlock.frames`, images); a list of dicts is
the video's sources (`{"url": ..., "quality": ..., "format": ...}` in the notes), of which the
block holds the first. Other keys (`duration`, `quality`) and the exact value are kept in the
record below, so the item comes back unchanged. How the Qwen messages differed
from parley's canonical form (`[]` for `""`, such strings, dicts and lists, several parts in
one message, other `extra` values, a missing `function_id`) is kept in the `Msg`'s
`metadata["parley"]`, so that both round trips are exact: `Msg` → Qwen → `Msg` gives equal
messages, and Qwen → `Msg` → Qwen equal messages (and equal dicts, as `model_dump()` writes
them). A `Msg` read from Qwen messages gets an id derived from its position and content, and
the Unix epoch as its (unknown) time.

Errors: an item that is not a Qwen message raises pydantic's `ValidationError`; messages a
`Msg` cannot hold (a function call outside an assistant message, media in reasoning, a data
URL that is not base64, a function message with neither a `function_id` nor a call waiting
for it, a URL scheme other than http(s), file and the storage ones, an audio or video dict
with no `data` or `url` string, a video list mixing frames and dicts, a frame that is no
image) raise `MessageError`, naming the message.
"""

from parley.compat.qwen import tools as tools  # registers Qwen-Agent's tools by their names
from parley.compat.qwen.agent import Agent, BasicAgent, FunctionListEntry, QwenResponse
from parley.compat.qwen.agents import MAX_LLM_CALL_PER_RUN, FnCallAgent
from parley.compat.qwen.agents.assistant import Assistant
from parley.compat.qwen.convert import as_dicts_like, from_msgs, to_msgs
from parley.compat.qwen.multi_agent_hub import MultiAgentHub
from parley.compat.qwen.schema import (
    ASSISTANT,
    AUDIO,
    CONTENT,
    DEFAULT_SYSTEM_MESSAGE,
    FILE,
    FUNCTION,
    IMAGE,
    NAME,
    REASONING_CONTENT,
    ROLE,
    SYSTEM,
    TEXT,
    USER,
    VIDEO,
    BaseModelCompatibleDict,
    ContentItem,
    ContentType,
    FunctionCall,
    Message,
    ModelResponse,
    Usage,
)
from parley.tools import TOOL_REGISTRY, register_tool
from parley.tools import Tool as BaseTool

__all__ = [
    "ASSISTANT",
    "AUDIO",
    "CONTENT",
    "DEFAULT_SYSTEM_MESSAGE",
    "FILE",
    "FUNCTION",
    "IMAGE",
    "MAX_LLM_CALL_PER_RUN",
    "NAME",
    "REASONING_CONTENT",
    "ROLE",
    "SYSTEM",
    "TEXT",
    "TOOL_REGISTRY",
    "USER",
    "VIDEO",
    "Agent",
    "Assistant",
    "BaseModelCompatibleDict",
    "BaseTool",
    "BasicAgent",
    "ContentItem",
    "ContentType",
    "FnCallAgent",
    "FunctionCall",
    "FunctionListEntry",
    "Message",
    "ModelResponse",
    "MultiAgentHub",
    "QwenResponse",
    "Usage",
    "as_dicts_like",
    "from_msgs",
    "register_tool",
    "to_msgs",
]
