"""Redis checkpoint rows are packed and unpacked from many threads at once (LangGraph puts from
worker threads, the browser reads from its thread pool): each thread has its own zstd objects."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from threadline.storage.redis import layout as L


def test_checkpoint_rows_pack_and_unpack_in_parallel_threads() -> None:
    def work(n: int) -> bool:
        for i in range(400):
            row = [f"parent-{n}", '{"channel_versions": {"messages": "%d"}}' % i * 40, "{}", i, "loop", None, 1.5 * i, f"sum-{n}"]
            if L.unpack_checkpoint(L.pack_checkpoint(row), "test") != row:
                return False
        return True

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(32)))
