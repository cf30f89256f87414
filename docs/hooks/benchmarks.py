"""MkDocs hook: the benchmark results (benchmarks/RESULTS.md, kept beside the benchmarks that
write it) as the site's benchmarks.md, built from that file at build time. Links between it and
docs/ are written for the repository (``../benchmarks/RESULTS.md``, ``../docs/storage.md``);
on the site they point at the pages themselves."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

PAGE = "benchmarks.md"
RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "RESULTS.md"


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, PAGE, content=RESULTS.read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri == PAGE:
        return markdown.replace("](../docs/", "](")
    return markdown.replace("](../benchmarks/RESULTS.md", f"]({PAGE}")
