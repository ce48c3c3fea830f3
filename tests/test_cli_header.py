"""Every result command names its engine, chip and profile in one header line; --help lists all."""

from __future__ import annotations

import pytest

from ane_kdma.chip import data_dir, load
from ane_kdma.cli import COMMAND_NAMES, build_parser, main

DUMP = str(data_dir() / "dumps" / "m3_n4096_d2048.txt")
RESULT_COMMANDS = {
    "predict": ["predict", "--bytes-per-core", "1MiB", "--engine", "analytic"],
    "plan": ["plan", "--shape", "2048x8192", "--engine", "analytic"],
    "llm": ["llm", "--model", "llama-3.2-1b", "--engine", "analytic"],
    "replay": ["replay", DUMP, "--engine", "analytic"],
    "erratum": ["erratum", "--engine", "analytic", "--laps", "2"],
}


@pytest.mark.parametrize("command", sorted(RESULT_COMMANDS))
def test_one_header_line_names_engine_chip_and_profile(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(RESULT_COMMANDS[command]) == 0
    out = capsys.readouterr().out.splitlines()
    p = load().profile
    want = f"{command}: analytic engine, chip m3, profile {p.name} ({p.hypothesis} x {p.mechanism})"
    assert out[0].startswith(want), out[0]
    assert sum("engine, chip" in line for line in out) == 1  # one header, not one per table


def test_sweep_header(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sweep", "--out", f"{tmp_path}/o", "--d-min", "1024", "--d-max", "3072"]
    assert main([*argv, "--d-step", "64"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("sweep: analytic engine, chip m3, profile "), out[0]


@pytest.mark.parametrize("name", ["Llama-3.2-1B", "LLAMA-3.2-1B", "llama-3.2-1b", " Qwen3-8B"])
def test_model_names_are_case_insensitive(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "--model", name, "--engine", "analytic", "--json"]) == 0
    assert '"tok_s_unsplit"' in capsys.readouterr().out


def test_an_unknown_model_is_still_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llm", "--model", "Llama-9"]) == 2
    assert "unknown model 'Llama-9'" in capsys.readouterr().err


def test_help_lists_every_registered_command_with_a_blurb(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    registered = build_parser()._subparsers._group_actions[0].choices
    assert set(registered) == set(COMMAND_NAMES)
    for name in registered:
        # the command's name, then its blurb on the same line or the next (argparse wraps)
        lines = text.splitlines()
        at = [i for i, line in enumerate(lines) if line.split()[:1] == [name]]
        assert at, f"{name} is not listed in --help"
        blurb = " ".join(lines[at[0]].split()[1:]) or lines[at[0] + 1].strip()
        assert len(blurb) > 10, f"{name} has no blurb in --help"
