"""One compiler-cache volume per side: a contender's runs never mount the volume PyTorch's
Inductor and Triton caches live in, so it can neither read nor seed them (§5 keeps a cache per
configuration's discarded run; nothing in the protocol lets one side reach the other's)."""

from __future__ import annotations

from pathlib import Path

from kit.executors.base import RunSpec
from kit.executors.docker.containers import CACHE_DIR, LABEL_SERIES, cache_volume_name
from kit.executors.docker.executor import DockerExecutor
from tests.fakes.docker_engine import FakeEngine, FakeImage


def _cache_source(engine: FakeEngine, cid: str) -> str:
    mounts = engine.created[cid]["host_config"]["mounts"]
    (cache,) = [m for m in mounts if m["Target"] == CACHE_DIR]
    return str(cache["Source"])


def test_each_side_gets_its_own_cache_volume_and_finish_removes_them_all(tmp_path: Path) -> None:
    engine = FakeEngine({"micakit-mica:t": FakeImage(), "micakit-pytorch:t": FakeImage()})
    ex = DockerExecutor(engine.client(), "2026-12-02T00:00:00Z s")  # type: ignore[arg-type]
    try:
        for k, image in enumerate(["micakit-pytorch:t", "micakit-mica:t", "micakit-mica:t"]):
            ex.run(RunSpec(f"run {k}", ("/bin/true",), image=image), tmp_path / str(k))
        sources = [_cache_source(engine, cid) for cid in engine.created if
                   engine.created[cid].get("entrypoint") == ["/bin/true"]]  # fmt: skip
        assert len(sources) == 3
        pytorch, mica, mica_again = sources
        assert pytorch != mica and mica == mica_again
        assert {pytorch, mica} == set(engine.volumes)
        assert all(v == {LABEL_SERIES: ex.series_id} for v in engine.volumes.values())
        assert mica == cache_volume_name(ex.series_id, "micakit-mica:t")
        ex.finish()
        assert engine.volumes == {}
    finally:
        ex.close_readers()
