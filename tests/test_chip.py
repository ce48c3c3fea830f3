"""The chip loader: a chip folder is checked whole, once, by the loader every command shares.

Each bad folder below is one a user could write (numbers out of range in
measured/, a chip no command can end, unknown names, overlapping registers):
every command refuses it with one line that names the file and the field,
exit status 2, before it runs anything. And "buggy" is resolved in one place,
the chip: the profile names its reading, and every caller asks the chip.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from refusal import refuses

from ane_kdma import chip as chips
from ane_kdma import hypotheses as hyps
from ane_kdma import measured, profile
from ane_kdma import mechanisms as mechs
from ane_kdma.cli import main
from ane_kdma.errors import InputError
from ane_kdma.llm.decode import decode_rate
from ane_kdma.llm.models import get_model

M3 = chips.chips_dir() / "m3"
CHIP = chips.load()
DUMP = str(chips.data_dir() / "dumps" / "m3_n4096_d2048.txt")
Edit = Callable[[dict[str, Any]], object]
PAIRS = len(hyps.buggy()) * len(mechs.names())  # fits.json holds one fit per pair at most


def _copy(tmp_path: Path, name: str, edit: Edit, *, raw: tuple[str, str] | None = None) -> Path:
    """A copy of the m3 folder with one JSON file edited (or one text replaced in it)."""
    folder = tmp_path / "c"
    shutil.copytree(M3, folder)
    path = folder / name
    if raw is not None:
        text = path.read_text()
        assert raw[0] in text
        path.write_text(text.replace(raw[0], raw[1], 1))
    else:
        doc = json.loads(path.read_text())
        edit(doc)
        path.write_text(json.dumps(doc))
    return folder


def _commands(folder: Path) -> dict[str, list[str]]:
    chip = ["--chip", str(folder)]
    return {
        "replay": ["replay", DUMP, "--engine", "analytic", *chip],
        "validate": ["validate", "--engine", "analytic", *chip],
        "calibrate": ["calibrate", "--out", str(folder / "out.json"), *chip],
        "predict": ["predict", "--bytes-per-core", "65536", "--engine", "analytic", *chip],
        "plan": ["plan", "--shape", "2048x4096", "--engine", "analytic", *chip],
        "dump": ["dump", "--d", "2048", "--n", "4096", *chip],
        "llm": ["llm", "--model", "llama-3.2-1b", "--engine", "analytic", *chip],
    }


def _set(path: tuple[Any, ...], value: object) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        parent: Any = doc
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value

    return edit


def _pop(path: tuple[Any, ...]) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        parent: Any = doc
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]

    return edit


# --------------------------------------------------------------- numbers in measured/

POINT = "measured/point_facts.json"
TABLE = "measured/table_a.json"
HUGE = [("1e308", "1e308"), ("10^30", str(10**30))]


@pytest.mark.parametrize(("what", "token"), HUGE)
@pytest.mark.parametrize("command", ["replay", "validate", "calibrate"])
def test_a_huge_notch_d_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, what: str, token: str
) -> None:
    """Was an OverflowError traceback in replay, validate and calibrate."""
    folder = _copy(tmp_path, POINT, _set(("facts", "notch_point", "d", "value"), "__x__"), raw=None)
    text = (folder / POINT).read_text().replace('"__x__"', token)
    (folder / POINT).write_text(text)
    refuses(_commands(folder)[command], "point_facts.json", "notch_point.d.value")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("conditions", "n", "value"), "conditions.n.value"),
        (("d", "values", 2), "d.values[2]"),
    ],
)
@pytest.mark.parametrize(("what", "token"), HUGE)
@pytest.mark.parametrize("command", ["replay", "validate", "calibrate"])
def test_a_huge_table_a_n_or_d_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    what: str,
    token: str,
    path: tuple[Any, ...],
    field: str,
) -> None:
    folder = _copy(tmp_path, TABLE, _set(path, "__x__"))
    (folder / TABLE).write_text((folder / TABLE).read_text().replace('"__x__"', token))
    refuses(_commands(folder)[command], "table_a.json", field)


@pytest.mark.parametrize(
    ("name", "path", "field"),
    [
        (POINT, ("facts", "notch_point", "throughput", "value"), "notch_point.throughput.value"),
        (POINT, ("facts", "k_scaling", "slope_per_lap", "value"), "slope_per_lap.value"),
        (POINT, ("facts", "lap_times", "notch", "value"), "lap_times.notch.value"),
        (POINT, ("facts", "lap_times", "shoulder", "value"), "lap_times.shoulder.value"),
        (POINT, ("facts", "scrambling", "baseline", "value"), "scrambling.baseline.value"),
        (POINT, ("facts", "floor", "throughput", "min"), "floor.throughput.min"),
        (TABLE, ("replicas", "b", "values", 3), "replicas.b.values[3]"),
        ("measured/platform.json", ("facts", "anemll_bench", "throughput", "value"), "anemll"),
    ],
)
def test_a_zero_rate_or_time_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, path: tuple[Any, ...], field: str
) -> None:
    """A 0 throughput, slope, lap time or baseline was a ZeroDivisionError in validate."""
    folder = _copy(tmp_path, name, _set(path, 0))
    refuses(_commands(folder)["validate"], Path(name).name, field)


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("facts", "only_total", "bytes_per_core", "value"), "only_total.bytes_per_core.value"),
        (("facts", "nominal", "high", "bytes_per_core", "value"), "high.bytes_per_core.value"),
        (("facts", "control", "bytes_per_core", "value"), "control.bytes_per_core.value"),
        (("facts", "split_workaround", "bytes_per_core", "value"), "split_workaround"),
    ],
)
def test_a_huge_bytes_per_core_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: tuple[Any, ...], field: str
) -> None:
    """1e20 bytes per core ran validate into a MemoryError after 15 s."""
    folder = _copy(tmp_path, POINT, _set(path, 1e20))
    refuses(_commands(folder)["validate"], "point_facts.json", field)


def test_figures_above_the_ceiling_or_off_their_own_size_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cross-field rules of measured/: physics and the figure's own D x N."""
    folder = _copy(tmp_path, POINT, _set(("facts", "shoulder_point", "throughput", "value"), 200))
    refuses(_commands(folder)["validate"], "shoulder_point.throughput.value", "102.4")
    folder = _copy(tmp_path / "x", POINT, _set(("facts", "shoulder_point", "x", "value"), 128))
    refuses(_commands(folder)["validate"], "shoulder_point.x", "16128 lines")
    folder = _copy(tmp_path / "t", TABLE, _set(("replicas", "a", "values", 0), 1.0))
    refuses(_commands(folder)["validate"], "replicas.a.values[0]", "ceiling")
    split = ("facts", "split_workaround", "splits", 1, "tasks", "value")
    folder = _copy(tmp_path / "s", POINT, _set(split, 3))
    refuses(_commands(folder)["validate"], "splits[1]", "3 x 262144 B")
    folder = _copy(tmp_path / "l", TABLE, _set(("d", "values"), list(range(64, 64 * 70, 64))))
    refuses(_commands(folder)["validate"], "table_a.json", "d.values", "at most 64")


# --------------------------------------------------------------- chips no command ends


@pytest.mark.parametrize(
    ("edit", "field", "why"),
    [
        (_set(("dram_ceiling", "value"), 0.001), "dram_ceiling.value", "below 8"),
        (_set(("dram_ceiling", "value"), 1), "dram_ceiling.value", "below 8"),
        (_set(("dram_ceiling", "value"), 1e5), "dram_ceiling.value", "is above 504 GB/s"),
        (_set(("prefetch_max_lines",), 65536), "prefetch_max_lines", "above 1024"),
        (_set(("prefetch_max_lines",), 384), "prefetch_max_lines", "power of two"),
        (_set(("kmem_lines",), 65536), "kmem_lines", "above 4096"),
        (_set(("clock", "ns_per_cycle"), 1e5), "clock.ns_per_cycle", "above 100"),
        (_set(("cores",), 17), "cores", "above 16"),
    ],
)
@pytest.mark.parametrize("command", ["predict", "llm", "validate"])
def test_a_chip_beyond_the_physics_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    edit: Edit,
    field: str,
    why: str,
) -> None:
    """A 0.001 GB/s ceiling ran every command past 100 s; a 65536-line clamp ran llm 53 s."""
    folder = _copy(tmp_path, "chip.json", edit)
    refuses(_commands(folder)[command], "chip.json", field, why)


# --------------------------------------------------------------- unknown names


@pytest.mark.parametrize("key", ["mechanism", "hypothesis"])
@pytest.mark.parametrize("command", ["predict", "plan", "validate", "replay", "llm", "dump"])
def test_an_unknown_name_in_the_profile_is_refused_by_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, key: str
) -> None:
    """mechanism "bogus": predict and plan exited 0; hypothesis "bogus": validate, replay did."""
    folder = _copy(tmp_path, "profile.json", _set((key,), "bogus"))
    refuses(_commands(folder)[command], "profile.json", key, "bogus")


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (_set(("fits", 3, "profile", "mechanism"), "bogus"), ("fits[3].profile.mechanism",)),
        (_set(("fits", 0, "profile", "hypothesis"), "bogus"), ("fits[0].profile.hypothesis",)),
        (_set(("fits", 0, "profile", "hypothesis"), "fixed"), ("the fix",)),
        (_set(("fits", 0, "mechanism"), "none"), ("fits[0].mechanism",)),
        (_set(("fits", 1), None), ("fits[1]", "must be an object")),
        (lambda d: d["fits"].__setitem__(1, d["fits"][0]), ("fits[1]", "fitted twice")),
        (
            lambda d: d["fits"].append(d["fits"][0]),
            ("fits", f"{PAIRS + 1} entries, at most {PAIRS}"),
        ),
        (
            _set(("fits", 2, "profile", "ceiling_gbps"), 50.0),
            ("fits[2].profile.ceiling_gbps", "recalibrate"),
        ),
    ],
)
def test_a_bad_fits_file_is_refused_before_validate_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Edit, words: tuple[str, ...]
) -> None:
    """A bogus mechanism in fits.json ran validate's ranking past 20 s."""
    folder = _copy(tmp_path, "fits.json", edit)
    for command in ("validate", "predict"):
        refuses(_commands(folder)[command], "fits.json", *words)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (_pop(("hypothesis",)), ("hypothesis: missing",)),
        (_pop(("mechanism",)), ("mechanism: missing",)),
        (_set(("hypothesis",), "buggy"), ("hypothesis", "resolve it through the chip")),
        (_set(("hypothesis",), "fixed"), ("hypothesis", "the fix")),
        (_set(("mechanism",), "none"), ("ramp_start_q16", "another rate mechanism")),
        (_set(("ns_per_cycle",), 4.0), ("profile.json: ns_per_cycle", "clock is 8 ns")),
        (_set(("ramp_inc_q16",), 0), ("increment",)),
    ],
)
def test_a_profile_is_checked_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Edit, words: tuple[str, ...]
) -> None:
    folder = _copy(tmp_path, "profile.json", edit)
    refuses(_commands(folder)["predict"], *words)


# --------------------------------------------------------------- overlapping registers


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"stride_mirror": "0x1f0"}, "td.offsets"),
        ({"coeff_size": "0x074"}, "td.offsets"),
        ({"coeff_size": "0x0b0"}, "coeff_size"),  # inside coeff_base's 16 words
        ({"cin": "0x0f0"}, "cin"),  # the last word of coeff_size's 16
    ],
)
@pytest.mark.parametrize("command", ["replay", "dump"])
def test_overlapping_td_registers_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, change: dict, field: str
) -> None:
    folder = _copy(tmp_path, "chip.json", lambda d: d["td"]["offsets"].update(change))
    refuses(_commands(folder)[command], "chip.json", field, "overlaps")


# --------------------------------------------------------------- bounded reading


def test_a_folder_is_read_by_name_whatever_else_it_holds(tmp_path: Path) -> None:
    """Unknown files (many, large, or special) in a chip folder are never opened or listed."""
    folder = tmp_path / "c"
    shutil.copytree(M3, folder)
    for i in range(2000):
        (folder / "measured" / f"junk{i}.json").write_text("{")
    (folder / "measured" / "big.bin").write_bytes(b"\0" * (8 << 20))
    chip = chips.load(folder)
    bundled = [name for name in measured.DATASETS if (M3 / "measured" / name).is_file()]
    assert [p.name for p in chip.measured.files] == bundled


def test_a_data_file_is_bounded_in_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _copy(tmp_path, POINT, lambda d: d.update(padding="x" * (5 << 20)))
    refuses(_commands(folder)["validate"], "point_facts.json")


# --------------------------------------------------------------- "buggy", resolved by the chip


def _signed_chip(tmp_path: Path) -> Path:
    """The m3 folder with its profile naming the signed reading (the same fitted numbers)."""
    folder = _copy(tmp_path, "profile.json", _set(("hypothesis",), "signed"))
    (folder / "fits.json").unlink()
    return folder


def test_buggy_is_the_reading_the_chip_names(tmp_path: Path) -> None:
    folder = _signed_chip(tmp_path)
    signed = chips.load(folder)
    assert signed.variant("buggy") is hyps.get("signed") is signed.hypothesis
    assert CHIP.variant("BUGGY ") is hyps.get(CHIP.profile.hypothesis) is CHIP.hypothesis
    assert CHIP.variant("fixed") is hyps.get("fixed")
    with pytest.raises(InputError, match="through the chip"):
        hyps.get("buggy")  # no reading is hard-coded behind the name
    with pytest.raises(InputError, match="unknown variant"):
        CHIP.variant("bogus")


def test_the_cli_and_the_library_agree_on_buggy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """predict --variant buggy and a library call without a reading both use the chip's."""
    folder = _signed_chip(tmp_path)
    chip = chips.load(folder)
    size = str((1 << 20) + (128 << 6))  # x = 128: the readings differ here
    base = ["predict", "--bytes-per-core", size, "--engine", "analytic", "--json"]
    rows = {}
    for where in (str(folder), str(M3)):
        for v in ("buggy", "signed", "paged"):
            assert main([*base, "--chip", where, "--variant", v]) == 0
            rows[(where, v)] = json.loads(capsys.readouterr().out)
    assert rows[(str(folder), "buggy")] == rows[(str(folder), "signed")]
    assert rows[(str(M3), "buggy")] == rows[(str(M3), "paged")]
    assert rows[(str(folder), "signed")]["gbps"] != rows[(str(folder), "paged")]["gbps"]
    model = get_model("llama-3.2-1b")
    lib = decode_rate(model, chip, engine="analytic")
    assert lib == decode_rate(model, chip, hyps.get("signed"), engine="analytic")
    assert lib["variant"] == "signed"


def test_the_profile_names_its_reading() -> None:
    """Required in the file (above) and in the dataclass: no default reading anywhere."""
    p = CHIP.profile
    with pytest.raises(TypeError, match="hypothesis"):
        profile.Profile(p.name, 8.0, 0.0, 100, 48, 1 << 15, p.ceiling_gbps)  # type: ignore[call-arg]
    assert profile.Profile(p.name, 8.0, 0.0, 100, 48, 1 << 15, p.ceiling_gbps, "signed").hypothesis
    assert not hasattr(hyps, "DEFAULT_BUGGY")  # no reading kept aside as the default


def test_the_one_geometry_and_the_one_source_parser() -> None:
    """The figures spread over the chip itself; one source reader."""
    assert not hasattr(measured, "Geometry")
    assert CHIP.measured.geo is CHIP
    assert int(CHIP.bytes_per_core(2048, 4096)) == 1 << 20
    assert CHIP.ceiling.source.where == "docs/erratum.md section 1"
    assert measured.Source is chips.Source


def test_an_oversized_measured_file_is_named_as_a_data_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 5 MB table_b.json: refused unread, in a line that reads as English."""
    folder = _copy(tmp_path, "chip.json", lambda doc: None)
    (folder / "measured" / "table_b.json").write_bytes(b" " * (5 << 20))
    refuses(
        ["predict", "--bytes-per-core", "1048576", "--chip", str(folder)],
        "table_b.json",
        "too large for a measured data file (at most",
    )
