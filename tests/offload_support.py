"""Test support for offload (tests/test_offload*.py): an S3-compatible server (moto_server) run
as a separate process on loopback, a LangGraph graph whose ``files`` channel holds big values,
and the database's stored bytes."""

from __future__ import annotations

import base64
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

MOTO = Path(sys.executable).parent / "moto_server"


class S3Server:
    """``moto_server`` on a free loopback port, in its own process (never an in-process mock)."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([str(MOTO), "-H", "127.0.0.1", "-p", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while True:
            try:
                urllib.request.urlopen(self.endpoint, timeout=1)
                break
            except Exception:
                if time.time() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("moto_server did not start")
                time.sleep(0.1)
        self.buckets = 0

    def bucket_url(self, prefix: str = "tl") -> str:
        """A new bucket's offload store URL."""
        self.buckets += 1
        name = f"threadline-{self.buckets}"
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/{name}", method="PUT"), timeout=5)
        return f"s3://{name}/{prefix}?endpoint={self.endpoint}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def s3_env() -> None:
    for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"), ("AWS_REGION", "us-east-1")):
        os.environ.setdefault(k, v)


def have_moto() -> bool:
    return MOTO.exists() or shutil.which("moto_server") is not None


class FilesState(TypedDict):
    files: dict
    step: int


def files_graph(checkpointer: Any, *, steps: int, size: int, every: int = 3, seed: int = 7) -> Any:
    """A graph whose node runs ``steps`` times; every ``every`` steps it rewrites one file of
    ``size`` bytes (base64 of seeded random bytes) in the ``files`` channel."""
    rng = random.Random(seed)

    def work(state: FilesState) -> dict:
        step = state["step"] + 1
        out: dict = {"step": step}
        if step % every == 1:
            files = dict(state["files"])
            files[f"f{step % 2}.txt"] = base64.b64encode(rng.randbytes(size * 3 // 4)).decode()
            out["files"] = files
        return out

    g = StateGraph(FilesState)
    g.add_node("work", work)
    g.add_edge(START, "work")
    g.add_conditional_edges("work", lambda s: END if s["step"] >= steps else "work")
    return g.compile(checkpointer=checkpointer)


def stored_bytes(saver: Any) -> int:
    """The bytes of the values and checkpoint rows a database holds (blobs, writes, checkpoint
    and metadata documents), the same measure on SQLite and Postgres."""
    conn = getattr(saver, "conn", None)
    q = (
        "SELECT (SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM threadline_blobs) + (SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM threadline_writes)"
        " + (SELECT COALESCE(SUM(LENGTH(CAST(checkpoint AS TEXT)) + LENGTH(CAST(metadata AS TEXT))), 0) FROM threadline_checkpoints)"
    )
    if callable(getattr(conn, "connection", None)):  # a psycopg pool
        with conn.connection() as c:
            return int(c.execute(q).fetchone()[0])
    return int(conn.execute(q).fetchone()[0])
