"""A small real agent with an approval tool, for the human-in-the-loop tests (issue 30).

``agent`` asks for the ``refund`` tool (an AI message with a tool call); ``tools`` stops at
``interrupt()`` with the call for a person to approve, then answers with a tool message;
``agent`` then replies. ``build_graph`` is the ``--graph`` factory (``tests.hitl_agent:build_graph``);
``broken`` fails as a factory whose app cannot start does."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    messages: Annotated[list, add_messages]


def agent(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(f"Done: {last.content}")]}
    return {"messages": [AIMessage("I will refund order 7.", tool_calls=[{"name": "refund", "args": {"order": 7, "amount": 42}, "id": "call-1"}])]}


def tools(state: State) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]
    answer = interrupt({"tool": call["name"], "args": call["args"], "question": "approve this refund?"})
    if isinstance(answer, dict) and answer.get("fail"):
        raise RuntimeError("the payment service is down")
    ok = isinstance(answer, dict) and answer.get("approved")
    text = f"refunded {call['args']['amount']} on order {call['args']['order']}" if ok else "refund rejected by a person"
    return {"messages": [ToolMessage(text, tool_call_id=call["id"])]}


def route(state: State) -> str:
    return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END


def builder() -> StateGraph:
    b = StateGraph(State)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", route, ["tools", END])
    b.add_edge("tools", "agent")
    return b


def build_graph() -> Any:
    """The compiled agent (no checkpointer: threadline binds its own saver)."""
    return builder().compile()


def broken() -> Any:
    raise RuntimeError("OPENAI_API_KEY is not set")


def start(saver: Any, thread_id: str, text: str = "please refund order 7") -> None:
    """Run the agent on ``thread_id`` until it waits for approval."""
    builder().compile(checkpointer=saver).invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread_id}})
