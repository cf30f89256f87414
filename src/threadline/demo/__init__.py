"""The demo agent: a deterministic, offline insurance consultation (seed 000's scenario).

``build_graph()`` returns the uncompiled LangGraph ``StateGraph``;
``compile_graph(checkpointer)`` compiles it; ``run_demo(db)`` is ``threadline demo``.
"""

from threadline.demo.agent import CATALOG, ConsultState, build_graph, compile_graph, get_quote
from threadline.demo.model import ScriptedChatModel
from threadline.demo.scenario import (
    BRANCH_MESSAGE,
    RESUME,
    THREAD_ID,
    TURNS,
    DemoResult,
    NotADemoDatabase,
    run_demo,
)

__all__ = [
    "BRANCH_MESSAGE",
    "CATALOG",
    "ConsultState",
    "DemoResult",
    "NotADemoDatabase",
    "RESUME",
    "ScriptedChatModel",
    "THREAD_ID",
    "TURNS",
    "build_graph",
    "compile_graph",
    "get_quote",
    "run_demo",
]
