"""The card, as NVML sees it: the only module of the kit that imports `pynvml`.

§5 asks for three things of the card: that it holds no other program before a run, and that its
clocks, temperature, power and memory are sampled during the run. `Card` is the small interface
those needs make; `NvmlCard` carries it out with NVIDIA's NVML (the library nvidia-smi reads);
kit.telemetry.recorded replays a recorded card, so that tests and benchmarks run without one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from kit.errors import UserError

# NVML's clock event reasons (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*), kept
# here so that decoding a recorded bitmask needs no NVML.
CLOCK_EVENT_BITS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
THERMAL_EVENTS = 0x020 | 0x040
POWER_EVENTS = 0x004 | 0x080
# NVML documents HW slowdown as "thermal or power": it is kept apart because it may be either.
HW_SLOWDOWN_EVENTS = 0x008


def clock_event_names(bitmask: int) -> tuple[str, ...]:
    """The names of the reasons set in an NVML clock-event bitmask; unknown bits as hex."""
    names = [name for bit, name in CLOCK_EVENT_BITS.items() if bitmask & bit]
    unknown = bitmask & ~sum(CLOCK_EVENT_BITS)
    if unknown:
        names.append(f"unknown_{unknown:#x}")
    return tuple(names)


def _plain(record: CardInfo | Sample, **sequences: Iterable[object]) -> dict[str, object]:
    """A record's fields as JSON takes them, each of `sequences` as a list."""
    data = asdict(record)
    data.update({name: list(value) for name, value in sequences.items()})
    return data


class CardError(Exception):
    """NVML failed while the card was being read (GPU lost, driver reloaded, ...).

    Kept apart from `UserError`: mid-run the sampler records it and goes on (§5: never lose the
    run for want of a sample).
    """


@dataclass(frozen=True)
class CardInfo:
    """What identifies the card a series ran on (§3 rule 4: every number carries its card)."""

    name: str
    uuid: str
    compute_capability: tuple[int, int]
    driver_version: str
    cuda_driver_version: str  # the CUDA version the driver supports, e.g. "12.4"
    memory_total_bytes: int
    index: int | None = None
    # what tells two cards of one name apart beside the UUID (merge: a row per machine); None
    # where the card does not report it (a GeForce has no serial) or an older kit did not read it
    serial: str | None = None
    vbios_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _plain(self, compute_capability=self.compute_capability)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CardInfo:
        major, minor = data["compute_capability"]
        return cls(
            name=str(data["name"]),
            uuid=str(data["uuid"]),
            compute_capability=(int(major), int(minor)),
            driver_version=str(data["driver_version"]),
            cuda_driver_version=str(data["cuda_driver_version"]),
            memory_total_bytes=int(data["memory_total_bytes"]),
            index=None if data.get("index") is None else int(data["index"]),
            serial=_optional_text(data.get("serial")),
            vbios_version=_optional_text(data.get("vbios_version")),
        )


@dataclass(frozen=True)
class GpuProcess:
    """A process holding a context on the card. `name` is None where NVML cannot tell it (a
    process of another PID namespace, e.g. another container); `used_memory_bytes` is None where
    the driver does not report it."""

    pid: int
    name: str | None
    used_memory_bytes: int | None
    kind: str = "compute"  # "compute" or "graphics"

    def describe(self) -> str:
        memory = (
            "memory unknown"
            if self.used_memory_bytes is None
            else f"{self.used_memory_bytes / 2**20:.0f} MiB"
        )
        return f"pid {self.pid} ({self.name or 'name unknown'}, {self.kind}, {memory})"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuProcess:
        used = data.get("used_memory_bytes")
        return cls(
            pid=int(data["pid"]),
            name=data.get("name"),
            used_memory_bytes=None if used is None else int(used),
            kind=str(data.get("kind", "compute")),
        )


@dataclass(frozen=True)
class Sample:
    """One reading of the card (§5: clocks, temperature, power, memory). A field is None where
    the card does not support its reading (NVML's Not Supported)."""

    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    temperature_c: int | None
    power_w: float | None
    memory_used_bytes: int | None
    utilization_gpu_pct: int | None
    utilization_mem_pct: int | None
    clock_event_reasons: int | None  # NVML's bitmask; see `clock_events`

    @property
    def clock_events(self) -> tuple[str, ...]:
        return (
            () if self.clock_event_reasons is None else clock_event_names(self.clock_event_reasons)
        )

    def to_dict(self) -> dict[str, Any]:
        return _plain(self, clock_events=self.clock_events)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sample:
        fields = cls.__dataclass_fields__
        return cls(**{key: data.get(key) for key in fields})


@runtime_checkable
class Card(Protocol):
    """What the kit needs of a card: who it is, who holds it, and how it is doing."""

    def info(self) -> CardInfo: ...

    def processes(self) -> list[GpuProcess]: ...

    def sample(self) -> Sample: ...

    def memory_used_bytes(self) -> int:
        """The card's used memory alone: cheap enough to read many times a second for the peak."""
        ...


# ---------------------------------------------------------------------------------------------
# The real card


def _optional_text(value: object) -> str | None:
    text = "" if value is None else str(value).strip()
    return text or None


def _cuda_version(encoded: int) -> str:
    # NVML encodes CUDA 12.4 as 12040.
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


class NvmlCard:
    """A card read through NVML. Open it with `open_card`, which turns NVML's failures into
    messages the user can act on; close it (or use it as a context manager) when done."""

    def __init__(self, index_or_uuid: int | str = 0) -> None:
        import pynvml  # the only import of pynvml in the kit (CONTRIBUTING.md)

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._open = True
        try:
            key = index_or_uuid
            if isinstance(key, str) and key.isdigit():
                key = int(key)
            if isinstance(key, int):
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(key)
                self._index: int | None = key
            else:
                self._handle = pynvml.nvmlDeviceGetHandleByUUID(key)
                self._index = pynvml.nvmlDeviceGetIndex(self._handle)
        except BaseException:
            self.close()
            raise
        self._event_reasons: Callable[[Any], int] | None = None

    def close(self) -> None:
        if self._open:
            self._open = False
            self._nvml.nvmlShutdown()

    def __enter__(self) -> NvmlCard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[..., Any], *args: Any, optional: bool = False) -> Any:
        """Call NVML; a reading the card does not support is None when `optional`, and any
        other failure is a `CardError`."""
        try:
            return fn(*args)
        except self._nvml.NVMLError as error:
            if optional and error.value == self._nvml.NVML_ERROR_NOT_SUPPORTED:
                return None
            raise CardError(f"NVML {getattr(fn, '__name__', 'call')}: {error}") from error

    def info(self) -> CardInfo:
        nv, h = self._nvml, self._handle
        major, minor = self._call(nv.nvmlDeviceGetCudaComputeCapability, h)
        return CardInfo(
            name=str(self._call(nv.nvmlDeviceGetName, h)),
            uuid=str(self._call(nv.nvmlDeviceGetUUID, h)),
            compute_capability=(int(major), int(minor)),
            driver_version=str(self._call(nv.nvmlSystemGetDriverVersion)),
            cuda_driver_version=_cuda_version(int(self._call(nv.nvmlSystemGetCudaDriverVersion))),
            memory_total_bytes=int(self._call(nv.nvmlDeviceGetMemoryInfo, h).total),
            index=self._index,
            serial=self._identity(nv.nvmlDeviceGetSerial, h),
            vbios_version=self._identity(nv.nvmlDeviceGetVbiosVersion, h),
        )

    def _identity(self, fn: Callable[..., Any], handle: Any) -> str | None:
        """A field that only names the card: None where this card or driver cannot read it."""
        try:
            value = self._call(fn, handle, optional=True)
        except CardError:
            return None  # e.g. NVML_ERROR_NO_PERMISSION: the card is still measured
        return _optional_text(value)

    def _process_name(self, pid: int) -> str | None:
        try:
            return str(self._nvml.nvmlSystemGetProcessName(pid)) or None
        except self._nvml.NVMLError:
            return None  # another PID namespace, or the process just ended

    def processes(self) -> list[GpuProcess]:
        nv, h = self._nvml, self._handle
        found: dict[tuple[int, str], GpuProcess] = {}
        for kind, fn, older in (
            (
                "compute",
                nv.nvmlDeviceGetComputeRunningProcesses,
                "nvmlDeviceGetComputeRunningProcesses_v2",
            ),
            (
                "graphics",
                nv.nvmlDeviceGetGraphicsRunningProcesses,
                "nvmlDeviceGetGraphicsRunningProcesses_v2",
            ),
        ):
            try:
                listed = self._call(fn, h, optional=True)
            except nv.NVMLLibraryMismatchError:
                # A driver older than nvidia-ml-py's unversioned call: ask with the older struct.
                listed = self._call(getattr(nv, older), h, optional=True)
            for proc in listed or []:
                used = getattr(proc, "usedGpuMemory", None)
                found[(int(proc.pid), kind)] = GpuProcess(
                    pid=int(proc.pid),
                    name=self._process_name(int(proc.pid)),
                    used_memory_bytes=None if used is None else int(used),
                    kind=kind,
                )
        return list(found.values())

    def memory_used_bytes(self) -> int:
        return int(self._call(self._nvml.nvmlDeviceGetMemoryInfo, self._handle).used)

    def _clock_event_reasons(self) -> int | None:
        # The "ClocksEvent" names replaced "ClocksThrottle" in NVML 12.2; an older driver or
        # nvidia-ml-py lacks them, so fall back once and remember the choice.
        nv = self._nvml
        if self._event_reasons is None:
            for name in (
                "nvmlDeviceGetCurrentClocksEventReasons",
                "nvmlDeviceGetCurrentClocksThrottleReasons",
            ):
                fn = getattr(nv, name, None)
                if fn is None:
                    continue
                try:
                    value = fn(self._handle)
                except nv.NVMLError as error:
                    if error.value == nv.NVML_ERROR_FUNCTION_NOT_FOUND:
                        continue
                    if error.value == nv.NVML_ERROR_NOT_SUPPORTED:
                        return None
                    raise CardError(f"NVML {name}: {error}") from error
                self._event_reasons = fn
                return int(value)
            return None
        value = self._call(self._event_reasons, self._handle, optional=True)
        return None if value is None else int(value)

    def sample(self) -> Sample:
        nv, h = self._nvml, self._handle
        power_mw = self._call(nv.nvmlDeviceGetPowerUsage, h, optional=True)
        util = self._call(nv.nvmlDeviceGetUtilizationRates, h, optional=True)
        return Sample(
            sm_clock_mhz=self._call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM, optional=True),
            mem_clock_mhz=self._call(
                nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM, optional=True
            ),
            temperature_c=self._call(
                nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU, optional=True
            ),
            power_w=None if power_mw is None else power_mw / 1000.0,
            memory_used_bytes=self.memory_used_bytes(),
            utilization_gpu_pct=None if util is None else int(util.gpu),
            utilization_mem_pct=None if util is None else int(util.memory),
            clock_event_reasons=self._clock_event_reasons(),
        )


_NO_CARD_FIX = (
    "on a GPU machine run the runner container with --gpus all (see README#gpu); "
    "on a machine without a card run the scaled-down smoke series with --smoke --device cpu"
)


def open_card(index_or_uuid: int | str = 0) -> NvmlCard:
    """Open the card the series runs on, or say what the user must do to make it visible."""
    try:
        import pynvml
    except ImportError as error:
        raise UserError(
            "the Python package nvidia-ml-py (module pynvml) is not installed",
            "pip install nvidia-ml-py, or install micakit with its dependencies",
        ) from error
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        raise UserError(f"NVML sees no NVIDIA card ({error})", _NO_CARD_FIX) from error
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()  # NVML counts its inits; NvmlCard takes its own
    if count == 0:
        raise UserError("NVML sees no NVIDIA card", _NO_CARD_FIX)
    try:
        return NvmlCard(index_or_uuid)
    except pynvml.NVMLError as error:
        raise UserError(
            f"NVML has no card {index_or_uuid!r} ({error}); it sees {count} card(s)",
            f"name the card by its index (0 to {count - 1}) or its UUID from nvidia-smi -L",
        ) from error
