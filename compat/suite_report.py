"""The comparison and report of ``langgraph_suite.py``: each threadline-only failure
classified by ``suite/expectations.toml``, the counts per suite and saver variant, the
Markdown report and the table it puts into ``docs/compatibility.md``."""

from __future__ import annotations

import fnmatch
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
EXPECTATIONS = ROOT / "compat" / "suite" / "expectations.toml"
DOCS = ROOT / "docs" / "compatibility.md"
DOCS_START = "<!-- langgraph-suite:results:start -->"
DOCS_END = "<!-- langgraph-suite:results:end -->"
IMPLS = ("official", "threadline")
OUTCOMES = ("passed", "failed", "skipped", "error")

from suites import SUITE_VARIANTS, SUITES, log

if TYPE_CHECKING:
    from langgraph_suite import Run


# --- comparing ----------------------------------------------------------------------------


@dataclass
class Expectation:
    pattern: str  # fnmatch pattern on "<suite>: <node id>"
    kind: str  # internals | deliberate | bug
    why: str
    message: str | None = None  # fnmatch pattern on the first line of the failure, if given


def load_expectations() -> list[Expectation]:
    if not EXPECTATIONS.exists():
        return []
    data = tomllib.loads(EXPECTATIONS.read_text())
    out = []
    for entry in data.get("expect", []):
        for pattern in entry["match"] if isinstance(entry["match"], list) else [entry["match"]]:
            if entry["class"] not in ("bug", "internals", "deliberate"):
                raise SystemExit(f"{EXPECTATIONS.name}: unknown class {entry['class']!r}")
            out.append(Expectation(pattern, entry["class"], entry["why"], entry.get("message")))
    return out


def classify(test_id: str, message: str, expectations: list[Expectation]) -> Expectation | None:
    for e in expectations:
        if fnmatch.fnmatchcase(test_id, e.pattern) and (e.message is None or fnmatch.fnmatchcase(message, e.message)):
            return e
    return None


def label_of(r: "Regression") -> str:
    """The class shown for a threadline-only failure."""
    if r.flaky:
        return "timing-sensitive: passed when rerun alone"
    return CLASS_LABEL[r.expectation.kind if r.expectation else None]


CLASS_LABEL = {
    "bug": "(a) threadline bug",
    "internals": "(b) official internals",
    "deliberate": "(c) deliberate difference",
    None: "UNCLASSIFIED",
}


@dataclass
class Regression:
    test_id: str  # "<suite>: <nodeid>"
    variant: str
    outcome: str
    message: str
    official_built_saver: bool
    expectation: Expectation | None
    rerun: str | None = None  # outcome when run again alone (see rerun_failures)

    @property
    def flaky(self) -> bool:
        return self.rerun == "passed"

    @property
    def unexplained(self) -> bool:
        return not self.flaky and (self.expectation is None or self.expectation.kind == "bug")


@dataclass
class Comparison:
    rows: list[tuple[str, str, str, Counter, Counter]] = field(default_factory=list)  # suite, variant, label, off, tl
    regressions: list[Regression] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)  # fail with official, pass with threadline
    both_fail: list[tuple[str, str]] = field(default_factory=list)
    saverless_passes: dict[str, int] = field(default_factory=dict)
    deselected: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def variant_order(suite: str, variants: set[str]) -> list[str]:
    if suite in SUITE_VARIANTS:
        known = [v for v in SUITE_VARIANTS[suite] if v in variants]
        return known + sorted(variants - set(known))
    return sorted(variants)


def compare(runs: dict[tuple[str, str], Run], expectations: list[Expectation]) -> Comparison:
    cmp = Comparison()
    for name in SUITES:
        off_run, tl_run = runs.get((name, "official")), runs.get((name, "threadline"))
        if off_run is None and tl_run is None:
            continue
        off = (off_run.data or {}).get("tests", {}) if off_run else {}
        tl = (tl_run.data or {}).get("tests", {}) if tl_run else {}
        reruns = (tl_run.data or {}).get("reruns", {}) if tl_run else {}
        for run in (off_run, tl_run):
            if run and run.data:
                cmp.deselected[name] = run.data.get("deselected", {})
        variants = {t["variant"] for t in off.values()} | {t["variant"] for t in tl.values()}
        for variant in variant_order(name, variants):
            c_off = Counter(t["outcome"] for t in off.values() if t["variant"] == variant)
            c_tl = Counter(t["outcome"] for t in tl.values() if t["variant"] == variant)
            label = SUITE_VARIANTS.get(name, {}).get(variant, variant)
            cmp.rows.append((name, variant, label, c_off, c_tl))
        cmp.saverless_passes[name] = sum(1 for t in tl.values() if t["outcome"] == "passed" and not t.get("built"))
        for nodeid in sorted(set(off) | set(tl)):
            o, t = off.get(nodeid), tl.get(nodeid)
            test_id = f"{name}: {nodeid}"
            if o and t and o["outcome"] == "passed" and t["outcome"] != "passed":
                cmp.regressions.append(Regression(test_id, t["variant"], t["outcome"], t["message"], bool(o.get("built")),
                                                  classify(test_id, t["message"], expectations),
                                                  reruns.get(nodeid, {}).get("outcome")))
            elif o and t and o["outcome"] in ("failed", "error") and t["outcome"] == "passed":
                cmp.fixed.append(test_id)
            elif o and t and o["outcome"] in ("failed", "error") and t["outcome"] in ("failed", "error"):
                cmp.both_fail.append((test_id, o["message"]))
    return cmp


# --- reporting ----------------------------------------------------------------------------


def fmt_counts(c: Counter) -> str:
    return " / ".join(str(c[o]) for o in OUTCOMES)


def counts_table(cmp: Comparison) -> list[str]:
    lines = [
        "| suite | saver variant | official P / F / S / E | threadline P / F / S / E |",
        "| --- | --- | --- | --- |",
    ]
    totals: dict[str, tuple[Counter, Counter]] = {}
    for suite, _variant, label, c_off, c_tl in cmp.rows:
        lines.append(f"| {suite} | {label} | {fmt_counts(c_off)} | {fmt_counts(c_tl)} |")
        t_off, t_tl = totals.setdefault(suite, (Counter(), Counter()))
        t_off.update(c_off)
        t_tl.update(c_tl)
    for suite, (t_off, t_tl) in totals.items():
        lines.append(f"| **{suite}** | **total** | **{fmt_counts(t_off)}** | **{fmt_counts(t_tl)}** |")
    return lines


def regressions_table(cmp: Comparison, limit: int = 300) -> list[str]:
    if not cmp.regressions:
        return ["None: every test that passes with the official savers passes with threadline's."]
    lines = ["| test | threadline outcome | class | first line of the failure |", "| --- | --- | --- | --- |"]
    for r in cmp.regressions:
        msg = r.message.replace("|", "\\|")
        if len(msg) > limit:
            msg = msg[: limit - 1] + "…"
        lines.append(f"| `{r.test_id}` | {r.outcome} | {label_of(r)} | {msg} |")
    return lines


def reasons_lines(cmp: Comparison) -> list[str]:
    lines = []
    for r in cmp.regressions:
        if r.expectation is not None:
            lines.append(f"- `{r.expectation.pattern}`: {r.expectation.why}")
    return sorted(set(lines))


def deselected_lines(cmp: Comparison) -> list[str]:
    lines = []
    for suite, reasons in cmp.deselected.items():
        for reason, ids in sorted(reasons.items()):
            lines.append(f"- {suite}: {len(ids)} deselected, {reason}")
    return lines


def causes_table(cmp: Comparison) -> list[str]:
    """The threadline-only failures grouped by their expectations entry (unclassified ones one by one)."""
    if not cmp.regressions:
        return ["None: every test that passes with the official savers passes with threadline's."]
    groups: dict[tuple, list[Regression]] = {}
    for r in cmp.regressions:
        key = (r.expectation.kind, r.expectation.why) if r.expectation and not r.flaky else ("?", r.test_id)
        groups.setdefault(key, []).append(r)
    order = {"bug": 0, None: 1, "flaky": 2, "internals": 3, "deliberate": 4}

    def rank(r: Regression) -> int:
        return order["flaky" if r.flaky else r.expectation.kind if r.expectation else None]

    rows = sorted(groups.values(), key=lambda g: (rank(g[0]), g[0].test_id))
    lines = ["| class | tests | first line of a failure | why |", "| --- | --- | --- | --- |"]
    for g in rows:
        e = g[0].expectation
        tests = f"`{g[0].test_id}`" if len(g) == 1 else f"{len(g)}: `{g[0].test_id}`, …"
        why = (e.why if e else "not classified in compat/suite/expectations.toml")
        if g[0].flaky:
            why = "failed in the full run, passed when rerun alone: timing-dependent under load"
        why = why.replace("|", "\\|")
        msg = g[0].message[:200].replace("|", "\\|")
        lines.append(f"| {label_of(g[0])} | {tests} | {msg} | {why} |")
    return lines


def report_markdown(cmp: Comparison, meta: dict, full: bool) -> str:
    """The report: ``full`` lists every test (report.md); otherwise failures are grouped by cause (docs)."""
    by_class = Counter("flaky" if r.flaky else r.expectation.kind if r.expectation else None for r in cmp.regressions)
    out = [
        f"threadline {meta['threadline']}; "
        + ", ".join(f"{d} {v}" for d, v in meta["versions"].items()) + ".",
        "pytest runs: " + ", ".join(f"{k} {secs:.0f}s ({date})" for k, (secs, date) in meta["runs"].items()) + ".",
        "",
        "P / F / S / E = passed / failed / skipped / errors (setup or teardown).",
        "",
        *counts_table(cmp),
        "",
        f"### Pass with the official saver, not with threadline: {len(cmp.regressions)}",
        "",
        ", ".join(f"{CLASS_LABEL.get(k, 'timing-sensitive (passed when rerun alone)')}: {by_class[k]}"
                  for k in ("bug", None, "flaky", "internals", "deliberate") if by_class[k])
        or "",
        "",
        *(regressions_table(cmp) if full else causes_table(cmp)),
        "",
    ]
    if full:
        reasons = reasons_lines(cmp)
        if reasons:
            out += ["Why (from `compat/suite/expectations.toml`):", "", *reasons, ""]
    if cmp.fixed:
        out += [f"Fail with the official saver, pass with threadline: {len(cmp.fixed)}", ""]
        if full:
            out += [f"- `{t}`" for t in cmp.fixed] + [""]
    if cmp.both_fail:
        out += [f"Fail with both (upstream or environment): {len(cmp.both_fail)}", ""]
        out += [f"- `{t}`: {m}" for t, m in cmp.both_fail] + [""]
    passes = {s: n for s, n in cmp.saverless_passes.items() if n}
    if passes:
        out += ["Threadline passes that built no threadline saver (they test official helpers only): "
                + ", ".join(f"{s} {n}" for s, n in passes.items()), ""]
    out += ["Deselected (in both runs):", "", *deselected_lines(cmp), ""]
    if full:
        for suite, reasons in cmp.deselected.items():
            for reason, ids in sorted(reasons.items()):
                if reason.startswith("uses no checkpointer fixture"):
                    continue
                out += [f"#### {suite}: {reason}", "", *[f"- `{i}`" for i in ids], ""]
    return "\n".join(out)


def print_console(cmp: Comparison, meta: dict) -> None:
    log("")
    log(f"threadline {meta['threadline']}; " + ", ".join(f"{d} {v}" for d, v in meta["versions"].items()))
    log("counts are passed / failed / skipped / errors")
    w = max((len(f"{s} {label}") for s, _v, label, _o, _t in cmp.rows), default=20)
    log(f"{'suite / variant'.ljust(w)}  {'official':>22}  {'threadline':>22}")
    for suite, _variant, label, c_off, c_tl in cmp.rows:
        log(f"{(suite + ' ' + label).ljust(w)}  {fmt_counts(c_off):>22}  {fmt_counts(c_tl):>22}")
    log("")
    log(f"pass with the official saver, not with threadline: {len(cmp.regressions)}")
    for r in cmp.regressions:
        log(f"  {r.test_id}  [{r.outcome}; {label_of(r)}]\n      {r.message[:300]}")
    log("")
    for line in deselected_lines(cmp):
        log(line[2:])


def write_docs(md: str) -> None:
    text = DOCS.read_text()
    if DOCS_START not in text or DOCS_END not in text:
        raise SystemExit(f"{DOCS} lacks the {DOCS_START} / {DOCS_END} markers")
    head, rest = text.split(DOCS_START, 1)
    _, tail = rest.split(DOCS_END, 1)
    DOCS.write_text(f"{head}{DOCS_START}\n{md}\n{DOCS_END}{tail}")
    log(f"wrote the results into {DOCS.relative_to(ROOT)}")
