"""--scheduler: the same results on a Dask cluster as with --jobs 1, and bad input in one line.

One LocalCluster (2 worker processes, 1 thread each) serves the module; its
workers build the RTL harness into their own cache (ANE_KDMA_HARNESS_CACHE,
a temporary folder), as a farm's workers would on their first call. A worker
killed mid-run either costs nothing (Dask runs its chunk again) or, when the
scheduler may not retry, stops the command with one line and no output.
"""

from __future__ import annotations

import _thread
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from refusal import refuses

from ane_kdma import chip as chips
from ane_kdma import cluster as cl
from ane_kdma import contract, runner
from ane_kdma import hypotheses as hyps
from ane_kdma import sweep as sw
from ane_kdma.cli import common, main
from ane_kdma.contract import Workload
from ane_kdma.errors import InputError

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.xdist_group("cluster")  # one xdist worker starts the one cluster

CHIP = chips.load()
SWEEP = (64, 512, 64, 64)  # d_min, d_max, d_step, N: 8 points, small cores
UP_S = 180  # the workers start within this (a loaded CI machine)


@pytest.fixture(scope="module")
def harness_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("worker-harness-cache")


@contextmanager
def _cluster(**env: str) -> Iterator[Any]:
    c = distributed.LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        dashboard_address=":0",  # a free port: never clash with a running cluster
        env={"ANE_KDMA_PROGRESS": "0", **env},
    )
    try:
        with distributed.Client(c.scheduler_address, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=UP_S)
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def local_cluster(harness_cache: Path) -> Iterator[Any]:
    with _cluster(ANE_KDMA_HARNESS_CACHE=str(harness_cache)) as c:
        yield c


@pytest.fixture
def address(local_cluster: Any) -> str:
    return str(local_cluster.scheduler_address)


@pytest.fixture
def doomed() -> Iterator[Any]:
    """A cluster of its own for a test that kills a worker (the others keep theirs)."""
    with _cluster() as c:
        yield c


def _loads(n: int = 24) -> list[Workload]:
    """Sizes around the first notches on 1 and 3 cores, uneven splits: distinct workloads."""
    lb, ring = CHIP.line_bytes, CHIP.ring_lines
    sizes = [k * ring + x for k in (1, 2) for x in (-64, -9, 0, 7, 64, 300)]
    loads = [Workload.from_size(s * lb, 1) for s in sizes]
    loads += [Workload.from_size(s * lb, 3, 2) for s in sizes]
    return loads[:n]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- the same results


@pytest.fixture(scope="module")
def one_core_chip(tmp_path_factory: pytest.TempPathFactory) -> chips.Chip:
    """The m3 with one core (its profile, two synthetic points): an rtl sweep of 1-core builds."""
    folder = tmp_path_factory.mktemp("chips") / "c1"
    (folder / "measured").mkdir(parents=True)
    m3 = chips.chips_dir() / "m3"
    doc = json.loads((m3 / "chip.json").read_text())
    doc.update({"name": "c1", "label": "the m3 on one core (tests/test_cluster.py)", "cores": 1})
    (folder / "chip.json").write_text(json.dumps(doc))
    prof = json.loads((m3 / "profile.json").read_text())
    (folder / "profile.json").write_text(json.dumps({**prof, "name": "c1"}))
    source = {"title": "synthetic test chip", "cited_in": "tests/test_cluster.py"}

    def point(d: int, x: int | None, gbps: float) -> dict[str, object]:
        out: dict[str, object] = {
            "d": {"value": d, "unit": "input channels (D)"},
            "n": {"value": 4096, "unit": "output channels (N)"},
            "throughput": {"value": gbps, "unit": "GB/s"},
        }
        return out if x is None else {**out, "x": {"value": x, "unit": "lines"}}

    facts = {"notch_point": point(128, None, 1.0), "shoulder_point": point(126, -256, 3.0)}
    (folder / "measured" / "point_facts.json").write_text(
        json.dumps(
            {"dataset": "point_facts", "method": "ane-task", "source": source, "facts": facts}
        )
    )
    return chips.load(str(folder))


@pytest.mark.parametrize("engine", ["model", "rtl"])
def test_a_sweep_on_the_cluster_equals_jobs_1(
    engine: str, address: str, local_cluster: Any, one_core_chip: chips.Chip
) -> None:
    """model: the m3's 16 cores; rtl: one core (a build per hypothesis, on each side)."""
    chip = CHIP if engine == "model" else one_core_chip
    if engine == "rtl":
        _need_rtl()
    with runner.options(jobs=1):
        here = sw.compute_sweep(chip, *SWEEP, engine)
    with cl.options(address) as on:
        assert on is not None and on.width() == 2
        there = sw.compute_sweep(chip, *SWEEP, engine)
        held = [str(k) for k in local_cluster.scheduler.tasks]
    assert sum(k.startswith("Chip-") for k in held) == 1  # scattered once for the 4 calls
    assert sum(k.startswith("Hypothesis-") for k in held) == len(hyps.registry())
    assert here.d.size == there.d.size == 8
    assert set(here.time_us) == set(there.time_us) == {h.name for h in hyps.registry()}
    for name in here.time_us:
        assert np.array_equal(here.time_us[name], there.time_us[name]), name
        assert np.array_equal(here.gbps[name], there.gbps[name]), name
    if engine == "rtl":  # and the exact engines agree
        with runner.options(jobs=1):
            model = sw.compute_sweep(chip, *SWEEP, "model")
        for name in here.time_us:
            assert np.array_equal(here.time_us[name], model.time_us[name]), name


def _need_rtl() -> None:
    from ane_kdma.engines import verilator as vb

    try:
        vb.toolchain()
    except vb.HarnessBuildError as exc:
        pytest.skip(str(exc))


def test_the_rtl_engine_on_workers_that_build_their_own_harness(
    address: str, harness_cache: Path
) -> None:
    """A tiny workload set on 1 and 3 cores: the workers' first call builds into their cache."""
    from ane_kdma.engines import verilator as vb

    _need_rtl()
    h = hyps.get(hyps.FIXED)
    loads = [w for w in _loads() if len(w.cores) == 1][:6]
    here = runner.run_many("rtl", h, CHIP, loads, jobs=1)
    with cl.options(address):
        there = runner.run_many("rtl", h, CHIP, loads)
    assert there == here
    assert [r.counters for r in there] == [
        r.counters for r in runner.run_many("model", h, CHIP, loads, jobs=1)
    ]
    built = [p.name for p in harness_cache.iterdir() if (p / vb.EXE).is_file()]
    assert built and all(name.startswith(vb.TOP) for name in built), built


@pytest.mark.parametrize("engine", ["model", "rtl"])
def test_validate_on_the_cluster_equals_jobs_1(
    engine: str, address: str, one_core_chip: chips.Chip, capsys: pytest.CaptureFixture[str]
) -> None:
    """model: the m3 (every row its data supports); rtl: the one-core m3 (its two points, on
    1-core builds the workers hold from the rtl sweep, or build)."""
    argv = ["validate", "--engine", engine, "--no-ranking", "--json"]
    if engine == "rtl":
        _need_rtl()
        argv += ["--chip", str(one_core_chip.path)]
    s1, here, _ = _cli([*argv, "--jobs", "1"], capsys)
    s2, there, err = _cli([*argv, "--scheduler", address], capsys)
    assert (s1, json.loads(here)) == (s2, json.loads(there)), err
    assert err == ""
    if engine == "rtl":  # the rows ran on the RTL, and the exact engines agree
        rows = json.loads(here)["rows"]
        assert any(r["engine"].startswith("rtl") for r in rows), rows
        s3, model, _ = _cli([*argv[:2], "model", *argv[3:], "--jobs", "1"], capsys)
        mine = [{k: v for k, v in r.items() if k != "engine"} for r in rows]
        theirs = [{k: v for k, v in r.items() if k != "engine"} for r in json.loads(model)["rows"]]
        assert (s3, theirs) == (s1, mine)


@pytest.mark.parametrize("engine", ["model", "rtl"])
def test_calibrate_on_the_cluster_equals_jobs_1(
    engine: str,
    address: str,
    one_core_chip: chips.Chip,
    harness_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One pair with a closed form (signed x none: the cheapest fit). model: the m3; rtl: the
    one-core m3 (its two points, on the 1-core builds the workers hold from the rtl sweep,
    or build). On rtl the profile is also the model's, byte for byte, and every exact
    evaluation ran on the RTL (the search and validate's ranking on the closed form)."""
    argv = ["calibrate", "--engine", engine, "--hypothesis", "signed", "--mechanism", "none"]
    argv += ["--json"]
    if engine == "rtl":
        _need_rtl()
        argv += ["--chip", str(one_core_chip.path)]
    ran: list[str] = []  # the engine of every run_many call, here and on the cluster
    real = runner.run_many

    def run_many(name: str, *args: Any, **kw: Any) -> list[contract.Result]:
        ran.append(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(runner, "run_many", run_many)
    s1, here, _ = _cli([*argv, "--out", str(tmp_path / "a.json"), "--jobs", "1"], capsys)
    s2, there, err = _cli(
        [*argv, "--out", str(tmp_path / "b.json"), "--scheduler", address], capsys
    )
    assert s1 == s2 == 0, err
    assert json.loads(here) == json.loads(there)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert set(ran) == {engine, "analytic"}, sorted(set(ran))  # no other engine ran
    if engine == "rtl":  # the workers ran it on their own builds; and the model's fit
        from ane_kdma.engines import verilator as vb

        signed = f"{vb.TOP}-CreditMode{hyps.get('signed').encoding}-NumCores1-"
        assert any(p.name.startswith(signed) for p in harness_cache.iterdir())
        argv[argv.index("rtl")] = "model"
        s3, model, _ = _cli([*argv, "--out", str(tmp_path / "m.json"), "--jobs", "1"], capsys)
        assert (s3, json.loads(model)) == (s1, json.loads(here))
        assert (tmp_path / "m.json").read_bytes() == (tmp_path / "a.json").read_bytes()


def test_the_environment_names_the_scheduler(
    address: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["erratum", "--laps", "3", "--json"]
    s1, here, _ = _cli([*argv, "--jobs", "1"], capsys)
    monkeypatch.setenv(cl.ENV, address)
    assert common.scheduler_of(_no_options()) == address
    assert common.run_options(_no_options())["connect"] is not None
    s2, there, err = _cli(argv, capsys)
    assert (s1, here) == (s2, there) and err == ""


def _no_options() -> Any:
    """A command line that gave neither --jobs nor --scheduler."""
    from argparse import Namespace

    return Namespace(scheduler=None, jobs=None, json=False)


# ---------------------------------------------------------------- workers that die, Ctrl-C


def _when_busy(cluster: Any, act: Callable[[str], None]) -> threading.Thread:
    """Run act(worker address) once a worker holds a chunk (polled on the in-process scheduler)."""

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            busy = [a for a, ws in list(cluster.scheduler.workers.items()) if ws.processing]
            if busy:
                act(busy[0])
                return
            time.sleep(0.002)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _killer(address: str, killed: list[int]) -> Callable[[str], None]:
    with distributed.Client(address, set_as_default=False) as c:
        pids = c.run(os.getpid)

    def kill(worker: str) -> None:
        os.kill(pids[worker], signal.SIGKILL)
        killed.append(pids[worker])

    return kill


def test_a_killed_worker_costs_nothing(doomed: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Dask runs the dead worker's chunk again: every row, in order, and nothing on stderr."""
    argv = ["erratum", "--laps", "6", "--cores", "3", "--json"]
    s1, here, _ = _cli([*argv, "--jobs", "1"], capsys)
    killed: list[int] = []
    address = doomed.scheduler_address
    t = _when_busy(doomed, _killer(address, killed))
    s2, there, err = _cli([*argv, "--scheduler", address], capsys)
    t.join(5)
    assert killed, "no worker was busy long enough to be killed"
    assert s1 == s2 == 0 and err == ""
    assert json.loads(there) == json.loads(here) and len(json.loads(here)["rows"]) == 6


def test_a_worker_that_keeps_dying_stops_the_command_in_one_line(
    doomed: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    killed: list[int] = []
    address = doomed.scheduler_address
    sched = doomed.scheduler
    allowed, sched.allowed_failures = sched.allowed_failures, 0  # no second chance
    try:
        t = _when_busy(doomed, _killer(address, killed))
        d_min, d_max, d_step, n = SWEEP
        argv = ["sweep", "--engine", "model", "--out", str(out), "--scheduler", address]
        argv += ["--d-min", str(d_min), "--d-max", str(d_max), "--d-step", str(d_step)]
        refuses([*argv, "--n", str(n), "--json"], "workers died", watch=[tmp_path])
        t.join(5)
    finally:
        sched.allowed_failures = allowed
    assert killed
    assert not out.exists()  # no partial output


def test_ctrl_c_cancels_the_work_on_the_cluster(address: str, local_cluster: Any) -> None:
    h = hyps.get("paged")
    with cl.options(address):
        t = _when_busy(local_cluster, lambda _w: _thread.interrupt_main())
        with pytest.raises(KeyboardInterrupt):
            runner.run_many("model", h, CHIP, _loads())
        t.join(5)
    deadline = time.monotonic() + 30
    while local_cluster.scheduler.tasks and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not local_cluster.scheduler.tasks  # nothing left queued or held


def test_bad_input_met_on_a_worker_comes_back_as_one_input_error(address: str) -> None:
    calls: list[int] = []
    h = hyps.get(hyps.FIXED)
    with cl.options(address) as on:
        assert on is not None
        with pytest.raises(InputError, match="unknown engine 'no-such-engine'"):
            on.run("no-such-engine", h, CHIP, _loads(4), 1, calls.append)
    assert calls == []


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("10.0.0.5", "tcp://10.0.0.5:8786"),
        ("sched.farm:9000", "tcp://sched.farm:9000"),
        ("TLS://sched:1", "tls://sched:1"),
        ("ws://h", "ws://h:8786"),
        ("[::1]:8786", "tcp://[::1]:8786"),
        ("  tcp://127.0.0.1:8786 ", "tcp://127.0.0.1:8786"),
    ],
)
def test_addresses_as_dask_writes_them(text: str, want: str) -> None:
    assert cl.check_address(text) == want


@pytest.mark.parametrize(
    "bad",
    ["", "  ", "tcp://", "http://h:1", "h:99999", "h:0", "h:", "a b", "u@h:1", "h:1/x", "[::1"],
)
@pytest.mark.parametrize("command", ["sweep", "validate", "erratum", "calibrate", "bench"])
def test_empty_or_malformed_addresses_are_one_line(
    command: str, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refuses([command, "--scheduler", bad], "--scheduler")


def test_a_bad_environment_value_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(cl.ENV, "not an address")
    refuses(["erratum", "--laps", "1"], cl.ENV)
    monkeypatch.setenv(cl.ENV, "  ")  # empty: unset, this machine
    assert common.run_options(_no_options()) == {
        "jobs": runner.default_jobs(),
        "quiet": False,
        "connect": None,
    }
    assert common.scheduler_of(_no_options()) is None


def test_a_scheduler_that_does_not_answer_is_one_line_within_10_s(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import distributed as _  # noqa: F401  (imported: the time is the wait, not the import)

    addr = f"tcp://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    refuses(["erratum", "--laps", "2", "--scheduler", addr], addr, "answers")
    took = time.monotonic() - t0
    assert took < 10, f"{took:.1f} s"


def test_something_else_answering_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """An HTTP server where the scheduler should be: its reply is not dask's protocol."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]

    def answer() -> None:
        for _ in range(4):
            try:
                conn, _addr = srv.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 64)

    threading.Thread(target=answer, daemon=True).start()
    try:
        t0 = time.monotonic()
        line = refuses(["erratum", "--scheduler", f"127.0.0.1:{port}"], f":{port}")
        assert time.monotonic() - t0 < 10
    finally:
        srv.close()
    # dask's reading of the reply, cut short: marked so, and its parenthesis closed
    assert line.rstrip().endswith("...)"), line


def test_the_cli_in_its_own_process_says_one_line(tmp_path: Path) -> None:
    """As a user runs it: no traceback, no noise from distributed, exit 2."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env[cl.ENV] = f"127.0.0.1:{_free_port()}"
    argv = ["sweep", "--engine", "model", "--out", "o"]
    refuses(argv, "no Dask scheduler answers", env=env, cwd=tmp_path, watch=[tmp_path])
    assert not (tmp_path / "o").exists()


def test_without_the_cluster_extra_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    refuses(["validate", "--scheduler", "tcp://127.0.0.1:8786"], "pip install 'ane-kdma[cluster]'")


def test_a_harness_cache_that_cannot_be_written_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ane_kdma.engines import verilator as vb

    (tmp_path / "file").write_text("")
    monkeypatch.setenv(vb.CACHE_ENV, str(tmp_path / "file" / "below"))
    with pytest.raises(InputError, match=vb.CACHE_ENV):
        vb.cache_root()
    monkeypatch.setenv(vb.CACHE_ENV, str(tmp_path / "shared"))
    assert vb.cache_root() == tmp_path / "shared" and (tmp_path / "shared").is_dir()


def test_jobs_with_a_scheduler_sets_the_chunks(address: str) -> None:
    with cl.options(address, jobs=3) as on:
        assert on is not None and on.width() == 3


def test_bench_runs_its_sweeps_on_the_cluster(
    address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sweep item's child connects, runs run_chunk on every worker first, then the clock."""
    status, out, err = _cli(
        ["bench", "--only", "sweep-analytic", "--scheduler", address, "--json"], capsys
    )
    assert status == 0, err
    item = json.loads(out)["results"]["sweep-analytic"]
    assert "error" not in item, item
    assert item["scheduler"] == address and item["workers"] == 2


SCHEDULER = """
import sys, time
from distributed import LocalCluster
c = LocalCluster(n_workers=1, processes=True, threads_per_worker=1, dashboard_address=":0")
print(c.scheduler_address, flush=True)
time.sleep(600)
"""


def test_a_scheduler_that_goes_away_is_one_line(tmp_path: Path) -> None:
    """The cluster's process killed 5 s into a sweep that takes minutes: one line, exit 2.

    Usually the command is running by then (a lost scheduler); on a slow machine
    it may still be connecting (no answer): one line either way, never the
    client's own tracebacks, and no output.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    sched = subprocess.Popen(
        [sys.executable, "-c", SCHEDULER],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert sched.stdout is not None
        addr = sched.stdout.readline().strip()
        threading.Timer(5.0, sched.kill).start()
        # the overlay on the model engine too (its default is analytic): 1 032 more cluster runs,
        # so the sweep is still running when the scheduler goes
        argv = ["sweep", "--engine", "model", "--overlay-engine", "model", "--out", "o"]
        argv += ["--scheduler", addr]
        err = refuses(argv, addr, env=env, cwd=tmp_path, watch=[tmp_path], timeout=300)
    finally:
        sched.kill()
        sched.wait()
    said = ("went away", "lost the scheduler", "answers", "cannot reach")  # by when it went
    assert addr in err and any(w in err for w in said), err
    assert not (tmp_path / "o").exists()
