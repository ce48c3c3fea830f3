"""Regenerate, or check, every command transcript in README.md and docs/*.md.

Why: a transcript typed by hand goes stale the day a figure moves, and a user
comparing thinks the install is broken. Here each transcript is the tool's own
output: the Markdown marks the block, this script runs the block's commands
through the installed `ane-kdma` in a subprocess and rewrites the block, and
tests/test_docs.py re-runs them and fails with a diff when a block differs.

Markers (an HTML comment on the line before a fenced block, blank lines allowed):

    <!-- transcript -->            the block's `$ ane-kdma ...` lines are run in
                                   order; the lines after each are its stdout (a
                                   line ending in `\\` continues on the next)
    <!-- transcript setup -->      a ```python block run once, before the file's
                                   later transcripts, in the same scratch folder
                                   (it builds the inputs they read, e.g. a package)
    <!-- illustrative: REASON -->  shown as written and not run (it needs the RTL,
                                   PyTorch, a cluster, or is a measured record);
                                   the reason is required and shown in the source

Every output-looking block (a fence with no language, or `text`/`console`, or
any block with a `$ ` line) must carry one of these markers.

The environment is fixed so a run is repeatable: COLUMNS=100, LINES=50,
NO_COLOR=1, TERM=dumb, LC_ALL=C.UTF-8, TZ=UTC, PYTHONHASHSEED=0, no
PYTHONUNBUFFERED, no Dask scheduler, stdin from /dev/null. Commands run in a
scratch folder holding a link to the repository's data/, so the paths shown
are the ones a user types from a checkout. Only stdout is shown (stderr holds
progress bars and library warnings); a command that fails stops the run. One
normalisation: trailing blanks are stripped from every line (editors strip
them; tables pad their last column).

    python tools/transcripts.py            # rewrite every marked block (make docs)
    python tools/transcripts.py --check    # print a diff per stale block, exit 1
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI_NAME = "ane-kdma"
TIMEOUT_S = 300.0  # per command: the checked commands take seconds; this only bounds a hang

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(
    r"^\s*<!--\s*(?P<kind>transcript setup|transcript|illustrative)\s*"
    r"(?::\s*(?P<reason>.*?))?\s*-->\s*$"
)
OUTPUT_INFOS = ("", "text", "console")


def doc_files(repo: Path = REPO) -> list[Path]:
    """The documents whose transcripts are kept: the README and docs/*.md."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


@dataclass
class Block:
    """One fenced block: its lines (without the fences) and where they sit in the file."""

    path: Path
    start: int  # index of the opening fence line
    end: int  # index of the closing fence line
    info: str
    body: list[str]
    marker: str | None  # "transcript", "transcript setup", "illustrative" or None
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.start + 1}"

    @property
    def shows_output(self) -> bool:
        """A block a reader takes for the tool's output (so it must be marked)."""
        return self.info in OUTPUT_INFOS or any(line.startswith("$ ") for line in self.body)

    def shown_commands(self) -> list[list[str]]:
        """Each command as the block shows it: its `$ ` line and any continuation lines.

        A `$ ` line ending in a backslash continues on the next line, as in a shell,
        so a long command is shown within 100 columns and still pastes as one.
        """
        out: list[list[str]] = []
        going = False
        for line in self.body:
            if going:
                out[-1].append(line)
            elif line.startswith("$ "):
                out.append([line])
            else:
                continue
            going = line.endswith("\\")
        return out

    def commands(self) -> list[str]:
        """Each command as one line (continuations joined), without its `$ `."""
        return [
            " ".join(part.removesuffix("\\").strip() for part in shown)[2:]
            for shown in self.shown_commands()
        ]


def blocks(path: Path, lines: Sequence[str] | None = None) -> list[Block]:
    """Every fenced block of a Markdown file, with the marker on the line before it."""
    text = list(lines) if lines is not None else path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(text):
        m = _FENCE.match(text[i])
        if not m:
            i += 1
            continue
        fence, indent = m["fence"], m["indent"]
        j = i + 1
        while j < len(text) and not (
            text[j].strip().startswith(fence[0] * len(fence))
            and text[j].strip().strip(fence[0]) == ""
        ):
            j += 1
        if j == len(text):
            raise ValueError(f"{path.name}:{i + 1}: unclosed code fence")
        k = i - 1
        while k >= 0 and not text[k].strip():
            k -= 1
        mk = _MARKER.match(text[k]) if k >= 0 else None
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in text[i + 1 : j]
        ]
        out.append(
            Block(
                path,
                i,
                j,
                m["info"].strip(),
                body,
                mk["kind"] if mk else None,
                (mk["reason"] or "") if mk else "",
            )
        )
        i = j + 1
    return out


def environment(scratch: Path) -> dict[str, str]:
    """The fixed environment every command runs in (see the module's docstring)."""
    keep = ("HOME", "USER", "TMPDIR", "CCACHE_DIR", "XDG_CACHE_HOME")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    bindir = str(Path(sys.executable).parent)
    env.update(
        PATH=os.pathsep.join([bindir, "/usr/local/bin", "/usr/bin", "/bin"]),
        COLUMNS="100",
        LINES="50",
        NO_COLOR="1",
        TERM="dumb",
        LC_ALL="C.UTF-8",
        TZ="UTC",
        PYTHONHASHSEED="0",
        PWD=str(scratch),
    )
    return env


def cli_path() -> Path:
    """The installed `ane-kdma` beside this interpreter (the venv's), as a user runs it."""
    cli = Path(sys.executable).parent / CLI_NAME
    if not cli.exists():
        raise SystemExit(
            f"transcripts: no {CLI_NAME} beside {sys.executable}: run it with the venv's python"
        )
    return cli


@dataclass
class Runner:
    """Runs commands in one scratch folder per document, in a fixed environment."""

    scratch: Path
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        (self.scratch / "data").symlink_to(REPO / "data", target_is_directory=True)
        self.env = environment(self.scratch)

    def command(self, line: str) -> list[str]:
        words = shlex.split(line, comments=True)
        if not words or words[0] != CLI_NAME:
            raise ValueError(f"a transcript runs `{CLI_NAME}` only, not: {line}")
        return [str(cli_path()), *words[1:]]

    def run(self, line: str, where: str) -> list[str]:
        p = subprocess.run(
            self.command(line),
            cwd=self.scratch,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        if p.returncode != 0:
            raise RuntimeError(f"{where}: `{line}` exited {p.returncode}:\n{p.stderr.strip()}")
        return [s.rstrip() for s in p.stdout.rstrip("\n").splitlines()]

    def setup(self, code: str, where: str) -> None:
        p = subprocess.run(
            [sys.executable, "-c", code],
            cwd=self.scratch,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        if p.returncode != 0:
            raise RuntimeError(f"{where}: the setup block failed:\n{p.stderr.strip()}")


def render(block: Block, runner: Runner) -> list[str]:
    """The block's body as the tool prints it today."""
    out: list[str] = []
    for shown, line in zip(block.shown_commands(), block.commands(), strict=True):
        out.extend(shown)
        out.extend(runner.run(line, block.where))
    return out


@dataclass(frozen=True)
class Stale:
    where: str
    diff: str


def regenerate(path: Path, write: bool) -> list[Stale]:
    """Run every marked block of one document, top to bottom; rewrite the stale ones (write)."""
    text = path.read_text().splitlines()
    found = blocks(path, text)
    if not any(b.marker in ("transcript", "transcript setup") for b in found):
        return []
    stale: list[Stale] = []
    edits: list[tuple[Block, list[str]]] = []
    with tempfile.TemporaryDirectory(prefix="transcripts-") as tmp:
        runner = Runner(Path(tmp))
        for b in found:
            if b.marker == "transcript setup":
                runner.setup("\n".join(b.body), b.where)
            elif b.marker == "transcript":
                if not b.commands():
                    raise ValueError(f"{b.where}: a transcript block with no `$ {CLI_NAME}` line")
                body = render(b, runner)
                if body != b.body:
                    diff = difflib.unified_diff(
                        b.body, body, f"{b.where} (in the file)", "(the tool now)", lineterm=""
                    )
                    stale.append(Stale(b.where, "\n".join(diff)))
                    edits.append((b, body))
    if write and edits:
        for b, body in reversed(edits):  # bottom up, so earlier blocks keep their indices
            indent = text[b.start][: len(text[b.start]) - len(text[b.start].lstrip())]
            text[b.start + 1 : b.end] = [indent + s if s else s for s in body]
        path.write_text("\n".join(text) + "\n")
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="print a diff per stale block and exit 1")
    ap.add_argument("files", nargs="*", type=Path, help="documents (default: README.md, docs/*.md)")
    args = ap.parse_args(argv)
    stale: list[Stale] = []
    try:
        for path in args.files or doc_files():
            stale += regenerate(path, write=not args.check)
    except (OSError, ValueError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"transcripts: {exc}", file=sys.stderr)  # a failed command: its stderr follows
        return 2
    for s in stale:
        print(s.diff if args.check else f"rewrote {s.where}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
