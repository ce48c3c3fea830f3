"""Lint: `verilator --lint-only -Wall` clean for every hypothesis and core count; Icarus compiles.

kdma_top is linted alone, in both settings of its Payload parameter (the full
line datapath the testbenches check, and the counters-only build the batch
engine times, also inside that engine's top kdma_batch_top), and inside the
harness kdma_tb_top, whose parameters include a ring width and credit clamp
other than the package's (a chip that differs from the m3, as the CLI's RTL
engine may build). The credit unit's testbench top kdma_credit_tb (every mode
code's unit side by side) is -Wall clean but for the package sizes the unit
alone does not read.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from test_kdma import CREDIT_TOP, IDS, MODES, OTHER_CHIP, credit_sources

from ane_kdma.engines.verilator import WRAPPER as BATCH_TOP_SV
from ane_kdma.hw import credit_mode_literal
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.sim import RTL, rtl_sources, setup_verilator

OTHER_GEOMETRY = {
    "RingBits": OTHER_CHIP.geometry.ring_bits,
    "PrefetchMaxLines": OTHER_CHIP.geometry.prefetch_max_lines,
}


def _rtl() -> list[str]:
    names = [
        ln.strip()
        for ln in (RTL / "kdma.f").read_text().splitlines()
        if ln.strip() and not ln.startswith("//")
    ]
    return [str(RTL / n) for n in names]


#: what is linted: the top alone (full and counters-only), the batch engine's top over
#: the counters-only build, and the harness with the package's geometry and another
TARGETS = {
    "kdma_top": ("kdma_top", {}),
    "kdma_top-counters-only": ("kdma_top", {"Payload": 0}),
    "batch-top": ("kdma_batch_top", {"Payload": 0}),
    "harness": ("kdma_tb_top", {}),
    "harness-other-geometry": ("kdma_tb_top", OTHER_GEOMETRY),
}


def _sources(top: str) -> list[str]:
    if top == "kdma_batch_top":
        return [*_rtl(), str(BATCH_TOP_SV)]
    return _rtl() if top == "kdma_top" else [str(p) for p in rtl_sources()]


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("cores", [1, 16])
@pytest.mark.parametrize("hyp", MODES, ids=IDS)
def test_verilator_lint_wall_clean(hyp: Hypothesis, cores: int, target: str) -> None:
    setup_verilator()
    top, geometry = TARGETS[target]
    params = {"CreditMode": credit_mode_literal(hyp.encoding), "NumCores": cores, **geometry}
    cmd = ["verilator", "--lint-only", "-Wall", "--top-module", top]
    cmd += [f"-G{k}={v}" for k, v in params.items()] + _sources(top)
    out = subprocess.run(cmd, capture_output=True, text=True)
    warnings = [ln for ln in out.stderr.splitlines() if ln.startswith("%")]
    assert out.returncode == 0 and not warnings, "\n".join(warnings) or out.stderr


@pytest.mark.parametrize("geometry", [{}, OTHER_GEOMETRY], ids=["m3", "other-geometry"])
def test_the_credit_unit_top_lints_clean(geometry: dict[str, int]) -> None:
    """kdma_credit_tb (every mode code's kdma_credit side by side) is -Wall clean but for the
    package's sizes that the credit unit alone does not read (UNUSEDPARAM in kdma_pkg.sv only:
    the cores read them, and the targets above, which build the cores, show no such warning)."""
    setup_verilator()
    cmd = ["verilator", "--lint-only", "-Wall", "--top-module", CREDIT_TOP]
    cmd += [f"-G{k}={v}" for k, v in geometry.items()] + [str(p) for p in credit_sources()]
    out = subprocess.run(cmd, capture_output=True, text=True)
    warnings = [ln for ln in out.stderr.splitlines() if ln.startswith("%Warning")]
    pkg_sizes = [ln for ln in warnings if re.match(r"%Warning-UNUSEDPARAM: \S*kdma_pkg\.sv:", ln)]
    others = [ln for ln in warnings if ln not in pkg_sizes]
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("%Error")]
    errors = [ln for ln in errors if "Exiting due to" not in ln]  # (the count of the warnings)
    assert not others and not errors, "\n".join(others + errors) or out.stderr


def test_no_lint_waivers_in_rtl() -> None:
    for path in {*RTL.glob("*.sv"), *rtl_sources(), *credit_sources()}:
        assert "lint_off" not in path.read_text(), f"{path.name} waives a lint warning"


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="apt-get install iverilog")
@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("hyp", MODES, ids=IDS)
def test_icarus_compiles(hyp: Hypothesis, target: str, tmp_path) -> None:
    """No error, and no 'sorry' (a construct Icarus 11 only half supports) in the harness."""
    top, geometry = TARGETS[target]
    params = {"CreditMode": hyp.encoding, "NumCores": 16, **geometry}
    cmd = ["iverilog", "-g2012", "-o", str(tmp_path / "a.vvp"), "-s", top]
    cmd += [f"-P{top}.{k}={v}" for k, v in params.items()] + _sources(top)
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = out.stderr.splitlines()
    errors = [ln for ln in lines if "warning" not in ln and "error" in ln.lower()]
    errors += [ln for ln in lines if "kdma_tb_top.sv" in ln]
    assert out.returncode == 0 and not errors, out.stderr


def _design(params: dict[str, object], tmp_path) -> dict[str, set[str]]:
    """Verilator's elaborated netlist (--json-only): its variables' and function calls' names."""
    setup_verilator()
    out_json = tmp_path / f"netlist-{len(list(tmp_path.iterdir()))}.json"
    cmd = ["verilator", "--json-only", "--json-only-output", str(out_json)]
    cmd += ["--top-module", "kdma_top", *(f"-G{k}={v}" for k, v in params.items()), *_rtl()]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    names: dict[str, set[str]] = {"VAR": set(), "FUNCREF": set()}
    stack = [json.loads(out_json.read_text())]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") in names:
                names[node["type"]].add(str(node.get("name")))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return names


def test_the_counters_only_build_leaves_the_payload_out(tmp_path) -> None:
    """Payload = 0: no line store in memory or KMem, no test data; occupancy and counters stay."""
    payload = {"kmem_data", "kmem_addr", "addr_mem"}  # KMem's line store, memory's address queue
    timing = {"due_mem", "kmem_count_q", "inflight_q", "peak_inflight_q", "cycles_q"}
    timing |= {"zero_credit_q"}
    full = _design({"NumCores": 2}, tmp_path)
    counters = _design({"NumCores": 2, "Payload": 0}, tmp_path)
    assert payload | timing <= full["VAR"] and "line_data" in full["FUNCREF"]
    assert not payload & counters["VAR"] and "line_data" not in counters["FUNCREF"]
    assert timing <= counters["VAR"]


def _top_level_items(text: str) -> list[str]:
    """`text` split at the commas outside any parentheses or braces, each item's spaces squeezed."""
    items, depth, cur = [], 0, []
    for ch in text:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    return [" ".join(i.split()) for i in items]


def test_the_assertion_guard_checks_what_the_assertions_check() -> None:
    """kdma_core runs its nine assertions only when `assert_ok` (their conditions) has a 0 bit.

    The conditions are written twice (kdma_core.sv says why): bit k of the guard must be
    the k-th assertion's condition, token for token, or a failure could pass unchecked.
    """
    src = (RTL / "kdma_core.sv").read_text()
    block = src[src.index("`ifndef SYNTHESIS") : src.index("`endif")]
    guard = re.search(r"assign\s+assert_ok\s*=\s*\{(.*?)\};", block, re.S)
    assert guard is not None, "kdma_core.sv: no `assign assert_ok = {...};`"
    bits = list(reversed(_top_level_items(guard.group(1))))  # {bit 8, ..., bit 0}
    asserted = []
    for m in re.finditer(r"\bassert\s*\(", block):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(block[i], 0)
            i += 1
        asserted.append(" ".join(block[m.end() : i - 1].split()))
    assert len(asserted) == 9 and "else if ((&assert_ok) !== 1'b1)" in block  # X too
    assert bits == asserted, "the guard and the assertions check different conditions"
