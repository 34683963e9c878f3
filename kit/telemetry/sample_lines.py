"""Samples written as they are taken, one JSON line each (samples.jsonl, machine.jsonl)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO


def write_sample(f: IO[str], record: Mapping[str, object]) -> None:
    """One sample as a compact JSON line, flushed: a killed run keeps every sample taken before
    it. An OSError (a full or vanished disk) is the caller's, whose run goes on."""
    f.write(json.dumps(record, separators=(",", ":")) + "\n")
    f.flush()
