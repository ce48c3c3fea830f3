"""An .mlpackage on disk: read without touching it, written whole or not at all.

Reading checks the package before anything else: a folder of plain files and
folders only (a FIFO or device inside would block a read), every one
readable, a Manifest.json that names the model, and an ML Program whose
protobuf is bounded in size. Nothing is opened for writing in the input.

Writing checks the output path first (not there yet, not the input or
inside it, in a folder we may write), then builds the new package in a
hidden folder next to it and renames it into place as the last step; any
failure, Ctrl-C included, removes the hidden folder, so a refused or
interrupted patch leaves no partial package.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ane_kdma.errors import InputError
from ane_kdma.patch.graph import pb

MAX_ENTRIES = 10_000  # files and folders in one package
MAX_MANIFEST = 1 << 20
MAX_SPEC = 256 << 20  # an ML Program's protobuf (weights live in the weight file)
MODEL_PATH = "@model_path/"
SUFFIX = ".mlpackage"  # what an output package's name must end in


def shown(path: str | Path) -> str:
    s = str(path)
    return s if len(s) <= 60 else "..." + s[-57:]


def _oserror(where: str, exc: OSError) -> InputError:
    why = exc.strerror or type(exc).__name__
    if exc.errno == errno.ENAMETOOLONG:
        why = "name too long"
    return InputError(f"{shown(where)}: {why}")


@dataclass
class Package:
    """A package's files, its parsed model, and where its weight files are."""

    path: Path
    model_rel: str  # model.mlmodel, relative to the package
    spec: Any  # the Model protobuf
    files: list[str] = field(default_factory=list)  # every file, relative to the package
    folders: list[str] = field(default_factory=list)

    @property
    def model_dir(self) -> str:
        return os.path.dirname(self.model_rel)

    def weight_rel(self, file_name: str) -> str:
        """The package-relative path of a blobFileValue's file (inside the model's folder)."""
        if not file_name.startswith(MODEL_PATH):
            raise InputError(
                f"{shown(self.path)}: a weight file outside the package ({file_name[:60]})"
            )
        rel = os.path.normpath(os.path.join(self.model_dir, file_name[len(MODEL_PATH) :]))
        if rel.startswith("..") or os.path.isabs(rel) or rel not in self.files:
            raise InputError(
                f"{shown(self.path)}: weight file {file_name[:60]} is not in the package"
            )
        return rel


def _walk(root: Path) -> tuple[list[str], list[str]]:
    """Every file and folder under root, refusing special files and unreadable entries."""
    files: list[str] = []
    folders: list[str] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        here = root / rel if rel else root
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError as exc:
            raise _oserror(str(here), exc) from None
        for e in entries:
            sub = f"{rel}/{e.name}" if rel else e.name
            if len(files) + len(folders) >= MAX_ENTRIES:
                raise InputError(
                    f"{shown(root)}: more than {MAX_ENTRIES} entries; not a model package"
                )
            try:
                st = e.stat(follow_symlinks=False)
            except OSError as exc:
                raise _oserror(e.path, exc) from None
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                if not os.access(e.path, os.R_OK | os.X_OK):
                    raise InputError(f"{shown(e.path)}: folder not readable")
                folders.append(sub)
                stack.append(sub)
            elif stat.S_ISREG(mode):
                if not os.access(e.path, os.R_OK):
                    raise InputError(f"{shown(e.path)}: file not readable")
                files.append(sub)
            else:
                kind = (
                    "a symbolic link" if stat.S_ISLNK(mode)
                    else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a socket" if stat.S_ISSOCK(mode)
                    else "a device"
                )  # fmt: skip
                raise InputError(
                    f"{shown(e.path)}: {kind} inside the package; patch reads plain files only"
                )
    return files, folders


def _read_small(path: Path, limit: int, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise _oserror(str(path), exc) from None
    if len(data) > limit:
        raise InputError(f"{shown(path)}: {what} larger than {limit >> 20} MB")
    return data


def _usable(path: str | Path, what: str) -> None:
    """A path the OS can take: not empty, no NUL byte (os calls raise ValueError for those)."""
    text = str(path)
    if not text:
        raise InputError(f"an empty {what} path")
    if "\x00" in text:
        raise InputError(f"{shown(text)!r}: a NUL byte in the {what} path")


def read(src: str | Path) -> Package:
    """The package at `src`, checked (see the module docstring); refusals in one line."""
    _usable(src, "input")
    p = Path(src)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise _oserror(str(p), exc) from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{shown(p)}: not an .mlpackage (a folder with a Manifest.json)")
    if not os.access(p, os.R_OK | os.X_OK):
        raise InputError(f"{shown(p)}: folder not readable")
    files, folders = _walk(p)
    if "Manifest.json" not in files:
        raise InputError(f"{shown(p)}: not an .mlpackage (a folder with a Manifest.json)")
    try:
        manifest = json.loads(_read_small(p / "Manifest.json", MAX_MANIFEST, "Manifest.json"))
        entries = manifest["itemInfoEntries"]
        root = entries[manifest["rootModelIdentifier"]]
        model_rel = os.path.normpath(os.path.join("Data", str(root["path"])))
    except InputError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"{shown(p)}: Manifest.json does not name the model ({type(exc).__name__})"
        ) from None
    if model_rel not in files:
        raise InputError(f"{shown(p)}: the model the manifest names is not in the package")
    raw = _read_small(p / model_rel, MAX_SPEC, "model.mlmodel")
    _, model_pb2 = pb()
    spec = model_pb2.Model()
    try:
        spec.ParseFromString(raw)
    except Exception:  # protobuf's DecodeError, and its C implementation's variants
        raise InputError(
            f"{shown(p / model_rel)}: not a Core ML model (the protobuf does not parse)"
        ) from None
    kind = spec.WhichOneof("Type")
    if kind != "mlProgram":
        raise InputError(
            f"{shown(p)}: a {kind} model, not an ML Program; patch rewrites ML Programs"
        )
    return Package(p, model_rel, spec, files, folders)


# ---------------------------------------------------------------- the output


def check_suffix(dst: str | Path) -> None:
    """OUT names a package: Core ML and Xcode know one by its extension, any other is a folder."""
    name = Path(dst).name
    if not name.endswith(SUFFIX) or name == SUFFIX:
        raise InputError(f"{shown(dst)}: OUT must end in {SUFFIX} (for example model-kdma{SUFFIX})")


def check_output(dst: str | Path, src: str | Path) -> Path:
    """The output path, refused in one line unless it is new, outside the input and writable."""
    _usable(dst, "output")
    _usable(src, "input")
    out = Path(dst)
    with contextlib.suppress(OSError, RuntimeError):
        if os.path.samefile(out, src):
            raise InputError(f"{shown(out)} is the input package; patch never writes to its input")
    try:
        os.lstat(out)
    except FileNotFoundError:
        pass
    except OSError as exc:  # a name too long, a parent that is a file, a loop
        if exc.errno != errno.ENOTDIR:
            raise _oserror(str(out), exc) from None
        raise InputError(f"{shown(out.parent)}: not a folder") from None
    else:
        raise InputError(f"{shown(out)} exists; patch does not overwrite")
    check_suffix(out)
    parent = out.parent
    try:
        pst = os.stat(parent)
        real_parent = parent.resolve(strict=True)
        real_src = Path(src).resolve()
    except (OSError, RuntimeError) as exc:
        if isinstance(exc, OSError) and exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise _oserror(str(parent), exc) from None
        raise InputError(f"{shown(parent)}: no such folder for the output") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise InputError(f"{shown(parent)}: not a folder")
    real_out = real_parent / out.name
    if real_out == real_src or real_src in real_out.parents:
        raise InputError(f"{shown(out)}: inside the input package; patch never writes to its input")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{shown(parent)}: folder not writable")
    return out


@contextlib.contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A hidden folder next to `out` to build the package in; renamed to `out` on success."""
    try:
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".ane-kdma-patch-"))
    except OSError as exc:  # e.g. /proc: there, "writable", but it takes no new folder
        why = exc.strerror or type(exc).__name__
        raise InputError(f"{shown(out.parent)}: cannot create the output there ({why})") from None
    try:
        build = tmp / "package"
        build.mkdir()
        yield build
        if os.path.lexists(out):
            raise InputError(f"{shown(out)} appeared while patching; not overwritten")
        os.rename(build, out)
    except OSError as exc:
        raise _oserror(str(out), exc) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def copy_files(pkg: Package, build: Path, leave_out: set[str]) -> None:
    """Every folder and every file of the package but `leave_out`, as it is."""
    for d in pkg.folders:
        (build / d).mkdir(parents=True, exist_ok=True)
    for f in pkg.files:
        if f not in leave_out:
            shutil.copyfile(pkg.path / f, build / f)
