"""State migrations (issue 32): the preflight ``check``, lazy migration on read and batch
``migrate``, on the test app of ``evolve_app`` evolving v1 → v2 → v3 (a channel renamed, a
node removed while threads are interrupted inside it, the note type changed), with real
LangGraph graphs on a real SQLite file, Postgres and (the lazy path) Redis."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command
from typer.testing import CliRunner

import evolve_app as A
from backends import make_backend
from threadline import evolve
from threadline.cli import app
from threadline.errors import ConfigError, MigrationError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TOPICS = ["alpha", "beta", "gamma"]


def cfg(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


@pytest.fixture(params=("sqlite", "postgres"))
def sql_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return make_backend(request.param, tmp_path, request)


def store_old_threads(backend: Any) -> dict[str, str]:
    """v1 threads (one finished, the others interrupted in ``review``) and a v2 thread
    interrupted in ``approve``; thread_id → topic."""
    with backend.open() as saver:
        g1 = A.v1().compile(checkpointer=saver)
        for i, topic in enumerate(TOPICS):
            g1.invoke({"topic": topic}, cfg(f"v1-{i}"))
        g1.invoke(Command(resume="fine"), cfg("v1-0"))
        A.v2().compile(checkpointer=saver).invoke({"topic": "delta"}, cfg("v2-0"))
    return {"v1-0": "alpha", "v1-1": "beta", "v1-2": "gamma", "v2-0": "delta"}


def v3_reference(saver: Any, topic: str, verdict: str) -> dict:
    """What a thread started under v3 with the same inputs ends with."""
    g3 = A.v3().compile(checkpointer=saver)
    tid = f"ref-{topic}-{verdict}"
    g3.invoke({"topic": topic}, cfg(tid))
    return g3.invoke(Command(resume=verdict), cfg(tid))


def assert_resumes_like_v3(saver: Any, threads: dict[str, str]) -> None:
    g3 = A.v3().compile(checkpointer=saver)
    for tid, topic in threads.items():
        if tid == "v1-0":  # finished under v1: its state is v3's finished state
            assert g3.get_state(cfg(tid)).values == v3_reference(saver, topic, "fine")
            continue
        assert g3.get_state(cfg(tid)).next == ("approve",), tid
        assert g3.invoke(Command(resume="ok"), cfg(tid)) == v3_reference(saver, topic, "ok"), tid
        assert g3.get_state(cfg(tid)).next == ()


def problems_of(report: evolve.Report) -> dict[tuple[str, str], set[str]]:
    return {(p.kind, p.subject): set(p.examples) for p in report.problems}


def test_check_finds_each_problem(sql_backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a type stored under v1 whose module is gone by v3
    (tmp_path / "evolve_gone_types.py").write_text(textwrap.dedent("""
        from dataclasses import dataclass
        @dataclass
        class Origin:
            source: str
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import evolve_gone_types

    threads = store_old_threads(sql_backend)
    with sql_backend.open() as saver:
        A.v1().compile(checkpointer=saver).update_state(cfg("v1-1"), {"topic": evolve_gone_types.Origin("crm")})
    monkeypatch.delitem(sys.modules, "evolve_gone_types")
    monkeypatch.syspath_prepend(str(tmp_path / "nowhere"))
    (tmp_path / "evolve_gone_types.py").unlink()

    with sql_backend.open() as saver:
        report = evolve.check(saver, A.graph_v3())
        found = problems_of(report)
        assert report.threads == 4 and report.checkpoints == 4 and not report.ok
        assert found[("removed_channel", "draft")] == {"v1-0", "v1-1", "v1-2"}
        assert found[("invalid_value", "notes")] == set(threads)
        assert found[("removed_node_next", "review")] == {"v1-1", "v1-2"}
        assert found[("interrupt_in_removed_node", "review")] == {"v1-2"}  # v1-1's head is update_state's, without it
        assert found[("unloadable_type", "evolve_gone_types.Origin")] == {"v1-1"}
        assert found[("invalid_value", "topic")] == {"v1-1"}
        # every checkpoint: the interrupted head of v1-1 under its update is found too
        every = evolve.check(saver, A.graph_v3(), all_checkpoints=True)
        assert every.checkpoints > report.checkpoints
        assert "v1-1" in problems_of(every)[("interrupt_in_removed_node", "review")]
        # v2 threads fit v2 apart from v1's leftovers
        v2 = problems_of(evolve.check(saver, A.v2().compile()))
        assert ("invalid_value", "notes") not in v2 and ("removed_node_next", "approve") not in v2
        # checked as the migrations present them, only the gone type is left
        after = problems_of(evolve.check(saver, A.graph_v3(), migrations=A.MIGRATIONS))
        assert set(after) == {("unloadable_type", "evolve_gone_types.Origin"), ("invalid_value", "topic")}


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_lazy_migration_resumes_like_v3(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    backend = make_backend(kind, tmp_path, request)
    threads = store_old_threads(backend)
    before = backend.snapshot() if kind != "redis" else None
    with backend.open() as saver:
        evolve.with_migrations(saver, A.MIGRATIONS)
        g3 = A.v3().compile(checkpointer=saver)
        shown = g3.get_state(cfg("v1-1"))
        assert shown.values["text"] == "draft on beta" and "draft" not in shown.values
        assert shown.metadata[evolve.MARKER] == ["v2-draft-is-text", "v2-review-is-approve", "v3-notes"]
        if before is not None:
            assert backend.snapshot() == before  # reading migrates nothing in the store
        # time travel: a pre-migration checkpoint shows migrated, and says so
        history = list(saver.list(cfg("v1-1")))
        assert all(evolve.RECORD in t.metadata for t in history)
        assert any(t.metadata.get(evolve.MARKER) for t in history)
        assert_resumes_like_v3(saver, threads)
    # what the threads wrote is stored migrated: a saver without migrations reads v3 state
    with backend.open() as plain:
        for tid in ("v1-1", "v2-0"):
            stored = plain.get_tuple(cfg(tid))
            assert evolve.MARKER not in stored.metadata and stored.metadata[evolve.RECORD] == A.MIGRATIONS.names
            assert stored.checkpoint["channel_values"]["notes"][0] == {"author": "writer", "body": f"wrote {threads[tid]}"}
            assert "draft" not in stored.checkpoint["channel_values"]


def test_batch_migration_dry_run_resume_and_v3(sql_backend: Any) -> None:
    threads = store_old_threads(sql_backend)
    before = sql_backend.snapshot()
    with sql_backend.open() as saver:
        plan = evolve.migrate(saver, A.graph_v3(), A.MIGRATIONS)
        assert plan.dry_run and plan.to_migrate == 4 and plan.migrated == 0 and plan.ok
        assert dict(plan.examples)["v2-0"] == ["v3-notes"]
        assert sql_backend.snapshot() == before  # a dry run writes nothing

        class Stop(Exception):
            pass

        def stop_after_two(done: int, total: int, what: str) -> None:
            if done == 2:
                raise Stop

        with pytest.raises(Stop):
            evolve.migrate(saver, A.graph_v3(), A.MIGRATIONS, apply=True, progress=stop_after_two)
        rerun = evolve.migrate(saver, A.graph_v3(), A.MIGRATIONS, apply=True)
        assert rerun.to_migrate == 2 and rerun.migrated == 2  # resumed: two were done
        assert evolve.migrate(saver, A.graph_v3(), A.MIGRATIONS, apply=True).to_migrate == 0
        assert evolve.check(saver, A.graph_v3()).ok
        for tid in threads:  # the history is intact: the old head is the migration's parent
            head = saver.get_tuple(cfg(tid))
            assert head.metadata["source"] == "update" and head.metadata[evolve.RECORD] == A.MIGRATIONS.names
            assert head.parent_config["configurable"]["checkpoint_id"] == head.metadata["threadline_migrated_from"]
            old = saver.get_tuple(head.parent_config)
            assert evolve.RECORD not in old.metadata
        assert_resumes_like_v3(saver, threads)


def test_failing_migration_changes_nothing_and_names_the_step(sql_backend: Any) -> None:
    store_old_threads(sql_backend)
    before = sql_backend.snapshot()
    with sql_backend.open() as saver:
        with pytest.raises(MigrationError) as batch:
            evolve.migrate(saver, A.graph_v3(), A.BROKEN, apply=True)
        assert batch.value.step == "v3-notes-broken" and batch.value.thread_id == "v1-0"
        assert "v1-0" in str(batch.value) and "cannot convert notes" in str(batch.value)
        assert sql_backend.snapshot() == before
        evolve.with_migrations(saver, A.BROKEN)
        with pytest.raises(MigrationError, match=r"'v3-notes-broken' failed on thread 'v1-2', checkpoint"):
            A.v3().compile(checkpointer=saver).invoke(Command(resume="ok"), cfg("v1-2"))
    assert sql_backend.snapshot() == before


def test_registry_rejects_bad_steps() -> None:
    with pytest.raises(ConfigError, match="registered twice"):
        evolve.Migrations().drop_channel("a", name="x").drop_channel("b", name="x")
    with pytest.raises(ConfigError, match="callable"):
        evolve.Migrations().transform("notes", "not a function")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a threadline.evolve.Migrations"):
        evolve.load_migrations("evolve_app:graph_v3")


def test_cli_check_and_migrate(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = make_backend("sqlite", tmp_path, request)
    threads = store_old_threads(backend)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    runner, db = CliRunner(), ["--db", backend.url]
    found = runner.invoke(app, ["check", "--graph", "evolve_app:graph_v3", "--json", *db])
    assert found.exit_code == 1, found.output
    report = json.loads(found.stdout)
    assert {p["kind"] for p in report["problems"]} == {"removed_channel", "invalid_value", "removed_node_next", "interrupt_in_removed_node"}
    people = runner.invoke(app, ["check", "--graph", "evolve_app:graph_v3", *db])
    assert people.exit_code == 1 and "interrupt_in_removed_node" in people.stdout
    dry = runner.invoke(app, ["migrate", "--graph", "evolve_app:graph_v3", "--migrations", "evolve_app:MIGRATIONS", *db])
    assert dry.exit_code == 0 and "dry run: 4 of 4" in dry.stdout
    done = runner.invoke(app, ["migrate", "--graph", "evolve_app:graph_v3", "--migrations", "evolve_app:MIGRATIONS", "--apply", "--json", *db])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["migrated"] == len(threads)
    assert runner.invoke(app, ["check", "--graph", "evolve_app:graph_v3", *db]).exit_code == 0
    failing = runner.invoke(app, ["migrate", "--graph", "evolve_app:graph_v3", "--migrations", "evolve_app:BROKEN", "--apply", *db])
    assert failing.exit_code == 1 and "'v3-notes-broken' failed on thread 'v1-0'" in " ".join(failing.output.split())
    # bad input: one line, exit 2
    for args in (["check", "--graph", "no_such_module:graph"], ["check", "--graph", "evolve_app:notes_v3"],
                 ["check", "--graph", "evolve_app:MIGRATIONS"], ["migrate", "--graph", "evolve_app:graph_v3"],
                 ["migrate", "--graph", "evolve_app:graph_v3", "--migrations", "evolve_app:graph_v3"]):
        bad = runner.invoke(app, [*args, *db])
        assert bad.exit_code == 2, (args, bad.output)


async def test_lazy_migration_async_saver(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    backend = make_backend("sqlite-async", tmp_path, request)
    with backend.open(is_async=False) as saver:
        g1 = A.v1().compile(checkpointer=saver)
        g1.invoke({"topic": "beta"}, cfg("v1-1"))
        reference = v3_reference(saver, "beta", "ok")
    async with backend.open() as saver:
        evolve.with_migrations(saver, A.MIGRATIONS)
        g3 = A.v3().compile(checkpointer=saver)
        assert (await g3.aget_state(cfg("v1-1"))).next == ("approve",)
        assert await g3.ainvoke(Command(resume="ok"), cfg("v1-1")) == reference
        assert [t async for t in saver.alist(cfg("v1-1"))][-1].metadata[evolve.RECORD] == A.MIGRATIONS.names


def test_put_on_a_checkpoint_this_saver_did_not_read(sql_backend: Any) -> None:
    """A put whose parent this saver has not presented reads the parent first, so the values
    migration renamed or transformed are stored with the new checkpoint."""
    from langgraph.checkpoint.base.id import uuid6

    store_old_threads(sql_backend)
    with sql_backend.open() as reader:
        shown = evolve.with_migrations(reader, A.MIGRATIONS).get_tuple(cfg("v1-2"))
    with sql_backend.open() as saver:
        evolve.with_migrations(saver, A.MIGRATIONS)
        child = {**shown.checkpoint, "id": str(uuid6(clock_seq=9))}
        written = saver.put(shown.config, child, {"source": "update", "step": 9, "parents": {}}, {})
    with sql_backend.open() as plain:
        stored = plain.get_tuple(written)
        assert stored.checkpoint["channel_values"]["text"] == "draft on gamma"
        assert stored.checkpoint["channel_values"]["notes"] == [{"author": "writer", "body": "wrote gamma"}]
        assert stored.metadata[evolve.RECORD] == A.MIGRATIONS.names


def test_record_survives_backup_and_restore(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from threadline.transfer import backup as B

    source = make_backend("postgres", tmp_path, request)
    threads = store_old_threads(source)
    with source.open() as saver:
        assert evolve.migrate(saver, A.graph_v3(), A.MIGRATIONS, apply=True).migrated == len(threads)
        B.backup(saver, str(tmp_path / "backup.db"))
    target = make_backend("sqlite", tmp_path / "restored", request)
    (tmp_path / "restored").mkdir()
    with target.open() as saver:
        B.restore(saver, str(tmp_path / "backup.db"))
        assert evolve.migrate(saver, A.graph_v3(), A.MIGRATIONS).to_migrate == 0  # every thread has had every step
        assert evolve.check(saver, A.graph_v3()).ok
        evolve.with_migrations(saver, A.MIGRATIONS)
        assert_resumes_like_v3(saver, threads)


def test_check_and_batch_on_redis(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    backend = make_backend("redis", tmp_path, request)
    threads = store_old_threads(backend)
    with backend.open() as saver:
        found = problems_of(evolve.check(saver, A.graph_v3()))
        assert found[("interrupt_in_removed_node", "review")] == {"v1-1", "v1-2"}
        assert found[("invalid_value", "notes")] == set(threads)
        assert evolve.migrate(saver, A.graph_v3(), A.MIGRATIONS, apply=True).migrated == len(threads)
        assert evolve.check(saver, A.graph_v3()).ok
        assert_resumes_like_v3(saver, threads)


@pytest.mark.parametrize("schema_kind", ["pydantic", "dataclass"])
def test_shape_validates_pydantic_and_dataclass_states(schema_kind: str) -> None:
    import dataclasses

    from langgraph.graph import START, StateGraph
    from langgraph.types import Send
    from pydantic import BaseModel

    from threadline.evolve.shape import Shape

    if schema_kind == "pydantic":
        class State(BaseModel):
            count: int = 0
            tags: list[str] = []
    else:
        @dataclasses.dataclass
        class State:  # type: ignore[no-redef]
            count: int = 0
            tags: list[str] = dataclasses.field(default_factory=list)

    g = StateGraph(State)
    g.add_node("work", lambda s: {"count": 1})
    g.add_edge(START, "work")
    shape = Shape.of(g.compile())
    assert shape.invalid("count", 3) is None and shape.invalid("tags", ["a"]) is None
    assert "valid integer" in shape.invalid("count", "three")
    assert shape.invalid("tags", [{"x": 1}]).startswith("0:")
    checkpoint = {"channel_values": {"count": "three", "old": 1}, "channel_versions": {}, "versions_seen": {}}
    found = shape.problems(checkpoint, [("task-1", "__pregel_tasks", Send("gone", {}))])
    assert sorted((k, s) for k, s, _ in found) == [("invalid_value", "count"), ("removed_channel", "old"), ("removed_node_task", "gone")]


def test_prebuilt_agent_threads_fit_their_own_graph(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """No false alarm on LangGraph's prebuilt agent: messages (tool calls, tool results) validate
    against ``AnyMessage``; without the ``tools`` node, its Send tasks would be reported."""
    from cli_support import agent_graph, run_agent

    backend = make_backend("sqlite", tmp_path, request)
    with backend.open() as saver:
        run_agent(saver)
        assert evolve.check(saver, agent_graph(), all_checkpoints=True).ok
        every = evolve.check(saver, A.graph_v3(), all_checkpoints=True)
        assert {("removed_channel", "messages"), ("removed_node_task", "tools")} <= set(problems_of(every))
