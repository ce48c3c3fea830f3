"""Every constant of rtl/kdma_pkg.sv against the Python that mirrors it, in one place.

Python cannot import the package, so the constants the host code needs are
copied (ane_kdma.hw, the hypothesis registry's encodings and paths, the bundled
m3 chip's geometry, the cocotb engine's build defaults, the profile's limits).
This test parses every localparam, the credit_mode_e enum and the settings_t
struct of the package, evaluates their expressions, and holds each copy to the
value the RTL has (the struct to ane_kdma.mechanisms.rtl_fields(), member by
member). A new localparam with no entry in ``mirrors`` fails here until someone
says where Python mirrors it (or that nothing in Python depends on it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ane_kdma import chip as chips
from ane_kdma import hw, profile
from ane_kdma import hypotheses as hyps
from ane_kdma.engines import cocotb as cocotb_engine
from ane_kdma.mechanisms import rtl_fields
from ane_kdma.rtl_settings import pack_settings, settings_bits, unpack_settings

REPO = Path(__file__).resolve().parents[1]
PKG_PATH = REPO / "rtl" / "kdma_pkg.sv"

_LOCALPARAM = re.compile(r"localparam\s+(?:int|logic\s*\[([^\]]*)\])\s+(\w+)\s*=\s*([^;]+);")
_ENUM = re.compile(r"typedef\s+enum\s+logic\s*\[([^\]]*)\]\s*\{(.*?)\}\s*(\w+)\s*;", re.S)
_STRUCT = re.compile(r"typedef\s+struct\s+packed\s*\{(.*?)\}\s*(\w+)\s*;", re.S)
_MEMBER = re.compile(r"logic\s*\[([^\]]*)\]\s*(\w+)\s*;")
_SIZED = re.compile(r"\b(\d+)'([dhb])([0-9a-fA-F_]+)")
_CAST = re.compile(r"(\b\w+)'\(")
_ALLOWED = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Call,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.LShift,
    ast.RShift,
    ast.USub,
)


def _cast(width: int, value: int) -> int:
    return value & ((1 << width) - 1)


def _eval(expr: str, env: dict[str, int]) -> int:
    """A constant expression of the package (+ - * << >>, sized literals, N'(x) casts)."""
    text = _SIZED.sub(
        lambda m: str(int(m.group(3).replace("_", ""), {"d": 10, "h": 16, "b": 2}[m.group(2)])),
        expr,
    )
    text = _CAST.sub(lambda m: f"_cast({m.group(1)}, ", text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise AssertionError(f"kdma_pkg.sv: cannot evaluate {expr.strip()!r}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise AssertionError(f"kdma_pkg.sv: cannot evaluate {expr.strip()!r}")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id == "_cast"
        ):
            raise AssertionError(f"kdma_pkg.sv: a call in {expr.strip()!r}")
        if isinstance(node, ast.Name) and node.id != "_cast" and node.id not in env:
            raise AssertionError(f"kdma_pkg.sv: {node.id} used before it is declared")
    value = eval(compile(tree, "kdma_pkg.sv", "eval"), {"__builtins__": {}, "_cast": _cast}, env)
    return int(value)


def _parse(text: str) -> tuple[dict[str, int], dict[str, int], int]:
    """(localparams, credit_mode_e members, credit_mode_e width), in declaration order."""
    text = re.sub(r"//[^\n]*", "", text)
    params: dict[str, int] = {}
    members: dict[str, int] = {}
    width = 0
    items = sorted(
        [(m.start(), "param", m) for m in _LOCALPARAM.finditer(text)]
        + [(m.start(), "enum", m) for m in _ENUM.finditer(text)],
        key=lambda item: item[0],
    )
    for _, kind, m in items:
        env = {**params, **members}
        if kind == "param":
            value = _eval(m.group(3), env)
            if m.group(1) is not None:  # logic [hi:0]: the value must fit
                hi, lo = (_eval(x, env) for x in m.group(1).split(":"))
                assert lo == 0 and 0 <= value < 1 << (hi + 1), m.group(2)
            params[m.group(2)] = value
        else:
            assert m.group(3) == "credit_mode_e", m.group(3)
            hi, lo = (_eval(x, env) for x in m.group(1).split(":"))
            assert lo == 0
            width = hi + 1
            for name, expr in re.findall(r"(\w+)\s*=\s*([^,]+)", m.group(2)):
                members[name] = _eval(expr, env)
                assert 0 <= members[name] < 1 << width, name
    # Every localparam and enum in the file was read (none in a form the patterns miss).
    assert len(params) == len(re.findall(r"\blocalparam\b", text))
    assert len(re.findall(r"\btypedef\s+enum\b", text)) == 1
    return params, members, width


PARAMS, MEMBERS, MODE_WIDTH = _parse(PKG_PATH.read_text())


def _parse_structs(text: str, params: dict[str, int]) -> dict[str, list[tuple[str, int]]]:
    """Each packed struct of the package: its members' (name, width), first declared first."""
    text = re.sub(r"//[^\n]*", "", text)
    out: dict[str, list[tuple[str, int]]] = {}
    for m in _STRUCT.finditer(text):
        members = []
        body = m.group(1)
        for member in _MEMBER.finditer(body):
            hi, lo = (_eval(x, params) for x in member.group(1).split(":"))
            assert lo == 0 and hi >= 0, member.group(0)
            members.append((member.group(2), hi + 1))
        # every declaration in the body was read (none in a form the pattern misses)
        assert len(members) == body.count(";"), m.group(2)
        out[m.group(2)] = members
    assert len(out) == len(re.findall(r"\btypedef\s+struct\b", text))
    return out


STRUCTS = _parse_structs(PKG_PATH.read_text(), PARAMS)


def _spec_path_codes() -> set[int]:
    mask = PARAMS["CREDIT_SPEC_PATH"]
    return {code for code in range(PARAMS["CREDIT_MODES"]) if mask >> code & 1}


def _m3() -> chips.Geometry:
    return chips.load("m3").geometry


#: every localparam of kdma_pkg.sv -> the Python values that must equal it (a name with an
#: empty list is one no Python code depends on: say so here rather than leave it out)
MIRRORS: dict[str, Callable[[], list[int]]] = {
    "LINE_BYTES": lambda: [hw.LINE_BYTES, _m3().line_bytes],
    "LINE_SHIFT": lambda: [hw.LINE_SHIFT, hw.LINE_BYTES.bit_length() - 1],
    "ADDR_BITS": lambda: [hw.ADDR_BITS],
    "LINE_ADDR_BITS": lambda: [hw.LINE_ADDR_BITS, hw.LINE_ADDR_MASK.bit_length()],
    "COUNT_BITS": lambda: [hw.COUNT_BITS, hw.COUNT_MASK.bit_length()],
    "RING_BITS": lambda: [_m3().ring_bits, cocotb_engine.PKG_RING_BITS],
    "PREFETCH_MAX_LINES": lambda: [_m3().prefetch_max_lines, cocotb_engine.PKG_PREFETCH_MAX_LINES],
    "KMEM_LINES": lambda: [_m3().kmem_lines, cocotb_engine.PKG_KMEM_LINES],
    # line_data: hw.line_words gives the 16 32-bit words of one line
    "LINE_BITS": lambda: [32 * hw.line_words(0).shape[1]],
    # line_data's multipliers: hw.line_words computes the same words from them
    "LINE_ADDR_MUL": lambda: [hw.LINE_ADDR_MUL],
    "LINE_WORD_MUL": lambda: [hw.LINE_WORD_MUL],
    "RATE_FRAC_BITS": lambda: [hw.RATE_FRAC_BITS],
    "RATE_ONE": lambda: [hw.RATE_ONE],
    # a per-core rate holds 1.0 (the profile's largest core rate and ramp values)
    "RATE_BITS": lambda: [hw.RATE_BITS, hw.RATE_ONE.bit_length()],
    "AGG_RATE_BITS": lambda: [hw.AGG_RATE_BITS],
    # the profile's (and so every chip's) largest aggregate ceiling
    "AGG_RATE_MAX_Q16": lambda: [hw.AGG_RATE_MAX_Q16, profile.AGG_RATE_MAX_Q16],
    # the cycle counters: the batch harness gets the width from hw (a -D define)
    "CYCLE_BITS": lambda: [hw.CYCLE_BITS],
    # the latency setting: the profile's (and the warm-ups') largest latency
    "LATENCY_BITS": lambda: [hw.LATENCY_BITS, profile.MAX_LATENCY_CYCLES.bit_length()],
    "MAX_LATENCY_CYCLES": lambda: [hw.MAX_LATENCY_CYCLES, profile.MAX_LATENCY_CYCLES],
    # the largest KMem a build may have: the chip loader's bound, and the window's width
    "KMEM_MAX_BITS": lambda: [hw.KMEM_MAX_BITS],
    "MAX_KMEM_LINES": lambda: [hw.MAX_KMEM_LINES, chips.MAX_KMEM_LINES],
    "WINDOW_BITS": lambda: [hw.WINDOW_BITS, chips.MAX_KMEM_LINES.bit_length()],
    # the governor's step counter: the profile's largest ramp step
    "RAMP_STEP_BITS": lambda: [hw.RAMP_STEP_BITS, profile.MAX_RAMP_STEP_LINES.bit_length()],
    # the demand path's warm-up: the starved-line counter holds the profile's longest
    # warm-up, and the extra-latency port its largest extra (the latency's own range)
    "DWARM_LINES_BITS": lambda: [hw.DWARM_LINES_BITS, profile.MAX_WARM_LINES.bit_length()],
    "DWARM_EXTRA_BITS": lambda: [hw.DWARM_EXTRA_BITS, profile.MAX_LATENCY_CYCLES.bit_length()],
    "CREDIT_MODE_BITS": lambda: [hw.CREDIT_MODE_BITS, MODE_WIDTH],
    "CREDIT_MODES": lambda: [1 << hw.CREDIT_MODE_BITS],
    # one bit per reading whose Hypothesis.paths is "split"
    "CREDIT_SPEC_PATH": lambda: [
        sum(1 << h.encoding for h in hyps.in_rtl() if h.paths == "split" and h.encoding is not None)
    ],
}


def test_every_localparam_has_its_mirrors_listed() -> None:
    missing = sorted(set(PARAMS) - set(MIRRORS))
    assert not missing, f"add {missing} to MIRRORS in {Path(__file__).name}"
    assert not set(MIRRORS) - set(PARAMS), "MIRRORS names a localparam kdma_pkg.sv lost"


@pytest.mark.parametrize("name", sorted(MIRRORS))
def test_python_mirror_equals_the_package(name: str) -> None:
    copies = MIRRORS[name]()
    assert copies, name
    assert all(v == PARAMS[name] for v in copies), (name, PARAMS[name], copies)


def test_every_enum_member_is_one_registry_entry() -> None:
    in_rtl = {h.rtl_name: h.encoding for h in hyps.in_rtl()}
    assert in_rtl == MEMBERS
    assert len(set(MEMBERS.values())) == len(MEMBERS)
    assert len({h.name for h in hyps.registry()}) == len(hyps.registry())


def test_mode_width_has_room_for_eight_readings() -> None:
    assert MODE_WIDTH == PARAMS["CREDIT_MODE_BITS"] and 1 << MODE_WIDTH >= 8
    assert all(hw.credit_mode_literal(code) == f"{MODE_WIDTH}'d{code}" for code in MEMBERS.values())
    with pytest.raises(ValueError):
        hw.credit_mode_literal(1 << MODE_WIDTH)


def test_split_path_readings_are_the_package_ones() -> None:
    split = {h.encoding for h in hyps.in_rtl() if h.paths == "split"}
    assert split == _spec_path_codes() and split  # the paged reading has one


def test_the_mode_width_is_spelled_only_in_the_package() -> None:
    """No RTL, testbench or formal file declares a credit mode with a width of its own,
    and the RTL asks the package which readings have a speculative path."""
    files = [*(REPO / "rtl").glob("*.sv"), *(REPO / "tb" / "hdl").glob("*.sv")]
    files += [*(REPO / "formal").glob("*.sv")]
    for path in files:
        text = path.read_text()
        for decl in re.findall(r"logic\s*\[([^\]]*)\]\s*(?:CreditMode|MODE)\b", text):
            assert "CREDIT_MODE_BITS" in decl, f"{path.name}: [{decl}] CreditMode"
        assert not re.search(r"\d+'\(\s*(?:kdma_pkg::)?Credit[A-Z]", text), path.name
        if path.parent.name == "rtl" and path.name != "kdma_pkg.sv":
            assert not re.search(r"CreditMode\s*==", text), f"{path.name} compares the mode"


def test_the_parser_reads_what_it_claims() -> None:
    """The evaluator on the forms the package uses, and a loud failure on others."""
    env = {"A": 6, "B": 3}
    assert _eval("32 - A", env) == 26
    assert _eval("1 << B", env) == 8
    assert _eval("8'(1) << B", env) == 8
    assert _eval("B'(9)", env) == 1
    assert _eval("4'b10_01 + 8'hF0 + 3'd2", env) == 9 + 240 + 2
    with pytest.raises(AssertionError):
        _eval("$clog2(A)", env)
    with pytest.raises(AssertionError):
        _eval("C + 1", env)
    params, members, width = _parse(
        "localparam int W = 2;\n// localparam int X = 1;\n"
        "typedef enum logic [W-1:0] {\n  Aa = W'(0), // a\n  Bb = W'(2)\n} credit_mode_e;\n"
        "localparam logic [3:0] M = 4'(1) << Bb;\n"
    )
    assert params == {"W": 2, "M": 4} and members == {"Aa": 0, "Bb": 2} and width == 2


def test_the_settings_struct_is_the_field_table() -> None:
    """kdma_pkg::settings_t has one member per rtl_fields() entry, named and sized as there,
    in the same order (the first most significant): the one table Python packs it from."""
    assert list(STRUCTS) == ["settings_t"]
    assert STRUCTS["settings_t"] == [(f.name, f.rtl_bits) for f in rtl_fields()]
    assert settings_bits() == sum(w for _, w in STRUCTS["settings_t"])


def test_the_packed_settings_put_each_field_where_the_struct_has_it() -> None:
    """Each field at the struct's offset for it (members declared first are the high bits),
    distinct values so that a swap or a shift shows; a value too wide is refused."""
    chip = chips.load("m3")
    values = {
        "latency": 0xABC,
        "window": 0x1ABC,
        "core_rate_q16": 0x10000,
        "agg_rate_q16": 0x3E_FFFF,
        "ramp_start_q16": 0x8001,
        "ramp_step_lines": 0xABCDE,
        "ramp_inc_q16": 0x10000,
        "dwarm_lines": 0xFEDCB,
        "dwarm_extra_cycles": 0x9A5,
    }
    assert set(values) == {f.name for f in rtl_fields()}
    s = profile.Settings(**values)
    word = pack_settings(s)
    lo = settings_bits()
    for name, width in STRUCTS["settings_t"]:
        lo -= width
        assert (word >> lo) & ((1 << width) - 1) == getattr(s, name), name
    assert lo == 0 and word >> settings_bits() == 0
    assert unpack_settings(word) == {f.name: getattr(s, f.name) for f in rtl_fields()}
    assert unpack_settings(pack_settings(chip.settings))["window"] == chip.settings.window
    with pytest.raises(ValueError, match="does not fit"):
        pack_settings(profile.Settings(**{**values, "window": 1 << hw.WINDOW_BITS}))
    assert {f.name: f.rtl_bits for f in rtl_fields()}["window"] == hw.WINDOW_BITS


def test_the_constants_are_spelled_only_in_the_package() -> None:
    """No RTL module or top spells the latency limit, a rate width or a counter width of its
    own: each is a kdma_pkg localparam (MAX_LATENCY_CYCLES, RATE_BITS, AGG_RATE_BITS,
    CYCLE_BITS) that this test holds Python to."""
    files = [p for p in (REPO / "rtl").glob("*.sv") if p.name != "kdma_pkg.sv"]
    files += [REPO / "python" / "ane_kdma" / "harness" / "kdma_batch_top.sv"]
    files += [REPO / "tb" / "hdl" / "kdma_tb_top.sv"]
    for path in files:
        text = re.sub(r"//[^\n]*", "", path.read_text())
        assert "4095" not in text, path.name
        assert not re.search(r"RATE_FRAC_BITS\s*(?:\+\s*\d+\s*)?[:\]]", text), path.name
        assert "MaxLatencyCycles" not in text, path.name
        if path.parent.name == "rtl":
            assert "[31:0]" not in text, path.name
