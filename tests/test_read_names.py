"""``read.names`` (git-like checkpoint names, thread globs) and ``read.tasks`` (the node of a
Send task) on real databases of both backends."""

from __future__ import annotations

import pytest
from langgraph.pregel._algo import _uuid5_str, _xxhash_str

from cli_support import run_agent
from backends import SYNC_KINDS, make_backend
from lifecycle_graphs import populate
from threadline import lifecycle, open_saver
from threadline import read
from threadline.errors import NotFoundError
from threadline.read import names, tasks


@pytest.fixture(params=SYNC_KINDS)
def saver(request, tmp_path):
    with open_saver(make_backend(request.param, tmp_path, request).url) as s:
        facts = populate(s)
        run_agent(s)
        yield s, facts


def test_checkpoint_names(saver):
    s, facts = saver
    nodes = read.thread_history(s, "t-research").ordered()
    head = max(n.checkpoint_id for n in nodes)
    by_id = {n.checkpoint_id: n for n in nodes}
    resolve = lambda name: names.resolve_checkpoint(s, "t-research", name)  # noqa: E731
    assert resolve("HEAD") == resolve("head") == head
    assert resolve("HEAD~") == resolve("HEAD~1") == by_id[head].parent_checkpoint_id
    assert resolve("HEAD~2") == by_id[by_id[head].parent_checkpoint_id].parent_checkpoint_id
    fork = facts["fork_point"]
    for name in (fork, fork[-8:], f"…{fork[-8:]}", fork[-6:], fork[-12:].upper(), fork.replace("-", "")[-20:]):
        assert resolve(name) == fork, name
    on_head_path = [n for n in nodes if n.on_head_path]
    step = on_head_path[3].step
    assert by_id[resolve(f"step:{step}")].step == step and by_id[resolve(f"step:{step}")].on_head_path
    prefix = head[:8]  # uuid6 ids of one run share their leading (time) digits
    with pytest.raises(names.AmbiguousNameError, match="give more digits") as err:
        resolve(prefix)
    assert head in str(err.value) or "more" in str(err.value)
    for bad in ("HEAD~999", "step:999", "abc", "zzzzzzzz", "ffffffffff"):
        with pytest.raises(NotFoundError):
            resolve(bad)
    with pytest.raises(NotFoundError, match="unknown thread 'nope'"):
        names.resolve_checkpoint(s, "nope", "HEAD")
    with pytest.raises(NotFoundError, match="has no checkpoint"):
        names.resolve_checkpoint(s, "t-research", "HEAD", checkpoint_ns="no-such-ns")


def test_step_after_a_rollback_names_the_newest_on_the_head_branch(saver):
    s, _ = saver
    target = names.resolve_checkpoint(s, "t-answer", "HEAD~2")
    r = lifecycle.rollback(s, "t-answer", target)
    step = read.thread_history(s, "t-answer").nodes[""][target].step
    assert names.resolve_checkpoint(s, "t-answer", f"step:{step}") == r.checkpoint_id  # the rollback repeats its target's step
    assert names.resolve_checkpoint(s, "t-answer", "HEAD~1") == target


def test_thread_patterns(saver):
    s, _ = saver
    assert names.expand_threads(s, ["t-*"]) == ["t-answer", "t-interrupt", "t-research"]
    assert names.expand_threads(s, ["t-research", "t-?nswer", "t-research"]) == ["t-research", "t-answer"]
    assert names.expand_threads(s, ["[at]*-1"]) == ["agent-1"]
    with pytest.raises(NotFoundError, match="no thread matches 'T-\\*'"):
        names.expand_threads(s, ["T-*"])  # case-sensitive
    with pytest.raises(NotFoundError, match="unknown thread 'nope'"):
        names.expand_threads(s, ["t-*", "nope"])
    assert names.match_threads(["a%_*"], ["a%_1", "ab1", "a%x"]) == ["a%_1"]  # LIKE's wildcards are plain characters


def test_abbreviate_lengthens_shared_suffixes():
    ids = ["1f1e6685-78ab-6994-bfff-aaaa12345678", "1f1e6685-78ab-6994-bfff-bbbb12345678", "1f1e6685-78ab-6994-bfff-000000000001"]
    short = names.abbreviate(ids)
    assert short[ids[2]] == "00000001" and len(set(short.values())) == 3
    assert all(i.replace("-", "").endswith(v) for i, v in short.items())
    assert names.short(ids[0]) == "12345678" and names.short(None) == "-"


@pytest.mark.parametrize("version", [1, 2, 4])
def test_task_id_hash_is_langgraphs(version):
    namespace = bytes(range(16))
    parts = ("tools", "3", "tools", "__pregel_push", "1")
    expected = (_xxhash_str if version > 1 else _uuid5_str)(namespace, *parts)
    assert tasks.task_id_hash(version, namespace, *parts) == expected


def test_push_paths():
    assert tasks.push_index("~__pregel_push, 0000000003, 0000000000") == 3
    assert tasks.push_index("~__pregel_push, 0000000000") == 0
    assert tasks.push_index("~__pregel_pull, agent") is None
    assert tasks.push_index("~__pregel_push, ~__pregel_pull, agent, 0000000002") is None  # a functional-API call
    assert tasks.push_index(None) is None


def test_send_tasks_get_their_node(saver):
    s, _ = saver
    writes = read.audit(s, "agent-1")
    pushed = [w for w in writes if tasks.push_index(w.task_path) is not None]
    assert len({w.task_id for w in pushed}) == 3 and {w.node for w in pushed} == {"tools"}
    assert {t.node for t in read.task_stats(s).tasks} >= {"tools", "agent"}
    assert all(not t.node.startswith("~") for t in read.task_stats(s, "agent-1").tasks)
