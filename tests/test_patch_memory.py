"""`patch` holds one tensor at a time: peak memory below the model's own weights.

A Llama-shaped ML Program is written here directly (protobuf and weight file,
weights streamed to disk in chunks, never held whole), so a model of any
size can be made without coremltools holding it in memory. `patch` then runs
in a child process that reports its own peak resident size.

The test runs a two-layer model at Llama 3.2 1B's widths (its MLP weights sit
on a ring lap, so they are split). The 16-layer, 1B-shaped run that the README
quotes is not part of the test suite (it writes about 5 GB); run it with

    .venv/bin/python tests/test_patch_memory.py --full /some/scratch/folder
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
MODEL = "Data/com.apple.CoreML/model.mlmodel"
WEIGHTS = "Data/com.apple.CoreML/weights/weight.bin"
MANIFEST = """{
    "fileFormatVersion": "1.0.0",
    "itemInfoEntries": {
        "A5F4B6A4-0000-4000-8000-000000000001": {
            "author": "com.apple.CoreML", "description": "CoreML Model Weights",
            "name": "weights", "path": "com.apple.CoreML/weights"
        },
        "A5F4B6A4-0000-4000-8000-000000000002": {
            "author": "com.apple.CoreML", "description": "CoreML Model Specification",
            "name": "model.mlmodel", "path": "com.apple.CoreML/model.mlmodel"
        }
    },
    "rootModelIdentifier": "A5F4B6A4-0000-4000-8000-000000000002"
}
"""
DRY_RUN_LIMIT = 300 << 20  # --dry-run reads shapes, not weights, on any model


def make_llama(
    path: Path,
    layers: int = 16,
    hidden: int = 2048,
    inter: int = 8192,
    kv: int = 512,
    vocab: int = 128256,
    seed: int = 0,
) -> int:
    """A decode-step Llama (tied embedding, q/k/v/o, gate/up/down) as an .mlpackage; its
    weight bytes. Converter names (linear_N_cast_fp16, model_layers_N_..._weight_to_fp16)."""
    from coremltools.proto import MIL_pb2, Model_pb2

    from ane_kdma.patch import blobs
    from ane_kdma.patch.rewrite import _const, _ints, _op

    fp16, i32 = MIL_pb2.DataType.Value("FLOAT16"), MIL_pb2.DataType.Value("INT32")
    rng = np.random.default_rng(seed)

    def tt(dtype: int, *dims: int):
        t = MIL_pb2.TensorType()
        t.dataType = dtype
        t.rank = len(dims)
        for d in dims:
            t.dimensions.add().constant.size = d
        return t

    (path / "Data/com.apple.CoreML/weights").mkdir(parents=True)
    (path / "Manifest.json").write_text(MANIFEST)
    ops: list = []
    total = 0
    with open(path / WEIGHTS, "wb") as fh:
        writer = blobs.Writer(fh)

        def weight(name: str, *shape: int) -> str:
            nonlocal total
            n = int(np.prod(shape))

            def fill() -> None:
                left = n
                while left:
                    k = min(left, 8 << 20)
                    fh.write((rng.standard_normal(k) / 32).astype(np.float16).tobytes())
                    left -= k

            offset = writer.add(name, 1, 2 * n, 0, fill)
            total += 2 * n
            v = MIL_pb2.Value()
            v.type.tensorType.CopyFrom(tt(fp16, *shape))
            v.blobFileValue.fileName = "@model_path/weights/weight.bin"
            v.blobFileValue.offset = offset
            ops.append(_const(name, v))
            return name

        count = 0

        def linear(x: str, w: str, cout: int) -> str:
            nonlocal count
            name = f"linear_{count}_cast_fp16"
            count += 1
            ops.append(_op("linear", name, {"x": [x], "weight": [w]}, [(name, tt(fp16, 1, cout))]))
            return name

        def binary(kind: str, x: str, y: str, name: str, width: int) -> str:
            ops.append(_op(kind, name, {"x": [x], "y": [y]}, [(name, tt(fp16, 1, width))]))
            return name

        embed = weight("model_embed_tokens_weight_to_fp16", vocab, hidden)
        ops.append(_const("gather_axis", _ints([0], scalar=True)))
        ops.append(_const("gather_batch_dims", _ints([0], scalar=True)))
        ops.append(
            _op(
                "gather",
                "embedding_0_cast_fp16",
                {
                    "x": [embed],
                    "indices": ["input_ids"],
                    "axis": ["gather_axis"],
                    "batch_dims": ["gather_batch_dims"],
                },
                [("embedding_0_cast_fp16", tt(fp16, 1, hidden))],
            )
        )
        x = "embedding_0_cast_fp16"
        for i in range(layers):
            p = f"model_layers_{i}_"
            q = linear(x, weight(f"{p}self_attn_q_proj_weight_to_fp16", hidden, hidden), hidden)
            k = linear(x, weight(f"{p}self_attn_k_proj_weight_to_fp16", kv, hidden), kv)
            v = linear(x, weight(f"{p}self_attn_v_proj_weight_to_fp16", kv, hidden), kv)
            kv_sum = binary("add", k, v, f"add_{i}_kv_cast_fp16", kv)
            o = linear(q, weight(f"{p}self_attn_o_proj_weight_to_fp16", hidden, hidden), hidden)
            h = binary("add", x, o, f"add_{i}_0_cast_fp16", hidden)
            g = linear(h, weight(f"{p}mlp_gate_proj_weight_to_fp16", inter, hidden), inter)
            u = linear(h, weight(f"{p}mlp_up_proj_weight_to_fp16", inter, hidden), inter)
            name = f"silu_{i}_cast_fp16"
            ops.append(_op("silu", name, {"x": [g]}, [(name, tt(fp16, 1, inter))]))
            m = binary("mul", name, u, f"mul_{i}_cast_fp16", inter)
            d = linear(m, weight(f"{p}mlp_down_proj_weight_to_fp16", hidden, inter), hidden)
            x = binary("add", h, d, f"add_{i}_1_cast_fp16", hidden)
            del kv_sum  # read by nothing: a synthetic model only needs the weights' shapes
        logits = linear(x, embed, vocab)
        writer.finish()
    spec = Model_pb2.Model()
    spec.specificationVersion = 9
    fi = spec.description.input.add()
    fi.name = "input_ids"
    fi.type.multiArrayType.shape.append(1)
    fi.type.multiArrayType.dataType = Model_pb2.ArrayFeatureType.INT32
    fo = spec.description.output.add()
    fo.name = "logits"
    fo.type.multiArrayType.shape.extend([1, vocab])
    fo.type.multiArrayType.dataType = Model_pb2.ArrayFeatureType.FLOAT16
    prog = spec.mlProgram
    prog.version = 1
    fn = prog.functions["main"]
    inp = fn.inputs.add()
    inp.name = "input_ids"
    inp.type.tensorType.CopyFrom(tt(i32, 1))
    fn.opset = "CoreML8"
    block = fn.block_specializations["CoreML8"]
    block.operations.extend(ops)
    # the output var takes the model's name, as ct.convert leaves it; the op keeps its own
    block.operations[-1].outputs[0].name = "logits"
    block.outputs.append("logits")
    del logits
    (path / MODEL).write_bytes(spec.SerializeToString())
    return total


#: the child's own peak: VmHWM is its address space's high-water mark (getrusage's ru_maxrss
#: would also carry the forking parent's, which Linux keeps across exec)
CHILD = """
import json, resource, sys, time
from ane_kdma.cli import main
t = time.perf_counter()
rc = main(sys.argv[1:])
seconds = time.perf_counter() - t
try:
    with open("/proc/self/status") as fh:
        peak = next(int(x.split()[1]) * 1024 for x in fh if x.startswith("VmHWM:"))
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"rc": rc, "seconds": seconds, "peak_bytes": peak}))
"""


def run_child(argv: list[str]) -> dict:
    """`ane-kdma argv --json` in a fresh interpreter: its document, peak RSS and wall time."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *argv, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and len(lines) == 2, proc.stderr[-2000:]
    return {**json.loads(lines[1]), "doc": json.loads(lines[0])}


def _measure(folder: Path, layers: int, vocab: int) -> dict:
    src, dst = folder / "llama.mlpackage", folder / "out.mlpackage"
    t = time.perf_counter()
    weights = make_llama(src, layers=layers, vocab=vocab)
    made = time.perf_counter() - t
    dry = run_child(["patch", str(src), "--dry-run"])
    full = run_child(["patch", str(src), str(dst)])
    return {"weights": weights, "made_s": made, "dry": dry, "full": full, "dst": dst, "src": src}


def test_patch_peaks_below_the_weights_and_dry_run_below_300_mb(tmp_path: Path) -> None:
    pytest.importorskip("coremltools")
    m = _measure(tmp_path, layers=2, vocab=8192)
    full, dry = m["full"], m["dry"]
    assert full["rc"] == 0 and dry["rc"] == 0
    changed = full["doc"]["changed"]
    assert {c["weight"] for c in changed} >= {
        f"model_layers_{i}_mlp_{p}_proj_weight_to_fp16" for i in (0, 1) for p in ("gate", "up")
    }
    assert full["peak_bytes"] < m["weights"], (full["peak_bytes"], m["weights"])
    assert dry["peak_bytes"] < DRY_RUN_LIMIT, dry["peak_bytes"]
    size_in = (m["src"] / WEIGHTS).stat().st_size
    size_out = (m["dst"] / WEIGHTS).stat().st_size
    shared = full["doc"]["duplicated_bytes"]  # the tied head, if split, keeps its table too
    # the report's sizes are the weight file's, measured (each stored tensor once)
    assert (full["doc"]["weight_bytes_in"], full["doc"]["weight_bytes_out"]) == (size_in, size_out)
    assert dry["doc"]["weight_bytes_in"] == size_in
    assert size_out <= size_in * 1.01 + shared


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", metavar="DIR", required=True, help="scratch folder (about 5 GB)")
    ap.add_argument("--layers", type=int, default=16)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.full) as tmp:
        m = _measure(Path(tmp), layers=args.layers, vocab=128256)
        gib = 2**30
        print(f"weights: {m['weights'] / gib:.2f} GiB (written in {m['made_s']:.0f} s)")
        for k in ("dry", "full"):
            r = m[k]
            print(f"patch {k}: peak RSS {r['peak_bytes'] / 2**20:.0f} MiB, {r['seconds']:.1f} s")
        doc = m["full"]["doc"]
        print(
            f"split {len(doc['changed'])} ops; weight.bin {doc['weight_bytes_in'] / gib:.3f} -> "
            f"{doc['weight_bytes_out'] / gib:.3f} GiB; duplicated {doc['duplicated_bytes']} B"
        )


if __name__ == "__main__":
    main()
