#!/usr/bin/env python3
"""Fails when a header includes a header of its own layer's siblings or of a layer above
(tests/layers/layers.txt): folders follow the layers, and includes only point down.

    python3 tests/layers/check_layers.py SOURCE_DIR
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
include_root = root / "include" / "luminal"
backend_root = root / "backends" / "luminal" / "backends"

rank_of = {}
for line in (root / "tests" / "layers" / "layers.txt").read_text().splitlines():
    line = line.split("#", 1)[0].split()
    if line:
        for folder in line[1:]:
            rank_of[folder] = int(line[0])


def folder_of(path):
    """The table's name for the folder of a header, or None when it is not a library header."""
    path = path.resolve()
    if backend_root in path.parents:
        return "backends"
    if include_root in path.parents:
        rel = path.relative_to(include_root)
        return "." if len(rel.parts) == 1 else rel.parts[0]
    return None


include = re.compile(r'^\s*#\s*include\s*(["<])([^">]+)[">]')
problems = []
headers = sorted(list(include_root.rglob("*.hpp")) + list(backend_root.rglob("*.hpp")))
for header in headers:
    folder = folder_of(header)
    if folder not in rank_of:
        problems.append(f"{header.relative_to(root)}: folder '{folder}' is not in tests/layers/layers.txt")
        continue
    for number, text in enumerate(header.read_text(encoding="utf-8").splitlines(), 1):
        match = include.match(text)
        if not match:
            continue
        quote, name = match.groups()
        if quote == '"':
            target = header.parent / name
        elif name.startswith("luminal/backends/"):
            target = backend_root / name[len("luminal/backends/"):]
        elif name.startswith("luminal/"):
            target = include_root / name[len("luminal/"):]
        else:
            continue  # the standard library, Boost, xtensor, ...
        if not target.exists():
            problems.append(f"{header.relative_to(root)}:{number}: includes {name}, which does not exist")
            continue
        to = folder_of(target)
        if to is None or to == folder:
            continue
        if to not in rank_of:
            problems.append(f"{header.relative_to(root)}:{number}: includes {name}, whose folder is not in the table")
        elif rank_of[to] >= rank_of[folder]:
            problems.append(f"{header.relative_to(root)}:{number}: includes {name}: '{to}' (layer {rank_of[to]}) "
                            f"is not below '{folder}' (layer {rank_of[folder]})")

for p in problems:
    print(p)
print(f"{len(headers)} headers, {len(problems)} include(s) against the layers")
sys.exit(1 if problems else 0)
