"""The house's structural rules, read from the source: small modules, and the Store's and the
Cache's SQL only in their named statements (``storage/dialect/store.py``, ``storage/dialect/cache.py``),
as the savers' is only in ``storage/dialect``."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "threadline"
MAX_LINES = 500
# SQL text in a string literal (f-strings included): the statements' opening words
SQL = re.compile(r"\b(SELECT |INSERT INTO |UPDATE \w+ SET |DELETE FROM |CREATE (TABLE|INDEX|EXTENSION) )")


def test_no_source_file_is_over_500_lines() -> None:
    sizes = {str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines()) for p in sorted(SRC.rglob("*.py"))}
    assert len(sizes) > 100  # the tree was found
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}, f"split these modules: at most {MAX_LINES} lines each"


def test_store_and_cache_hold_no_sql() -> None:
    found = []
    files = sorted([*(SRC / "store").rglob("*.py"), *(SRC / "cache").rglob("*.py")])
    assert len(files) > 10
    for path in files:
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
            if tok.type == tokenize.STRING and SQL.search(tok.string):
                found.append(f"{path.relative_to(SRC)}:{tok.start[0]}: {tok.string[:60]}")
    assert found == [], "name the statement in storage/dialect/store.py or cache.py and ask for it there"
