"""§8 told whole: each measured image's size, what it holds beyond its side's minimum (with the
sizes), the ratio of the two measured sizes, and beside it, labelled, the ratio without those
additions. Everything from the recorded footprints (footprint/<side>/ and footprint/<side>/base/),
never typed in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kit.executors.docker import footprint
from kit.results.planned import SIDE_LABELS

FOLDER = "footprint"
# a series' folders by side; "mica": the contender's image as `micakit footprint OUT` names it
SIDE_NAMES = {**SIDE_LABELS, "mica": "Mica"}


@dataclass(frozen=True)
class Measured:
    side: str
    image: str
    size_bytes: int
    files: int
    additions: tuple[footprint.Addition, ...] | None  # None: its base's file list was not recorded


def measured(root: Path) -> list[Measured]:
    """The measured images a results directory (or `micakit footprint OUT`) recorded."""
    out = []
    folder = root / FOLDER
    for side in SIDE_NAMES:
        record = folder / side / footprint.JSON_NAME
        if not record.is_file():
            continue
        info = json.loads(record.read_text("utf-8"))
        files = footprint.read_files(folder / side / info["files"]["list"])
        base = folder / side / footprint.BASE / footprint.FILES_NAME
        additions = (
            tuple(footprint.beyond_minimum(side, files, footprint.read_files(base)))
            if base.is_file()
            else None
        )
        out.append(Measured(side, info["image"], int(info["size_bytes"]), len(files), additions))
    return out


# what the Debian packages an image adds are for, by side (the Dockerfile says why it adds them)
PACKAGES_FOR = {"pytorch": "the compiler torch.compile needs (Dockerfile.pytorch)"}


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f}"


def size(n: int) -> str:
    """Bytes as a reader weighs them: KiB below a MiB, MiB below a GiB, GiB above."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"


def footprint_lines(root: Path) -> list[str]:
    """Markdown for §8, or nothing where no image was measured (a local series)."""
    images = measured(root)
    if not images:
        return []
    lines = ["## Footprint (§8)", ""]
    lines += [_sizes_table(images), ""]
    lines += _additions_lines(images)
    return lines + _ratio_lines(images)


def _sizes_table(images: list[Measured]) -> str:
    """Each measured image's size, entries and what it holds beyond its side's minimum."""
    rows = []
    for m in images:
        rows.append(
            {
                "side": SIDE_NAMES[m.side],
                "measured image": m.image,
                "size": size(m.size_bytes),
                "entries": m.files,
                "beyond the side's minimum": "not told: its base's file list was not recorded"
                if m.additions is None
                else size(sum(a.size_bytes for a in m.additions)),
            }
        )
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def _additions_lines(images: list[Measured]) -> list[str]:
    """What each image holds beyond its side's minimum, where its base's list was recorded."""
    extra = [
        {
            "side": SIDE_NAMES[m.side],
            "beyond the minimum": a.what
            + (f": {PACKAGES_FOR[m.side]}" if a.packages and m.side in PACKAGES_FOR else ""),
            "entries": a.files,
            "size": size(a.size_bytes),
            "Debian packages": ", ".join(a.packages),
        }
        for m in images
        for a in m.additions or ()
    ]
    if not extra:
        return []
    return [
        "What each image holds beyond its side's minimum (§8: Mica's the program and the "
        "libraries it opens, PyTorch's Python and what `pip install torch numpy` brings), "
        "from its file list against its base image's:",
        "",
        pd.DataFrame(extra).to_markdown(index=False, disable_numparse=True),
        "",
    ]


def _ratio_lines(images: list[Measured]) -> list[str]:
    """§8's ratio of the two measured sizes, where both sides' images were measured."""
    by_side = {m.side: m for m in images}
    mica = by_side.get("contender") or by_side.get("mica")
    torch = by_side.get("pytorch")
    if not (mica and torch):
        return []
    lines = []
    ratio = footprint.footprint_ratio(
        {"image": mica.image, "size_bytes": mica.size_bytes},
        {"image": torch.image, "size_bytes": torch.size_bytes},
    )
    lines.append(
        f"- Footprint ratio (§8, the two measured sizes): PyTorch's {mib(torch.size_bytes)} "
        f"MiB / {SIDE_NAMES[mica.side]}'s {mib(mica.size_bytes)} MiB = "
        f"{ratio['pytorch_over_mica']:.2f}"
    )
    if mica.additions is not None and torch.additions is not None:
        without = footprint.ratio_without(
            mica.size_bytes, torch.size_bytes, list(mica.additions), list(torch.additions)
        )
        lines.append(
            f"- Without what each image holds beyond its side's minimum (not §8's ratio; "
            f"shown so that the additions can be weighed): {without:.2f}"
        )
    lines.append(f"- {ratio['note']}")
    lines.append("")
    return lines
