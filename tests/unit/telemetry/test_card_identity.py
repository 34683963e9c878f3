"""What tells two cards of one name apart (merge's machines): NVML's serial and VBIOS beside the
UUID, read where the card gives them, None where it does not, absent from an older record."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kit.errors import UserError
from kit.results import documents
from kit.telemetry.nvml import CardInfo, NvmlCard


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


NOT_SUPPORTED, NO_PERMISSION = 3, 4


def _card(serial: object, vbios: object) -> NvmlCard:
    """An NvmlCard over a stand-in for pynvml: a value, or an NVML error code to raise."""

    def answer(value: object):
        def call(handle: object) -> object:
            if isinstance(value, int):
                raise NVMLError(value)
            return value

        return call

    nvml = SimpleNamespace(
        NVMLError=NVMLError,
        NVML_ERROR_NOT_SUPPORTED=NOT_SUPPORTED,
        nvmlDeviceGetCudaComputeCapability=lambda h: (8, 9),
        nvmlDeviceGetName=lambda h: "NVIDIA L4",
        nvmlDeviceGetUUID=lambda h: "GPU-1",
        nvmlSystemGetDriverVersion=lambda: "570.1",
        nvmlSystemGetCudaDriverVersion=lambda: 12080,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=24 * 2**30),
        nvmlDeviceGetSerial=answer(serial),
        nvmlDeviceGetVbiosVersion=answer(vbios),
    )
    card = object.__new__(NvmlCard)
    card._nvml, card._handle, card._index, card._open = nvml, object(), 0, False
    return card


def test_serial_and_vbios_are_read_beside_the_uuid() -> None:
    info = _card("1652922003042", "95.04.5C.00.07").info()
    assert (info.uuid, info.serial, info.vbios_version) == (
        "GPU-1",
        "1652922003042",
        "95.04.5C.00.07",
    )
    assert CardInfo.from_dict(info.to_dict()) == info


@pytest.mark.parametrize("error", [NOT_SUPPORTED, NO_PERMISSION])
def test_a_card_without_a_readable_serial_is_still_read(error: int) -> None:
    info = _card(error, "95.04").info()  # a GeForce has no serial
    assert info.serial is None and info.vbios_version == "95.04"


def test_an_older_record_without_them_still_reads() -> None:
    older = {
        "name": "NVIDIA L4", "uuid": "GPU-1", "compute_capability": [8, 9],
        "driver_version": "550", "cuda_driver_version": "12.4", "memory_total_bytes": 1, "index": 0,
    }  # fmt: skip
    info = CardInfo.from_dict(older)
    assert info.serial is None and info.vbios_version is None


def test_a_series_started_before_the_serial_was_read_still_resumes() -> None:
    older = {"card": {"name": "NVIDIA L4", "uuid": "GPU-1"}}
    now = {"card": {"name": "NVIDIA L4", "uuid": "GPU-1", "serial": "165", "vbios_version": "95"}}
    documents.check_unchanged(older, now)  # an earlier kit did not read them: not compared
    with pytest.raises(UserError, match="card.serial: '164' then, '165' now"):
        documents.check_unchanged({"card": {**now["card"], "serial": "164"}}, now)
