#!/usr/bin/env python3
"""The skipped tests of a ctest run, each with its labels and reason; in strict mode a failure when any test
outside the allowed labels (gpu) was skipped. scripts/test.sh runs it after ctest.

usage: ctest_skips.py JUNIT_XML [--build DIR] [--strict] [--allow-label LABEL ...]
  JUNIT_XML   what `ctest --output-junit FILE` wrote
  --build     the build directory ctest ran in (default: the XML's directory): the labels come from
              `ctest --show-only=json-v1` there
  --strict    exit 1 when a test without an allowed label was skipped or disabled
  --allow-label LABEL   a label whose skips are expected (default: gpu; repeatable)

A test is skipped when ctest says so: a script test exited 77 (SKIP_RETURN_CODE) or a GoogleTest printed
`[  SKIPPED ]` (SKIP_REGULAR_EXPRESSION); a DISABLED test counts as skipped too. Tests ctest could not run
(a missing executable, a failed fixture) are failures ctest reports itself. The reason is the line the test
printed saying why (`SKIPPED: ...` from tests/support/sinklm_test.py, the message after GoogleTest's
`Skipped`, or a line naming a skip), else its last line of output.

Standard library only: it must work when the project's venv is what is broken.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

SKIP_MESSAGES = ("SKIP_RETURN_CODE=", "SKIP_REGULAR_EXPRESSION_MATCHED")


def labels_by_test(build_dir):
    """{test name: [labels]} from ctest's own listing of the build; {} when it cannot be had."""
    try:
        out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build_dir, capture_output=True, text=True,
                             timeout=300).stdout
        tests = json.loads(out).get("tests", [])
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}
    labels = {}
    for t in tests:
        for p in t.get("properties", []):
            if p.get("name") == "LABELS":
                labels[t.get("name")] = list(p.get("value") or [])
        labels.setdefault(t.get("name"), [])
    return labels


def reason_of(output, fallback):
    """Why a test skipped, from its output."""
    lines = [l.strip() for l in (output or "").splitlines()]
    lines = [l for l in lines if l]
    for i, l in enumerate(lines):  # tests/support/sinklm_test.py's skip(); "...:" continues on the next line
        m = re.match(r"SKIPPED:\s*(.*)", l)
        if m and m.group(1):
            return m.group(1) + (" " + lines[i + 1] if m.group(1).endswith(":") and i + 1 < len(lines) else "")
    for i, l in enumerate(lines):  # GoogleTest: "file.cpp:12: Skipped" then the GTEST_SKIP() message
        if re.search(r":\d+: Skipped$", l) and i + 1 < len(lines) and not lines[i + 1].startswith("["):
            return lines[i + 1]
    for l in lines:
        if re.match(r"(skip|skipping|skipped)\b", l, re.IGNORECASE) and not l.startswith("[  SKIPPED ]"):
            return l
    for l in reversed(lines):
        if not l.startswith("[  SKIPPED ]") and not re.match(r"\[=+\]|\[-+\]|\[  PASSED  \]", l):
            return l
    return fallback


def skipped_tests(junit_path):
    """[(name, reason)] of the skipped and disabled tests in a ctest JUnit file, in its order."""
    root = ET.parse(junit_path).getroot()
    found = []
    for case in root.iter("testcase"):
        name, status = case.get("name"), case.get("status")
        output = case.findtext("system-out") or ""
        if status == "disabled":
            found.append((name, "disabled (the test's DISABLED property)"))
            continue
        skipped = case.find("skipped")
        if status == "notrun" and skipped is not None and (skipped.get("message") or "").startswith(SKIP_MESSAGES):
            found.append((name, reason_of(output, skipped.get("message") or "skipped")))
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("junit")
    ap.add_argument("--build")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--allow-label", action="append", dest="allowed")
    args = ap.parse_args(argv)
    allowed = set(args.allowed or ["gpu"])
    if not os.path.exists(args.junit):
        print(f"[test] no ctest results in {args.junit} (no test ran); no skips to list")
        return 0
    try:
        skips = skipped_tests(args.junit)
    except ET.ParseError as e:
        print(f"[test] {args.junit}: not a ctest JUnit file ({e})", file=sys.stderr)
        return 1
    if not skips:
        print("[test] skipped tests: none")
        return 0
    labels = labels_by_test(args.build or os.path.dirname(os.path.abspath(args.junit)))
    refused = []
    print(f"[test] skipped tests ({len(skips)}):")
    for name, reason in skips:
        own = labels.get(name, [])
        ok = bool(allowed.intersection(own))
        if not ok:
            refused.append(name)
        print(f"  {name} [{','.join(own) or 'no label'}]: {reason}")
    if args.strict and refused:
        print(f"[test] strict mode (CI=true or --strict): {len(refused)} skipped test(s) outside the "
              f"{', '.join(sorted(allowed))} label(s) fail the run: {', '.join(refused)}")
        return 1
    if refused:
        print(f"[test] {len(refused)} of them would fail the run in strict mode (CI=true or scripts/test.sh --strict)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
