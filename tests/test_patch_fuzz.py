"""Property-based fuzzing (Hypothesis) of `patch`'s paths: IN and OUT as a user might type them.

Every example ends in a patched package or one line and exit status 2, never a
traceback; the input package is byte for byte and timestamp for timestamp as
it was; and nothing is left behind but a finished output package (no staging
folder, no partial package). Examples are derandomized and no example
database is kept, as in tests/fuzzing.py.
"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from refusal import check_refusal, run_cli
from test_patch import RNG_SEED, _clear, coreml
from test_patch_inputs import snapshot
from test_patch_models import SEED, _shared

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=timedelta(seconds=30),
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
STAGING = ".ane-kdma-patch-"

#: where an input path may point (relative to the scratch folder), built once per module
INPUTS = [
    "clear.mlpackage",  # nothing to split: copied as it is
    "notched.mlpackage",  # split
    "fifo.mlpackage",  # a FIFO in place of its weight file
    "link.mlpackage",  # a symbolic link inside
    "none.mlpackage",
    "afile",
    "afifo",
    "dangling",
    "x" * 300,
    "",
    "clear.mlpackage/Data",
    "clear.mlpackage/Manifest.json",
    "bad\x00name",
]
#: the folder an output path starts from, and what may follow it
OUT_BASES = [
    "",
    "clear.mlpackage",
    "notched.mlpackage/Data",
    "afile",
    "dangling",
    "tolink",
    "/proc",
]
OUT_TAILS = ["out.mlpackage", ".", "..", "", "x" * 300, "a/b.mlpackage", "o\x00ut", "Manifest.json"]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cm = coreml()
    root = tmp_path_factory.mktemp("fuzz_patch")
    _clear(cm, root / "clear.mlpackage", np.random.default_rng(RNG_SEED))
    _shared(cm, root / "notched.mlpackage", np.random.default_rng(SEED), tied=False)
    shutil.copytree(root / "clear.mlpackage", root / "fifo.mlpackage")
    weights = root / "fifo.mlpackage/Data/com.apple.CoreML/weights/weight.bin"
    weights.unlink()
    os.mkfifo(weights)
    shutil.copytree(root / "clear.mlpackage", root / "link.mlpackage")
    (root / "link.mlpackage/extra").symlink_to(root / "afile")
    (root / "afile").write_text("not a package")
    os.mkfifo(root / "afifo")
    (root / "dangling").symlink_to(root / "nowhere")
    (root / "tolink").symlink_to(root / "clear.mlpackage")
    return root


def _paths(root: Path) -> st.SearchStrategy[tuple[str, str | None]]:
    src = st.sampled_from(INPUTS).map(lambda p: str(root / p) if p else "")
    base = st.sampled_from(OUT_BASES).map(lambda b: b if b.startswith("/") else str(root / b))
    tail = st.sampled_from(OUT_TAILS)
    out = st.one_of(st.none(), st.builds(lambda b, t: os.path.join(b, t) if t else b, base, tail))
    return st.tuples(src, out)


def _left_behind(root: Path) -> list[str]:
    found = []
    for here, dirs, _ in os.walk(root):
        found += [os.path.join(here, d) for d in dirs if d.startswith(STAGING)]
    return found


def test_patch_paths_end_in_a_package_or_one_line(scratch: Path) -> None:
    packages = ["clear.mlpackage", "notched.mlpackage", "link.mlpackage"]
    baseline = {p: snapshot(scratch / p) for p in packages}
    entries = sorted(os.listdir(scratch))

    @FUZZ
    @given(_paths(scratch))
    def check(paths: tuple[str, str | None]) -> None:
        src, out = paths
        argv = ["patch", src, *([out] if out is not None else ["--dry-run"])]
        argv += ["--engine", "analytic"]
        ran = run_cli(argv)
        assert ran.status in (0, 2), (argv, ran.status, ran.err)
        if ran.status == 2:
            check_refusal(ran, argv=argv)
        for p in packages:
            assert snapshot(scratch / p) == baseline[p], (argv, p)
        assert _left_behind(scratch) == [], argv
        made = sorted(set(os.listdir(scratch)) - set(entries))
        if ran.status == 0 and out is not None:
            assert Path(out).is_dir() and (Path(out) / "Manifest.json").is_file(), argv
            assert made == [Path(out).name] and Path(out).parent == scratch, (argv, made)
            shutil.rmtree(out)
        else:
            assert made == [], (argv, made)

    check()
