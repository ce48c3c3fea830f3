"""`patch` never writes to its input, and refuses what it cannot do before writing.

Every run here (a patch, a dry run, each refusal) is bracketed by a snapshot
of the input package: every entry's bytes, size, mode and timestamps
(modification and status change). A refused run leaves nothing next to the
output path either: no package, no staging folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from pathlib import Path

import numpy as np
import pytest
from refusal import refuses
from test_patch import BUGGY, CHIP, coreml
from test_patch_models import SEED, _shared

from ane_kdma.cli import main
from ane_kdma.patch import blobs, patch

FAST = "analytic"
WEIGHTS = "Data/com.apple.CoreML/weights/weight.bin"
ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root (root included): content hash, size, mode, mtime and ctime."""
    out: dict[str, tuple] = {}
    for here, dirs, files in os.walk(root):
        for name in [".", *dirs, *files]:
            p = Path(here) / name
            st = os.lstat(p)
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
            out[str(p.relative_to(root))] = (
                digest,
                st.st_size if p.is_file() else 0,
                st.st_mode,
                st.st_mtime_ns,
                st.st_ctime_ns,
            )
    return out


@pytest.fixture(scope="module")
def pkg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A package with weights to split (a weight two linears share, on a ring lap)."""
    folder = tmp_path_factory.mktemp("inputs")
    return _shared(coreml(), folder / "in.mlpackage", np.random.default_rng(SEED), tied=False)


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    return status, err.getvalue()


def _untouched(src: Path, argv: list[str], status: int, words: str = "") -> None:
    before = snapshot(src)
    if status == 2:  # and nothing left next to the input
        refuses(argv, words, watch=[src.parent])
    else:
        got, err = _run(argv)
        assert got == status, err
    assert snapshot(src) == before


def test_patch_and_dry_run_leave_the_input_as_it_was(pkg: Path, tmp_path: Path) -> None:
    _untouched(pkg, ["patch", str(pkg), "--dry-run", "--engine", FAST], 0)
    _untouched(pkg, ["patch", str(pkg), str(tmp_path / "out.mlpackage"), "--engine", FAST], 0)
    assert (tmp_path / "out.mlpackage" / "Manifest.json").is_file()


@pytest.mark.parametrize(
    "where,words",
    [
        (".", "is the input package"),
        ("out.mlpackage", "inside the input package"),
        ("Data/out.mlpackage", "inside the input package"),
        ("Manifest.json", "exists"),
    ],
)
def test_an_output_in_the_input_is_refused(pkg: Path, where: str, words: str) -> None:
    out = pkg / where if where != "." else pkg
    _untouched(pkg, ["patch", str(pkg), str(out), "--engine", FAST], 2, words)
    assert not (pkg / "out.mlpackage").exists() and not (pkg / "Data/out.mlpackage").exists()


def test_an_output_through_a_link_into_the_input_is_refused(pkg: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(pkg / "Data")
    _untouched(pkg, ["patch", str(pkg), str(link / "out.mlpackage")], 2, "inside the input")


@pytest.mark.parametrize("kind", ["dangling", "loop", "file-parent", "long", "proc"])
def test_an_output_that_cannot_be_written_is_one_line(pkg: Path, tmp_path: Path, kind: str) -> None:
    if kind == "dangling":
        out = tmp_path / "out.mlpackage"
        out.symlink_to(tmp_path / "nowhere")
        words = "exists"
    elif kind == "loop":
        out = tmp_path / "loop.mlpackage"
        out.symlink_to(out)
        words = "exists"
    elif kind == "file-parent":
        (tmp_path / "f").write_text("")
        out = tmp_path / "f" / "out.mlpackage"
        words = "not a folder"
    elif kind == "long":
        out = tmp_path / ("x" * 300 + ".mlpackage")
        words = "name too long"
    else:
        out = Path("/proc/out.mlpackage")
        words = "/proc: cannot create the output there"
    _untouched(pkg, ["patch", str(pkg), str(out), "--engine", FAST], 2, words)


@pytest.mark.skipif(ROOT, reason="root may write anywhere")
def test_a_read_only_output_folder_is_one_line(pkg: Path, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        _untouched(pkg, ["patch", str(pkg), str(ro / "out.mlpackage")], 2, "not writable")
    finally:
        ro.chmod(0o755)


def _copy(pkg: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(pkg, dst)
    return dst


@pytest.mark.parametrize("target", ["Data/com.apple.CoreML/model.mlmodel", WEIGHTS])
def test_a_fifo_inside_is_refused_without_blocking(pkg: Path, tmp_path: Path, target: str) -> None:
    src = _copy(pkg, tmp_path / "fifo.mlpackage")
    (src / target).unlink()
    os.mkfifo(src / target)
    before = snapshot(src)
    for argv in (["--dry-run"], [str(tmp_path / "out.mlpackage")]):
        refuses(["patch", str(src), *argv], "a FIFO inside the package", child=True)
    assert snapshot(src) == before and not (tmp_path / "out.mlpackage").exists()


@pytest.mark.parametrize("kind", ["long", "missing", "file"])
def test_an_input_that_cannot_be_read_is_one_line(tmp_path: Path, kind: str) -> None:
    src = {
        "long": tmp_path / ("y" * 300 + ".mlpackage"),
        "missing": tmp_path / "none" / "in.mlpackage",
        "file": tmp_path / "file.mlpackage",
    }[kind]
    if kind == "file":
        src.write_text("")
    words = {"long": "name too long", "missing": "No such file", "file": "not an .mlpackage"}[kind]
    refuses(["patch", str(src), str(tmp_path / "out.mlpackage")], words, watch=[tmp_path])
    assert not (tmp_path / "out.mlpackage").exists()


@pytest.mark.skipif(ROOT, reason="root reads every file")
def test_an_unreadable_file_inside_is_refused_before_writing(pkg: Path, tmp_path: Path) -> None:
    src = _copy(pkg, tmp_path / "locked.mlpackage")
    (src / WEIGHTS).chmod(0)
    try:
        argv = ["patch", str(src), str(tmp_path / "out.mlpackage")]
        refuses(argv, "not readable", watch=[tmp_path])
        assert sorted(os.listdir(tmp_path)) == ["locked.mlpackage"]
    finally:
        (src / WEIGHTS).chmod(0o644)


@pytest.mark.parametrize("entry", [WEIGHTS, "Data"])
def test_an_unreadable_entry_is_refused_even_as_root(
    pkg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    """The same refusal where chmod cannot make it (root): access() says no for one entry."""
    from ane_kdma.patch import package

    real = os.access

    def access(path, mode, *a, **kw):  # type: ignore[no-untyped-def]
        return False if str(path).endswith(entry) else real(path, mode, *a, **kw)

    monkeypatch.setattr(package.os, "access", access)
    before = snapshot(pkg)
    refuses(["patch", str(pkg), str(tmp_path / "out.mlpackage")], "not readable", watch=[tmp_path])
    assert os.listdir(tmp_path) == [] and snapshot(pkg) == before


@pytest.mark.parametrize("when", [1, 2])
def test_an_interrupted_patch_leaves_nothing(
    pkg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: int
) -> None:
    """Ctrl-C while the new weight file is written (at its first or second blob): no package,
    no staging folder, the input as it was."""
    real = blobs.Writer.add
    calls = {"n": 0}

    def interrupted(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == when:
            raise KeyboardInterrupt
        return real(self, *a, **kw)

    monkeypatch.setattr(blobs.Writer, "add", interrupted)
    src = _copy(pkg, tmp_path / "in.mlpackage")
    before = snapshot(src)
    with pytest.raises(KeyboardInterrupt):
        patch(src, tmp_path / "out.mlpackage", CHIP, BUGGY, FAST)
    assert calls["n"] == when
    assert sorted(os.listdir(tmp_path)) == ["in.mlpackage"]
    assert snapshot(src) == before
