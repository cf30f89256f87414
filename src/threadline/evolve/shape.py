"""What a compiled graph accepts: ``Shape.of(graph)`` — its nodes, its channels and, per state
channel, a pydantic validator of its annotation (pydantic model, TypedDict or dataclass schema),
and ``problems(...)``: every way one stored checkpoint does not fit (the preflight's rules)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import ConfigError
from threadline.read.state import next_nodes

TASKS = "__pregel_tasks"
INTERRUPT = "__interrupt__"
# Problem kinds, in the order a report lists them.
KINDS = ("removed_channel", "invalid_value", "removed_node_next", "removed_node_task", "interrupt_in_removed_node", "unloadable_type")


def _value_type(hint: Any) -> Any:
    """A state key's annotation without its reducer: ``Annotated[list[X], add]`` → ``list[X]``
    (annotations inside it, such as ``AnyMessage``'s discriminator, are kept)."""
    return hint.__origin__ if typing.get_origin(hint) is typing.Annotated else hint


def _hints(schema: Any) -> dict[str, Any]:
    fields = getattr(schema, "model_fields", None)
    if isinstance(fields, dict):  # pydantic model
        return {k: f.annotation for k, f in fields.items()}
    try:
        return {k: _value_type(h) for k, h in typing.get_type_hints(schema, include_extras=True).items()}
    except Exception:
        return {f.name: f.type for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}


@dataclass
class Shape:
    """A graph's ``nodes`` and ``channels`` and the annotations of its state channels."""

    nodes: frozenset[str]
    channels: frozenset[str]
    hints: dict[str, Any]
    _adapters: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, graph: Any) -> Shape:
        """Raises ConfigError when ``graph`` is not a LangGraph graph (``compiled``)."""
        graph = compiled(graph)
        hints: dict[str, Any] = {}
        builder = getattr(graph, "builder", None)
        for schema in (getattr(builder, "schemas", None) or {}):
            for name, hint in _hints(schema).items():
                hints.setdefault(name, hint)
        return cls(frozenset(graph.nodes), frozenset(graph.channels), hints)

    def foreign(self, checkpoint: dict[str, Any]) -> bool:
        """Whether a stored checkpoint is another graph's: it names state channels or nodes
        (``versions_seen``) and none of them is this graph's."""
        channels = {ch for ch in (*(checkpoint.get("channel_values") or {}), *(checkpoint.get("channel_versions") or {}))
                    if not ch.startswith(("__", "branch:to:", "join:"))}
        nodes = {n for n in checkpoint.get("versions_seen") or {} if not n.startswith("__")}
        return bool(channels or nodes) and not (channels & self.channels or nodes & self.nodes)

    def invalid(self, channel: str, value: Any) -> str | None:
        """Why ``value`` does not validate against ``channel``'s annotation (None: it does, or
        the channel has no annotation pydantic can check)."""
        if channel not in self.hints:
            return None
        if channel not in self._adapters:
            from pydantic import TypeAdapter

            try:
                self._adapters[channel] = TypeAdapter(self.hints[channel])
            except Exception:
                self._adapters[channel] = None
        adapter = self._adapters[channel]
        if adapter is None:
            return None
        from pydantic import ValidationError

        try:
            # as decoded: LangGraph's own types (messages) are instances, an application's
            # classes their stored fields (inspection), which validate as the schema would build them
            adapter.validate_python(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            return f"{'.'.join(str(p) for p in first['loc']) or '(value)'}: {first['msg']}"
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def problems(self, checkpoint: dict[str, Any], writes: Iterable[tuple[str, str, Any]], unloadable: Iterable[str] = ()) -> list[tuple[str, str, str]]:
        """(kind, subject, detail) for every way a stored checkpoint does not fit this graph:
        ``removed_channel`` (a stored value of a channel the graph lacks), ``invalid_value``,
        ``removed_node_next`` / ``removed_node_task`` (``next`` or a pending ``Send`` naming a node
        the graph lacks), ``interrupt_in_removed_node``, and one ``unloadable_type`` per name in
        ``unloadable`` (module.name of a stored type the graph's serializer would not construct)."""
        out: list[tuple[str, str, str]] = []
        values = checkpoint.get("channel_values") or {}
        for ch, value in values.items():
            if ch.startswith(("branch:to:", "join:")) or ch.startswith("__"):
                continue
            if ch not in self.channels:
                out.append(("removed_channel", ch, "the graph has no such channel"))
            elif (why := self.invalid(ch, value)) is not None:
                out.append(("invalid_value", ch, why))
        nxt = next_nodes(checkpoint)
        sends = {getattr(v, "node", None) for t, c, v in writes if c == TASKS} | {getattr(s, "node", None) for s in values.get(TASKS) or []}
        for node in nxt:
            if node not in self.nodes and node not in sends:
                out.append(("removed_node_next", node, "next names a node the graph lacks"))
        for node in sorted(n for n in sends if n and n not in self.nodes):
            out.append(("removed_node_task", node, "a pending Send to a node the graph lacks"))
        for task_id, ch, value in writes:
            if ch == INTERRUPT:
                node = _interrupt_node(task_id, value, nxt)
                if node is not None and node not in self.nodes:
                    out.append(("interrupt_in_removed_node", node, "an interrupt pending in a node the graph lacks"))
        for name in sorted(set(unloadable)):
            out.append(("unloadable_type", name, "the serializer would not construct it: loads as raw fields"))
        return out


def compiled(graph: Any) -> Any:
    """``graph`` compiled (a ``StateGraph`` is compiled without a checkpointer).

    Raises ConfigError when it is not a LangGraph graph."""
    if hasattr(graph, "compile") and not hasattr(graph, "get_state"):
        graph = graph.compile()
    if not hasattr(graph, "get_state") or not isinstance(getattr(graph, "channels", None), dict) or not hasattr(graph, "nodes"):
        raise ConfigError(f"expected a compiled LangGraph graph (Pregel), got {type(graph).__name__}")
    return graph


def _interrupt_node(task_id: str, value: Any, candidates: list[str]) -> str | None:
    """The node an interrupt write was raised in: the candidate whose task namespace
    (``node:task_id``) hashes to the interrupt's id (LangGraph's ``Interrupt.id``), else the
    only candidate, else None."""
    from threadline.evolve.carry import interrupt_id

    ids = {getattr(i, "id", None) for i in (value if isinstance(value, (list, tuple)) else [value])}
    for node in candidates:
        if interrupt_id(f"{node}:{task_id}", 0) in ids:
            return node
    return candidates[0] if len(candidates) == 1 else None
