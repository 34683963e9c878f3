"""Who owns what in an image, read from the texts its package managers leave (§8's SBOM).

dpkg's status and file lists, each Debian package's machine-readable copyright file, each
Python distribution's METADATA and RECORD, os-release, and the labels the Mica image carries
(the contender program and the NVIDIA libraries beside it): each owner becomes a `Package`
with its purl, supplier, licenses, the names it depends on and the paths of its files.
`kit.executors.docker.sbom` writes them; nothing here talks to the engine.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from email.parser import HeaderParser
from email.utils import getaddresses, parseaddr
from urllib.parse import quote

DPKG_STATUS, DPKG_INFO = "/var/lib/dpkg/status", "/var/lib/dpkg/info/"
DOC = "/usr/share/doc/"
OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")
MICA_LIBS = "/opt/mica/lib/"  # Dockerfile.mica: the NVIDIA libraries the contender opens
PROGRAM_LABEL, PROGRAM_SHA256_LABEL = "org.micakit.program", "org.micakit.program.sha256"
DEP5 = "debian.org/doc/packaging-manuals/copyright-format/"  # http:// or https://
LGPL = {"2": "2.0", "2.0": "2.0", "2.1": "2.1", "3": "3.0", "3.0": "3.0"}
# Debian's short license names (DEP-5 §7) where SPDX spells them otherwise
DEBIAN_SPDX = {
    **{f"GPL-{v}": f"GPL-{v}.0-only" for v in "123"},
    **{f"GPL-{v}+": f"GPL-{v}.0-or-later" for v in "123"},
    **{f"LGPL-{v}": f"LGPL-{s}-only" for v, s in LGPL.items()},
    **{f"LGPL-{v}+": f"LGPL-{s}-or-later" for v, s in LGPL.items()},
    "Expat": "MIT",
    "BSD-2-clause": "BSD-2-Clause",
    "BSD-3-clause": "BSD-3-Clause",
    "BSD-4-clause": "BSD-4-Clause",
    "Apache-2": "Apache-2.0",
    "Artistic": "Artistic-1.0-Perl",
    "public-domain": "",  # no SPDX id: kept by name
}


@dataclass(frozen=True)
class Package:
    """A component that owns files: what it is, who supplies it, and the paths of its files."""

    ref: str  # its bom-ref: the purl, or the kind and its path
    name: str
    version: str
    kind: str  # CycloneDX's component type
    purl: str
    files: tuple[str, ...]
    sha256: str = ""
    supplier: str = ""
    supplier_email: str = ""
    supplier_url: str = ""
    licenses: tuple[str, ...] = ()  # SPDX ids where they are, names where not
    expression: str = ""  # an SPDX expression the package states (PEP 639)
    depends: tuple[str, ...] = ()  # refs of the packages it needs


def is_text(path: str) -> bool:
    """Whether the file at `path` names an owner (kept whole as the stream passes: small)."""
    if path == DPKG_STATUS or path in OS_RELEASE:
        return True
    if path.startswith(DPKG_INFO):
        return path.endswith(".list")
    if path.startswith(DOC):
        return path.endswith("/copyright") and path.count("/") == 5
    folder, name = posixpath.split(path)
    return folder.endswith(".dist-info") and name in ("METADATA", "RECORD")


def operating_system(texts: Mapping[str, str]) -> dict[str, str]:
    """os-release's fields (ID, VERSION_ID, PRETTY_NAME...), empty where the image has none."""
    text = next((texts[p] for p in OS_RELEASE if p in texts), "")
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip().strip('"')
    return out


def packages(
    labels: Mapping[str, str],
    texts: Mapping[str, str],
    sha256: Mapping[str, str],
    paths: Iterable[str],
    links: Mapping[str, str],
) -> list[Package]:
    """Every owner the image names, in the order a file is given to one: the contender
    program, the NVIDIA libraries beside it, the Python distributions, the Debian packages."""
    present = set(paths)
    out = []
    program = labels.get(PROGRAM_LABEL, "")
    if program in present:
        digest = labels.get(PROGRAM_SHA256_LABEL) or sha256.get(program, "")
        # D4: the kit runs a Mica program it is given; its SHA-256 is its identity
        out.append(
            Package(f"application:{program}", posixpath.basename(program), digest,
                    "application", "", (program,), digest, "Mica")
        )  # fmt: skip
    for path in sorted(p for p in present if _beside(p, MICA_LIBS)):
        name = posixpath.basename(path)
        version = name.partition(".so.")[2]  # the soname's version: libcublas.so.12 is 12
        out.append(
            Package(f"library:{path}", name, version or sha256.get(path, ""), "library", "",
                    (path,), sha256.get(path, ""), "NVIDIA Corporation")
        )  # fmt: skip
    out += python(texts)
    out += debian(texts, links)
    seen: set[str] = set()
    for i, p in enumerate(out):  # a distribution installed twice: one bom-ref each
        if p.ref in seen:
            out[i] = replace(p, ref=f"{p.ref}#{p.files[0] if p.files else i}")
        seen.add(out[i].ref)
    return out


def _beside(path: str, folder: str) -> bool:
    return path.startswith(folder) and "/" not in path[len(folder) :]


def pypi_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def python(texts: Mapping[str, str]) -> list[Package]:
    found = []
    for path, text in sorted(texts.items()):
        if not path.endswith(".dist-info/METADATA"):
            continue
        info = posixpath.dirname(path)
        meta = HeaderParser().parsestr(text)
        name, version = str(meta.get("Name", "")), str(meta.get("Version", ""))
        site = posixpath.dirname(info)
        record = texts.get(f"{info}/RECORD", "")
        files = [_in(site, line.rsplit(",", 2)[0]) for line in record.splitlines() if line.strip()]
        who, email = _author(meta)
        url = str(meta.get("Home-page") or "") or next(
            (str(u).partition(",")[2].strip() for u in meta.get_all("Project-URL") or []), ""
        )
        expression = str(meta.get("License-Expression") or "")
        # a short License field (often an SPDX id) says more than a trove classifier
        short = str(meta.get("License") or "").strip()
        names = [short] if short and "\n" not in short and len(short) < 64 else []
        names = names or [
            str(c).rsplit("::", 1)[1].strip()
            for c in meta.get_all("Classifier") or []
            if str(c).startswith("License ::") and str(c).count("::") >= 2
        ]
        requires = [str(r) for r in meta.get_all("Requires-Dist") or []]
        purl = f"pkg:pypi/{pypi_name(name)}@{quote(version, safe='+')}"
        found.append(
            (Package(purl, name, version, "library", purl, tuple(files), "", who, email, url,
                     tuple(_spdx(n) for n in names) if not expression else (), expression),
             requires)
        )  # fmt: skip
    refs = {pypi_name(p.name): p.ref for p, _ in found}
    return [_with_depends(p, _requires(r, refs)) for p, r in found]


def _in(site: str, rel: str) -> str:
    """A RECORD's path in the image: most lie under site-packages, a script at ../../../bin."""
    if rel.startswith("/") or ".." in rel or "./" in rel:
        return posixpath.normpath(posixpath.join(site, rel))
    return f"{site}/{rel}"


def _author(meta: object) -> tuple[str, str]:
    """The supplier a distribution's METADATA names: its author, else its maintainer."""
    for name_key, email_key in (("Author", "Author-email"), ("Maintainer", "Maintainer-email")):
        name = str(meta.get(name_key) or "").strip()  # type: ignore[attr-defined]
        emails = getaddresses([str(meta.get(email_key) or "")])  # type: ignore[attr-defined]
        first_name, first_email = emails[0] if emails else ("", "")
        if name or first_name or first_email:
            return name or first_name or first_email, first_email
    return "", ""


def _requires(requires: list[str], refs: Mapping[str, str]) -> tuple[str, ...]:
    """The installed distributions a list of Requires-Dist names, extras' own left out."""
    out = []
    for line in requires:
        spec, _, marker = line.partition(";")
        if "extra" in marker:
            continue  # wanted only with an extra: not what the distribution needs
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        ref = refs.get(pypi_name(m.group(1))) if m else None
        if ref and ref not in out:
            out.append(ref)
    return tuple(out)


def _with_depends(p: Package, depends: tuple[str, ...]) -> Package:
    return replace(p, depends=depends)


def debian(texts: Mapping[str, str], links: Mapping[str, str]) -> list[Package]:
    release = operating_system(texts)
    distro = f"{release.get('ID', '')}-{release.get('VERSION_ID', '')}".strip("-")
    found = []
    for block in texts.get(DPKG_STATUS, "").split("\n\n"):
        fields = HeaderParser().parsestr(block)
        name = str(fields.get("Package", ""))
        if not name or not str(fields.get("Status", "")).endswith(" installed"):
            continue
        found.append((name, fields))
    provides: dict[str, str] = {}
    refs: dict[str, str] = {}
    folders: dict[str, str] = {}  # each listed folder, resolved once: files share folders
    out = []
    for name, fields in found:
        arch, version = str(fields.get("Architecture", "")), str(fields.get("Version", ""))
        source = str(fields.get("Source", "")).split(" ")[0]
        qualifiers = [f"arch={arch}"] if arch else []
        qualifiers += [f"distro={distro}"] if distro else []
        qualifiers += [f"upstream={quote(source, safe='')}"] if source and source != name else []
        purl = f"pkg:deb/debian/{name}@{quote(version, safe='+~')}"
        purl += "?" + "&".join(sorted(qualifiers)) if qualifiers else ""
        refs[name] = purl
        for provided in _names(str(fields.get("Provides", ""))):
            provides.setdefault(provided, purl)
        listed = texts.get(f"{DPKG_INFO}{name}:{arch}.list") or texts.get(
            f"{DPKG_INFO}{name}.list", ""
        )
        files = [
            _resolved(line.strip(), links, folders) for line in listed.splitlines() if line.strip()
        ]
        who, email = parseaddr(str(fields.get("Maintainer", "")))
        copyright_ = texts.get(_resolved(f"{DOC}{name}/copyright", links), "")
        out.append(
            Package(purl, name, version, "library", purl, tuple(files), "", who or email,
                    email, "", _dep5(copyright_))
        )  # fmt: skip
    with_depends = []
    for (_, fields), p in zip(found, out, strict=True):
        wanted = ", ".join(str(fields.get(k, "")) for k in ("Pre-Depends", "Depends"))
        depends: list[str] = []
        for alternatives in wanted.split(","):
            for name in _names(alternatives.replace("|", ",")):
                ref = refs.get(name) or provides.get(name)
                if ref:  # the first alternative installed is the one that serves
                    if ref not in depends and ref != p.ref:
                        depends.append(ref)
                    break
        with_depends.append(_with_depends(p, tuple(depends)))
    return with_depends


def _names(field: str) -> list[str]:
    """The package names of a dpkg relation field, versions and architectures left out."""
    out = []
    for part in field.split(","):
        name = part.strip().split(" ")[0].split("(")[0].split(":")[0]
        if name:
            out.append(name)
    return out


def _dep5(text: str) -> tuple[str, ...]:
    """The licenses a machine-readable copyright file (DEP-5) names, in order; none where the
    file is free text, whose licenses no reader can take as stated."""
    if not text.startswith(("Format:", "Format-Specification:")) or DEP5 not in text[:200]:
        return ()
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("License:"):
            for name in re.split(r"\s+or\s+|\s+and\s+|,\s*", line[len("License:") :].strip()):
                spdx = _spdx(name.strip())
                if spdx and spdx not in out:
                    out.append(spdx)
    return tuple(out)


def _spdx(name: str) -> str:
    """An SPDX id where the name is one (or Debian's short name for one), else the name."""
    mapped = DEBIAN_SPDX.get(name)
    if mapped is not None:
        return mapped or name
    # lazy: the report reads the SBOM's names, and CycloneDX's SPDX list loads slowly
    from cyclonedx.spdx import fixup_id

    return fixup_id(name) or name


def _resolved(path: str, links: Mapping[str, str], folders: dict[str, str] | None = None) -> str:
    """`path` with its folders' symlinks followed (Debian lists /bin/ls; merged /usr holds it
    at /usr/bin/ls); the last part is kept, a package may ship a link of its own. `folders`
    keeps each folder's resolution for the next path in it."""
    folder, _, name = ("/" + path.strip("/")).rpartition("/")
    if folders is not None and folder in folders:
        return f"{folders[folder].rstrip('/')}/{name}"
    out = _followed(path, links)
    if folders is not None:
        folders[folder] = out.rpartition("/")[0]
    return out


def _followed(path: str, links: Mapping[str, str]) -> str:
    parts = path.strip("/").split("/")
    for _ in range(40):  # a loop of links ends here, unresolved
        here = "/"
        for i, part in enumerate(parts[:-1]):
            at = posixpath.join(here, part)
            if at in links:  # a relative target is read from the link's own folder
                target = posixpath.normpath(posixpath.join(here, links[at]))
                parts = target.strip("/").split("/") + parts[i + 1 :]
                break
            here = at
        else:
            return posixpath.join(here, parts[-1])
    return path
