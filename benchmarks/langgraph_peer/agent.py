"""The LangGraph server's side of `langgraph_peer.py`: one node calling a fake streaming model.

Loaded by `langgraph dev` (`langgraph.json` beside this file) in the peer's own virtualenv,
never in parley's. The node calls langchain_core's `GenericFakeChatModel`, which answers
`ANSWER` to every call and streams it one whitespace-split token at a time, with no delay;
LangGraph turns each token into a `messages` event. parley's agent in the benchmark streams
the same tokens from a scripted model.
"""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph

ANSWER = "hello there friend"

model = GenericFakeChatModel(messages=itertools.cycle([AIMessage(content=ANSWER)]))


async def call_model(state: MessagesState) -> dict[str, Any]:
    """Answer the conversation so far (the model streams; LangGraph relays its tokens)."""
    return {"messages": [await model.ainvoke(state["messages"])]}


graph = (
    StateGraph(MessagesState)
    .add_node("model", call_model)
    .add_edge(START, "model")
    .add_edge("model", END)
    .compile()
)
