"""A scripted, offline chat model for the demo agent: no network, no API key.

``ScriptedChatModel`` is a ``langchain_core`` chat model (``BaseChatModel``) whose
reply is a pure function of the prompt it is given. It stands where
``ChatOpenAI(...).bind_tools([get_quote])`` would stand in a real agent.

Why not ``GenericFakeChatModel`` / ``FakeMessagesListChatModel``: those replay a
fixed sequence, so their position lives in the model object. The demo restarts
the process (a fresh saver and graph) mid-conversation and time-travels to an
earlier checkpoint; a fixed sequence would then answer the wrong turn. Here the
same conversation always gets the same reply, whichever branch or process asks.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

CONTEXT_PREFIX = "User context: "
PRODUCTS_PREFIX = "Products found: "


def advisor_prompt(user_context: dict[str, Any], search_results: list[dict[str, Any]]) -> SystemMessage:
    """The system prompt ``generate_response`` puts before the conversation."""
    return SystemMessage(
        "You are an insurance advisor. Recommend one product that fits the budget; "
        "call get_quote when you know the user's age.\n"
        f"{CONTEXT_PREFIX}{json.dumps(user_context, sort_keys=True)}\n"
        f"{PRODUCTS_PREFIX}{json.dumps(search_results, sort_keys=True)}"
    )


def _prompt_field(messages: list[BaseMessage], prefix: str, default: Any) -> Any:
    for m in messages:
        if isinstance(m, SystemMessage):
            for line in str(m.content).splitlines():
                if line.startswith(prefix):
                    return json.loads(line[len(prefix):])
    return default


def scripted_reply(messages: list[BaseMessage]) -> AIMessage:
    """The advisor's reply to a prompt (system prompt from ``advisor_prompt`` + conversation)."""
    context = _prompt_field(messages, CONTEXT_PREFIX, {})
    products = _prompt_field(messages, PRODUCTS_PREFIX, [])
    last = messages[-1] if messages else None

    if isinstance(last, ToolMessage) and last.name == "get_quote":
        quote = json.loads(str(last.content))
        if quote.get("status") != "quoted":
            return AIMessage("Understood, I did not request a quote. Anything else I can help with?")
        return AIMessage(
            f"Your quote for {quote['name']} ({quote['product_id']}): {quote['annual_premium']}/year "
            f"at age {quote['age']}, cover up to {quote['coverage']:,}. Shall I prepare the application?"
        )

    if not products:
        if context.get("intent") in (None, "greeting"):
            return AIMessage(
                "Hello! I'm your insurance advisor. Tell me what cover you are looking for, "
                "your age and your yearly budget."
            )
        return AIMessage("Sorry, I found no product that fits. Could you tell me more about what you need?")

    budget = context.get("budget")
    fitting = [p for p in products if budget is None or p["price"] <= budget] or products
    best = min(fitting, key=lambda p: (-p["coverage"], p["price"]))
    text = f"I recommend {best['name']} ({best['product_id']}): {best['price']}/year, {best['summary']}."
    age = context.get("age")
    if age is None:
        return AIMessage(text + " Tell me your age and I can get you a personal quote.")
    return AIMessage(
        text + " Let me get you a personal quote.",
        tool_calls=[
            {
                "name": "get_quote",
                "args": {"product_id": best["product_id"], "age": age},
                "id": f"call_get_quote_{best['product_id']}",
                "type": "tool_call",
            }
        ],
    )


class ScriptedChatModel(BaseChatModel):
    """Deterministic chat model: ``invoke(messages)`` returns ``scripted_reply(messages)``."""

    @property
    def _llm_type(self) -> str:
        return "threadline-scripted"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=scripted_reply(messages))])
