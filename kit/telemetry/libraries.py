"""Which shared libraries a run opened, read from the dynamic loader's own log (amendment 2).

Until the Mica runtime reports which modules NVRTC compiled (step 5e), a series records which
NVIDIA libraries the loader opened during each configuration's first run, the discarded one: an
opened libnvrtc shows that NVRTC compiled at least one module, and the list shows what each side
needs from NVIDIA at run time (§8).

The executors run that program with `LD_DEBUG=libs` and `LD_DEBUG_OUTPUT=<dir>/ld`, so glibc
writes one file per process, `ld.<pid>` (an `exec` keeps the pid, so a file may hold several
programs). glibc prints every line as `<pid, right-aligned>:\\t<message>`; with `libs`:

    find library=libz.so.1 [0]; searching            a search by name (DT_NEEDED or dlopen)
     search cache=/etc/ld.so.cache                   where it looks
      trying file=/lib/x86_64-linux-gnu/libz.so.1    each candidate
    calling init: /lib/x86_64-linux-gnu/libz.so.1    a library loaded and its constructors run

A library is *opened* when its `calling init:` line appears: that line also catches libraries
opened by a full path, which print no search, and it is printed only for an object that really
loaded. A search by name that no `calling init:` of that name follows is kept apart as
*searched*: either it failed (an optional library the program probes for) or the library has no
constructors, which the log cannot tell apart.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = 1

_LINE = re.compile(r"^\s*(\d+):\t(.*)$")
_INIT = re.compile(r"^calling init: (.+)$")
_FIND = re.compile(r"^find library=(\S+) \[\d+\]; searching$")

# NVIDIA's libraries by their file-name stems: the driver's (libcuda, libnvidia-*), the CUDA
# toolkit's, and the libraries PyTorch's wheels bring (cuDNN, NCCL, cuSPARSELt, ...). A wheel
# may vendor one under an auditwheel name with a hash (libnvrtc-b51b459d.so.12).
_NVIDIA = re.compile(
    r"^lib(?:nvidia-[\w.-]+"
    r"|(?:cuda|cudart|cublas|cublasLt|nvrtc|nvrtc-builtins|nvrtc\.alt|cudnn\w*|nccl|cufft|cufftw"
    r"|curand|cusparse|cusparseLt|cusolver|cusolverMg|nvJitLink|nvToolsExt|nvtx3interop|cupti"
    r"|nvperf_host|nvperf_target|cufile|cufile_rdma|nvfatbin|nvblas|nvjpeg|npp\w*|cudadebugger"
    r"|nvcuvid|nvoptix|nvptxcompiler_static|nvml|cudss|cutensor\w*|cuda-checkpoint)"
    r"(?:-[0-9a-f]{8})?(?:\.so(?:\.[\d.]+)?|-[\d.]+\.so(?:\.[\d.]+)?))$"
)
_NVRTC = re.compile(r"^libnvrtc(?:\.alt)?(?:-[0-9a-f]{8})?\.so")


def is_nvidia(name: str) -> bool:
    """Whether a library's file name is one of NVIDIA's (the driver, CUDA, cuDNN, NCCL...)."""
    return bool(_NVIDIA.match(Path(name).name))


@dataclass(frozen=True)
class OpenedLibrary:
    name: str  # the file name, e.g. libcublasLt.so.12
    path: str  # where the loader found it, as the program saw it (inside a container)
    nvidia: bool
    processes: int  # how many traced processes opened it


@dataclass(frozen=True)
class LibraryTable:
    """The libraries a run's processes opened; the table of one configuration (amendment 2)."""

    processes: int  # processes (log files) read
    opened: tuple[OpenedLibrary, ...]  # sorted by name, then path
    searched: tuple[str, ...]  # names searched for but never opened (see the module docs)

    @property
    def nvidia(self) -> tuple[OpenedLibrary, ...]:
        return tuple(lib for lib in self.opened if lib.nvidia)

    @property
    def nvrtc_opened(self) -> bool:
        """An opened libnvrtc: NVRTC compiled at least one module (amendment 2)."""
        return any(_NVRTC.match(lib.name) for lib in self.opened)

    def to_record(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "processes": self.processes,
            "nvrtc_opened": self.nvrtc_opened,
            "opened": [dataclasses.asdict(lib) for lib in self.opened],
            "searched": list(self.searched),
        }


@dataclass(frozen=True)
class _Process:
    opened: frozenset[str]  # paths
    searched: frozenset[str]  # names


def _parse(lines: Iterable[str]) -> _Process:
    opened: set[str] = set()
    searched: set[str] = set()
    for line in lines:
        m = _LINE.match(line.rstrip("\n"))
        if not m:
            continue  # a message's blank continuation line, or a torn last line
        message = m.group(2)
        if init := _INIT.match(message):
            opened.add(init.group(1))
        elif find := _FIND.match(message):
            searched.add(find.group(1))
    return _Process(frozenset(opened), frozenset(searched))


def parse_ld_debug(text: str) -> LibraryTable:
    """The table of one process's log (the text of one `ld.<pid>` file)."""
    return _table([_parse(text.splitlines())])


def read_library_dir(path: Path) -> LibraryTable:
    """The table of a run: every `ld.*` file the loader wrote into `path`."""
    processes = []
    for file in sorted(path.glob("ld.*")):
        with open(file, encoding="utf-8", errors="replace") as f:
            processes.append(_parse(f))
    return _table(processes)


def _table(processes: list[_Process]) -> LibraryTable:
    counts: dict[str, int] = {}
    for proc in processes:
        for p in proc.opened:
            counts[p] = counts.get(p, 0) + 1
    opened = tuple(
        OpenedLibrary(name=Path(p).name, path=p, nvidia=is_nvidia(p), processes=n)
        for p, n in sorted(counts.items(), key=lambda item: (Path(item[0]).name, item[0]))
    )
    names = {lib.name for lib in opened}
    searched = {name for proc in processes for name in proc.searched}
    return LibraryTable(
        processes=len(processes),
        opened=opened,
        searched=tuple(sorted(n for n in searched if Path(n).name not in names)),
    )


def tables_by_configuration(dirs: Mapping[str, Path]) -> dict[str, LibraryTable]:
    """Each configuration's table, from the library folder of its first (discarded) run."""
    return {config: read_library_dir(path) for config, path in dirs.items()}


TSV_HEADER = ("configuration", "library", "path", "nvidia", "processes")


def tsv_lines(tables: Mapping[str, LibraryTable]) -> list[str]:
    """Every opened library of every configuration, one TSV line each, header first."""
    lines = ["\t".join(TSV_HEADER)]
    for config, table in tables.items():
        for lib in table.opened:
            nvidia = "yes" if lib.nvidia else "no"
            lines.append(f"{config}\t{lib.name}\t{lib.path}\t{nvidia}\t{lib.processes}")
    return lines


def summary_lines(tables: Mapping[str, LibraryTable]) -> list[str]:
    """A Markdown table: per configuration, the NVIDIA libraries opened and whether NVRTC was."""
    lines = [
        "| configuration | NVIDIA libraries opened | libnvrtc opened |",
        "| --- | --- | --- |",
    ]
    for config, table in tables.items():
        names = ", ".join(sorted({lib.name for lib in table.nvidia})) or "none"
        lines.append(f"| {config} | {names} | {'yes' if table.nvrtc_opened else 'no'} |")
    return lines
