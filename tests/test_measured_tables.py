"""ane_kdma.measured: the article's Tables B and C as data, and what a row of them must carry.

Every figure of a Table B or C row names its unit, its qualifier (how it was
published) and, on the row, its source; a row without one is refused by the
loader every command shares, with one line naming the field.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ane_kdma import chip as chips
from ane_kdma.cli import main

M3 = chips.chips_dir() / "m3"
URL = "https://eiln.github.io/posts/ane-dma.html"
MIB = 1 << 20


def test_table_b_as_published() -> None:
    tb = chips.load("m3").measured.table_b
    assert tb is not None and tb.n == 4096 and tb.chunk_bytes == 512 * 1024
    got = [
        (r.d, r.bytes_per_core, r.unsplit.value, r.chunked.value, r.speedup.value) for r in tb.rows
    ]
    assert got == [
        (2048, 1 * MIB, 17.3, 43.5, 2.51),
        (4096, 2 * MIB, 18.4, 52.1, 2.84),
        (8192, 4 * MIB, 18.8, 57.8, 3.07),
        (12288, 6 * MIB, 19.0, 59.8, 3.15),
        (16384, 8 * MIB, 19.1, 60.5, 3.16),
    ]
    for r in tb.rows:
        for fig in (r.unsplit, r.chunked, r.speedup):
            assert fig.qualifier and fig.source is not None and fig.source.where == URL
        assert (r.unsplit.unit, r.chunked.unit, r.speedup.unit) == ("GB/s", "GB/s", "x")


def test_table_c_as_published() -> None:
    tc = chips.load("m3").measured.table_c
    assert tc is not None and (tc.d, tc.n, tc.bytes_per_core) == (2048, 4096, MIB)
    got = [(r.tasks, r.lines_per_task, r.gbps.value) for r in tc.rows]
    assert got == [(1, 0x4000, 17.25), (2, 0x2000, 45.52), (4, 0x1000, 44.83)]
    assert [r.speedup.value if r.speedup else None for r in tc.rows] == [None, 2.66, 2.60]
    assert all(r.gbps.qualifier and r.source.where == URL for r in tc.rows)


def _edit(name: str, change: Callable[[dict], object]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        doc = json.loads((folder / name).read_text())
        change(doc)
        (folder / name).write_text(json.dumps(doc))

    return edit


def _row_b(i: int, *keys: str) -> Callable[[dict], dict]:
    def pick(doc: dict) -> dict:
        out = doc["rows"][i]
        for k in keys:
            out = out[k]
        return out

    return pick


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (
            _edit("measured/table_b.json", lambda d: _row_b(1, "unsplit")(d).pop("unit")),
            "table_b.json: rows[1].unsplit.unit: missing",
        ),
        (
            _edit("measured/table_b.json", lambda d: _row_b(3, "chunked")(d).pop("qualifier")),
            "table_b.json: rows[3].chunked.qualifier: missing",
        ),
        (
            _edit("measured/table_b.json", lambda d: _row_b(0, "speedup")(d).pop("qualifier")),
            "table_b.json: rows[0].speedup.qualifier: missing",
        ),
        (
            _edit("measured/table_b.json", lambda d: _row_b(4)(d).pop("source")),
            "table_b.json: rows[4].source: missing",
        ),
        (
            _edit("measured/table_c.json", lambda d: _row_b(2, "throughput")(d).pop("unit")),
            "table_c.json: rows[2].throughput.unit: missing",
        ),
        (
            _edit("measured/table_c.json", lambda d: _row_b(0, "throughput")(d).pop("qualifier")),
            "table_c.json: rows[0].throughput.qualifier: missing",
        ),
        (
            _edit("measured/table_c.json", lambda d: _row_b(1)(d).pop("source")),
            "table_c.json: rows[1].source: missing",
        ),
        (
            _edit("measured/table_c.json", lambda d: _row_b(1, "speedup")(d).pop("qualifier")),
            "table_c.json: rows[1].speedup.qualifier: missing",
        ),
        (
            _edit("measured/table_c.json", lambda d: _row_b(1, "tasks")(d).update(value=3)),
            "3 x 8192 lines is not the 16384 lines per core",
        ),
        (
            _edit(
                "measured/table_b.json", lambda d: _row_b(2, "bytes_per_core")(d).update(value=1)
            ),
            "D x N = 8192 x 4096 is 4194304 B per core",
        ),
    ],
)
def test_a_row_without_its_field_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit, field: str
) -> None:
    folder = tmp_path / "m3"
    shutil.copytree(M3, folder)
    edit(folder)
    assert main(["predict", "--bytes-per-core", "64", "--chip", str(folder)]) == 2
    out = capsys.readouterr()
    err = out.err.strip().splitlines()
    assert out.out == "" and len(err) == 1 and err[0].startswith("ane-kdma: "), err
    assert field in err[0], err
