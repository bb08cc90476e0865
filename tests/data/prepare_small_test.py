"""End-to-end: `sinklm prepare corpus` on a few small Debian packages (real English text), then
`prepare shards` and `prepare sentencepiece`; checks the manifest (sources, licences, splits, token counts
recomputed with tiktoken), the shard bytes against tiktoken's ids, determinism of the split, and a
SentencePiece round trip through `sinklm tokenize`. Exit 77 (skipped) without openai-whisper or when
apt-get cannot download the packages (offline machine)."""
import json
import os
import struct

import gpt2_reference as ref
from sinklm_test import CommandFailed, check, finish, run_sinklm, skip, temp_dir

SOURCES = "bible-kjv,fortunes,dict-devil"


def run(*args, stdin=None):
    """stdout (bytes) of `sinklm ARGS...`, which must succeed."""
    return run_sinklm(*args, stdin=stdin, text=False).stdout


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, width, tokens, docs, vocab, eot = struct.unpack_from("<8sIIQQII", data, 0)
    assert magic == b"SINKTOK\0" and version == 1, f"{path}: bad header"
    assert len(data) == 64 + tokens * width + (docs + 1) * 8, f"{path}: size disagrees with header"
    fmt = "<%d%s" % (tokens, "H" if width == 2 else "I")
    ids = list(struct.unpack_from(fmt, data, 64))
    starts = list(struct.unpack_from("<%dQ" % (docs + 1), data, 64 + tokens * width))
    return ids, starts, eot, vocab


def main():
    rank_path = ref.gpt2_rank_file()
    if rank_path is None:
        skip("openai-whisper (GPT-2 rank file) not installed")
    with temp_dir("sinklm-prepare-") as work:
        run_checks(work, rank_path)
    finish()


def run_checks(work, rank_path):
    encoding = ref.tiktoken_encoding(rank_path)
    cache = os.environ.get("SINKLM_DEB_CACHE", os.path.join(os.getcwd(), "deb-cache"))
    corpus = os.path.join(work, "corpus")
    try:
        run("prepare", "corpus", "--out", corpus, "--sources", SOURCES, "--cache", cache, "--seed", "5",
            "--validation-fraction", "0.05", "--test-fraction", "0.05", "--tokenizer", rank_path)
    except CommandFailed as e:
        if "apt-get download" in str(e):
            skip(f"cannot download Debian packages here:\n{e}")
        raise

    # Per-document checks print only when they fail (quiet): there are thousands.
    manifest = json.load(open(os.path.join(corpus, "manifest.json")))
    names = [s["name"] for s in manifest["sources"]]
    check(sorted(names) == sorted(SOURCES.split(",")), "the manifest lists the sources asked for", f"{names}")
    for s in manifest["sources"]:
        check(s["licence"] and s["debian_packages"] and all(p["version"] for p in s["debian_packages"]),
              f"source {s['name']} has a licence and package versions")
    bible = [d for d in manifest["documents"] if d["source"] == "bible-kjv"]
    check(len(bible) == 66, "66 bible books", f"{len(bible)}")
    total = 0
    by_id = {d["id"]: d for d in manifest["documents"]}
    texts = {}
    for split in ("train", "validation", "test"):
        docs = [json.loads(line) for line in open(os.path.join(corpus, split + ".jsonl"), encoding="utf-8")]
        check(len(docs) > 0, f"split {split} is not empty")
        check(manifest["splits"][split]["documents"] == len(docs), f"split {split}: the manifest's document count",
              f"{manifest['splits'][split]['documents']} vs {len(docs)}")
        for d in docs:
            texts[d["id"]] = (split, d["text"])
            total += len(d["text"].encode())
            check(by_id[d["id"]]["split"] == split, f"{d['id']}: the manifest's split", quiet=True)
            check(by_id[d["id"]]["tokens"] == len(encoding.encode_ordinary(d["text"])),
                  f"{d['id']}: the manifest's token count = tiktoken's", quiet=True)
    check(total > 5_000_000, "more than 5 MB of text", f"{total} bytes")
    check("In the beginning God created the heaven and the earth." in texts["bible-kjv/Ge"][1], "Genesis text")

    again = os.path.join(work, "corpus-again")
    run("prepare", "corpus", "--out", again, "--sources", SOURCES, "--cache", cache, "--seed", "5",
        "--validation-fraction", "0.05", "--test-fraction", "0.05")
    for split in ("train", "validation", "test"):
        check(open(os.path.join(corpus, split + ".jsonl"), "rb").read() == open(os.path.join(again, split + ".jsonl"), "rb").read(),
              f"{split}: two runs with one seed give the same bytes")

    shards = os.path.join(work, "shards")
    run("prepare", "shards", "--tokenizer", rank_path, "--in", corpus, "--out", shards, "--shard-tokens", "300000")
    smanifest = json.load(open(os.path.join(shards, "manifest.json")))
    check(len(smanifest["splits"]["train"]["shards"]) > 1, "several train shards")
    docs_in_order = [d for d in smanifest["documents"]]
    for split in ("train", "validation", "test"):
        expected = [d for d in docs_in_order if d["split"] == split]
        i = 0
        for name in smanifest["splits"][split]["shards"]:
            ids, starts, eot, vocab = read_shard(os.path.join(shards, name))
            check(eot == 50256 and vocab == 50257, f"{name}: eot 50256, vocab 50257", f"eot {eot} vocab {vocab}", quiet=True)
            for k in range(len(starts) - 1):
                doc = expected[i]
                i += 1
                want = encoding.encode_ordinary(texts[doc["id"]][1]) + [eot]
                check(ids[starts[k]:starts[k + 1]] == want, f"{name} document {k} ({doc['id']}): tiktoken's ids", quiet=True)
        check(i == len(expected), f"{split}: the shards hold the documents the manifest lists",
              f"{i} vs {len(expected)}")

    spm = os.path.join(work, "spm")
    run("prepare", "sentencepiece", "--in", corpus, "--out", spm, "--vocab-size", "2000", "--threads", "2")
    sample = texts["bible-kjv/Ge"][1][:5000] + "\nnaïve — 1234 €\n"
    ids = run("tokenize", "--tokenizer", os.path.join(spm, "tokenizer.model"), stdin=sample.encode())
    check(len(ids.split()) < len(sample) / 2, "the sentencepiece vocabulary compresses the text")
    back = run("tokenize", "--tokenizer", os.path.join(spm, "tokenizer.model"), "--decode", stdin=ids)
    check(back == sample.encode(), "sentencepiece round trip")
    print(f"corpus {total / 1e6:.1f} MB, {len(texts)} documents")


if __name__ == "__main__":
    main()
