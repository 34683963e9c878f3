"""A results directory's documents, typed: its manifest, its plan and its versions.

Each is a frozen dataclass with `to_json` (the file exactly as the kit has always written it,
key for key and in order) and `from_json` (a file read back: an older schema upgraded, a newer
one refused, naming it). Readers ask them by attribute; a key a reader mistypes is an error
mypy finds, not a `None` that reaches a report.

A check's directory (kind "correctness") has the same three documents: its manifest holds the
check's spec where a series' holds the series', and its plan's runs name a side and a seed
where a series' name a configuration and a round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kit.errors import UserError
from kit.results.planned import Config, PlannedRun

# the schema of manifest.json, plan.json and versions.json; 2: its key is "schema_version" (as in
# every file the kit writes), "schema" before
SCHEMA = 2
VERSION_KEY, OLD_VERSION_KEY = "schema_version", "schema"


def version_key(schema: int) -> str:
    """The key a document of `schema` keeps its version under: an earlier directory's own."""
    return VERSION_KEY if schema >= 2 else OLD_VERSION_KEY


def refuse_newer(d: Mapping[str, Any], where: str) -> int:
    """The document's schema; one a newer kit wrote is refused (0: before schemas were kept)."""
    schema = d.get(VERSION_KEY, d.get(OLD_VERSION_KEY, 0))
    if not isinstance(schema, int) or schema > SCHEMA:
        raise UserError(
            f"{where} has results schema {schema!r}; this kit reads schema {SCHEMA} and older",
            "read it with the kit version named in the directory's manifest.json (kit_version)",
        )
    return schema


def _malformed(where: str, e: Exception) -> UserError:
    return UserError(
        f"{where} is not as the kit writes it ({type(e).__name__}: {e})",
        "`micakit verify` names what changed; restore the file from a copy of the directory",
    )


# -- the manifest ------------------------------------------------------------------------------

# the header every manifest has, in the order the engine writes it (kit.engine.engine)
_HEADER = ("kit_version", "kit_commit", "protocol_name", "protocol_sha256",
           "amendments_in_force", "command", "date_utc", "host", "platform", "python",
           "executor", "executor_versions")  # fmt: skip


@dataclass(frozen=True)
class Manifest:
    """manifest.json: who made the directory, under which protocol file, with which command,
    and what it measures (a series' spec, or a check's) with the options it was resolved from.
    Written last before the first run: a directory without one never started."""

    kit_version: str = ""  # "": not recorded (no kit writes a manifest without these two)
    protocol_sha256: str = ""
    kit_commit: str = "unknown"
    protocol_name: str = ""
    amendments_in_force: tuple[int, ...] = ()
    command: tuple[str, ...] = ()
    date_utc: str = ""
    host: str = ""
    platform: str = ""
    python: str = ""
    executor: str = ""  # "local" or "docker"; "" where an old kit did not record it
    executor_versions: Mapping[str, Any] = field(default_factory=dict)
    kind: str | None = None  # None: a series; "correctness": a check
    series: Mapping[str, Any] | None = None  # a series' spec (kit.engine.series.SeriesSpec)
    check: Mapping[str, Any] | None = None  # a check's spec (kit.correctness.check_plan.CheckSpec)
    options: Mapping[str, Any] = field(default_factory=dict)  # as resolved from the command
    inputs_sha256: Mapping[str, str] | None = None  # a series': every file read beside it
    schema: int = SCHEMA

    # -- what readers ask of a series' spec ---------------------------------------------------

    @property
    def is_check(self) -> bool:
        return self.kind == "correctness"

    @property
    def spec(self) -> Mapping[str, Any]:
        """What the directory measures: the series' spec, or the check's."""
        return (self.check if self.is_check else self.series) or {}

    @property
    def card(self) -> str:
        return str(self.spec.get("card", ""))

    @property
    def device(self) -> str:
        return str(self.spec.get("device", ""))

    @property
    def smoke(self) -> bool:
        return bool(self.spec.get("smoke", False))

    # -- the file -------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {version_key(self.schema): self.schema}
        if self.kind:
            out["kind"] = self.kind
        for name in _HEADER:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else _plain(value)
        if self.series is not None:
            out["series"] = _plain(self.series)
        if self.check is not None:
            out["check"] = _plain(self.check)
        out["options"] = _plain(self.options)
        if self.inputs_sha256 is not None:
            out["inputs_sha256"] = dict(self.inputs_sha256)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "manifest.json") -> Manifest:
        """Schema 0 (before schemas were kept) lacked the executor's versions and the check's
        kind; its other keys are read as they are. A key this kit does not know is refused."""
        schema = refuse_newer(d, where)
        known = {
            VERSION_KEY,
            OLD_VERSION_KEY,
            "kind",
            *_HEADER,
            "series",
            "check",
            "options",
            "inputs_sha256",
        }
        unknown = sorted(set(d) - known)
        if unknown:
            raise UserError(
                f"{where} holds keys this kit does not know: {', '.join(unknown)}",
                "read it with the kit version named in its kit_version",
            )
        try:
            return cls(
                schema=schema,
                kind=d.get("kind"),
                kit_version=str(d.get("kit_version") or ""),
                kit_commit=str(d.get("kit_commit") or "unknown"),
                protocol_name=str(d.get("protocol_name", "")),
                protocol_sha256=str(d.get("protocol_sha256") or ""),
                amendments_in_force=tuple(int(a) for a in d.get("amendments_in_force") or ()),
                command=tuple(str(a) for a in d.get("command") or ()),
                date_utc=str(d.get("date_utc", "")),
                host=str(d.get("host", "")),
                platform=str(d.get("platform", "")),
                python=str(d.get("python", "")),
                executor=str(d.get("executor") or ""),
                executor_versions=dict(d.get("executor_versions") or {}),
                series=d.get("series"),
                check=d.get("check"),
                options=dict(d.get("options") or {}),
                inputs_sha256=d.get("inputs_sha256"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise _malformed(where, e) from None


def _plain(value: Any) -> Any:
    """A mapping or tuple as JSON writes it (tuples as lists), recursively."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# -- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NotMeasured:
    """A model and precision the card cannot measure (D3: bfloat16 below 8.0 is emulated)."""

    model: str
    precision: str
    why: str


@dataclass(frozen=True)
class Plan:
    """plan.json: the configurations and every planned run in order, fixed before run 0."""

    order: tuple[PlannedRun, ...]
    configurations: tuple[Config, ...] = ()  # a check's plan has none: its spec names both
    primary: Mapping[str, bool] | None = None  # a configuration the verdicts read (amendment 4)
    not_measured: tuple[NotMeasured, ...] | None = None
    schema: int = SCHEMA
    aa: tuple[str, ...] = ()  # the configurations of the A/A rounds; none before they existed

    @property
    def by_id(self) -> dict[str, Config]:
        return {c.id: c for c in self.configurations}

    def timed(self, config: str) -> list[PlannedRun]:
        """A configuration's timed runs, in order."""
        return [r for r in self.order if r.config == config and r.timed]

    def order_json(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.order]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {version_key(self.schema): self.schema}
        if self.configurations or self.primary is not None:
            out["configurations"] = [c.to_json() for c in self.configurations]
        if self.primary is not None:
            out["primary"] = dict(self.primary)
        if self.not_measured is not None:
            out["not_measured"] = [vars(n) for n in self.not_measured]
        if self.aa:
            out["aa"] = list(self.aa)
        out["order"] = self.order_json()
        return out

    @classmethod
    def of(cls, order: Sequence[Mapping[str, Any]], **fields: Any) -> Plan:
        """The plan an engine writes: its runs as their kinds give them, and a series' fields."""
        return cls.from_json({VERSION_KEY: SCHEMA, **fields, "order": list(order)})

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "plan.json") -> Plan:
        schema = refuse_newer(d, where)
        try:
            configurations = tuple(Config.from_json(c) for c in d.get("configurations") or ())
            missing = d.get("not_measured")
            return cls(
                schema=schema,
                order=tuple(PlannedRun.from_json(r) for r in d["order"]),
                configurations=configurations,
                primary=None if d.get("primary") is None else dict(d["primary"]),
                not_measured=None if missing is None else tuple(NotMeasured(**n) for n in missing),
                aa=tuple(str(c) for c in d.get("aa") or ()),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise _malformed(where, e) from None


# -- the versions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Versions:
    """versions.json (rule 4): the kit, the card, the executor, each side's own versions (a
    probe's answers: they differ by side and are kept as the probe gave them) and, under
    Docker, the measured images with their ids and registry digests."""

    kit: Mapping[str, Any] = field(default_factory=dict)  # version and commit
    card: Mapping[str, Any] = field(default_factory=dict)  # NVML's name, driver, uuid, ...
    executor: Mapping[str, Any] = field(default_factory=dict)  # name and engine versions
    sides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # pytorch, contender
    images: Mapping[str, Mapping[str, Any]] | None = None  # side or "runner" -> id, digests

    def side(self, name: str) -> Mapping[str, Any]:
        """A side's versions; empty where it was not recorded."""
        return self.sides.get(name) or {}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kit": dict(self.kit),
            "card": dict(self.card),
            "executor": dict(self.executor),
        }
        out.update({name: _plain(v) for name, v in self.sides.items()})
        if self.images is not None:
            out["images"] = _plain(self.images)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "versions.json") -> Versions:
        refuse_newer(d, where)
        try:
            header = (VERSION_KEY, OLD_VERSION_KEY, "kit", "card", "executor")
            rest = {k: v for k, v in d.items() if k not in header}
            images = rest.pop("images", None)
            return cls(
                kit=dict(d.get("kit") or {}),
                card=dict(d.get("card") or {}),
                executor=dict(d.get("executor") or {}),
                sides={k: dict(v) for k, v in rest.items()},
                images=None if images is None else dict(images),
            )
        except (TypeError, ValueError) as e:
            raise _malformed(where, e) from None


ANSWERS = "answers"  # a program's answers when it gave no version: recorded, never compared
# the registry names an image has: a push after the start adds one to the same image, whose id
# is compared; recorded, never compared
REPO_DIGESTS = "repo_digests"
# what a later kit records that an earlier one did not read: absent from a series' versions.json,
# not compared at its resume (the card's serial and VBIOS, read since merge tells machines apart)
LATER = frozenset({"card.serial", "card.vbios_version"})


# the resume that keeps its versions: said whole, so a fix line never begins with "or"
WHERE_IT_STARTED = "resume it on the machine it started on, with the same card, images and kit"


def check_unchanged(
    recorded: dict, now: dict, image_id: Callable[[str], str | None] | None = None
) -> None:
    """Refuse to resume when any version differs; name every one that did. A measured image
    that changed is named with how to get the series' own back (`image_id`: whether the engine
    still holds an image, by its id)."""
    changed = []

    def walk(a: Any, b: Any, where: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted((set(a) | set(b)) - {ANSWERS, REPO_DIGESTS}):
                key = f"{where}.{k}" if where else k
                if key in LATER and k not in a:
                    continue  # an earlier kit did not read it
                walk(a.get(k), b.get(k), key)
        elif a != b:
            changed.append(f"{where}: {a!r} then, {b!r} now")

    walk(recorded, now, "")
    if changed:
        told, fixes = _images_changed(recorded, now, image_id)
        raise UserError(
            "the versions this series runs under changed since it started:\n  "
            + "\n  ".join(changed + told),
            "; ".join([*fixes, f"{'or ' if fixes else ''}{WHERE_IT_STARTED}"])
            + "; or start a new series in a new directory (`micakit series --out NEW_DIR ...`)",
        )


def _images_changed(
    recorded: Mapping[str, Any],
    now: Mapping[str, Any],
    image_id: Callable[[str], str | None] | None,
) -> tuple[list[str], list[str]]:
    """Each measured image whose id changed, in words, and how to get the series' own back:
    by its id where the engine still holds it, else by its registry digest (versions.json)."""
    told, fixes = [], []
    for name, then in sorted((recorded.get("images") or {}).items()):
        later = (now.get("images") or {}).get(name) or {}
        old, new, ref = then.get("image_id"), later.get("image_id"), then.get("image")
        if not old or old == new:
            continue
        line = (
            f"the {name} image {ref} is {str(new)[:19]}… now; the series started with {old[:19]}…"
        )
        program = (recorded.get(name) or {}).get("program_sha256")
        if program and program == (now.get(name) or {}).get("program_sha256"):
            line += (
                f": the program in it is the same (SHA-256 {program[:12]}…), only the image "
                "around it changed (its libraries or its base)"
            )
        told.append(line)
        digests = list(then.get(REPO_DIGESTS) or [])
        if image_id is not None and image_id(old) is not None:
            fixes.append(f"get the series' {name} image back: `docker tag {old} {ref}`")
        elif digests:
            fixes.append(
                f"get the series' {name} image back by its digest in versions.json: `docker "
                f"pull {digests[0]} && docker tag {digests[0]} {ref}`"
            )
        else:
            fixes.append(
                f"the series' {name} image ({old[:19]}…, in versions.json) is on no registry "
                "and no longer on this engine: it cannot be had back"
            )
    return told, fixes
