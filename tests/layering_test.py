#!/usr/bin/env python3
"""The include-direction rule (label unit): each library includes only its own layer and the layers below it.

Layers, lowest first:
  core/   no LibTorch
  data/   no LibTorch
  model/
  serve/  (no trainer, no evaluation)
  eval/   scores through serve/'s cached decoder and streams through its caches
  train/  its sink probe measures attention with eval/attention_analysis.h
  cli/
Two directories at the same level would be siblings: neither may include the other.
tests/ may include anything and is not read. Every `#include "..."` of the project's .h/.cpp files under the
layer directories is read; a quoted include resolves like the compiler's (next to the including file, then
from the source root, which is the include directory); one that resolves to no project file (a system header
in quotes) is not a layer's. A file fails, named with its line and the rule, when it includes a layer above its
own or a sibling, a project file outside the layers (e.g. tests/), or, in core/ and data/, a LibTorch header
(<torch/...>, <ATen/...>, <c10/...>, <caffe2/...>, in quotes or angle brackets).
"""
import os
import re

from sinklm_test import SOURCE, check, finish

LAYERS = {"core": 0, "data": 1, "model": 2, "serve": 3, "eval": 4, "train": 5, "cli": 6}
NO_TORCH = {"core", "data"}
TORCH_HEADERS = ("torch/", "ATen/", "c10/", "caffe2/")
SOURCE_SUFFIXES = (".h", ".cpp", ".hpp", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def describe(layer):
    return f"{layer}/ (layer {LAYERS[layer]})"


def sources():
    """(path relative to SOURCE, layer) of every source file under the layer directories, sorted."""
    found = []
    for layer in LAYERS:
        for directory, subdirs, files in os.walk(os.path.join(SOURCE, layer)):
            subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d != "__pycache__")
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    found.append((os.path.relpath(os.path.join(directory, name), SOURCE), layer))
    return found


def resolve(including, target):
    """The project path (relative to SOURCE) a quoted include names, or None when it is no project file."""
    for base in (os.path.dirname(os.path.join(SOURCE, including)), SOURCE):
        path = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(path):
            relative = os.path.relpath(path, SOURCE)
            return None if relative.startswith("..") else relative
    return None


def violation(path, layer, bracket, target):
    """Why this include breaks the rule, or "" when it does not."""
    if layer in NO_TORCH and target.startswith(TORCH_HEADERS):
        return f"{describe(layer)} must not use LibTorch: {target} is a LibTorch header"
    if bracket != '"':
        return ""
    included = resolve(path, target)
    if included is None:
        return ""
    other = included.split(os.sep)[0]
    if other == layer:
        return ""
    if other not in LAYERS:
        return f"{describe(layer)} includes {included}, which is in no layer (libraries include only layers)"
    if LAYERS[other] > LAYERS[layer]:
        return f"{describe(layer)} must not include {describe(other)}: a layer above it"
    if LAYERS[other] == LAYERS[layer]:
        return f"{describe(layer)} must not include {describe(other)}: siblings, neither includes the other"
    return ""


def main():
    files = sources()
    check(len(files) > 0, "the layer directories hold sources", SOURCE)
    includes = 0
    for path, layer in files:
        with open(os.path.join(SOURCE, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                includes += 1
                why = violation(path, layer, match.group(1), match.group(2).strip())
                check(not why, f"{path}:{number}: {line.strip()}", why, quiet=True)
    print(f"read {includes} includes in {len(files)} files under {', '.join(f'{d}/' for d in LAYERS)}")
    finish()


if __name__ == "__main__":
    main()
