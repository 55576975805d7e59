"""AgentScope's message JSON, read and written both ways, in its Python and Java forms.

AgentScope 2.x's model layer is in the submodules named as AgentScope's own, so that its code
runs with `agentscope.` imports changed to `parley.compat.agentscope.`: `model`,
`credential`, `message`, `formatter`, `embedding`, `tts` and `tool` (see
docs/migration/agentscope.md).

* The **Python form** is what AgentScope 2.x writes (`Msg.model_dump(mode="json")`): roles
  `user` / `assistant` / `system`, `created_at`, blocks `text`, `thinking`, `data` (media with a
  `url` or `base64` source), `hint`, `tool_call` (arguments as a raw JSON string) and
  `tool_result` (`state`), tool results and hints inside the assistant's reply.
* The **Java form** is the seed's (`io.agentscope.core.message.Msg` through Jackson): roles
  `SYSTEM` / `USER` / `ASSISTANT` / `TOOL`, `timestamp`, blocks `text`, `thinking`, `image`,
  `audio`, `video`, `tool_use` (arguments as an object) and `tool_result` (`output` a list).

Entry points: `msg_from_agentscope` / `msg_to_agentscope` for one message,
`msgs_from_agentscope` / `msgs_to_agentscope` for a conversation.

Python form (`parley` -> AgentScope; reading is the reverse)::

    Msg.role system/user/assistant  role, same            (tool -> "assistant", see below)
    Msg.name                        name                  (None -> the role written)
    Msg.id / created_at             id / created_at       (see Timestamps)
    Msg.metadata / usage            metadata / usage      (cached_tokens <-> cache_input_tokens)
    TextBlock                       text
    ThinkingBlock signature, extra  thinking, its `signature` and extra keys
    Image/Audio/Video/FileBlock     data, source {url|base64, media_type}; filename <-> name;
                                    read by media type: image/* -> ImageBlock, ..., else File;
                                    a URL without one gets image/*, audio/*, video/* or
                                    application/octet-stream (AgentScope requires one)
    ToolCallBlock input, raw_input  tool_call, input = raw_input or json.dumps(input);
                                    state "finished" when answered in the message, else "pending"
    ToolResultBlock                 tool_result, id = tool_call_id, state "error" | "success"
                                    (read: error, denied, interrupted -> is_error)
    tool Msg                        its results in an assistant message
    (a user Msg read from a hint)   hint, source = name

Java form::

    Msg.role                        role upper-cased: SYSTEM, USER, ASSISTANT, TOOL
    Msg.name / id / metadata        name (left out when None) / id / metadata
    Msg.created_at                  timestamp, ISO-8601 like "2024-01-15T10:30:00Z"
    Msg.usage                       metadata["_chat_usage"] = {inputTokens, outputTokens, time}
    TextBlock                       text
    ThinkingBlock                   thinking, metadata = extra + {"thoughtSignature": signature}
    ImageBlock/AudioBlock/Video...  image / audio / video, source {type: url, url} or
                                    {type: base64, media_type, data}
    FileBlock                       data (agentscope-java's DataBlock), filename <-> name
    ToolCallBlock                   tool_use, id, name, input (object), content = raw_input
    ToolResultBlock                 tool_result, id = tool_call_id, name, output (a list: a
                                    string output is one text block, and back), state

Key names: the seed shows `Base64Source.builder().mediaType(...)` and a result's
`toolUseId(...)`, but agentscope-java annotates them `@JsonProperty("media_type")` and `"id"`;
those are written, and `mediaType` / `toolUseId` / `tool_use_id` are read too. A result
without a name (Java's `ToolResultBlock.error(id, text)` has none) takes the name of the call it
answers, when that call is in the same or an earlier message read with it, else `""`.

Timestamps are written as Java's `Instant.toString()` writes them: UTC, `Z`, and no, 3 or 6
fraction digits, so `2024-01-15T10:30:00Z` comes back as it was. One without a zone is read
as local time, which is what both libraries write (`datetime.now().isoformat()`, Java's
`yyyy-MM-dd HH:mm:ss.SSS`).

Block ids AgentScope requires and parley does not have are made from the message id
(`<msg id>.<index>`), and block times are the message's, so writing is deterministic. What is
written is what AgentScope 2.0.11 dumps back unchanged after reading it (unless it normalizes
a URL: `https://example.com` becomes `https://example.com/`).

**Detecting the form** (`detect_form`): Java when the role is upper case, or the message has
`timestamp` and no `created_at`, or a block is `tool_use`, `image`, `audio` or `video`;
Python otherwise.

**One AgentScope message, several parley messages.** The Python form keeps tool results (and
hints) inside the assistant's reply; parley keeps them in messages of their own. So
`msgs_from_agentscope` splits such a message: a message holding only tool results is one
`tool` message; otherwise each tool result is a `tool` message, each hint a `user` message
named after its source, and each run of other blocks a message of the message's role.
`msg_from_agentscope` returns the one message a message holds, and raises `MessageError`
pointing to `msgs_from_agentscope` when it holds several. `msgs_to_agentscope` joins them back,
and in the Python form also folds each single-result tool message into the assistant message
whose call it answers, as AgentScope's agent writes its reply.

**Nothing is lost, either way.** What the target has no place for is kept in its metadata under
one reserved key, as a JSON Patch (RFC 6902) holding only the difference:
`metadata["parley"]` in AgentScope (a parley message's `raw_input`, a URL's missing media
type, the name `None`, `Usage.elapsed`, ...) and `metadata["agentscope"]["patch"]` in parley
(block ids and times, tool call states, `finished_at`, `structured_output`, ...). So every
valid `Msg` comes back equal through either form, and an AgentScope message read and written
back is the same document. A message edited since its patch was made gets what still fits:
the ops of a block that changed or went away are skipped, not misapplied. Patches list their
ops in an order set by the documents' values alone (object keys sorted), so a document read,
written and read again gives the same patch. A message whose own `metadata["agentscope"]`
went to AgentScope inside `metadata["parley"]`, and which AgentScope changed since so that
reading needs that key for a patch too, gets the patch there: it rebuilds the whole document,
`metadata["parley"]` (and so the message's own value) included.

Errors: malformed input raises `MessageError` (or pydantic's `ValidationError` for a field
parley's models reject), saying what is wrong and where (`content[2].source`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import ValidationError

from parley.compat.agentscope import _groups
from parley.compat.agentscope._common import FORMS, Form
from parley.errors import ConfigurationError, MessageError, ParleyError
from parley.messages import Msg

__all__ = [
    "AgentScopeForm",
    "detect_form",
    "msg_from_agentscope",
    "msg_to_agentscope",
    "msgs_from_agentscope",
    "msgs_to_agentscope",
]

AgentScopeForm = Form
"""`"python"` (AgentScope 2.x) or `"java"` (agentscope-java, the seed's form)."""

# Tuples, not sets: the values tested come from input and may be unhashable.
_JAVA_BLOCKS = ("tool_use", "image", "audio", "video")


def detect_form(data: Any) -> AgentScopeForm:
    """Tell which form an AgentScope message is in.

    Java when the role is upper case (`USER`), or the message has a `timestamp` and no
    `created_at`, or one of its blocks is `tool_use`, `image`, `audio` or `video`; Python
    otherwise.

    Raises:
        MessageError: `data` is not a JSON object.
    """
    if not isinstance(data, dict):
        raise MessageError(
            f"an AgentScope message must be a JSON object, got {type(data).__name__}"
        )
    role = data.get("role")
    if isinstance(role, str) and role.isupper():
        return "java"
    if "timestamp" in data and "created_at" not in data:
        return "java"
    content = data.get("content")
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in _JAVA_BLOCKS for b in content
    ):
        return "java"
    return "python"


def msg_from_agentscope(data: Any, form: AgentScopeForm | None = None) -> Msg:
    """Read one AgentScope message (a dict) as a parley `Msg`.

    Args:
        data: The message as JSON data, in either form.
        form: The form, or None to detect it (see `detect_form`).

    Raises:
        MessageError: The message is malformed, or it holds several parley messages (tool
            results or hints beside other content): read it with `msgs_from_agentscope`.
        pydantic.ValidationError: A field has the wrong type or breaks a parley rule.
    """
    with _convertible():
        pieces = _groups.read_group(data, _form(form, data), {})
    if len(pieces) != 1:
        roles = ", ".join(p.role for p in pieces)
        raise MessageError(
            f"this AgentScope message holds {len(pieces)} parley messages ({roles}): its tool "
            "results and hints are messages of their own in parley; read it with "
            "msgs_from_agentscope([...])"
        )
    return pieces[0]


def msgs_from_agentscope(data: Any, form: AgentScopeForm | None = None) -> list[Msg]:
    """Read a list of AgentScope messages as parley messages, splitting where needed.

    Args:
        data: A list of messages as JSON data.
        form: The form of all of them, or None to detect each one's.

    Raises:
        MessageError: `data` is not a list, or a message is malformed.
        pydantic.ValidationError: A field has the wrong type or breaks a parley rule.
    """
    if not isinstance(data, list):
        raise MessageError(f"expected a list of AgentScope messages, got {type(data).__name__}")
    msgs: list[Msg] = []
    names: dict[str, str] = {}
    previous: list[Msg] = []
    for item in data:
        chosen = _form(form, item)
        with _convertible():
            pieces = _groups.keep_apart(_groups.read_group(item, chosen, names), previous, chosen)
        names.update(_groups.call_names(pieces))
        msgs.extend(pieces)
        previous = pieces
    return msgs


def msg_to_agentscope(msg: Msg, form: AgentScopeForm = "python") -> dict[str, Any]:
    """Write a parley `Msg` as one AgentScope message.

    A tool message becomes an assistant message holding its results in the Python form, a
    `TOOL` message in the Java form.

    Args:
        msg: The message (a dict in parley's own JSON is validated first).
        form: `"python"` (AgentScope 2.x) or `"java"`.

    Raises:
        MessageError: The message holds values that are not JSON, or a malformed patch under
            `metadata["agentscope"]`.
    """
    with _convertible():
        return _groups.write_group([_msg(msg)], _form(form, None), {}, [])


def msgs_to_agentscope(
    msgs: Iterable[Msg], form: AgentScopeForm = "python"
) -> list[dict[str, Any]]:
    """Write parley messages as AgentScope messages, joining what one message holds there.

    Messages read from one AgentScope message are joined back; in the Python form a tool
    message with one result also joins the assistant message whose call it answers.

    Args:
        msgs: The messages, in order.
        form: `"python"` (AgentScope 2.x) or `"java"`.

    Raises:
        MessageError: A message holds values that are not JSON, or a malformed patch under
            `metadata["agentscope"]`.
    """
    chosen = _form(form, None)
    written: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    previous: list[Msg] = []
    for group in _groups.groups((_msg(m) for m in msgs), chosen):
        with _convertible():
            written.append(_groups.write_group(group, chosen, names, previous))
        names.update(_groups.call_names(group))
        previous = group
    return written


def _form(form: Any, data: Any) -> Form:
    if form is None:
        return detect_form(data)
    if form not in FORMS:
        raise ConfigurationError(f"form must be 'python' or 'java', got {form!r}")
    return form  # type: ignore[no-any-return]


def _msg(msg: Any) -> Msg:
    return msg if isinstance(msg, Msg) else Msg.model_validate(msg)


@contextlib.contextmanager
def _convertible() -> Iterator[None]:
    # Data nested deeper than pydantic-core serializes ("Maximum serialization depth
    # exceeded", a bare ValueError) or Python recurses, or a parley message holding values
    # that are not JSON, cannot be converted.
    try:
        yield
    except (ParleyError, ValidationError):
        raise
    except (RecursionError, ValueError) as exc:
        raise MessageError(f"this message cannot be converted: {exc}") from None
