"""The Docker capability against a real engine: images, footprints, runs in containers.

Skipped, with the reason, where no engine answers. The images build on MICAKIT_BASE_IMAGE
(default micakit-base:bookworm, which `bash scripts/ci-setup.sh` builds from Debian's archive)
and install from the wheelhouse that script fills, so no registry or package index is needed.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import signal
import socket
import threading
import time
import uuid
import zipapp
from collections.abc import Iterator
from pathlib import Path

import docker.errors
import pytest

from kit.errors import UserError
from kit.executors.base import Mount, RunOutcome, RunSpec
from kit.executors.docker import building, inventory, kit_images
from kit.executors.docker.containers import (
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_SERIES,
    TOOLKIT_URL,
    owner_label,
)
from kit.executors.docker.executor import DockerExecutor
from kit.executors.docker.footprint import footprint_ratio, read_files
from kit.measure import stamped
from kit.telemetry.libraries import read_library_dir

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "fakes"
WHEELHOUSE = Path(os.environ.get("MICAKIT_WHEELHOUSE", ROOT / "wheelhouse"))
TAG = "ci"


@pytest.fixture(scope="session")
def base_image(client) -> str:
    ref = os.environ.get("MICAKIT_BASE_IMAGE", "micakit-base:bookworm")
    if not building.image_exists(client, ref):
        pytest.skip(f"no base image {ref}: `bash scripts/ci-setup.sh` builds it")
    return ref


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    if not list(WHEELHOUSE.glob("torch-*.whl")):
        pytest.skip(f"no torch wheel in {WHEELHOUSE}: `bash scripts/ci-setup.sh` fills it")
    return WHEELHOUSE


@pytest.fixture(scope="session")
def executor(client) -> Iterator[DockerExecutor]:
    # a series id of this run's own: the tests count its containers by it, and another run of
    # the suite (a pid alike, in another container) may use the same engine meanwhile
    ex = DockerExecutor(client, f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}", stop_grace_s=2)
    yield ex
    ex.drop_cache()


def _leftovers(client, series_id: str) -> list:
    return client.api.containers(all=True, filters={"label": f"{LABEL_SERIES}={series_id}"})


def _lines(outcome: RunOutcome) -> list[stamped.StampedLine]:
    return list(stamped.read_stamped(outcome.stdout_log))


def _fake_spec(base_image: str, label: str, *args: str, **fake: object) -> RunSpec:
    fakes = Mount("fakes", FAKES)
    argv = ("python3", "/micakit/fakes/contender.py", "+mica", "stdout=line", "-mica", *args)
    return RunSpec(
        label=label,
        argv=argv,
        env={"MICAKIT_FAKE": json.dumps(fake)},
        mounts=(fakes,),
        image=base_image,
    )


# --- runs --------------------------------------------------------------------------------------


def test_a_run_in_a_container_is_stamped_and_removed(client, base_image, executor, tmp_path):
    spec = _fake_spec(base_image, "run 1 mica-f32", "--steps", "100", step_ms={"*": 5})
    outcome = executor.run(spec, tmp_path / "run")
    assert outcome.exit_code == 0
    lines = _lines(outcome)
    assert [line.text.split()[1] for line in lines] == [str(s) for s in range(0, 101, 10)]
    stamps = [line.stamp_ns for line in lines]
    assert stamps == sorted(stamps)
    assert outcome.start_ns < stamps[0] and stamps[-1] <= outcome.end_ns
    # 10 steps of 5 ms between lines: the outside clock sees the program's pace
    gaps_ms = [(b - a) / 1e6 for a, b in zip(stamps[1:], stamps[2:], strict=False)]
    assert 40 < sorted(gaps_ms)[len(gaps_ms) // 2] < 80
    record = json.loads((tmp_path / "run" / "container.json").read_text())
    assert record["state"]["ExitCode"] == 0 and record["labels"]["micakit.run"] == spec.label
    assert {m["Destination"] for m in record["mounts"]} >= {"/micakit/fakes", "/micakit/cache"}
    assert not _leftovers(client, executor.series_id)


def test_out_of_memory_run_keeps_its_exit_code_and_logs(client, base_image, executor, tmp_path):
    spec = _fake_spec(base_image, "run 2 mica-f32", "--steps", "100", events={"mica#*": "oom"})
    outcome = executor.run(spec, tmp_path / "oom")
    assert outcome.exit_code == 1
    err = [line.text for line in stamped.read_stamped(outcome.stderr_log)]
    assert any("out of memory" in text for text in err)  # D4: the contract's line
    assert _lines(outcome)  # the lines before it were kept
    assert not _leftovers(client, executor.series_id)


@pytest.mark.timeout(300)  # a lost interrupt fails here, not after the suite's 30 minutes
def test_ctrl_c_while_waiting_leaves_no_container(
    client, base_image, executor, tmp_path, sigint_default
):
    spec = _fake_spec(base_image, "run 3 mica-f32", events={"mica#*": "sleep-forever"})
    main = threading.main_thread().ident
    assert main is not None
    log_dir = tmp_path / "interrupted"

    def interrupt() -> None:  # as Ctrl-C does: a SIGINT in the thread that waits
        # once the program has started and printed (a cold engine may take many seconds):
        # the interrupt this test is about comes while the kit waits on the container
        for _ in range(2400):
            if (log_dir / "stdout.log").exists() and (log_dir / "stdout.log").read_text():
                break
            threading.Event().wait(0.05)
        signal.pthread_kill(main, signal.SIGINT)

    timer = threading.Thread(target=interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            executor.run(spec, log_dir)
    finally:
        timer.join()
    assert [line.text for line in stamped.read_stamped(log_dir / "stdout.log")] == ["started"]
    assert not _leftovers(client, executor.series_id)


def test_sweep_removes_what_a_crashed_series_left(client, base_image, executor):
    series = f"sweep-test-{uuid.uuid4().hex[:8]}"  # the containers of this test alone

    def create(owner: str) -> str:
        labels = {LABEL_SERIES: series, LABEL_OWNER: owner}
        return client.api.create_container(base_image, command=["true"], labels=labels)["Id"]

    crashed = create(f"{socket.gethostname()}/999999999/1")  # no such process
    other_host = create("0123456789ab/1/1")  # a runner container that no longer runs
    live = create(owner_label())  # this process: a series that still runs
    try:
        executor.sweep()
        left = {c["Id"] for c in _leftovers(client, series)}
        assert left == {live}
        assert crashed not in left and other_host not in left
    finally:
        client.api.remove_container(live, force=True)


def test_a_measured_container_is_contained(client, base_image, executor, tmp_path):
    """Each containment setting took effect in the engine, and the program feels it: no
    network, no capability, no new privileges, the user's uid, a read-only root, /tmp only."""
    work = tmp_path / "work"
    work.mkdir()
    spec = RunSpec(
        label="contained",
        argv=("python3", "/micakit/fakes/contained_probe.py", "/micakit/work/go"),
        mounts=(Mount("fakes", FAKES), Mount("work", work, read_only=False)),
        image=base_image,
    )
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(executor.run, spec, tmp_path / "probe")
        try:
            labels = [f"{LABEL_SERIES}={executor.series_id}", f"{LABEL_RUN}=contained"]
            deadline = time.monotonic() + 120
            found: list = []
            while not found and time.monotonic() < deadline and not running.done():
                found = client.api.containers(filters={"label": labels})
                time.sleep(0.1)
            assert found, "the measured container never ran"
            info = client.api.inspect_container(found[0]["Id"])
        finally:
            (work / "go").touch()
        outcome = running.result(timeout=120)
    host = info["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
    assert "no-new-privileges" in (host.get("SecurityOpt") or [])
    assert host["ReadonlyRootfs"] is True
    assert host["Privileged"] is False
    assert set(host["Tmpfs"]) == {"/tmp"} and "nosuid" in host["Tmpfs"]["/tmp"]
    assert host["Init"] is True
    assert info["Config"]["User"] == f"{os.getuid()}:{os.getgid()}"
    writable = {m["Destination"] for m in info["Mounts"] if m["RW"]}
    assert writable == {"/micakit/work", "/micakit/cache"}
    # what the program met inside
    assert outcome.exit_code == 0
    (line,) = [line.text for line in _lines(outcome)]
    probe = json.loads(line)
    assert (probe["uid"], probe["gid"]) == (os.getuid(), os.getgid())
    assert probe["write_root"] == "EROFS"
    assert probe["write_tmp"] == "allowed"
    assert probe["connect"] in ("ENETUNREACH", "EHOSTUNREACH", "EACCES", "EPERM")
    assert probe["interfaces"] == ["lo"]
    assert int(probe["status"]["CapEff"], 16) == 0 and int(probe["status"]["CapPrm"], 16) == 0
    assert probe["status"]["NoNewPrivs"] == "1"
    assert not _leftovers(client, executor.series_id)


def test_library_table_of_a_program_that_opens_libz(base_image, executor, tmp_path):
    code = "import ctypes; ctypes.CDLL('libz.so.1'); print('opened', flush=True)"
    spec = RunSpec(
        label="libs", argv=("python3", "-c", code), image=base_image, trace_libraries=True
    )
    outcome = executor.run(spec, tmp_path / "libs")
    assert outcome.exit_code == 0 and outcome.libraries_dir == tmp_path / "libs" / "ld_debug"
    table = read_library_dir(outcome.libraries_dir)
    assert table.processes >= 1
    libz = [lib for lib in table.opened if lib.name == "libz.so.1"]
    assert libz and libz[0].path.endswith("/libz.so.1")
    assert not table.nvidia and not table.nvrtc_opened


def test_missing_image_says_how_to_build_it(executor, tmp_path):
    spec = RunSpec(label="r", argv=("true",), image="micakit-test-missing:none")
    with pytest.raises(UserError, match="not built") as e:
        executor.run(spec, tmp_path / "r")
    assert "micakit images build" in (e.value.fix or "")


def test_the_fake_engine_answers_what_is_missing_as_the_real_one(client, base_image):
    """tests/fakes/docker_engine.py, held to this engine: a missing image, container and file
    answer with the same status, the same error class of the SDK and the engine's own words."""
    from tests.fakes.docker_engine import FakeEngine, FakeImage

    fake = FakeEngine({base_image: FakeImage()}).client().api
    ref, gone, path = "micakit-test-missing:none", "micakit-test-no-such-container", "/no/such"

    def answer(api, call, *args) -> tuple[type, int, str]:
        with pytest.raises(docker.errors.APIError) as e:
            getattr(api, call)(*args)
        return type(e.value), e.value.response.status_code, str(e.value.explanation)

    cases = [("inspect_image", ref), ("inspect_container", gone)]
    for call, arg in cases:
        real, ours = answer(client.api, call, arg), answer(fake, call, arg)
        assert real[:2] == ours[:2] and real[2].endswith(ours[2]), (call, real, ours)
    real_cid = client.api.create_container(base_image, command=["true"])["Id"]
    try:
        real = answer(client.api, "get_archive", real_cid, path)
    finally:
        client.api.remove_container(real_cid, force=True)
    fake_cid = fake.create_container(base_image)["Id"]
    ours = answer(fake, "get_archive", fake_cid, path)
    assert real[:2] == ours[:2] and real[2].replace(real_cid, fake_cid) == ours[2], (real, ours)


def test_a_gpu_without_nvidia_runtime_names_the_toolkit(client, base_image, executor, tmp_path):
    if "nvidia" in (client.info().get("Runtimes") or {}):
        pytest.skip("this engine has NVIDIA's runtime")
    spec = RunSpec(label="gpu", argv=("true",), image=base_image, gpu="all")
    with pytest.raises(UserError, match="GPU") as e:
        executor.run(spec, tmp_path / "gpu")
    assert "NVIDIA Container Toolkit" in (e.value.fix or "")
    assert TOOLKIT_URL in (e.value.fix or "")
    assert not _leftovers(client, executor.series_id)


def test_versions_name_the_engine(executor):
    v = executor.versions()
    assert v["docker_engine"] and v["docker_api"] and v["docker_sdk"]


# --- images and footprints ---------------------------------------------------------------------


def test_a_failed_build_shows_its_own_lines(client, base_image, tmp_path):
    dockerfile = tmp_path / "Dockerfile.bad"
    dockerfile.write_text("ARG BASE\nFROM ${BASE}\nRUN echo about-to-fail && false\n")
    with pytest.raises(UserError, match="about-to-fail") as e:
        building.build_image(
            client, dockerfile, tmp_path, f"micakit-test-bad:{TAG}", {"BASE": base_image}
        )
    assert "returned a non-zero code" in e.value.message


def test_a_missing_base_image_names_the_local_one(client, tmp_path):
    dockerfile = tmp_path / "Dockerfile.nobase"
    dockerfile.write_text("ARG BASE\nFROM ${BASE}\n")
    with pytest.raises(UserError, match="micakit-test-nobase:none") as e:
        building.build_image(
            client,
            dockerfile,
            tmp_path,
            f"micakit-test-x:{TAG}",
            {"BASE": "micakit-test-nobase:none"},
        )
    assert "scripts/ci-setup.sh" in (e.value.fix or "")


@pytest.fixture(scope="session")
def mica_image(client, base_image, tmp_path_factory) -> tuple[str, Path]:
    """The contender's image, with the fake contender as a one-file program and one library.

    Images are used by id: a test session running beside this one may retag the same name."""
    ctx = tmp_path_factory.mktemp("mica-context")
    src = tmp_path_factory.mktemp("mica-src")
    shutil.copy(FAKES / "contender.py", src / "contender.py")
    shutil.copy(FAKES / "fakelib.py", src / "fakelib.py")
    (src / "__main__.py").write_text(
        "import sys\n\nimport contender\n\nsys.exit(contender.main(sys.argv[1:]))\n"
    )
    zipapp.create_archive(src, ctx / "contender", interpreter="/usr/bin/env python3")
    (ctx / "libs").mkdir()
    shutil.copy(Path("/lib/x86_64-linux-gnu/libz.so.1").resolve(), ctx / "libs" / "libfake.so.1")
    args = {"BASE": base_image, "PROGRAM": "contender", "LIBS": "libfake.so.1"}
    return building.build_image(
        client, ROOT / "Dockerfile.mica", ctx, f"micakit-test-mica:{TAG}", args
    ), ctx


def test_mica_image_footprint_and_a_run_in_it(client, mica_image, executor, tmp_path):
    ref, ctx = mica_image
    fp = inventory.footprint(client, ref, tmp_path / "fp")
    assert fp["size_bytes"] == client.api.inspect_image(ref)["Size"]
    assert fp["id"] == client.api.inspect_image(ref)["Id"]
    assert fp["labels"]["org.micakit.libs"] == "libfake.so.1"
    rows = {r["path"]: r for r in read_files(tmp_path / "fp" / "files.tsv")}
    program = rows["/opt/mica/bin/contender"]
    assert program["size_bytes"] == (ctx / "contender").stat().st_size
    assert program["type"] == "file"
    assert program["mode"] == f"{(ctx / 'contender').stat().st_mode & 0o7777:04o}"
    assert (
        rows["/opt/mica/lib/libfake.so.1"]["size_bytes"]
        == (ctx / "libs/libfake.so.1").stat().st_size
    )
    assert (
        json.loads((tmp_path / "fp" / "footprint.json").read_text())["size_bytes"]
        == fp["size_bytes"]
    )
    assert any("COPY" in (h["created_by"] or "") for h in fp["history"])

    spec = RunSpec(label="mica", argv=("contender", "--steps", "40"), image=ref)
    outcome = executor.run(spec, tmp_path / "run")
    assert outcome.exit_code == 0
    assert [line.text.split()[1] for line in _lines(outcome)] == ["0", "10", "20", "30", "40"]


@pytest.fixture(scope="session")
def pytorch_image(client, base_image, wheelhouse, tmp_path_factory) -> str:
    """PyTorch's image from the wheelhouse (torch 2.13.0, CPU), with a small nanoGPT stand-in."""
    ctx = tmp_path_factory.mktemp("pytorch-context")
    shutil.copytree(ROOT / "tests" / "fixtures" / "nanogpt_image", ctx / "nanogpt")
    args = {"BASE": base_image, "NANOGPT_COMMIT": "fixture"}
    tag = f"micakit-test-pytorch:{TAG}"
    return building.build_image(client, ROOT / "Dockerfile.pytorch", ctx, tag, args, wheelhouse)


@pytest.mark.slow
def test_pytorch_image_compiles_and_trains(client, pytorch_image, mica_image, executor, tmp_path):
    fp = inventory.footprint(client, pytorch_image, tmp_path / "fp")
    rows = {r["path"]: r for r in read_files(tmp_path / "fp" / "files.tsv")}
    assert "/opt/nanogpt/train.py" in rows and "/usr/bin/g++" in rows
    version_py = "/opt/venv/lib/python3.11/site-packages/torch/version.py"
    code = f"import os; print(os.path.getsize({version_py!r}))"
    spec = RunSpec(label="size", argv=("python", "-c", code), image=pytorch_image)
    seen = executor.run(spec, tmp_path / "size")
    assert rows[version_py]["size_bytes"] == int(_lines(seen)[0].text)

    spec = RunSpec(
        label="train", argv=("python", "-u", "/opt/nanogpt/train.py", "20"), image=pytorch_image
    )
    outcome = executor.run(spec, tmp_path / "train")
    assert outcome.exit_code == 0, (tmp_path / "train" / "stderr.log").read_text()[-2000:]
    texts = [line.text for line in _lines(outcome)]
    # the protocol's torch, whichever build the wheelhouse holds (+cpu here, a CUDA build where
    # pip took PyPI's): the local label names the build, not the release
    assert texts[0].startswith("iter 0: loss") and texts[-1].split("+")[0] == "torch 2.13.0"
    # Inductor's cache went to the series' volume, where the next run of the series finds it
    spec = RunSpec(
        label="cache",
        argv=("sh", "-c", "ls -A $TORCHINDUCTOR_CACHE_DIR | wc -l"),
        image=pytorch_image,
    )
    listed = executor.run(spec, tmp_path / "cache")
    assert int(_lines(listed)[0].text) > 0

    mica = inventory.footprint(client, mica_image[0], tmp_path / "fp-mica")
    ratio = footprint_ratio(mica, fp)
    assert ratio["pytorch_over_mica"] == fp["size_bytes"] / mica["size_bytes"] > 1


def test_runner_image_help_and_host_paths(client, base_image, wheelhouse, tmp_path):
    ref = f"micakit-test-runner:{TAG}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    building.build_image(
        client,
        ROOT / "Dockerfile.runner",
        kit_images.runner_context(tmp_path / "context"),  # the context `micakit images build` makes
        ref,
        {"BASE": base_image, "KIT_COMMIT": commit},
        wheelhouse,
    )
    labels = client.api.inspect_image(ref)["Config"]["Labels"]
    assert labels["micakit.commit"] == labels["org.opencontainers.image.revision"] == commit
    sock = {"/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"}}
    out = client.containers.run(ref, ["--help"], volumes=sock, remove=True).decode()
    assert "Usage: micakit" in out and "series" in out
    # inside the runner, the kit finds its own container and maps /results to the host's folder;
    # it names the commit it was built from and the engine's host, not the container's id
    code = (
        "import socket; from pathlib import Path; "
        "from kit.executors.docker.connection import connect; from kit import kit_commit; "
        "from kit.executors.docker.executor import DockerExecutor, detect_host_paths; "
        "c = connect(); p = detect_host_paths(c); "
        "print(p.to_host(Path('/results/s1'))); print(kit_commit()); "
        "print(DockerExecutor(c).host()); print(socket.gethostname())"
    )
    volumes = {**sock, str(tmp_path): {"bind": "/results", "mode": "rw"}}
    out = client.containers.run(
        ref, ["-c", code], entrypoint=["python"], volumes=volumes, remove=True
    ).decode()
    host_path, got_commit, host, container = out.split()
    assert host_path == f"{tmp_path}/s1"
    assert got_commit == commit
    assert host == client.info()["Name"] != container


# --- the sides apart ---------------------------------------------------------------------------


def _check_folder(root: Path) -> Path:
    """A check's directory as the contender's run of method B meets it: PyTorch's run already
    logged (the fake nanoGPT's lines, every digit), the shared start made, a products folder."""
    log = root / "runs" / "0001-shakespeare-char.float32.pytorch.default" / "attempt-1"
    log.mkdir(parents=True)
    (log / "stdout.log").write_text(
        "".join(
            f"{i} iter {i}: loss {4 - i / 10:.10f}, time 1.00ms, mfu -100.00%\n" for i in range(5)
        )
    )
    for name in ("init.safetensors", "batch_order.npy"):
        (root / "shared_start").mkdir(exist_ok=True)
        (root / "shared_start" / name).write_bytes(b"x")
    (root / "data" / "shakespeare_char").mkdir(parents=True)
    return root


def test_a_copying_contender_cannot_read_pytorchs_log_in_either_executor(
    base_image, executor, tmp_path
):
    """Method B's copier (tests/fakes/hostile_contender.py) run as a check runs the contender:
    with the side's own mounts (kit.sides.side.ContenderSide.spec) it finds no log to copy
    under Docker, nor locally where namespaces are allowed; locally without them, it copies."""
    import dataclasses

    from kit.executors.local import LocalExecutor
    from kit.protocol.load import load
    from kit.results.planned import Config
    from kit.sides.side import ContenderSide, RunContext

    root = _check_folder(tmp_path / "check")
    protocol = load(ROOT / "kit" / "files" / "protocol.toml")
    config = Config("cpu", "shakespeare-char", "float32", "contender", "mica")
    program = FAKES / "hostile_contender.py"
    shared = Mount("shared_start", root / "shared_start")

    def run(ex, image: str | None, logs: Path) -> tuple[int | None, str, str | None]:
        side = ContenderSide(program, root / "data", image=image)
        ctx = RunContext(protocol, ex, "cpu", None, root / "work")
        init, batches = (f"{ex.where(shared)}/{n}" for n in ("init.safetensors", "batch_order.npy"))
        spec = side.spec(config, "copier", ctx, init=init, batches=batches, extra_mounts=(shared,))
        # the run's mounts: its program, the data, its products folder, the shared start
        assert {m.name for m in spec.mounts} == {"program", "data", "products", "shared_start"}
        spec = dataclasses.replace(spec, env={"HOSTILE": "copy"}, confine=(root,))
        outcome = ex.run(spec, logs)
        said = outcome.stdout_log.read_text() + outcome.stderr_log.read_text()
        return outcome.exit_code, said, outcome.isolation

    code, said, isolation = run(executor, base_image, tmp_path / "docker")
    assert code == 1 and "cannot copy PyTorch's losses" in said, said
    assert isolation and isolation.startswith("container")
    code, said, isolation = run(LocalExecutor(confine=False), None, tmp_path / "open")
    assert code == 0 and "step 4 loss 3.6000000000" in said, said  # the copier works
    assert isolation == "none"
    code, said, isolation = run(LocalExecutor(), None, tmp_path / "local")
    if isolation and isolation.startswith("namespaces"):
        assert code == 1 and "cannot copy PyTorch's losses" in said, said
