"""Regenerate, or check, docs/method.md's validate table, ranking table and verdict.

Why: those figures were typed from validate's output and went stale unseen
(validate on the model engine and the ranking take about two minutes, too long
for the transcript runner). Here each is rendered from validate itself: the
rows from ``validate.validate("model", chip)``, the ranking from
``validate.ranking(chip)`` (every fit of fits.json on its own profile).
tests/test_validate.py renders them from the runs it already makes and
compares with docs/method.md, so a moved figure fails ``make test`` until
``make docs`` (which runs this script) rewrites them.

The Markdown marks each generated part with a pair of comments:

    <!-- generated: NAME (tools/method_tables.py) -->
    ...
    <!-- end generated: NAME -->

    python tools/method_tables.py            # rewrite docs/method.md (make docs)
    python tools/method_tables.py --check    # print a diff if stale, exit 1
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "method.md"
PARTS = ("validate-rows", "ranking", "verdict")


def _pct(v: float | None) -> str:
    return "" if v is None else f"{100 * v:+.1f}%"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _modeled(r: Mapping[str, Any]) -> str:
    v, unit = r["modeled"], str(r["unit"])
    if v is None:
        return "-"
    if unit == "us":
        return f"{v:.1f} us"
    if unit == "GB/s":
        return f"{v:.2f} GB/s"
    if unit == "x":
        return f"{v:.2f}x"
    if "us/line" in unit:
        return f"{v:.3f} {unit}"
    if unit == "R^2":
        return f"{v:.4f}"
    return f"{100 * v:+.2f}%"


def _status(r: Mapping[str, Any]) -> str:
    if r["scope"] == "info":
        return "info"
    if r["passed"]:
        return "pass"
    return "FAIL" if r["counts"] else "fail*"


def rows_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """validate's rows (``validate --json``'s ``rows``), one line each, as validate orders them."""
    out = [
        "| row | scope | modeled | measured | error | tolerance | result |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = (
            r["name"],
            r["scope"],
            _modeled(r),
            r["measured"],
            _pct(r["error"]),
            r["tolerance"],
            _status(r),
        )
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(out)


def ranking_table(ranked: Sequence[Mapping[str, Any]]) -> str:
    """Every fitted pair, best first; the best in bold; the rows each one fails, by name."""
    out = [
        "| hypothesis x mechanism | rows passed | RMS error | fails |",
        "|---|---|---|---|",
    ]
    for i, e in enumerate(ranked):
        pair = f"{e['hypothesis']} x {e['mechanism']}"
        passed = f"{e['passed']}/{e['rows']}"
        if i == 0:
            pair, passed = f"**{pair}**", f"**{passed}**"
        fails = "; ".join(str(f) for f in e["failed"]) or "-"
        cells = (pair, passed, f"{100 * float(e['rms_rel_err']):.2f}%", fails)
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(out)


def verdict_text(ranked: Sequence[Mapping[str, Any]], margin: str, profile: str) -> str:
    """The ranking's verdict in a sentence: its winner, its rows and RMS, and by how much."""
    top = ranked[0]
    return (
        f"**Verdict**: *{str(top['hypothesis']).upper()} x {top['mechanism']} fits the "
        f"measurements best: {top['passed']}/{top['rows']} rows pass, RMS relative error "
        f"{100 * float(top['rms_rel_err']):.2f}%, {margin}; the profile is {profile}.*"
    )


def replace(text: str, name: str, body: str) -> str:
    """`text` with the generated part `name` set to `body` (its markers must be there)."""
    pat = re.compile(
        rf"(<!-- generated: {re.escape(name)} \(tools/method_tables\.py\) -->\n)"
        rf"(.*?)(\n<!-- end generated: {re.escape(name)} -->)",
        re.S,
    )
    if len(pat.findall(text)) != 1:
        raise SystemExit(f"{DOC.name}: needs exactly one generated part {name!r}")
    return pat.sub(lambda m: m.group(1) + body + m.group(3), text)


def render(
    text: str,
    rows: Sequence[Mapping[str, Any]],
    ranked: Sequence[Mapping[str, Any]],
    margin: str,
    profile: str,
) -> str:
    """docs/method.md's text with every generated part rendered from these results."""
    text = replace(text, "validate-rows", rows_table(rows))
    text = replace(text, "ranking", ranking_table(ranked))
    return replace(text, "verdict", verdict_text(ranked, margin, profile))


def current(text: str) -> str:
    """Render from validate on the model engine and the ranking, as `make docs` does."""
    from ane_kdma import chip as chips
    from ane_kdma import validate

    chip = chips.load()
    report = validate.validate("model", chip, rank=False)
    ranked = validate.ranking(chip)
    m = validate.margin(ranked)
    assert m is not None
    rows = validate.to_json(report, chip)["rows"]
    assert isinstance(rows, list)
    profile = f"{chip.profile.hypothesis} x {chip.profile.mechanism}"
    return render(text, rows, ranked, validate.margin_text(m), profile)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="print a diff if stale; exit 1")
    args = ap.parse_args(argv)
    text = DOC.read_text()
    new = current(text)
    if args.check:
        diff = list(difflib.unified_diff(text.splitlines(), new.splitlines(), lineterm=""))
        print("\n".join(diff))
        return 1 if diff else 0
    if new != text:
        DOC.write_text(new)
        print(f"rewrote the generated parts of {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
