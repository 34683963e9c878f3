"""nanoGPT's working trees for a series: as shipped, and with §4's patch, each beside its data.

    <series>/work/nanogpt/
        shipped/   train.py as nanoGPT ships it (eager and default time this one, §3 rule 2)
        patched/   train.py with benchmarks/NanoGpt/train.patch (the other modes, §7's runs)
        data/      the prepared datasets the series' models read
    both trees hold model.py, configurator.py, config/, gpt2-shakespeare.py and a relative
    `data` link to ../data, since nanoGPT opens its configurator and data from its working folder.

Keeping them in the results directory makes it self-contained: the code and the data each run
used stand beside its logs, and their hashes are recorded.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from kit.errors import UserError, writing
from kit.protocol.load import Protocol
from kit.results import store
from kit.results.run_options import SideInputs
from kit.sides import data, gpt2_bpe, nanogpt, patch

SHIPPED, PATCHED = "shipped", "patched"


def source(p: Protocol, checkout: str | None) -> Path:
    """nanoGPT at the protocol's commit: the user's checkout, or the kit's checked download."""
    return nanogpt.source(
        cache_dir() / "nanogpt",
        Path(checkout) if checkout else None,
        commit=p.nanogpt.commit,
        file_sha256=p.nanogpt.files,
    )


def datasets(p: Protocol, o: SideInputs) -> Path:
    """The datasets the series' models need, prepared once into the kit's data cache."""
    root = Path(o.data_dir)
    needed = {p.model(m).dataset for m in o.models}
    input_path = data.fetch_input(
        cache_dir() / "input",
        Path(o.input) if o.input else None,
        expected_sha256=p.data.input_sha256,
        url=p.data.input_url,
    )
    if data.CHAR_DATASET in needed:
        data.prepare_char(input_path, root / data.CHAR_DATASET, input_sha256=p.data.input_sha256)
    if data.BPE_DATASET in needed:
        encoding = gpt2_bpe.gpt2_encoding(
            cache_dir() / "tiktoken",
            Path(o.tiktoken_files) if o.tiktoken_files else None,
        )
        data.prepare_bpe(
            input_path, root / data.BPE_DATASET, encoding, input_sha256=p.data.input_sha256
        )
    unknown = needed - {data.CHAR_DATASET, data.BPE_DATASET}
    if unknown:
        raise UserError(f"the protocol names datasets the kit cannot prepare: {sorted(unknown)}")
    return root


def prepare(p: Protocol, o: SideInputs, dest: Path) -> Path:
    """Write (or, on resume, check) the two trees and the data under `dest`; returns `dest`."""
    record = dest / "workspace.json"
    if record.exists():
        _check_unchanged(dest, json.loads(record.read_text()))
        return dest
    src = source(p, o.nanogpt)
    data_root = datasets(p, o)
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    # a full disk names itself (the trees are the results directory's); the partial trees are
    # written again by the same command
    with writing(tmp, elsewhere="--out"):
        nanogpt.copy_run_files(src, tmp / SHIPPED)
        patch.apply_patch(src, p.beside(p.nanogpt.patch), tmp / PATCHED)
        for dataset in sorted({p.model(m).dataset for m in o.models}):
            _copy_dataset(data_root / dataset, tmp / "data" / dataset)
        for tree in (SHIPPED, PATCHED):
            for m in o.models:
                config = p.model(m).config
                if not (tmp / tree / config).exists():
                    # a config file of the kit's own (M2's), beside the protocol file (amendment
                    # 4.4)
                    shutil.copyfile(p.beside(config), tmp / tree / config)
            os.symlink(os.path.join("..", "data"), tmp / tree / "data")
        files = {
            str(f.relative_to(tmp)): store.sha256_file(f)
            for f in sorted(tmp.rglob("*"))
            if f.is_file() and not f.is_symlink()
        }
        listing = {"schema_version": 1, "nanogpt_commit": p.nanogpt.commit, "files": files}
        store.write_json(tmp / "workspace.json", listing)
    tmp.rename(dest)
    return dest


def _copy_dataset(src: Path, dest: Path) -> None:
    """A prepared dataset's files (kit.sides.data writes them flat), one by one: a copy that
    fails says why with its errno, where copytree would gather the reasons as text."""
    dest.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        shutil.copyfile(f, dest / f.name)


def _check_unchanged(dest: Path, record: dict) -> None:
    changed = [
        rel
        for rel, digest in record["files"].items()
        if not (dest / rel).is_file() or store.sha256_file(dest / rel) != digest
    ]
    if changed:
        raise UserError(
            f"the nanoGPT trees of this series changed since it started: {', '.join(changed)}",
            "restore them; a series never changes the code it measures midway",
        )


def cache_dir() -> Path:
    """The kit's cache (nanoGPT's source, datasets, encodings): $MICAKIT_CACHE or ~/.cache."""
    return Path(os.environ.get("MICAKIT_CACHE") or Path.home() / ".cache" / "micakit")


def image_context(protocol: Protocol, checkout: str | None, dest: Path) -> dict[str, str]:
    """The PyTorch image's build context (§8): nanoGPT's shipped and patched trees, checked,
    as the image's /opt/nanogpt, and the build arguments that pin torch, numpy and nanoGPT."""
    src = source(protocol, checkout)
    tree = dest / "nanogpt"
    nanogpt.copy_run_files(src, tree / SHIPPED)
    patch.apply_patch(src, protocol.beside(protocol.nanogpt.patch), tree / PATCHED)
    for sub in (SHIPPED, PATCHED):
        for model in protocol.models.values():
            if not (tree / sub / model.config).exists():
                shutil.copyfile(protocol.beside(model.config), tree / sub / model.config)
    shutil.copyfile(protocol.beside(protocol.nanogpt.patch), tree / "train.patch")
    return {
        "TORCH_VERSION": protocol.pytorch.torch,
        "NUMPY_VERSION": protocol.pytorch.numpy,
        "NANOGPT_COMMIT": protocol.nanogpt.commit,
    }
