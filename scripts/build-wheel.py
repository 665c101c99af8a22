#!/usr/bin/env python3
"""Builds the spindle-ml wheel: the spindle binary and the Python package, one version.

Usage: build-wheel.py --binary bin/spindle --version 0.1.0 --out dist/

The wheel holds the package (python/spindle/*.py) and the binary as a data
script (spindle_ml-VERSION.data/scripts/spindle), which pip installs into
the environment's bin directory, so `pip install` puts `spindle` on PATH.
It is written with the standard library alone (zipfile and the wheel
format's METADATA, WHEEL and RECORD files), so it builds offline.

The platform tag comes from the binary itself: its ELF machine (x86_64 or
aarch64) and the newest glibc symbol version it needs. A binary built
without cgo needs no libc and gets manylinux_2_17, the oldest tag pip
installs on any current Linux.
"""

import argparse
import base64
import hashlib
import os
import re
import struct
import sys
import zipfile

NAME = "spindle-ml"
DIST = "spindle_ml"  # the name as it appears in file names
MACHINES = {62: "x86_64", 183: "aarch64"}  # ELF e_machine
OLDEST_GLIBC = (2, 17)


def elf_arch(data, path):
    """Return the wheel arch of an ELF executable, or exit naming the file."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"build-wheel: {path} is not a 64-bit ELF executable")
    endian = "<" if data[5] == 1 else ">"
    (machine,) = struct.unpack_from(endian + "H", data, 18)
    if machine not in MACHINES:
        sys.exit(f"build-wheel: {path} is for ELF machine {machine}; wheels are built for x86_64 and aarch64")
    return MACHINES[machine]


def glibc_needed(data):
    """Return the newest GLIBC_x.y version the binary's symbols name, or None when it needs no libc."""
    versions = {tuple(int(p) for p in m.groups()) for m in re.finditer(rb"GLIBC_(\d+)\.(\d+)(?![\d.])", data)}
    return max(versions) if versions else None


def platform_tag(data, path):
    arch = elf_arch(data, path)
    need = glibc_needed(data) or OLDEST_GLIBC
    need = max(need, OLDEST_GLIBC)
    tag = f"manylinux_{need[0]}_{need[1]}_{arch}"
    if need == OLDEST_GLIBC:
        tag += f".manylinux2014_{arch}"  # for pip older than 20.3
    return tag


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def metadata(version, readme):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {version}",
        "Summary: Distributed training on Hadoop clusters: the spindle command and its Python API",
        "License: Apache-2.0",
        "Requires-Python: >=3.8",
        "Requires-Dist: numpy>=1.17",
        "Provides-Extra: arrow",
        'Requires-Dist: pyarrow; extra == "arrow"',
        "Provides-Extra: spark",
        'Requires-Dist: pyarrow; extra == "spark"',
        'Requires-Dist: pyspark; extra == "spark"',
        'Requires-Dist: cloudpickle; extra == "spark"',
        "Provides-Extra: run",
        'Requires-Dist: cloudpickle; extra == "run"',
        "Description-Content-Type: text/markdown",
        "",
        readme,
    ]
    return "\n".join(lines).encode()


def build(binary, version, src, out):
    with open(binary, "rb") as f:
        exe = f.read()
    tag = platform_tag(exe, binary)
    pkg_dir = os.path.join(src, "spindle")
    with open(os.path.join(pkg_dir, "_version.py"), encoding="utf-8") as f:
        m = re.search(r'__version__ = "([^"]+)"', f.read())
    if not m or m.group(1) != version:
        sys.exit(f"build-wheel: {pkg_dir}/_version.py says {m.group(1) if m else 'nothing'}, the wheel is {version}: "
                 "the binary and the package must carry one version")
    with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
        readme = f.read()

    info = f"{DIST}-{version}.dist-info"
    files = []  # (name in the wheel, bytes, unix mode)
    for name in sorted(os.listdir(pkg_dir)):
        if name.endswith(".py"):
            with open(os.path.join(pkg_dir, name), "rb") as f:
                files.append((f"spindle/{name}", f.read(), 0o644))
    # The Spark pusher's jar (scripts/build-spark-jar.sh), when built.
    jars = os.path.join(pkg_dir, "jars")
    for name in sorted(os.listdir(jars)) if os.path.isdir(jars) else ():
        if name.endswith(".jar"):
            with open(os.path.join(jars, name), "rb") as f:
                files.append((f"spindle/jars/{name}", f.read(), 0o644))
    files.append((f"{DIST}-{version}.data/scripts/spindle", exe, 0o755))
    files.append((f"{info}/METADATA", metadata(version, readme), 0o644))
    wheel = f"Wheel-Version: 1.0\nGenerator: spindle build-wheel.py\nRoot-Is-Purelib: false\n"
    for t in tag.split("."):
        wheel += f"Tag: py3-none-{t}\n"
    files.append((f"{info}/WHEEL", wheel.encode(), 0o644))
    files.append((f"{info}/top_level.txt", b"spindle\n", 0o644))

    record = [record_line(n, d) for n, d, _ in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))

    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"{DIST}-{version}-py3-none-{tag}.whl")
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:
            zi = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(tmp, path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True, help="the spindle executable to carry")
    ap.add_argument("--version", required=True, help="the wheel's version (python/spindle/_version.py's)")
    ap.add_argument("--src", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"),
                    help="the directory holding spindle/ and README.md")
    ap.add_argument("--out", default="dist", help="where to write the wheel")
    a = ap.parse_args()
    print(build(a.binary, a.version, a.src, a.out))


if __name__ == "__main__":
    main()
