#!/usr/bin/env python3
"""`sinklm prepare shards` over real MPI ranks and threads, interrupted and resumed (label dist).

A multi-file corpus (JSONL cut into byte ranges, JSONL.zst, JSONL.gz, text files) is tokenized
  - by 1 process with 1 thread (the reference),
  - by `mpirun -np 2` ranks with 1 thread each, and by 1 process with 2 threads,
  - by a process SIGKILLed halfway through a unit (after it finished some), then rerun: once with the same
    command, and once killed again and resumed by 2 ranks;
and every output directory must be byte-identical to the reference: same file names, same bytes.
Exit 77 (skipped) without openai-whisper (the GPT-2 rank file) or the zstd CLI.
"""
import filecmp
import gzip
import json
import os
import shutil
import subprocess

import gpt2_reference as ref
import sinklm_test
from sinklm_test import BIN, check, finish, skip, temp_dir

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2"]


def run(cmd, expect=0):
    return sinklm_test.run(cmd, expect=expect, env=ENV, timeout=300)


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names)


def same_directory(a, b):
    names_a, names_b = files_under(a), files_under(b)
    if names_a != names_b:
        return f"file names differ: {sorted(set(names_a) ^ set(names_b))[:5]}"
    _, mismatch, errors = filecmp.cmpfiles(a, b, names_a, shallow=False)
    return f"differ: {mismatch + errors}" if mismatch or errors else ""


def make_corpus(root):
    text = ref.real_english_text(1_500_000)
    docs, pos, n = [], 0, 0
    while pos < len(text):
        size = 200 + (n * 7919) % 4000
        docs.append(f"document {n}: {text[pos:pos + size]}")
        pos += size
        n += 1
    os.makedirs(os.path.join(root, "more"))
    third = len(docs) // 3
    with open(os.path.join(root, "a.jsonl"), "w", encoding="utf-8") as f:
        for d in docs[:third]:
            f.write(json.dumps({"text": d, "meta": {"len": len(d)}}) + "\n")
        f.write("{broken json\n")
    raw = os.path.join(root, "b.jsonl")
    with open(raw, "w", encoding="utf-8") as f:
        for d in docs[third:2 * third]:
            f.write(json.dumps({"text": d}) + "\n")
    subprocess.run(["zstd", "-q", "--rm", raw, "-o", raw + ".zst"], check=True)
    with gzip.open(os.path.join(root, "more", "c.jsonl.gz"), "wt", encoding="utf-8") as f:
        for d in docs[2 * third:-20]:
            f.write(json.dumps({"text": d}) + "\n")
    for i, d in enumerate(docs[-20:]):
        with open(os.path.join(root, "more", f"t{i:02d}.txt"), "w", encoding="utf-8") as f:
            f.write(d)
    return len(docs)


def main():
    rank_path = ref.gpt2_rank_file()
    if rank_path is None or not shutil.which("zstd") or shutil.which("mpirun") is None:
        skip("needs openai-whisper (the GPT-2 rank file), the zstd CLI and mpirun (scripts/setup.sh)")
    with temp_dir("sinklm-prepare-dist-") as work:
        corpus = os.path.join(work, "corpus")
        n_docs = make_corpus(corpus)

        def command(out, threads, *extra):
            return [BIN, "prepare", "shards", "--tokenizer", rank_path, "--in", corpus, "--out", out,
                    "--unit-bytes", "96K", "--shard-tokens", "20000", "--validation-size", "0.05",
                    "--test-size", "0.05", "--threads", str(threads), "--progress-seconds", "0", *extra]

        ref_dir = os.path.join(work, "one")
        p = run(command(ref_dir, 1))
        summary = json.load(open(os.path.join(ref_dir, "summary.json")))
        check(summary["documents"] == n_docs and summary["bad_lines"] == 1, f"reference run: {summary['documents']} "
              f"of {n_docs} documents, {summary['bad_lines']} bad line")
        units = summary["inputs"]["units"]
        check(units >= 8, f"{units} work units")

        p = run(MPIRUN + command(os.path.join(work, "two-ranks"), 1))
        check("over 2 rank(s)" in p.stderr, "mpirun -np 2 runs 2 ranks")
        diff = same_directory(ref_dir, os.path.join(work, "two-ranks"))
        check(not diff, f"2 ranks == 1 process, byte for byte {diff}")
        run(command(os.path.join(work, "two-threads"), 2))
        diff = same_directory(ref_dir, os.path.join(work, "two-threads"))
        check(not diff, f"2 threads == 1 thread, byte for byte {diff}")

        killed = os.path.join(work, "killed")
        p = run(command(killed, 2, "--fault-kill-after-units", "3"), expect=None)
        records = os.listdir(os.path.join(killed + ".partial", "units")) if os.path.isdir(killed + ".partial") else []
        check(p.returncode != 0 and not os.path.exists(killed) and 3 <= len(records) < units,
              f"SIGKILL mid-unit leaves a partial job (exit {p.returncode}, {len(records)} of {units} units recorded)")
        p = run(command(killed, 2))
        check(f"resuming: {len(records)} of {units} unit(s)" in p.stderr, "the rerun keeps the finished units")
        diff = same_directory(ref_dir, killed)
        check(not diff and not os.path.exists(killed + ".partial"), f"killed + rerun == uninterrupted {diff}")

        killed2 = os.path.join(work, "killed-then-two-ranks")
        p = run(command(killed2, 1, "--fault-kill-after-units", "5"), expect=None)
        check(p.returncode != 0, f"second SIGKILL (exit {p.returncode})")
        p = run(MPIRUN + command(killed2, 1))
        diff = same_directory(ref_dir, killed2)
        check("resuming: 5 of" in p.stderr and not diff, f"killed, resumed on 2 ranks == uninterrupted {diff}")
    finish()


if __name__ == "__main__":
    main()
