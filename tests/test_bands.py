"""Bands (`bands.py`): each figure's lowest and highest over a profile and its fits.

The profiles are built here from the bundled M3 profile's fields (its own
uncertainty, if any, is dropped), so the checks do not move when calibrate
writes intervals into data/chips. The model is exact per member, so a band
must equal, to the printed digit, the lowest and highest of the same command
run once per member with that member as the whole profile.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from ane_kdma import bands
from ane_kdma import chip as chips
from ane_kdma.cli import main

M3 = chips.chips_dir() / "m3" / "profile.json"
#: fields the fits move: the per-request overhead and the latency (the streaming rate stays)
MEMBERS = [
    {"overhead_us": 25.0, "latency_cycles": 560},
    {"overhead_us": 33.0, "latency_cycles": 590},
]
INTERVALS = {"overhead_us": [25.0, 33.0], "latency_cycles": [560, 590]}


def _base() -> dict[str, object]:
    doc = json.loads(M3.read_text())
    doc.pop("uncertainty", None)
    return doc


def _write(path: Path, doc: dict[str, object]) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def banded(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A profile with two fits, and each of the three (itself, then the fits) as a lone profile."""
    base = _base()
    doc = {
        **base,
        "uncertainty": {"method": "two fits", "intervals": INTERVALS, "members": MEMBERS},
    }
    lone = [_write(tmp_path / "m0.json", base)]
    lone += [_write(tmp_path / f"m{i + 1}.json", {**base, **m}) for i, m in enumerate(MEMBERS)]
    return _write(tmp_path / "banded.json", doc), lone


def _run(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def _json(argv: list[str]) -> object:
    return json.loads(_run([*argv, "--json"]))


def _want(values: list[float], digits: int) -> list[float]:
    return [round(min(values), digits), round(max(values), digits)]


PREDICT_KEYS = ("time_us", "gbps", "time_us_fixed", "gbps_fixed")


@pytest.mark.parametrize("engine", ["analytic", "model"])
def test_predict_s_band_is_the_members_lowest_and_highest(
    banded: tuple[Path, list[Path]], engine: str
) -> None:
    prof, lone = banded
    argv = ["predict", "--bytes-per-core", "1MiB", "--engine", engine]
    got = _json([*argv, "--profile", str(prof)])
    each = [_json([*argv, "--profile", str(p)]) for p in lone]
    assert isinstance(got, dict)
    for key in PREDICT_KEYS:
        assert got[key] == each[0][key]  # the figure is the profile's own
        want = _want([e[key] for e in each], 3)
        assert got[f"{key}_band"] == want, key
        assert want[0] < want[1], key  # these fits do move every figure
    # the members' own figures are the band's ends: the band is not widened or narrowed
    assert {tuple(got[f"{k}_band"]) for k in ("time_us",)} == {
        (min(e["time_us"] for e in each), max(e["time_us"] for e in each))
    }


def test_predict_s_text_shows_each_figure_with_its_band(banded: tuple[Path, list[Path]]) -> None:
    prof, _ = banded
    argv = ["predict", "--bytes-per-core", "1MiB", "--engine", "analytic", "--profile", str(prof)]
    doc = _json(argv)
    assert isinstance(doc, dict)
    text = _run(argv)
    # the header (wrapped), then the table folded into 100 columns: column lines and row lines
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines), lines
    assert " ".join(" ".join(lines[:2]).split()).endswith("; (lo-hi): band over 3 fits")
    rows = [line for line in lines if line.lstrip().startswith(str(doc["bytes_per_core"]))]
    cols = [line for line in lines if line.lstrip().startswith("bytes_per_core")]
    assert len(rows) == len(cols) >= 1, lines
    for key in PREDICT_KEYS:
        lo, hi = doc[f"{key}_band"]
        assert sum(f"{doc[key]} ({bands.short(lo)}-{bands.short(hi)})" in r for r in rows) == 1, key
    assert not any("_band" in c for c in cols)


def test_short_keeps_four_figures_without_exponents() -> None:
    assert [bands.short(v) for v in (26768.7, 2130.432, 849.152, 17.633, 25.0, 0.5)] == [
        "26769",
        "2130",
        "849.2",
        "17.63",
        "25.00",
        "0.500",
    ]


def test_plan_s_band_times_the_profile_s_split_under_each_fit(
    banded: tuple[Path, list[Path]],
) -> None:
    prof, lone = banded
    argv = ["plan", "--shape", "2048x8192", "--engine", "analytic"]
    (got,) = _json([*argv, "--profile", str(prof)])
    each = [_json([*argv, "--profile", str(p)])[0] for p in lone]
    # every fit takes the same split here, so each lone plan times what the band times
    assert {tuple(e["chunk_bytes_per_core"]) for e in each} == {tuple(got["chunk_bytes_per_core"])}
    for key in ("time_us_before", "time_us_after", "time_us_fixed"):
        assert got[f"{key}_band"] == _want([e[key] for e in each], 3), key
    assert got["time_us_before_band"][0] < got["time_us_before_band"][1]
    for i, alt in enumerate(got["alternatives"]):
        assert alt["time_us_band"] == _want([e["alternatives"][i]["time_us"] for e in each], 3)
    text = _run([*argv, "--profile", str(prof)])
    lo, hi = got["time_us_before_band"]
    assert f"{got['time_us_before']} ({bands.short(lo)}-{bands.short(hi)})" in text


def test_llm_s_band_covers_the_rates_and_each_projection(banded: tuple[Path, list[Path]]) -> None:
    """On the model engine: the analytic engine's figure for a workload can move by a cycle
    with the other workloads of its batch (its closed form is within 1%, not exact), and a
    band batches every weight of a member in one call where llm batches weight by weight."""
    prof, lone = banded
    argv = ["llm", "--model", "llama-3.2-1b", "--engine", "model"]
    got = _json([*argv, "--profile", str(prof)])
    each = [_json([*argv, "--profile", str(p)]) for p in lone]
    assert isinstance(got, dict)
    digits = {"tok_s_unsplit": 3, "tok_s_split": 3, "gbps_unsplit": 2, "gbps_split": 2}
    for key, d in digits.items():
        assert got[f"{key}_band"] == _want([e[key] for e in each], d), key
    assert got["tok_s_unsplit_band"][0] < got["tok_s_unsplit_band"][1]
    for name, row in got["breakdown"].items():
        for key in ("us_unsplit", "us_split"):
            want = _want([e["breakdown"][name][key] for e in each], 3)
            assert row[f"{key}_band"] == want, (name, key)
    assert got["breakdown"]["overhead"]["us_unsplit_band"] == [25.0, 33.0]
    text = _run([*argv, "--profile", str(prof)])
    lo, hi = got["tok_s_unsplit_band"]
    assert f"{got['tok_s_unsplit']} ({bands.short(lo)}-{bands.short(hi)})" in text


@pytest.mark.parametrize(
    "uncertainty",
    [None, {"method": "intervals only", "intervals": INTERVALS}],
    ids=["no-uncertainty", "intervals-without-fits"],
)
def test_no_fits_no_band(tmp_path: Path, uncertainty: dict[str, object] | None) -> None:
    """Without fits to run there is no band: no keys, no parentheses, nothing in the header."""
    doc = _base()
    if uncertainty is not None:
        doc["uncertainty"] = uncertainty
    prof = str(_write(tmp_path / "p.json", doc))
    for argv in (
        ["predict", "--bytes-per-core", "1MiB"],
        ["plan", "--shape", "2048x8192"],
        ["llm", "--model", "llama-3.2-1b"],
    ):
        argv += ["--engine", "analytic", "--profile", prof]
        assert "_band" not in _run([*argv, "--json"]), argv
        text = _run(argv)
        assert "(lo-hi)" not in text and not re.search(r"\d \(\d", text), argv


@pytest.mark.parametrize("command", ["predict", "plan", "llm"])
def test_help_says_how_a_band_is_computed(command: str) -> None:
    words = " ".join(_run([command, "--help"]).split())
    assert "the lowest and the highest over the profile and those fits" in words
    assert "KEY_band: [lo, hi]" in words


def test_patch_s_decode_estimate_has_its_band(
    banded: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """patch --dry-run's decode step: the same plans, each weight timed under every fit."""
    import numpy as np
    from test_patch import RNG_SEED, _cm, _notched

    prof, lone = banded
    src, _ = _notched(_cm(), tmp_path / "in.mlpackage", np.random.default_rng(RNG_SEED))
    argv = ["patch", str(src), "--dry-run", "--engine", "model"]
    got = _json([*argv, "--profile", str(prof)])
    each = [_json([*argv, "--profile", str(p)]) for p in lone]
    assert isinstance(got, dict)
    assert [c["parts"] for c in got["changed"]] == [c["parts"] for c in each[1]["changed"]]
    assert [c["parts"] for c in got["changed"]] == [c["parts"] for c in each[2]["changed"]]
    d = got["decode_us"]
    for key in ("before", "after"):
        assert d[key] == each[0]["decode_us"][key]
        assert d[f"{key}_band"] == _want([e["decode_us"][key] for e in each], 3), key
    assert d["before_band"][0] < d["before_band"][1]
    text = _run([*argv, "--profile", str(prof)])
    lo, hi = d["before_band"]
    assert f"{d['before']} ({bands.short(lo)}-{bands.short(hi)}) us before" in text
    assert "(lo-hi): band over 3 fits" in text
    assert "_band" not in json.dumps(_json([*argv, "--profile", str(lone[0])]))
