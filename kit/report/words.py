"""The words around the numbers (§9), shared by report.md, report.html and release.md.

Formatting functions return text and print nothing. PyTorch is named with its version, mode,
precision and attention kernels; every M1 number travels with its model's size; a preparation
or preview says so wherever its numbers appear (rules 6 and 9, D3).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from kit.protocol import shipped
from kit.protocol.load import Model, Protocol
from kit.report import states
from kit.report.tables import Tables
from kit.results.documents import Versions
from kit.results.store import PROTOCOL, ResultsDir
from kit.telemetry import kernels

PREPARATION = "preparation (a development build, rule 9)"
# §9, word for word: how kernels are made
KERNELS_SENTENCE = (
    "Mica writes every kernel in its intermediate language; Dragon’s NVIDIA provider renders "
    "it as CUDA C, and NVIDIA’s NVRTC compiles it to the card’s machine code; matrix products "
    "run in cuBLAS."
)
DOMAIN = "mica-dev.com"  # §9: the domain
NOT_PROFILED = "not profiled"  # PyTorch's attention where no profiled run named its kernels


def shipped_of(rd: ResultsDir) -> shipped.Shipped:
    """The directory's protocol file against the one this kit ships (§3 rule 1)."""
    return shipped.against_shipped(rd.root / PROTOCOL)


SHIPPED_FIRST = 2  # the keys said in the first paragraph; every key at the report's end


def shipped_lines(found: shipped.Shipped, most: int | None = SHIPPED_FIRST) -> list[str]:
    """Where the protocol is not the shipped one: one paragraph first, naming the first `most`
    keys with both values (so the summary stays on the first screen), and, with `most` None,
    every key under a heading of its own at the report's end."""
    if found.shipped:
        return []
    keys = found.lines()
    if most is None:
        return ["## How this protocol differs from the shipped one", "", found.sentence(), "",
                *(f"- {line}" for line in keys), ""]  # fmt: skip
    named = "; ".join(keys[:most])
    more = len(keys) - most
    rest = f"; and {more} more" if more > 0 else ""
    return [
        f"**Not the shipped protocol**: {len(keys)} difference{'s' if len(keys) != 1 else ''} "
        f'({named}{rest}), each under "How this protocol differs from the shipped one" below.',
        "",
    ]


def ms(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 1e3:.3f}"


def mib(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x / 2**20:.0f}"


def range_ms(lo: float, hi: float) -> str:
    if math.isnan(lo):
        return "—"
    return f"{ms(lo)}–{ms(hi)}"


def pytorch_name(found: Versions, mode: str, precision: str, attention: str) -> str:
    """§9: PyTorch is named with its version, mode, precision and attention kernels, always."""
    version = found.side("pytorch").get("torch", "(version not recorded)")
    return f"PyTorch {version} {mode} mode, {precision}, attention: {attention}"


def is_preparation(found: Versions) -> bool:
    """Rule 9: a development build's numbers, or numbers under a torch other than the
    protocol's pin (--allow-torch), are preparation, wherever they appear."""
    if found.side("pytorch").get("torch_other_allowed"):
        return True
    return found.side("contender").get("build_kind") == "development"


def preparation_label(found: Versions) -> str:
    """Rule 9's label for a directory's numbers, naming why they are preparation; "" if not."""
    pytorch = found.side("pytorch")
    if pytorch.get("torch_other_allowed"):
        return (
            f"preparation (torch {pytorch.get('torch')}, not the protocol's "
            f"{pytorch.get('torch_pinned')}, rule 9)"
        )
    return PREPARATION if is_preparation(found) else ""


def model_words(
    protocol_models: Mapping[str, Model], model: str, smoke_args: list[str] | None = None
) -> str:
    """§9: every number travels with its model's size (M1's sentence above all).

    A smoke series' model is the protocol's scaled down, and is never given the real one's size.
    """
    m = protocol_models.get(model)
    if m is None:
        return model
    if smoke_args is not None:
        size = m.parameters.replace(" ", "-")
        return (
            f"{m.label} ({model}) scaled down for the CPU smoke series "
            f"({' '.join(smoke_args)}), not the protocol's {size}-parameter model"
        )
    return f"{m.label} ({model}): {m.size_sentence}"


def model_short(protocol_models: Mapping[str, Model], model: str, smoke: bool = False) -> str:
    """A model in a plot title or a summary cell: "M1, 10.7 million parameters"; the sentence
    itself stands in the caption beside it."""
    m = protocol_models.get(model)
    if m is None:
        return model
    return f"{m.label}, scaled down" if smoke else f"{m.label}, {m.parameters} parameters"


def smoke_args(rd: ResultsDir, protocol: Protocol) -> list[str] | None:
    """The smoke series' scaling of the models, or None for a protocol series."""
    return list(protocol.smoke.args) if rd.manifest().smoke else None


def labels(t: Tables) -> list[str]:
    """What every title, table caption and plot of a series says of itself (rule 6, D3)."""
    out = []
    if t.preview:
        out.append(states.PREVIEW)
    if not t.card_named:
        out.append(states.NOT_NAMED)
    return out


def caption(t: Tables, text: str) -> str:
    """A table's caption: what it shows, and the series' labels beside every number."""
    return caption_words(text, labels(t))


def caption_words(text: str, said: list[str]) -> str:
    return f"*{'; '.join([text, *said])}.*"


def attention_by_config(t: Tables) -> dict[str, str]:
    """Each profiled PyTorch configuration's attention, named from its kernels (§6)."""
    out: dict[str, str] = {}
    if not t.kernels.empty:
        for config, rows in t.kernels.groupby("config", sort=False):
            if str(config).split("/")[2:3] == ["pytorch"]:
                out[str(config)] = kernels.attention_kind(rows)
    return out


def config_named(found: Versions, attention: dict[str, str], c: pd.Series) -> str:
    """§9: a configuration as the report names it; PyTorch with version, mode, precision and
    attention kernels, every time."""
    if c["side"] == "pytorch":
        kind = attention.get(c["config"], NOT_PROFILED)
        return pytorch_name(found, c["variant"], c["precision"], kind)
    role = "primary" if c.get("primary", True) else "secondary"
    return f"contender {c['variant']} ({role}), {c['precision']}"


def step_cells(
    median: float, lo: float, hi: float, state: str, publication: str
) -> tuple[str, str]:
    """The median and range cells: the numbers, or the state, or why they are withheld."""
    if state != states.State.COMPLETE.value:
        return state, "—"
    if states.Publication.of(publication) is states.Publication.WITHHELD:
        return publication, "—"
    return ms(median), range_ms(lo, hi)


def versions_line(found: Versions) -> str:
    """Rule 4's versions in one line; a version not recorded (null) is left out, never "None"."""
    rows = versions_rows(found)
    return ", ".join(f"{k} {v}" for k, v in rows) + " (all in versions.json)"


PYTORCH_VERSIONS = ("python", "torch", "triton", "cudnn", "numpy", "cuda_runtime", "nanogpt_commit")
CARD_VERSIONS = ("driver_version", "cuda_driver_version", "uuid")


def versions_rows(found: Versions) -> list[tuple[str, str]]:
    """Rule 4's versions as (what, version) pairs, in a fixed order; null ones left out."""
    py = found.side("pytorch")
    card = found.card
    rows = [("card", str(card.get("name", "?")))]
    rows += [(key, str(card[key])) for key in CARD_VERSIONS if card.get(key)]
    rows += [(key, str(py[key])) for key in PYTORCH_VERSIONS if py.get(key) is not None]
    # the key kit.executors.docker.connection.versions() writes
    engine = found.executor
    if engine.get("docker_engine"):
        rows.append(("Docker", str(engine["docker_engine"])))
    return rows


def names(rd: ResultsDir, t: Tables, config_ids: pd.Series) -> list[str]:
    """§9's naming of each configuration id of a table."""
    found = rd.versions()
    attention = attention_by_config(t)
    by_id = {c["config"]: c for _, c in t.configurations.iterrows()}
    return [config_named(found, attention, by_id[c]) if c in by_id else str(c) for c in config_ids]


def models_of(t: Tables, table: pd.DataFrame, protocol: Protocol, rd: ResultsDir) -> str:
    """§9: the size sentence of every model whose numbers a table holds."""
    by_id = dict(zip(t.configurations["config"], t.configurations["model"]))
    models = dict.fromkeys(by_id.get(c, "") for c in table["config"])
    words = [model_words(protocol.models, m, smoke_args(rd, protocol)) for m in models if m]
    return "; ".join(words)
