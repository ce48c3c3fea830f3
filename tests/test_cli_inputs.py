"""Reproducers as a user types them: unreadable paths, --jobs in other scripts, bench with
nothing to run, configs that ask too much.

Each case is what a user typed (in a subprocess, through the real entry point,
with PYTHONUNBUFFERED removed as in a user's shell) and must end in one line
on stderr, exit status 2, nothing on stdout and no traceback.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from refusal import refuses

from ane_kdma import fileio
from ane_kdma.cli import bench as bench_cmd
from ane_kdma.cli import common
from ane_kdma.errors import InputError

REPO = Path(__file__).resolve().parents[1]
HF = REPO / "data" / "models" / "hf"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


# --------------------------------------------------------------------------- paths

ARGV_WITH_PATH = {
    "predict --chip": ["predict", "--bytes-per-core", "65536", "--chip", "{}"],
    "calibrate --chip": ["calibrate", "--chip", "{}"],
    "llm --config": ["llm", "--config", "{}"],
    "llm --chip": ["llm", "--model", "llama-3.2-1b", "--chip", "{}"],
}


@pytest.mark.parametrize("tail", ["", "/chip.json"], ids=["folder", "below"])
@pytest.mark.parametrize("name", list(ARGV_WITH_PATH))
def test_a_name_too_long_is_one_line(name: str, tail: str, tmp_path: Path) -> None:
    path = str(tmp_path / ("c" * 300)) + tail
    argv = [a.replace("{}", path) for a in ARGV_WITH_PATH[name]]
    refuses(argv, "File name too long", env=_env())


def _without_dac() -> tuple[str, ...]:
    """A prefix that runs a command without root's power over permissions, or skip."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and no setpriv to drop CAP_DAC_OVERRIDE (root reads anything)")
    return (setpriv, "--bounding-set=-dac_override,-dac_read_search")


@pytest.mark.parametrize("name", list(ARGV_WITH_PATH))
def test_a_folder_without_permission_is_one_line(name: str, tmp_path: Path) -> None:
    prefix = _without_dac()
    locked = tmp_path / "locked"
    shutil.copytree(REPO / "data" / "chips" / "m3", locked / "m3")
    shutil.copy(HF / "llama-3.2-1b" / "config.json", locked / "config.json")
    target = locked / ("config.json" if name == "llm --config" else "m3")
    argv = [a.replace("{}", str(target)) for a in ARGV_WITH_PATH[name]]
    locked.chmod(0)
    try:
        refuses(argv, "Permission denied", env=_env(), prefix=prefix)
    finally:
        locked.chmod(0o755)


def test_probe_tells_nothing_there_from_cannot_look(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert fileio.probe(tmp_path / "absent", "--chip") is None
    assert fileio.probe(tmp_path / "f" / "below", "--chip") is None  # a file on the way
    assert fileio.is_dir(tmp_path, "--chip") and not fileio.is_dir(tmp_path / "f", "--chip")
    with pytest.raises(InputError, match=r"^--chip \.\.\.c+: File name too long$"):
        fileio.probe(tmp_path / ("c" * 300), "--chip")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(InputError, match="Too many levels of symbolic links"):
        fileio.probe(loop, "--chip")
    with pytest.raises(InputError, match="embedded null"):
        fileio.probe("a\0b", "--chip")


# --------------------------------------------------------------------------- --jobs


@pytest.mark.parametrize("text", ["\u0662", "\u00b2", "\uff13", "1\u0662", "\u0663\u0660", "+-2"])
def test_jobs_takes_ascii_digits_only(text: str) -> None:
    with pytest.raises(InputError, match="not a number of processes"):
        common.parse_jobs(text)


@pytest.mark.parametrize(("text", "jobs"), [("2", 2), (" 3 ", 3), ("+4", 4), ("0012", 12)])
def test_jobs_in_ascii_is_taken(text: str, jobs: int) -> None:
    assert common.parse_jobs(text) == jobs


@pytest.mark.parametrize("command", ["validate", "sweep", "erratum", "calibrate", "bench"])
def test_every_jobs_option_refuses_an_arabic_indic_two(command: str) -> None:
    refuses([command, "--jobs", "\u0662"], "argument --jobs: not a number of processes", env=_env())


# --------------------------------------------------------------------------- bench


@pytest.mark.parametrize("only", [",", "", " , ,"])
def test_bench_with_no_item_named_is_one_line(only: str) -> None:
    refuses(["bench", "--only", only], "names no bench item", env=_env())


def test_bench_with_nothing_left_to_run_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "iverilog" else real(name))
    with pytest.raises(InputError, match="nothing to run: cocotb-icarus needs Icarus Verilog"):
        bench_cmd._wanted("cocotb-icarus")
    assert bench_cmd._wanted("model,cocotb-icarus") == ["model"]  # with a warning


def test_bench_without_icarus_on_the_path_is_one_line(tmp_path: Path) -> None:
    """The reproducer as a user meets it: a PATH where no iverilog is found."""
    env = dict(_env(), PATH=str(tmp_path))
    refuses(["bench", "--only", "cocotb-icarus"], "nothing to run", env=env)


# --------------------------------------------------------------------------- HF configs


def _config(tmp_path: Path, **over: object) -> str:
    import json

    doc = json.loads((HF / "llama-3.2-1b" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**doc, **over}))
    return str(path)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"intermediate_size": 10**30}, "intermediate_size 100000000000... (31 digits)"),
        ({"hidden_size": 2**18 + 1}, "hidden_size 262145 is out of range (1..262144)"),
        ({"num_hidden_layers": 10**4}, "num_hidden_layers 10000 is out of range (1..4096)"),
        ({"vocab_size": 2**23 + 1}, "vocab_size 8388609 is out of range"),
    ],
)
def test_a_config_that_asks_too_much_is_refused_not_computed(
    tmp_path: Path, over: dict, message: str
) -> None:
    refuses(["llm", "--config", _config(tmp_path, **over)], message, env=_env())


def test_text_config_deeper_than_three_levels_is_one_line(tmp_path: Path) -> None:
    import json

    doc: dict = json.loads((HF / "llama-3.2-1b" / "config.json").read_text())
    for _ in range(4):
        doc = {"model_type": "gemma3", "text_config": doc}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    refuses(
        ["llm", "--config", str(path)], "text_config nested more than 3 levels deep", env=_env()
    )
