"""§6 graph-break runs: one run per mode under TORCH_LOGS=graph_breaks,recompiles, its log
published and its counts in the results. This module reads the counts from the log.

What torch 2.x prints (torch/_dynamo/symbolic_convert.py and guards.py), each line behind a glog
prefix such as `V1129 10:35:25.781000 3431 site-packages/torch/_dynamo/...py:5124] [0/0]
[__graph_breaks] `:

- torch 2.5 and later: "Graph break in user code at FILE:LINE" for a break's first sighting and
  "Graph break (user stack suppressed due to duplicate graph break) in user code at FILE:LINE"
  for every later one, each followed by "Graph Break Reason: ...";
- torch 2.1 to 2.4: "Graph break: [REASON ]from user code at:" followed by the user stack
  (`File "FILE", line N, in FN`), printed once per site; later breaks at a site are not logged;
- every version: "Recompiling function NAME in FILE:LINE" under [__recompiles], and a warning
  "torch._dynamo hit config.recompile_limit (N)" (cache_size_limit before 2.6) when dynamo gives
  up compiling a frame.

The parser reads the log as text, whatever else is in it (the training's own lines, the kit's
line stamps, `[rank0]:` prefixes); it never imports torch.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# §6: the environment of a graph-break run.
GRAPH_BREAK_ENV = {"TORCH_LOGS": "graph_breaks,recompiles"}

# The prefix of a logging record: glog style (torch 2.2 and later, repeated on every line of a
# multi-line record) or the older `[date time] [frame] logger: [LEVEL] ` style.
_PREFIX = re.compile(
    r"(?:[VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+ [^\]\s]+\] "
    r"|\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d+\] (?:\[[^\]]*\] )?[\w.]+: \[[A-Z]+\] )"
)
_STAMP = re.compile(r"^\d{6,} ")  # the kit's own line stamp, "<monotonic_ns> <line>"
_TAGS = re.compile(r"^(?:\[[^\]]*\] )+")  # "[0/0] [__graph_breaks] "

_BREAK_AT = re.compile(
    r"^Graph break (?P<dup>\(user stack suppressed due to duplicate graph break\) )?"
    r"in user code at (?P<site>.+:\d+)\s*$"
)
_BREAK_OLD = re.compile(r"^Graph break: (?P<reason>.*?)\s*from user code at:?\s*$")
_STACK_FILE = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+)')
_REASON = re.compile(r"^Graph Break Reason: (?P<reason>.*)$")
_RECOMPILE = re.compile(r"^Recompiling function (?P<function>\S+) in (?P<site>.+:\d+)\s*$")
_LIMIT = re.compile(r"torch\._dynamo hit config\.(?:recompile_limit|cache_size_limit)")


@dataclass(frozen=True)
class GraphBreak:
    """One graph break as the log tells it."""

    site: str  # FILE:LINE of the user code where dynamo broke the graph
    reason: str
    repeated: bool  # logged as a duplicate of an earlier break at the same site


@dataclass(frozen=True)
class GraphBreakCounts:
    """The counts §6 puts in the results, with what they were counted from."""

    graph_breaks: int
    break_sites: int
    recompiles: int
    recompile_limit_hits: int
    breaks_per_site: dict[str, int] = field(default_factory=dict)
    recompiles_per_function: dict[str, int] = field(default_factory=dict)  # "NAME at FILE:LINE"
    breaks: tuple[GraphBreak, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "graph_breaks": self.graph_breaks,
            "break_sites": self.break_sites,
            "recompiles": self.recompiles,
            "recompile_limit_hits": self.recompile_limit_hits,
            "breaks_per_site": dict(self.breaks_per_site),
            "recompiles_per_function": dict(self.recompiles_per_function),
            "breaks": [
                {"site": b.site, "reason": b.reason, "repeated": b.repeated} for b in self.breaks
            ],
        }


@dataclass(frozen=True)
class _Line:
    prefixed: bool
    tags: str
    message: str


def _split(line: str) -> _Line:
    line = _STAMP.sub("", line.rstrip("\r\n"), count=1)
    found = _PREFIX.search(line)
    if found is None:
        return _Line(prefixed=False, tags="", message=line)
    rest = line[found.end() :]
    tags = _TAGS.match(rest)
    return _Line(
        prefixed=True,
        tags=(tags.group(0) if tags else "") + line[: found.end()],
        message=rest[tags.end() :] if tags else rest,
    )


def _reason_after(lines: list[_Line], start: int) -> str:
    """The reason logged after a break's first line: "Graph Break Reason: X", and when X only
    says which instruction broke ("...when attempting to trace CALL: ...:"), the next line too,
    which names the kind of break."""
    for index in range(start, min(start + 3, len(lines))):
        reason = _REASON.match(lines[index].message)
        if reason is None:
            continue
        text = reason.group("reason").strip()
        if text.endswith(":"):
            detail = next(
                (ln.message.strip() for ln in lines[index + 1 : index + 4] if ln.message.strip()),
                "",
            )
            text = f"{text} {detail}".strip()
        return text
    return ""


def _old_site(lines: list[_Line], start: int) -> str:
    """The innermost frame of the user stack that follows an old-style break line."""
    site = ""
    for line in lines[start:]:
        frame = _STACK_FILE.match(line.message)
        if frame is not None:
            site = f"{frame.group('file')}:{frame.group('line')}"
        elif not line.message.startswith(" ") or not line.message.strip():
            break  # the stack ended: a new record, the program's own output, or a blank line
    return site or "unknown"


def parse_graph_break_log(text: str) -> GraphBreakCounts:
    """Count the graph breaks, their distinct sites and the recompilations in a log written
    under TORCH_LOGS=graph_breaks,recompiles (stdout and stderr together, stamped or not).

    With torch 2.5 and later every break is counted; older versions log a site's first break
    only, so there `graph_breaks` counts sites seen, not breaks taken.
    """
    lines = [_split(line) for line in text.splitlines()]
    breaks: list[GraphBreak] = []
    recompiles: Counter[str] = Counter()
    limit_hits = 0
    for index, line in enumerate(lines):
        message = line.message
        if not message.startswith(("Graph break", "Recompiling function")) and not _LIMIT.search(
            message
        ):
            continue
        if "__recompiles_verbose" in line.tags:
            continue  # the verbose artifact repeats what [__recompiles] says
        # A prefixed break counts only from the graph_breaks artifact: dynamo also warns
        # "Graph break: from user code at:" for Tensor.item(), beside the break it logs itself.
        counted = not line.prefixed or "__graph_breaks" in line.tags
        if not counted and message.startswith("Graph break"):
            continue
        if found := _BREAK_AT.match(message):
            breaks.append(
                GraphBreak(
                    site=found.group("site"),
                    reason=_reason_after(lines, index + 1),
                    repeated=found.group("dup") is not None,
                )
            )
        elif found := _BREAK_OLD.match(message):
            breaks.append(
                GraphBreak(
                    site=_old_site(lines, index + 1),
                    reason=found.group("reason"),
                    repeated=False,
                )
            )
        elif found := _RECOMPILE.match(message):
            recompiles[f"{found.group('function')} at {found.group('site')}"] += 1
        elif _LIMIT.search(message):
            limit_hits += 1
    per_site = Counter(b.site for b in breaks)
    return GraphBreakCounts(
        graph_breaks=len(breaks),
        break_sites=len(per_site),
        recompiles=sum(recompiles.values()),
        recompile_limit_hits=limit_hits,
        breaks_per_site=dict(per_site),
        recompiles_per_function=dict(recompiles),
        breaks=tuple(breaks),
    )
