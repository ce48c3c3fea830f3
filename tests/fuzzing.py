"""Helpers of the fuzzing tests, each written once (tests/README.md): Hypothesis' settings,
integer strategies, a scratch folder per example, and the CLI contract for a fuzzed command.

Examples are derandomized and no example database is kept: every run tries the same inputs
(CI and a laptop alike) and nothing is written into the tree.
"""

from __future__ import annotations

import io
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from refusal import Ran, check_refusal

from ane_kdma import chip as chips
from ane_kdma.cli import main
from ane_kdma.errors import InputError

M3 = chips.load()
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def fuzz(examples: int, **kw: object) -> settings:
    """FUZZ with this many examples (and any other change, such as a longer deadline)."""
    return settings(FUZZ, max_examples=examples, **kw)


def one_line(exc: InputError) -> None:
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text, repr(text)


HUGE = st.sampled_from([40, 41, 400, 4300, 4301, 6000]).flatmap(  # around every digit limit
    lambda n: st.text(alphabet="0123456789", min_size=n, max_size=n)
)
ASCII_INTS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.integers(0, 2**40).flatmap(lambda v: st.sampled_from([hex(v), oct(v), bin(v), f"{v:_}"])),
    st.integers(1, 1 << 22).map(lambda v: str(v * 64)),
    HUGE,
)
ODD_INTS = st.one_of(
    st.text(
        st.characters(categories=["Nd"], exclude_characters="0123456789"), min_size=1, max_size=6
    ),
    st.text(st.characters(categories=["No"]), min_size=1, max_size=3),  # ², ½
    st.sampled_from(["", " ", "0x", "1e3", "4096.0", "-0", "+64", "0x_40", "nan", "1_", "٢٠٤٨"]),
    st.text(max_size=12),
)
INTS = st.one_of(ASCII_INTS, ODD_INTS)


@contextmanager
def scratch() -> Iterator[Path]:
    """A fresh folder per example (Hypothesis reuses function-scoped fixtures)."""
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def run(argv: list[str]) -> tuple[int, str, str]:
    """main() in process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def check(argv: list[str], status: int, out: str, err: str) -> None:
    """The CLI contract: a result on stdout, or one line on stderr and status 2."""
    if status == 2:
        check_refusal(Ran(status, out, err), argv=argv)
        return
    assert status == 0, (argv, status, err)
    assert out, argv
    if "--json" in argv:
        json.loads(out)  # exactly one document
    assert all(ln.startswith("ane-kdma: warning: ") for ln in err.splitlines()), (argv, err)


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
