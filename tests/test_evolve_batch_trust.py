"""Batch state migration a user can trust (issue 42, findings 1 and 4), driven through the CLI as
a user runs it, on SQLite, Postgres and Redis, with the app of ``evolve_app`` going v1 → v2 (the
channel ``draft`` renamed ``text``, the interrupting node ``review`` renamed ``approve``):

* every checkpoint ``migrate --apply`` writes is readable by every reader (``threads``, ``inbox``,
  ``read.thread_status``, ``get_state``, the history), a finished thread's included;
* a thread interrupted before the migration is interrupted after it, and resumes on v2;
* only threads a step changes are written: a thread the steps leave as it is and a thread of
  another graph are not, and the dry run's count is its listing;
* ``--thread`` selects threads; a thread that cannot be read is reported with why, the others
  are migrated, and the exit status says some failed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

import evolve_app as A
from backends import make_backend
from cli_support import agent_graph, cli, one_line_error, run_agent
from threadline import evolve
from threadline.read import thread_status

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

V2 = ("--graph", "evolve_app:graph_v2", "--migrations", "evolve_app:MIGRATIONS_V2")


def cfg(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


@pytest.fixture(params=("sqlite", "postgres", "redis"))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return make_backend(request.param, tmp_path, request)


def store_v1(saver: Any, topics: dict[str, str]) -> None:
    """v1 threads interrupted in ``review``; the first is then resumed to the end."""
    g1 = A.v1().compile(checkpointer=saver)
    for tid, topic in topics.items():
        g1.invoke({"topic": topic}, cfg(tid))
    g1.invoke(Command(resume="fine"), cfg(next(iter(topics))))


def v2_reference(saver: Any, topic: str, verdict: str) -> dict:
    """What a thread started under v2 with the same inputs ends with."""
    g2 = A.v2().compile(checkpointer=saver)
    g2.invoke({"topic": topic}, cfg(f"ref-{topic}"))
    return g2.invoke(Command(resume=verdict), cfg(f"ref-{topic}"))


def run(*args: str, code: int = 0) -> Any:
    proc = cli(*args)
    assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc


def test_migrated_threads_are_readable_and_stay_interrupted(backend: Any) -> None:
    topics = {"ev-2": "gamma", "ev-0": "alpha", "ev-1": "beta"}  # ev-2 finished, the others interrupted
    with backend.open() as saver:
        store_v1(saver, topics)
    done = json.loads(run("migrate", *V2, "--apply", "--json", "--db", backend.url).stdout)
    assert done["migrated"] == 3 and done["ok"], done

    # every reader reads every thread: the listing, the inbox, the status, the graph, the history
    listed = {t["thread_id"]: t["status"]["kind"] for t in json.loads(run("threads", "--json", "--db", backend.url).stdout)["threads"]}
    assert listed == {"ev-2": "done", "ev-0": "interrupted", "ev-1": "interrupted"}, listed
    inbox = json.loads(run("inbox", "--json", "--db", backend.url).stdout)
    assert {(i["thread_id"], i["node"], i["value"]["draft"]) for i in inbox} == {
        ("ev-0", "approve", "draft on alpha"), ("ev-1", "approve", "draft on beta")}
    run("fsck", "--deep", "--db", backend.url)
    with backend.open() as saver:
        g2 = A.v2().compile(checkpointer=saver)
        assert [thread_status(saver, t).kind for t in topics] == ["done", "interrupted", "interrupted"]
        finished = g2.get_state(cfg("ev-2"))
        assert finished.next == () and finished.values["text"] == "draft on gamma" and "draft" not in finished.values
        assert all(s.values for s in g2.get_state_history(cfg("ev-2")))
        waiting = {i["thread_id"]: i["interrupt_id"] for i in inbox}
        for tid, interrupt_id in waiting.items():
            state = g2.get_state(cfg(tid))
            assert state.next == ("approve",) and [x.id for x in state.interrupts] == [interrupt_id]
        # resumed on v2: by value, and by the interrupt id the inbox shows
        assert g2.invoke(Command(resume="ok"), cfg("ev-0")) == v2_reference(saver, "alpha", "ok")
        assert g2.invoke(Command(resume={waiting["ev-1"]: "ok"}), cfg("ev-1")) == v2_reference(saver, "beta", "ok")
        assert [thread_status(saver, t).kind for t in topics] == ["done", "done", "done"]


def test_a_channel_rename_keeps_the_thread_interrupted(backend: Any) -> None:
    """Without any node renamed: the interrupt pending before the migration still is after it."""
    with backend.open() as saver:
        store_v1(saver, {"ev-2": "gamma", "ev-0": "alpha"})
        graph = A._app(A.StateV2, "text", "review", ("role", "content"))  # v1 with the channel renamed
        done = evolve.migrate(saver, graph.compile(), evolve.Migrations().rename_channel("draft", "text"), apply=True)
        assert done.migrated == 2 and done.ok, done
    inbox = json.loads(run("inbox", "--json", "--db", backend.url).stdout)
    assert [(i["thread_id"], i["node"]) for i in inbox] == [("ev-0", "review")]
    with backend.open() as saver:
        assert thread_status(saver, "ev-0").kind == "interrupted"
        assert graph.compile(checkpointer=saver).invoke(Command(resume="ok"), cfg("ev-0"))["result"].endswith("reviewer:ok")


def test_an_interrupted_send_task_moves_with_its_node(backend: Any) -> None:
    """A pending ``Send`` to a renamed node: the migrated checkpoint stores the re-addressed
    ``Send`` (under a new version: the old one keeps its value) and the interrupt moves to it."""
    with backend.open() as saver:
        A.fan_out("worker").compile(checkpointer=saver).invoke({"items": ["a"]}, cfg("fan-1"))
    done = json.loads(run("migrate", "--graph", "evolve_app:fan_v2", "--migrations", "evolve_app:FAN_MIGRATIONS", "--apply", "--json",
                          "--db", backend.url).stdout)
    assert done["migrated"] == 1 and done["ok"], done
    with backend.open() as saver:
        g2 = A.fan_out("helper").compile(checkpointer=saver)
        state = g2.get_state(cfg("fan-1"))
        assert state.next == ("helper",) and [i.value for i in state.interrupts] == ["ok?"]
        assert thread_status(saver, "fan-1").kind == "interrupted"
        assert g2.invoke(Command(resume="yes"), cfg("fan-1")) == {"items": ["a"], "done": ["a:yes"]}


def heads(saver: Any, thread_ids: list[str]) -> dict[str, tuple[str, int]]:
    """thread_id → (head checkpoint_id, checkpoints in the thread)."""
    return {t: (saver.get_tuple(cfg(t)).config["configurable"]["checkpoint_id"], len(list(saver.list(cfg(t))))) for t in thread_ids}


def test_only_threads_a_step_changes_are_written(backend: Any) -> None:
    with backend.open() as saver:
        store_v1(saver, {"ev-0": "alpha", "ev-1": "beta"})
        A.v2().compile(checkpointer=saver).invoke({"topic": "delta"}, cfg("v2-0"))  # already v2: no step changes it
        run_agent(saver, "agent-1")  # another graph's thread
        before = heads(saver, ["v2-0", "agent-1"])
    dry = json.loads(run("migrate", *V2, "--json", "--db", backend.url).stdout)
    assert dry["to_migrate"] == len(dry["examples"]) == 2, dry
    assert {e["thread_id"] for e in dry["examples"]} == {"ev-0", "ev-1"}
    assert dry["unchanged"] == 1 and dry["other_graph"] == ["agent-1"] and dry["ok"], dry
    people = run("migrate", *V2, "--db", backend.url).stdout
    assert "2 of 4 thread(s) would be migrated" in people and "1 unchanged" in people
    assert "of another graph" in people and "agent-1" in people

    done = json.loads(run("migrate", *V2, "--apply", "--json", "--db", backend.url).stdout)
    assert done["migrated"] == 2 and done["unchanged"] == 1 and done["other_graph"] == ["agent-1"], done
    with backend.open() as saver:
        assert heads(saver, ["v2-0", "agent-1"]) == before  # not written
        assert agent_graph(saver).get_state(cfg("agent-1")).next == ()
        again = evolve.migrate(saver, A.graph_v2(), A.MIGRATIONS_V2, apply=True)
        assert again.to_migrate == again.migrated == 0 and again.unchanged == 3, again


def test_thread_selection(backend: Any) -> None:
    with backend.open() as saver:
        store_v1(saver, {"ev-0": "alpha", "ev-1": "beta", "other-0": "gamma"})
        before = heads(saver, ["ev-1", "other-0"])
    done = json.loads(run("migrate", *V2, "--thread", "ev-0", "--apply", "--json", "--db", backend.url).stdout)
    assert done["threads"] == done["migrated"] == 1, done
    with backend.open() as saver:
        assert heads(saver, ["ev-1", "other-0"]) == before
    checked = json.loads(run("check", "--graph", "evolve_app:graph_v2", "--thread", "ev-*", "--thread", "ev-0", "--json",
                             "--db", backend.url, code=1).stdout)
    assert checked["threads"] == 2 and {t for p in checked["problems"] for t in p["examples"]} == {"ev-1"}
    one_line_error(cli("migrate", *V2, "--thread", "nobody-*", "--db", backend.url), 2, "nobody-*")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])  # offload: SQLite and Postgres
def test_an_unreadable_thread_fails_alone(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A value offloaded to an object store the command has none of: that thread is reported with
    why, every other thread is checked and migrated, and the exit status is 1."""
    from threadline.backends import open_saver
    from threadline.codec import BlobCodec
    from threadline.objectstore import Offload

    backend = make_backend(kind, tmp_path, request)
    with backend.open() as saver:
        store_v1(saver, {"ev-0": "alpha", "ev-1": "beta"})
    offload = BlobCodec(offload=Offload(f"file://{tmp_path / 'objects'}", min_bytes=4096))
    with open_saver(backend.url, codec=offload) as saver:
        big = random.Random(7).randbytes(8000).hex()  # incompressible: offloaded
        A.v1().compile(checkpointer=saver).invoke({"topic": big}, cfg("big"))
        before = heads(saver, ["big"])
    checked = json.loads(run("check", "--graph", "evolve_app:graph_v2", "--json", "--db", backend.url, code=1).stdout)
    assert [u["thread_id"] for u in checked["unreadable"]] == ["big"] and "offloaded" in checked["unreadable"][0]["error"]
    assert checked["threads"] == 3 and {t for p in checked["problems"] for t in p["examples"]} == {"ev-0", "ev-1"}
    proc = run("migrate", *V2, "--apply", "--db", backend.url, code=1)
    assert "not migrated: thread big" in " ".join(proc.stdout.split()) and "THREADLINE_OFFLOAD" in proc.stdout
    with backend.open() as saver:  # no object store: the API says the same
        again = evolve.migrate(saver, A.graph_v2(), A.MIGRATIONS_V2, apply=True)
        assert [t for t, _ in again.failed] == ["big"] and again.unchanged == 2 and not again.ok, again
        assert [thread_status(saver, t).kind for t in ("ev-0", "ev-1")] == ["done", "interrupted"]
    with open_saver(backend.url, codec=offload) as saver:
        assert heads(saver, ["big"]) == before  # not written


def test_lazy_migration_then_a_write_on_a_finished_thread(backend: Any) -> None:
    """The lazy path's next checkpoint stores the renamed empty channels too."""
    with backend.open() as saver:
        store_v1(saver, {"ev-0": "alpha"})
        evolve.with_migrations(saver, A.MIGRATIONS_V2)
        A.v2().compile(checkpointer=saver).update_state(cfg("ev-0"), {"result": "edited"})
    run("threads", "--db", backend.url)
    with backend.open() as saver:
        assert thread_status(saver, "ev-0").kind == "done"
