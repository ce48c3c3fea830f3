"""`calibrate --prior`: a fit from a handful of timed figures (ane_kdma.calibrate.prior).

The committed M4 profile is checked against its own three figures, its intervals and
members, and what it says of each field; the bad inputs are refused before any fit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from refusal import refuses

from ane_kdma import chip as chips
from ane_kdma import contract
from ane_kdma.calibrate import prior
from ane_kdma.contract import Workload
from ane_kdma.profile import Profile
from ane_kdma.validate import specs

M4 = chips.chips_dir() / "m4"
BAND = specs.POINT_TOL


def _model(chip: chips.Chip, prof: Profile, engine: str = "analytic") -> list[float]:
    """Each timed figure as the profile models it: the task time plus the call overhead."""
    ch = chip.with_profile(prof)
    out = []
    for row in chip.measured.timings.rows:  # type: ignore[union-attr]
        load = Workload.from_size(row.bytes_per_core, ch.cores, 1, ch.line_bytes)
        t = contract.run(engine, ch.hypothesis, ch, load).time_us
        out.append(t + prof.predict_overhead_us)
    return out


def test_the_m4_profile_meets_its_three_figures_and_says_how_it_was_fitted() -> None:
    chip = chips.load("m4")
    prof = chip.profile
    measured = [r.time.value for r in chip.measured.timings.rows]  # type: ignore[union-attr]
    assert measured == [426, 840, 1142]
    for engine in ("analytic", "model"):  # the cycle model agrees with the search's engine
        model = _model(chip, prof, engine)
        errs = [m / t - 1 for m, t in zip(model, measured, strict=True)]
        assert max(abs(e) for e in errs) <= BAND, (engine, errs)
    assert "calibrate --chip m4 --prior m3" in prof.notes["status"]
    assert 0 < prof.predict_overhead_us < measured[0]  # a stated cost, not hidden in a rate
    m3 = chips.load("m3").profile
    u = prof.uncertainty
    assert u is not None and set(u.free) == set(prior.FREE) == set(u.intervals)
    for name, (lo, hi) in u.intervals.items():
        assert lo <= getattr(prof, name) <= hi and lo < hi, name
    for name in u.kept:  # kept from the prior, each with its reason
        assert getattr(prof, name) == getattr(m3, name), name
        assert u.kept[name] and name not in u.free
    for name in ("latency_cycles", "core_rate_q16", "overhead_us"):
        assert name in u.kept
    assert (prof.ceiling_gbps, prof.ns_per_cycle) == (120.0, m3.ns_per_cycle)


def test_every_member_of_the_m4_profile_passes_its_figures() -> None:
    """The intervals are the span of fits that all pass: each member meets every figure."""
    chip = chips.load("m4")
    members = chip.profile.members()
    assert len(members) > 5
    measured = [r.time.value for r in chip.measured.timings.rows]  # type: ignore[union-attr]
    windows = set()
    for m in members:
        errs = [t / x - 1 for t, x in zip(_model(chip, m), measured, strict=True)]
        assert max(abs(e) for e in errs) <= BAND, (m.window_lines, errs)
        windows.add(m.window_lines)
    u = chip.profile.uncertainty
    assert u is not None
    assert (min(windows), max(windows)) == u.intervals["window_lines"]


def test_validate_holds_m4_against_its_own_figures(capsys: pytest.CaptureFixture[str]) -> None:
    from ane_kdma.cli import main

    assert main(["validate", "--chip", "m4", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["profile"] == "m4"
    timed = [r for r in doc["rows"] if r["dataset"] == "timings"]
    assert [r["name"].split()[0] for r in timed] == ["2016x4096", "2048x4096", "4096x4096"]
    assert all(r["passed"] and r["tolerance"] == "+-3%" for r in timed)
    assert "no measured figure here tells the readings apart" in doc["verdict"]


@pytest.mark.parametrize(
    "argv",
    [
        ["predict", "--bytes-per-core", "1048576", "--engine", "analytic"],
        ["plan", "--shape", "4096x2048", "--engine", "analytic"],
        ["llm", "--model", "llama-3.2-1b", "--engine", "analytic"],
        ["validate"],
    ],
    ids=lambda a: a[0],
)
def test_result_commands_take_chip_m4_and_say_so(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from ane_kdma.cli import main

    assert main([*argv, "--chip", "m4"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "m4" in head and "profile m4" in head, head


def test_sweep_takes_chip_m4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ane_kdma.cli import main

    argv = ["sweep", "--chip", "m4", "--engine", "analytic", "--out", str(tmp_path / "s")]
    assert main([*argv, "--d-min", "1024", "--d-max", "4096", "--no-overlay"]) == 0
    out = capsys.readouterr().out
    assert "chip m4, profile m4" in out


def _chip_with_rows(tmp_path: Path, keep: int, method: str = "coreml-predict") -> Path:
    folder = tmp_path / "few"
    (folder / "measured").mkdir(parents=True)
    shutil.copy(M4 / "chip.json", folder / "chip.json")
    doc = json.loads((M4 / "measured" / "timings.json").read_text())
    doc["rows"] = doc["rows"][:keep]
    doc["method"] = method
    (folder / "measured" / "timings.json").write_text(json.dumps(doc))
    doc = json.loads((folder / "chip.json").read_text())
    doc["name"] = "few"
    (folder / "chip.json").write_text(json.dumps(doc))
    return folder


def test_fewer_figures_than_free_parameters_is_refused(tmp_path: Path) -> None:
    folder = _chip_with_rows(tmp_path, 2)
    refuses(
        ["calibrate", "--chip", str(folder), "--prior", "m3"],
        "timings.json",
        "rows",
        "2 timed figures",
        "3 free parameters",
        watch=[folder],
    )


def test_task_timed_figures_take_no_prior_fit(tmp_path: Path) -> None:
    folder = _chip_with_rows(tmp_path, 3, method="ane-task")
    refuses(
        ["calibrate", "--chip", str(folder), "--prior", "m3"],
        "timings.json",
        "method",
        watch=[folder],
    )


def test_a_prior_that_does_not_exist_or_has_no_profile_is_refused(tmp_path: Path) -> None:
    refuses(["calibrate", "--chip", "m4", "--prior", "m9"], "--prior", "m9", watch=[M4])
    bare = _chip_with_rows(tmp_path, 3)
    refuses(
        ["calibrate", "--chip", "m4", "--prior", str(bare)],
        "--prior",
        "no profile.json",
        watch=[M4, bare],
    )
    refuses(
        ["calibrate", "--chip", "m3", "--prior", "m3", "--out", str(tmp_path / "p.json")],
        "timings.json",
        watch=[tmp_path],
    )
    refuses(
        ["calibrate", "--chip", "m4", "--prior", "m3", "--hypothesis", "paged"],
        "--prior",
        "--hypothesis",
        watch=[M4],
    )


def test_figures_no_fit_can_meet_are_refused_naming_the_worst(tmp_path: Path) -> None:
    """M4's three figures with the 2 MiB one at 500 us, faster than the 1 MiB notch (840 us):
    a notch whose time falls as a second lap is added, which no window, depth and call
    overhead can give. The best fit found misses a figure by far more than the point band,
    so the fit is refused in one line naming the figure, and no profile is written."""
    folder = _chip_with_rows(tmp_path, 3)
    doc = json.loads((folder / "measured" / "timings.json").read_text())
    assert [r["time"]["value"] for r in doc["rows"]] == [426, 840, 1142]
    doc["rows"][2]["time"]["value"] = 500
    (folder / "measured" / "timings.json").write_text(json.dumps(doc))
    out = tmp_path / "out"
    out.mkdir()
    line = refuses(
        ["calibrate", "--chip", str(folder), "--prior", "m3", "--out", str(out / "p.json")],
        "few/measured/timings.json",
        "rows",
        f"no fit meets every figure within +-{100 * BAND:g}%",
        "at best",
        "kept from m3",
        watch=[folder, out],
    )
    off = float(line.split(" is off by ")[1].split("%")[0])
    assert abs(off) > 100 * BAND, line  # the worst figure, as the best fit misses it
    assert list(out.iterdir()) == [] and not (folder / "profile.json").exists()


def test_a_full_calibrate_on_timed_figures_points_to_the_prior(tmp_path: Path) -> None:
    refuses(
        ["calibrate", "--chip", "m4", "--out", str(tmp_path / "p.json")],
        "m4",
        "--prior",
        watch=[M4, tmp_path],
    )


def test_interval_edges_double_then_bisect() -> None:
    """calibrate --intervals' search: the largest passing move, found in a few evaluations."""
    from ane_kdma.calibrate import intervals as iv

    seen: list[int] = []

    def ok(n: int) -> bool:
        seen.append(n)
        return n <= 37

    assert iv.edge(ok) == 37 and len(seen) <= 2 * 6 + 1
    assert iv.edge(lambda n: n == 0) == 0
    assert iv.edge(lambda n: True) == 2 ** (iv.MAX_DOUBLINGS - 1)


def test_intervals_take_the_profile_as_it_is(tmp_path: Path) -> None:
    for flag in (["--prior", "m3"], ["--hypothesis", "paged"], ["--hold-out", "table_c"]):
        refuses(
            ["calibrate", "--intervals", *flag, "--out", str(tmp_path / "p.json")],
            "--intervals",
            flag[0],
            watch=[tmp_path],
        )
