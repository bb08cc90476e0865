"""End-to-end: `sinklm prepare shards` on the inputs people bring (label e2e).

Real files of every kind: JSONL (with extra fields, CRLF lines, blank lines and malformed lines), JSONL.gz,
multi-frame JSONL.zst (the zstd CLI), a directory of .txt files (one document each), a glob, and .txt with
blank-line-separated blocks. Checks, with a small --unit-bytes so that files are cut into byte ranges over
several units:
  - every document's tokens in the shards equal `sinklm tokenize` of the same text, in input order, and each
    document sits in the split its seeded hash gives (reimplemented here);
  - bad_lines.tsv lists every malformed line (file:line) and nothing else is lost; summary.json totals;
  - a `sinklm prepare corpus` directory keeps its splits and document ids;
  - token-count split sizes; --max-bad-fraction; user errors naming the input.
Exit 77 (skipped) without openai-whisper (the GPT-2 rank file) or the zstd CLI.
"""
import gzip
import json
import os
import random
import shutil
import struct
import subprocess

import gpt2_reference as ref
from sinklm_test import check, finish, run_sinklm, skip, temp_dir

M64 = (1 << 64) - 1


def run(*args, stdin=None, expect=0):
    """`sinklm ARGS...` with bytes in and out."""
    return run_sinklm(*args, stdin=stdin, expect=expect, text=False)


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def split_of(seed, text, validation, test):
    """data/prepare/hash_split.h: FNV-1a over the UTF-8 bytes, seeded and mixed with SplitMix64."""
    h = splitmix64(seed) ^ 0xCBF29CE484222325
    for c in text.encode():
        h = ((h ^ c) * 0x100000001B3) & M64
    u = (splitmix64(h) >> 11) / float(1 << 53)
    return "validation" if u < validation else "test" if u < validation + test else "train"


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, width, tokens, docs, vocab, eot = struct.unpack_from("<8sIIQQII", data, 0)
    assert magic == b"SINKTOK\0" and len(data) == 64 + tokens * width + (docs + 1) * 8, path
    ids = list(struct.unpack_from("<%d%s" % (tokens, "H" if width == 2 else "I"), data, 64))
    starts = list(struct.unpack_from("<%dQ" % (docs + 1), data, 64 + tokens * width))
    return [ids[starts[k]:starts[k + 1]] for k in range(docs)]


def split_documents(out):
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    return manifest, {s: [d for name in manifest["splits"][s]["shards"] for d in read_shard(os.path.join(out, name))]
                      for s in ("train", "validation", "test")}


def tokenize(rank_path, texts):
    lines = "".join(json.dumps(t) + "\n" for t in texts).encode()
    out = run("tokenize", "--tokenizer", rank_path, "--jsonl", stdin=lines).stdout.decode().splitlines()
    return [[int(x) for x in line.split()] for line in out]


def make_documents(count, seed):
    text = ref.real_english_text(600_000)
    rng = random.Random(seed)
    extras = ["naïve café", "— 日本語のテキスト", "emoji 😀 ok", "Ελληνικά", "tab\there", "quote \" and \\ backslash"]
    docs = []
    for i in range(count):
        start = rng.randrange(0, len(text) - 4000)
        body = text[start:start + rng.randrange(40, 3000)]
        docs.append(f"{rng.choice(extras)} {i}\n{body}")
    return docs


def main():
    rank_path = ref.gpt2_rank_file()
    if rank_path is None or not shutil.which("zstd"):
        skip("needs openai-whisper (the GPT-2 rank file) and the zstd CLI (scripts/setup.sh)")
    with temp_dir("sinklm-inputs-") as work:
        run_checks(work, rank_path)
    finish()


def run_checks(work, rank_path):
    docs = make_documents(270, 7)
    inp = os.path.join(work, "in")
    os.makedirs(os.path.join(inp, "sub"))
    os.makedirs(os.path.join(inp, "txt"))
    a = os.path.join(inp, "a.jsonl")
    # a.jsonl: documents 0..99 with extra fields, CRLF on some lines, blank lines, and malformed lines.
    bad_expected = []
    lines = []
    for i in range(100):
        rec = {"id": i, "meta": {"source": "test", "n": i}, "text": docs[i]}
        lines.append(json.dumps(rec, ensure_ascii=(i % 2 == 0)).encode() + (b"\r" if i % 7 == 0 else b""))
        if i == 10:
            lines.append(b"")
            lines.append(b"   ")
        if i in (20, 40, 60, 80, 90):
            bad = {20: b'{"text": "unterminated', 40: b'{"content": "no text field"}', 60: b'{"text": 42}',
                   80: b'["text", "a list"]', 90: b'{"text": "bad \xff byte"}'}[i]
            lines.append(bad)
            bad_expected.append((a, len(lines), {20: "not JSON", 40: "no \"text\" field", 60: "number, not a string",
                                                 80: "a JSON array", 90: "invalid UTF-8"}[i]))
        if i == 50:
            lines.append(b'{"text": ""}')  # empty: skipped and counted, not malformed
    with open(a, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    with gzip.open(os.path.join(inp, "sub", "b.jsonl.gz"), "wb") as f:
        for i in range(100, 200):
            f.write((json.dumps({"text": docs[i]}) + "\n").encode())
    # c.jsonl.zst: two zstd frames concatenated (as `zstd` of appended files produces).
    zst = os.path.join(inp, "sub", "c.jsonl.zst")
    for part, rng_ in (("p1", range(200, 230)), ("p2", range(230, 260))):
        raw = os.path.join(work, part + ".jsonl")
        with open(raw, "w", encoding="utf-8") as f:
            for i in rng_:
                f.write(json.dumps({"text": docs[i]}) + "\n")
        subprocess.run(["zstd", "-q", "-f", raw, "-o", raw + ".zst"], check=True)
        with open(zst, "ab") as out, open(raw + ".zst", "rb") as src:
            out.write(src.read())
    for i in range(260, 270):
        with open(os.path.join(inp, "txt", f"d{i}.txt"), "w", encoding="utf-8") as f:
            f.write(docs[i])
    expected_docs = docs  # file path order: a.jsonl, sub/b.jsonl.gz, sub/c.jsonl.zst, txt/d260..d269.txt

    seed, fv, ft = 99, 0.1, 0.1
    out = os.path.join(work, "shards")
    result = run("prepare", "shards", "--tokenizer", rank_path, "--in", a, os.path.join(inp, "sub", "*.jsonl.*"),
                 "--in", os.path.join(inp, "txt"), "--out", out, "--seed", str(seed), "--validation-size", str(fv),
                 "--test-size", str(ft), "--unit-bytes", "16K", "--shard-tokens", "3000", "--threads", "2",
                 "--max-bad-fraction", "0.05", "--progress-seconds", "0")
    stderr = result.stderr.decode()
    check("[prepare shards]" in stderr and "MB/s" in stderr and "ETA" in stderr and "bad lines" in stderr,
          "progress line with MB/s, tokens/s, documents, bad lines and ETA")
    manifest, got = split_documents(out)
    ids = tokenize(rank_path, expected_docs)
    eot = manifest["end_of_text_id"]
    for s in ("train", "validation", "test"):
        want = [ids[i] + [eot] for i, d in enumerate(expected_docs) if split_of(seed, d, fv, ft) == s]
        check(len(want) > 0, f"{s}: expected documents")
        check(got[s] == want, f"{s}: {len(got[s])} documents in shards equal `sinklm tokenize` of the {len(want)} "
                              f"documents the hash puts there, in input order")
    check(len(manifest["splits"]["train"]["shards"]) > 3, "train split cut into several shards")
    report = [line for line in open(os.path.join(out, "bad_lines.tsv"), encoding="utf-8") if not line.startswith("#")]
    check([r.split("\t")[0] for r in report] == [f"{p}:{n}" for p, n, _ in bad_expected],
          f"bad_lines.tsv lists exactly the malformed lines by file:line ({len(report)} of {len(bad_expected)})")
    check(all(why in r for r, (_, _, why) in zip(report, bad_expected)), "bad_lines.tsv gives each problem")
    summary = json.load(open(os.path.join(out, "summary.json")))
    check(summary["bad_lines"] == len(bad_expected) and summary["empty_documents"] == 1, "summary: bad and empty counts")
    check(summary["documents"] == len(expected_docs), "summary: documents (nothing else lost)")
    check(all(summary["splits"][s]["tokens"] == sum(len(d) for d in got[s]) for s in got), "summary: tokens per split")
    check(summary["inputs"]["units"] > 4 and summary["inputs"]["files"] == 13, f"units {summary['inputs']}")

    # Blank-line-separated blocks in text files.
    blocks_dir = os.path.join(work, "blocks")
    os.makedirs(blocks_dir)
    blocks = ["\n".join(line.rstrip("\r") for line in d.split("\n") if line.strip(" \t\r\f\v"))
              for d in docs[:40]]
    with open(os.path.join(blocks_dir, "book.txt"), "w", encoding="utf-8", newline="") as f:
        f.write("\n\n".join(blocks[:20]) + "\n \t\n\r\n" + "\n\n\n".join(blocks[20:]) + "\n")
    out2 = os.path.join(work, "shards-blocks")
    run("prepare", "shards", "--tokenizer", rank_path, "--in", blocks_dir, "--out", out2, "--text-blocks",
        "--validation-size", "0", "--test-size", "0", "--unit-bytes", "2K")  # cut into byte ranges
    _, got2 = split_documents(out2)
    want2 = [i + [eot] for i in tokenize(rank_path, blocks)]
    check(got2["train"] == want2, f"--text-blocks: {len(got2['train'])} blocks == `sinklm tokenize` of {len(want2)}")
    check(json.load(open(os.path.join(out2, "summary.json")))["inputs"]["units"] > 5, "--text-blocks: several units")

    # A `sinklm prepare corpus` directory keeps its splits and lists its documents by id.
    corpus = os.path.join(work, "corpus")
    os.makedirs(corpus)
    json.dump({"format": "sinklm-corpus", "format_version": 1}, open(os.path.join(corpus, "manifest.json"), "w"))
    corpus_docs = {"train": docs[:30], "validation": docs[30:35], "test": docs[35:40]}
    for split, texts in corpus_docs.items():
        with open(os.path.join(corpus, split + ".jsonl"), "w", encoding="utf-8") as f:
            for k, t in enumerate(texts):
                f.write(json.dumps({"id": f"{split}/{k}", "text": t}) + "\n")
    out4 = os.path.join(work, "shards-corpus")
    run("prepare", "shards", "--tokenizer", rank_path, "--in", corpus, "--out", out4)
    manifest4, got4 = split_documents(out4)
    for split, texts in corpus_docs.items():
        check(got4[split] == [i + [eot] for i in tokenize(rank_path, texts)], f"corpus directory: {split} kept")
        listed = [d["id"] for d in manifest4["documents"] if d["split"] == split]
        check(listed == [f"{split}/{k}" for k in range(len(texts))], f"corpus directory: {split} document ids listed")

    # Token-count split sizes become fractions of an estimate of the corpus's tokens.
    out3 = os.path.join(work, "shards-tokens")
    run("prepare", "shards", "--tokenizer", rank_path, "--in", inp, "--out", out3, "--validation-size", "20K",
        "--test-size", "10K", "--max-bad-fraction", "0.05")
    s3 = json.load(open(os.path.join(out3, "summary.json")))
    total = sum(v["tokens"] for v in s3["splits"].values())
    check(abs(s3["estimated_tokens"] - total) < 0.3 * total, f"token estimate {s3['estimated_tokens']} vs {total}")
    check(0 < s3["splits"]["validation"]["tokens"] < 3 * 20000, f"validation ~20K tokens: {s3['splits']['validation']}")

    # --max-bad-fraction: 5 malformed of ~106 records in a.jsonl is more than 1%.
    r = run("prepare", "shards", "--tokenizer", rank_path, "--in", a, "--out", os.path.join(work, "x"), expect=2)
    err = r.stderr.decode()
    check("--max-bad-fraction" in err and f"{a}:{bad_expected[0][1]}" in err,
          f"--max-bad-fraction exceeded names the first bad line: {err.strip()[-300:]}")
    check(not os.path.exists(os.path.join(work, "x")), "no output directory after a failed job")
    # User errors name the input.
    csv = os.path.join(work, "table.csv")
    open(csv, "w").write("a,b\n")
    for args, needle in (([os.path.join(work, "missing.jsonl")], "missing.jsonl: no such file"),
                         ([csv], "table.csv: unknown input type"),
                         ([os.path.join(work, "nothing-*.jsonl")], "matches no file")):
        r = run("prepare", "shards", "--tokenizer", rank_path, "--in", *args, "--out", os.path.join(work, "y"), expect=2)
        check(needle in r.stderr.decode(), f"error names the input: {r.stderr.decode().strip()}")
    r = run("prepare", "shards", "--tokenizer", rank_path, "--in", a, "--out", os.path.join(work, "y"),
            "--validation-size", "1.5", expect=2)
    check("--validation-size" in r.stderr.decode(), f"bad size names the flag: {r.stderr.decode().strip()}")


if __name__ == "__main__":
    main()
