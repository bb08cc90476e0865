#!/usr/bin/env python3
"""No document copies the generated flag reference (label unit).

docs/cli.md is generated from each flag's one declaration (`sinklm help --markdown`; cli_reference_current
holds it current). A hand-made table of flags elsewhere (a header whose first cell is "flag") drifts from it,
so every other Markdown file of the repository must link to cli.md instead.
"""
import os
import re

from sinklm_test import SOURCE, check, finish

CLI = os.path.join(SOURCE, "docs", "cli.md")


def documents():
    for directory in (SOURCE, os.path.join(SOURCE, "docs")):
        for name in sorted(os.listdir(directory)):
            if name.endswith(".md") and name not in ("cli.md", "CHANGELOG.md"):
                yield os.path.join(directory, name)


def main():
    with open(CLI, encoding="utf-8") as f:
        known = set(re.findall(r"^\| `(--[a-z][a-z0-9-]*)", f.read(), re.M))
    check(len(known) > 50, "docs/cli.md lists the flags", f"{len(known)} flags")
    for path in documents():
        name = os.path.relpath(path, SOURCE)
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        tables = [i + 1 for i, line in enumerate(lines) if re.match(r"^\|\s*flag\s*\|", line)]
        check(not tables, f"{name} copies no flag table (link to docs/cli.md)", f"flag tables at lines {tables}")
    finish()


if __name__ == "__main__":
    main()
