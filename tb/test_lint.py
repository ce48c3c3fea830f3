"""Lint: `verilator --lint-only -Wall` clean for every mode and core count; Icarus 11 compiles."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ane_kdma.hw import CreditMode
from ane_kdma.sim import RTL, setup_verilator


def _rtl() -> list[str]:
    names = [
        ln.strip()
        for ln in (RTL / "kdma.f").read_text().splitlines()
        if ln.strip() and not ln.startswith("//")
    ]
    return [str(RTL / n) for n in names]


@pytest.mark.parametrize("cores", [1, 16])
@pytest.mark.parametrize("mode", list(CreditMode), ids=lambda m: m.name.lower())
def test_verilator_lint_wall_clean(mode: CreditMode, cores: int) -> None:
    setup_verilator()
    cmd = ["verilator", "--lint-only", "-Wall", "--top-module", "kdma_top"]
    cmd += [f"-GCreditMode=2'd{int(mode)}", f"-GNumCores={cores}", *_rtl()]
    out = subprocess.run(cmd, capture_output=True, text=True)
    warnings = [ln for ln in out.stderr.splitlines() if ln.startswith("%")]
    assert out.returncode == 0 and not warnings, "\n".join(warnings)


def test_no_lint_waivers_in_rtl() -> None:
    for path in RTL.glob("*.sv"):
        assert "lint_off" not in path.read_text(), f"{path.name} waives a lint warning"


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="apt-get install iverilog")
@pytest.mark.parametrize("mode", list(CreditMode), ids=lambda m: m.name.lower())
def test_icarus_compiles(mode: CreditMode, tmp_path) -> None:
    cmd = ["iverilog", "-g2012", "-o", str(tmp_path / "a.vvp"), "-s", "kdma_top"]
    cmd += [f"-Pkdma_top.CreditMode={int(mode)}", "-Pkdma_top.NumCores=16", *_rtl()]
    out = subprocess.run(cmd, capture_output=True, text=True)
    errors = [ln for ln in out.stderr.splitlines() if "warning" not in ln and "error" in ln.lower()]
    assert out.returncode == 0 and not errors, out.stderr
