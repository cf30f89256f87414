"""The demo agent: an insurance consultation (seed 000's scenario), fully offline.

Graph (``build_graph``)::

    START → retrieve_context → search_products → generate_response ─┬→ END
                                                      ↑              │ (tool call)
                                                      └── call_tool ←┘

* ``retrieve_context`` reads the user's last message and writes ``user_context``
  (intent, age, budget), merged over what earlier turns found.
* ``search_products`` searches a small in-memory catalog for that intent and
  writes ``search_results`` plus the search's tool-call / tool-result messages;
  it writes nothing when there is nothing to search for (e.g. a greeting).
* ``generate_response`` asks the chat model (``ScriptedChatModel`` unless you pass
  another) and appends its reply to ``messages``. A reply may call ``get_quote``.
* ``call_tool`` runs the reply's tool calls, each only after a human approves it:
  it pauses the run with ``interrupt({...})`` and continues when the caller
  invokes the graph with ``Command(resume={"approved": True})`` (or ``False``).

State channels: ``messages`` (``add_messages`` reducer), ``user_context`` (dict),
``search_results`` (list of product dicts).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Annotated, Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from threadline.demo.model import ScriptedChatModel, advisor_prompt

CATALOG: list[dict[str, Any]] = [
    {"product_id": "M001", "category": "medical", "name": "Million Medical", "price": 399, "coverage": 1_000_000,
     "summary": "hospital costs up to 1,000,000 after a 10,000 deductible"},
    {"product_id": "M002", "category": "medical", "name": "Medical Plus", "price": 6_800, "coverage": 4_000_000,
     "summary": "no deductible, private wards included"},
    {"product_id": "A001", "category": "accident", "name": "Everyday Accident", "price": 99, "coverage": 500_000,
     "summary": "accidental injury and disability, worldwide"},
    {"product_id": "L001", "category": "life", "name": "Term Life 20", "price": 1_200, "coverage": 2_000_000,
     "summary": "20-year level term life cover"},
]

INTENTS = {"medical": "medical_insurance", "accident": "accident_insurance", "life": "life_insurance"}


class ConsultState(TypedDict, total=False):
    """The agent's state: one LangGraph channel per key."""

    messages: Annotated[list[AnyMessage], add_messages]
    user_context: dict[str, Any]
    search_results: list[dict[str, Any]]


@tool
def get_quote(product_id: str, age: int) -> str:
    """Price a product for a customer of the given age (yearly premium). Needs human approval."""
    product = next((p for p in CATALOG if p["product_id"] == product_id), None)
    if product is None:
        return json.dumps({"status": "error", "error": f"unknown product_id {product_id!r}"})
    factor = 1.0 if age < 30 else 1.3 if age < 40 else 1.8 if age < 50 else 2.6
    return json.dumps(
        {"status": "quoted", "product_id": product_id, "name": product["name"], "age": age,
         "annual_premium": round(product["price"] * factor), "coverage": product["coverage"]},
        sort_keys=True,
    )


TOOLS = {get_quote.name: get_quote}


def new_id() -> str:
    """A message id. Messages get theirs when created: ``add_messages`` would otherwise
    assign one by mutating the message in place, racing with the background thread
    that serializes the node's pending write (so the stored write may or may not
    carry the id)."""
    return str(uuid.uuid4())


def _last_human_text(state: ConsultState) -> str:
    for m in reversed(state.get("messages", [])):
        if isinstance(m, HumanMessage):
            return str(m.content)
    return ""


def extract_context(text: str) -> dict[str, Any]:
    """Intent, age and budget found in one user message (the last-named insurance kind wins)."""
    lower = text.lower()
    found: dict[str, Any] = {}
    hits = [(lower.rfind(word), intent) for word, intent in INTENTS.items() if word in lower]
    if hits:
        found["intent"] = max(hits)[1]
    elif re.search(r"\b(hi|hello|hey)\b", lower):
        found["intent"] = "greeting"
    if m := re.search(r"\b(?:i'?m|i am|age)\s*(\d{1,3})\b", lower):
        found["age"] = int(m.group(1))
    if m := re.search(r"budget\D{0,12}?(\d[\d,]*)", lower):
        found["budget"] = int(m.group(1).replace(",", ""))
    return found


def retrieve_context(state: ConsultState) -> dict[str, Any]:
    """Write ``user_context``: what the last user message says, over what earlier turns said."""
    return {"user_context": {"language": "en", **state.get("user_context", {}), **extract_context(_last_human_text(state))}}


def search_products(state: ConsultState) -> dict[str, Any]:
    """Search the catalog for the intent; write ``search_results`` and the search tool messages."""
    intent = state.get("user_context", {}).get("intent")
    category = next((k for k, v in INTENTS.items() if v == intent), None)
    if category is None:
        return {}  # nothing to search: no channel changes
    results = [p for p in CATALOG if p["category"] == category]
    call_id = f"call_search_{category}"
    return {
        "search_results": results,
        "messages": [
            AIMessage("", id=new_id(), tool_calls=[{"name": "search_catalog", "args": {"category": category}, "id": call_id, "type": "tool_call"}]),
            ToolMessage(json.dumps([p["product_id"] for p in results]), id=new_id(), tool_call_id=call_id, name="search_catalog"),
        ],
    }


def make_generate_response(model: BaseChatModel):
    def generate_response(state: ConsultState) -> dict[str, Any]:
        """Ask the chat model for the next reply; append it to ``messages``."""
        prompt = [advisor_prompt(state.get("user_context", {}), state.get("search_results", [])), *state.get("messages", [])]
        return {"messages": [model.invoke(prompt)]}

    return generate_response


def call_tool(state: ConsultState) -> dict[str, Any]:
    """Run the last reply's tool calls, each after a human approves it through ``interrupt``.

    The interrupt value is ``{"type": "tool_approval", "tool", "args", "question"}``;
    resume with ``Command(resume={"approved": bool})`` (a bare bool or "yes"/"no" also works).
    On resume LangGraph re-runs this node from the top; ``interrupt`` then returns the
    resume value instead of pausing.
    """
    last = state["messages"][-1]
    replies = []
    for tc in getattr(last, "tool_calls", []):
        decision = interrupt({
            "type": "tool_approval",
            "tool": tc["name"],
            "args": tc["args"],
            "question": f"Allow the advisor to call {tc['name']}({', '.join(f'{k}={v!r}' for k, v in tc['args'].items())})?",
        })
        if _approved(decision) and tc["name"] in TOOLS:
            content = TOOLS[tc["name"]].invoke(tc["args"])
        else:
            content = json.dumps({"status": "declined"})
        replies.append(ToolMessage(content, id=new_id(), tool_call_id=tc["id"], name=tc["name"]))
    return {"messages": replies}


def _approved(decision: Any) -> bool:
    if isinstance(decision, dict):
        decision = decision.get("approved")
    if isinstance(decision, str):
        return decision.strip().lower() in ("y", "yes", "approve", "approved", "true", "ok")
    return decision is True


def route_after_response(state: ConsultState) -> str:
    """``call_tool`` when the reply calls a tool, else END."""
    last = state["messages"][-1]
    return "call_tool" if getattr(last, "tool_calls", None) else END


def build_graph(model: BaseChatModel | None = None) -> StateGraph:
    """The uncompiled agent graph. ``model`` defaults to the offline ``ScriptedChatModel``."""
    g = StateGraph(ConsultState)
    g.add_node("retrieve_context", retrieve_context)
    g.add_node("search_products", search_products)
    g.add_node("generate_response", make_generate_response(model or ScriptedChatModel()))
    g.add_node("call_tool", call_tool)
    g.add_edge(START, "retrieve_context")
    g.add_edge("retrieve_context", "search_products")
    g.add_edge("search_products", "generate_response")
    g.add_conditional_edges("generate_response", route_after_response, ["call_tool", END])
    g.add_edge("call_tool", "generate_response")
    return g


def compile_graph(checkpointer: Any, model: BaseChatModel | None = None, **kwargs: Any):
    """``build_graph(model).compile(checkpointer=checkpointer, **kwargs)``."""
    return build_graph(model).compile(checkpointer=checkpointer, **kwargs)
