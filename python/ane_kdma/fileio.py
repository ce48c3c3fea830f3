"""Files read and written safely: bounded reads, atomic replacement, sets of files, locks.

Why one module: every input the tool reads (dumps, chip files, profiles) goes
through :func:`read_input`, so a device, a FIFO or a huge file is refused in
one line before anything is read, and every output goes through
:func:`write_atomic` or :func:`write_set`, so a failed, interrupted or
terminated run leaves the old file (or the old set of files), never a mix.
Temporary files are removed on any exception, including KeyboardInterrupt and
the CLI's SIGTERM exception, so an interrupted run leaves nothing behind.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import shutil
import signal
import stat
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

from ane_kdma.errors import InputError

STDIN = "-"  # the one name that is not a file: read standard input
STDOUT = "-"  # and, as --out, write standard output (a command that writes one file)
_FALLBACK_NAME_MAX = 255
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


# ---------------------------------------------------------------- names in messages


def one_line(text: str) -> str:
    r"""`text` with control characters, line separators and undecodable bytes escaped.

    A path may hold a newline or bytes that are not UTF-8 (``surrogateescape``);
    printed as is, a message would span two lines or fail to encode. A byte the
    file system gave back as a lone surrogate shows as the byte, ``\xff``.
    """
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _kind(mode: int) -> str:
    """What a non-regular file is, for a message."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


# ---------------------------------------------------------------- looking a path up


def shown(path: str | os.PathLike[str], width: int = 80) -> str:
    """A path for a message: one line, and its end only when it is long (the end names it)."""
    text = one_line(os.fspath(path))
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def probe(path: str | os.PathLike[str], what: str) -> os.stat_result | None:
    """stat(`path`), following links; None when there is nothing there.

    Nothing there: the name does not exist, or a component of it is a file, not
    a folder (what ``Path.is_dir`` reads as False). Every other failure (a name
    or a component too long, a folder on the way that cannot be searched, a
    symlink loop, a NUL in the name) is one line naming `what` and the path,
    not an OSError from deep inside a command: every user-given path that is
    looked up before it is read (``--chip DIR``, ``llm --config``) goes through here.
    """
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise InputError(f"{what} {shown(path)}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL in the name
        raise InputError(f"{what} {shown(path)}: {exc}") from None


def is_dir(path: str | os.PathLike[str], what: str) -> bool:
    """``Path.is_dir``, except that a path that cannot be looked up is one line, not OSError."""
    st = probe(path, what)
    return st is not None and stat.S_ISDIR(st.st_mode)


# ---------------------------------------------------------------- reading


def read_input(
    path: str | os.PathLike[str], limit: int, what: str, missing: str | None = None
) -> bytes:
    """The bytes of a regular file, or of standard input for ``-``, at most `limit` of them.

    Anything else (a directory, a device such as /dev/zero, a FIFO that would
    block for ever) is refused before it is opened for reading, and a file
    above `limit` bytes before it is read. `missing` replaces the message for
    a file that does not exist.
    """
    name = os.fspath(path)
    if name == STDIN:
        return _read_stdin(limit, what)
    try:
        st = os.stat(name)
    except FileNotFoundError:
        raise InputError(missing or f"no such file: {name}") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise InputError(f"cannot read {name}: {getattr(exc, 'strerror', None) or exc}") from None
    _check_regular(name, st, limit, what)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}") from None
    try:
        _check_regular(name, os.fstat(fd), limit, what)  # the file that was opened
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > limit:  # it grew while being read
        raise InputError(f"{name}: more than {limit} bytes is too large for a {what}")
    return b"".join(chunks)


def _check_regular(name: str, st: os.stat_result, limit: int, what: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{name}: is a directory, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{name}: {_kind(st.st_mode)}, not a regular file: cannot be a {what}")
    if st.st_size > limit:
        raise InputError(
            f"{name}: {st.st_size} bytes is too large for a {what} (at most {limit} bytes)"
        )


def _read_stdin(limit: int, what: str) -> bytes:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError(f"cannot read a {what} from standard input: it is closed")
    try:
        data = stream.read(limit + 1)
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise InputError(f"cannot read standard input: {why}") from None
    if len(data) > limit:
        raise InputError(f"standard input: more than {limit} bytes is too large for a {what}")
    return data


# ---------------------------------------------------------------- writing one file


def _temp_name(directory: Path, name: str) -> str:
    """A unique hidden name beside `name`, no longer than the directory allows."""
    try:
        name_max = os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = _FALLBACK_NAME_MAX
    tail = f".{os.getpid()}.{secrets.token_hex(4)}.tmp"
    stem = name
    while stem and len(os.fsencode(f".{stem}{tail}")) > name_max:
        stem = stem[: max(0, len(stem) - 8)]
    return f".{stem}{tail}"


def check_file_target(path: Path) -> os.stat_result | None:
    """The file `path` would replace, or None; InputError unless it is a writable regular file.

    Commands call it before long work, so a bad --out fails at once, not after.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise InputError(f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"cannot write {path}: is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"cannot write {path}: it is {_kind(st.st_mode)}, and only a regular file is replaced"
        )
    if not st.st_mode & 0o222 or not os.access(path, os.W_OK):
        raise InputError(f"cannot write {path}: the file is read-only")
    return st


def _write_new(path: Path, data: bytes, mode: int | None) -> None:
    """Create `path` (it must not exist), write, set `mode` if given, and fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        if mode is not None:
            os.fchmod(fh.fileno(), mode)
        os.fsync(fh.fileno())


def _sync_dir(directory: Path) -> None:
    """Make a rename durable; best effort (not every file system can open a directory)."""
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` by `data` through a temporary file beside it, so no partial file remains.

    Only a regular, writable file is replaced (never a symlink, a device or a
    read-only file), and it keeps its permission bits.
    """
    path = Path(path)
    directory = path.parent  # Path("td.bin").parent is Path(".")
    old = check_file_target(path)
    tmp = directory / _temp_name(directory, path.name)
    try:
        _write_new(tmp, data, stat.S_IMODE(old.st_mode) if old is not None else None)
        os.replace(tmp, path)
    except FileNotFoundError:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: no such directory: {directory}") from None
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _sync_dir(directory)


# ---------------------------------------------------------------- writing a set of files


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done (a few renames), then arrive.

    Held at the level of Python's handlers, not the thread's signal mask: a
    signal may land on any thread (numpy's, for one), but its Python handler
    always runs in the main thread, which is where this takes effect.
    """
    pending: list[int] = []

    def hold(signum: int, frame: object) -> None:
        pending.append(signum)

    old: dict[int, object] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            if signal.getsignal(sig) is not None:  # None: not set from Python, leave it
                old[sig] = signal.signal(sig, hold)
        except ValueError:  # not the main thread: nothing to hold
            break
    try:
        yield
    finally:
        for num, handler in old.items():
            signal.signal(num, handler)  # type: ignore[arg-type]
        for num in dict.fromkeys(pending):
            handler = old[num]
            if callable(handler):
                handler(num, None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), num)


def check_dir_target(directory: Path) -> None:
    """InputError unless `directory` is a directory or does not exist yet (an output folder)."""
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        why = getattr(exc, "strerror", None) or exc
        raise InputError(f"cannot write {directory}: {why}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"cannot write {directory}: it exists and is not a directory")


def write_set(directory: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write several files into `directory` so that they appear together or not at all.

    A new directory is filled under a temporary name beside it and renamed
    into place in one step. In an existing directory (which may hold other
    files, kept as they are) the new files are written into a temporary folder
    inside it first, then moved in one rename each with SIGINT and SIGTERM held
    back; if a rename fails, the old files are put back.
    """
    directory = Path(directory)
    for name in files:
        if not name or os.sep in name or name in (".", ".."):
            raise ValueError(f"not a plain file name: {name!r}")
    check_dir_target(directory)
    try:
        existed = directory.is_dir()
        if not existed:
            directory.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {directory}: {exc.strerror or exc}") from None
    if not existed and _write_new_dir(directory, files):
        return [directory / name for name in files]
    return _write_into(directory, files)


def _write_new_dir(directory: Path, files: Mapping[str, bytes]) -> bool:
    """Fill a temporary folder and rename it to `directory`; False if it appeared meanwhile."""
    parent = directory.parent
    stage = parent / _temp_name(parent, directory.name)
    try:
        os.mkdir(stage)
        for name, data in files.items():
            _write_new(stage / name, data, None)
        os.rename(stage, directory)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY) and directory.is_dir():
            return False
        raise InputError(f"cannot write {directory}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    _sync_dir(parent)
    return True


def _write_into(directory: Path, files: Mapping[str, bytes]) -> list[Path]:
    """The files into an existing directory: staged inside it, then renamed in together."""
    targets = {name: directory / name for name in files}
    olds = {name: check_file_target(path) for name, path in targets.items()}
    stage = directory / _temp_name(directory, "ane-kdma")
    try:
        os.mkdir(stage)
        for name, data in files.items():
            old = olds[name]
            _write_new(stage / name, data, stat.S_IMODE(old.st_mode) if old else None)
        with _signals_held():
            _commit(stage, targets, olds)
    except OSError as exc:
        raise InputError(f"cannot write {directory}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    _sync_dir(directory)
    return list(targets.values())


def _commit(stage: Path, targets: Mapping[str, Path], olds: Mapping[str, object]) -> None:
    """Rename every staged file over its target; on a failure, restore what was there."""
    backups: dict[str, Path] = {}
    for name, target in targets.items():
        if olds[name] is not None:
            backup = stage / f"{name}.old"
            with suppress(OSError):  # no hard links here: no way back for this one
                os.link(target, backup)
                backups[name] = backup
    moved: list[str] = []
    try:
        for name, target in targets.items():
            os.replace(stage / name, target)
            moved.append(name)
    except OSError:
        for name in moved:
            with suppress(OSError):
                if name in backups:
                    os.replace(backups[name], targets[name])
                elif olds[name] is None:
                    targets[name].unlink()
        raise


# ---------------------------------------------------------------- locks


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path`, shared by processes (pytest-xdist workers, CLI runs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
