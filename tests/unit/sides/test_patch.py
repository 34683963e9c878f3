"""§4's patch to nanoGPT's train.py, and the strict applier that writes it."""

from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

import pytest

from kit.errors import UserError
from kit.sides import nanogpt, patch

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "nanogpt" / "train.py.txt"


@pytest.fixture
def fragment(tmp_path: Path) -> Path:
    """A folder whose train.py holds only the lines the patch reads (not nanoGPT's file)."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(FIXTURE, src / "train.py")
    return src


def patched_fragment(src: Path, dest: Path) -> str:
    return patch.apply_patch(src, nanogpt.PATCH_PATH, dest, files=()).read_text()


def test_patch_touches_train_py_only():
    patches = patch.parse_patch(nanogpt.PATCH_PATH.read_text())
    assert [p.path for p in patches] == ["train.py"]


def test_patch_applies_to_fragment_and_leaves_source(fragment: Path, tmp_path: Path):
    before = (fragment / "train.py").read_bytes()
    text = patched_fragment(fragment, tmp_path / "run")
    assert (fragment / "train.py").read_bytes() == before  # §3 rule 2: the source stays
    # §4: the mode string, the seed, and for §7 B the TF32 switch and the batch order.
    assert "model = torch.compile(model, mode=compile_mode)" in text
    assert "torch.manual_seed(seed + seed_offset)" in text
    assert "torch.backends.cuda.matmul.allow_tf32 = allow_tf32" in text
    assert "torch.backends.cudnn.allow_tf32 = allow_tf32" in text
    assert "torch.manual_seed(1337" not in text
    assert "np.load(batch_order)" in text
    assert "X, Y = get_batch('train')\n" not in text


def test_patch_changes_nothing_else(fragment: Path, tmp_path: Path):
    # Every line the patch removes is one of the four §4 changes' lines.
    fp = patch.parse_patch(nanogpt.PATCH_PATH.read_text())[0]
    removed = [ln for h in fp.hunks for ln in h.old if ln not in h.new]
    assert len(removed) == 8
    for line in removed:
        assert any(
            key in line
            for key in ("1337", "allow_tf32", "get_batch", "torch.randint", "torch.compile")
        ), line


def test_config_variables_precede_config_keys(fragment: Path, tmp_path: Path):
    # configurator.py accepts --name=value only for globals that exist before config_keys, and
    # only when literal_eval's type matches the default's: so no None defaults.
    text = patched_fragment(fragment, tmp_path / "run")
    lines = text.splitlines()
    keys_at = next(i for i, ln in enumerate(lines) if ln.startswith("config_keys = "))
    defaults = {}
    for ln in lines[:keys_at]:
        if ln and not ln.startswith((" ", "#")) and " = " in ln:
            name, _, rest = ln.partition(" = ")
            try:
                defaults[name] = ast.literal_eval(rest.split(" #")[0])
            except ValueError:
                continue  # dtype's default is an expression
    assert defaults["compile_mode"] == "default"  # torch.compile's own default for mode=None
    assert defaults["seed"] == 1337
    assert defaults["allow_tf32"] is True
    assert defaults["batch_order"] == ""
    for name in ("compile_mode", "seed", "allow_tf32", "batch_order"):
        assert isinstance(defaults[name], (int, float, bool, str))


def test_patch_that_does_not_apply_names_the_hunk(fragment: Path, tmp_path: Path):
    train = fragment / "train.py"
    train.write_text(train.read_text().replace("torch.manual_seed(1337 + seed_offset)", "pass"))
    with pytest.raises(UserError) as e:
        patched_fragment(fragment, tmp_path / "run")
    assert "hunk 2 of train.patch" in e.value.message
    assert "torch.manual_seed(1337 + seed_offset)" in e.value.message
    assert not (tmp_path / "run").exists()  # nothing half written


def test_context_change_is_not_fuzzed(fragment: Path, tmp_path: Path):
    train = fragment / "train.py"
    # Only a context line differs (one space): no fuzz, the hunk is refused.
    train.write_text(train.read_text().replace("# clip the gradient", "#  clip the gradient"))
    with pytest.raises(UserError, match="hunk 6 of train.patch"):
        patched_fragment(fragment, tmp_path / "run")


def test_patch_twice_says_applied_already(fragment: Path, tmp_path: Path):
    once = tmp_path / "once"
    patched_fragment(fragment, once)
    with pytest.raises(UserError, match="applied already"):
        patched_fragment(once, tmp_path / "twice")


def test_crlf_source_is_refused(fragment: Path, tmp_path: Path):
    train = fragment / "train.py"
    train.write_bytes(train.read_bytes().replace(b"\n", b"\r\n"))
    with pytest.raises(UserError, match="hunk 1 of train.patch"):
        patched_fragment(fragment, tmp_path / "run")


def test_run_files_are_copied(tmp_path: Path):
    src = tmp_path / "src"
    for name in nanogpt.RUN_FILES:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(f"# {name}\n")
    shutil.copyfile(FIXTURE, src / "train.py")
    train = patch.apply_patch(src, nanogpt.PATCH_PATH, tmp_path / "run")
    assert train == tmp_path / "run" / "train.py"
    for name in nanogpt.RUN_FILES[1:]:
        assert (tmp_path / "run" / name).read_text() == f"# {name}\n"
    stock = nanogpt.copy_run_files(src, tmp_path / "stock")
    assert (stock / "train.py").read_bytes() == FIXTURE.read_bytes()


# ----------------------------------------------------------------------------- the applier itself

DIFF = """\
--- a/f.txt
+++ b/f.txt
@@ -2,3 +2,3 @@ head
 b
-c
+C
 d
@@ -7,2 +7,3 @@
 g
 h
+i
"""


def apply(text: str, diff: str = DIFF) -> str:
    return patch.patch_text(text, patch.parse_patch(diff, "t.diff")[0], "t.diff")


def test_applies_at_header_line():
    assert apply("a\nb\nc\nd\ne\nf\ng\nh\n") == "a\nb\nC\nd\ne\nf\ng\nh\ni\n"


def test_applies_at_unique_offset():
    assert apply("x\nx\na\nb\nc\nd\ng\nh\n") == "x\nx\na\nb\nC\nd\ng\nh\ni\n"


def test_ambiguous_place_is_refused():
    with pytest.raises(UserError, match="hunk 1 of t.diff .* more than one place"):
        apply("z\nz\nz\nz\nz\nb\nc\nd\nb\nc\nd\ng\nh\n")


def test_hunk_order_is_kept():
    # Hunk 2's lines stand only before hunk 1's: refused, not moved back.
    with pytest.raises(UserError, match="hunk 2 of t.diff"):
        apply("g\nh\nb\nc\nd\n")


def test_no_newline_at_end_of_file():
    diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+B\n"
    assert apply("a\nb", diff) == "a\nB\n"
    with pytest.raises(UserError, match="hunk 1"):
        apply("a\nb\n", diff)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "--- a/f\n@@ -1 +1 @@\n",
        "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n",
        "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n?b\n",
        "--- a/f\n+++ b/f\n@@ nonsense @@\n",
        "--- a/f\n+++ b/f\n",
    ],
)
def test_malformed_patches_are_user_errors(bad: str):
    with pytest.raises(UserError):
        patch.parse_patch(bad, "bad.diff")


# ----------------------------------------------------------------------------- real nanoGPT

NANOGPT = os.environ.get("MICAKIT_NANOGPT")
needs_nanogpt = pytest.mark.skipif(
    not NANOGPT, reason="MICAKIT_NANOGPT names no nanoGPT checkout at the pinned commit"
)


@pytest.mark.nanogpt
@needs_nanogpt
def test_patch_applies_to_real_train_py(tmp_path: Path):
    src = nanogpt.from_checkout(Path(str(NANOGPT)))
    train = patch.apply_patch(src, nanogpt.PATCH_PATH, tmp_path / "run")
    compile(train.read_text(), str(train), "exec")  # the patched file is Python
    assert (src / "train.py").read_bytes() != train.read_bytes()
    assert nanogpt.verify_files(src) == []  # the checkout is untouched
    for name in nanogpt.RUN_FILES[1:]:
        assert (tmp_path / "run" / name).read_bytes() == (src / name).read_bytes()
