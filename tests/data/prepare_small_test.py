"""End-to-end: `sinklm prepare corpus` on a few small Debian packages (real English text), then
`prepare shards` and `prepare sentencepiece`; checks the manifest (sources, licences, splits, token counts
recomputed with tiktoken), the shard bytes against tiktoken's ids, determinism of the split, and a
SentencePiece round trip through `sinklm tokenize`. Exit 77 (skipped) without openai-whisper or when
apt-get cannot download the packages (offline machine)."""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.environ["SINKLM_SOURCE_DIR"], "scripts"))
import gpt2_reference as ref  # noqa: E402

SINKLM = os.environ["SINKLM_BIN"]
SOURCES = "bible-kjv,fortunes,dict-devil"


def run(*args, stdin=None):
    out = subprocess.run([SINKLM, *args], input=stdin, capture_output=True)
    if out.returncode != 0:
        raise RuntimeError(f"sinklm {' '.join(args)} failed ({out.returncode}):\n{out.stderr.decode()}")
    return out.stdout


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
        print("SKIP: openai-whisper (GPT-2 rank file) not installed")
        return 77
    encoding = ref.tiktoken_encoding(rank_path)
    cache = os.environ.get("SINKLM_DEB_CACHE", os.path.join(os.getcwd(), "deb-cache"))
    work = tempfile.mkdtemp(prefix="sinklm-prepare-")
    corpus = os.path.join(work, "corpus")
    try:
        run("prepare", "corpus", "--out", corpus, "--sources", SOURCES, "--cache", cache, "--seed", "5",
            "--validation-fraction", "0.05", "--test-fraction", "0.05", "--tokenizer", rank_path)
    except RuntimeError as e:
        if "apt-get download" in str(e):
            print(f"SKIP: cannot download Debian packages here:\n{e}")
            return 77
        raise
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    manifest = json.load(open(os.path.join(corpus, "manifest.json")))
    names = [s["name"] for s in manifest["sources"]]
    check(sorted(names) == sorted(SOURCES.split(",")), f"sources {names}")
    for s in manifest["sources"]:
        check(s["licence"] and s["debian_packages"] and all(p["version"] for p in s["debian_packages"]),
              f"source {s['name']} lacks licence or package versions")
    bible = [d for d in manifest["documents"] if d["source"] == "bible-kjv"]
    check(len(bible) == 66, f"{len(bible)} bible books")
    total = 0
    by_id = {d["id"]: d for d in manifest["documents"]}
    texts = {}
    for split in ("train", "validation", "test"):
        docs = [json.loads(line) for line in open(os.path.join(corpus, split + ".jsonl"), encoding="utf-8")]
        check(len(docs) > 0, f"split {split} is empty")
        check(manifest["splits"][split]["documents"] == len(docs), f"split {split} count")
        for d in docs:
            texts[d["id"]] = (split, d["text"])
            total += len(d["text"].encode())
            check(by_id[d["id"]]["split"] == split, f"{d['id']} split mismatch")
            check(by_id[d["id"]]["tokens"] == len(encoding.encode_ordinary(d["text"])), f"{d['id']} token count")
    check(total > 5_000_000, f"only {total} bytes of text")
    check("In the beginning God created the heaven and the earth." in texts["bible-kjv/Ge"][1], "Genesis text")

    again = os.path.join(work, "corpus-again")
    run("prepare", "corpus", "--out", again, "--sources", SOURCES, "--cache", cache, "--seed", "5",
        "--validation-fraction", "0.05", "--test-fraction", "0.05")
    for split in ("train", "validation", "test"):
        check(open(os.path.join(corpus, split + ".jsonl"), "rb").read() == open(os.path.join(again, split + ".jsonl"), "rb").read(),
              f"{split} differs between two runs with one seed")

    shards = os.path.join(work, "shards")
    run("prepare", "shards", "--tokenizer", rank_path, "--in", corpus, "--out", shards, "--shard-tokens", "300000")
    smanifest = json.load(open(os.path.join(shards, "manifest.json")))
    check(len(smanifest["splits"]["train"]["shards"]) > 1, "expected several train shards")
    docs_in_order = [d for d in smanifest["documents"]]
    for split in ("train", "validation", "test"):
        expected = [d for d in docs_in_order if d["split"] == split]
        i = 0
        for name in smanifest["splits"][split]["shards"]:
            ids, starts, eot, vocab = read_shard(os.path.join(shards, name))
            check(eot == 50256 and vocab == 50257, f"{name}: eot {eot} vocab {vocab}")
            for k in range(len(starts) - 1):
                doc = expected[i]
                i += 1
                want = encoding.encode_ordinary(texts[doc["id"]][1]) + [eot]
                check(ids[starts[k]:starts[k + 1]] == want, f"{name} document {k} ({doc['id']}) ids differ from tiktoken")
        check(i == len(expected), f"{split}: shards hold {i} documents, manifest lists {len(expected)}")

    spm = os.path.join(work, "spm")
    run("prepare", "sentencepiece", "--in", corpus, "--out", spm, "--vocab-size", "2000", "--threads", "2")
    sample = texts["bible-kjv/Ge"][1][:5000] + "\nnaïve — 1234 €\n"
    ids = run("tokenize", "--tokenizer", os.path.join(spm, "tokenizer.model"), stdin=sample.encode())
    check(len(ids.split()) < len(sample) / 2, "sentencepiece vocabulary does not compress the text")
    back = run("tokenize", "--tokenizer", os.path.join(spm, "tokenizer.model"), "--decode", stdin=ids)
    check(back == sample.encode(), "sentencepiece round trip differs")

    for f in failures[:30]:
        print("FAIL:", f)
    print(f"corpus {total / 1e6:.1f} MB, {len(texts)} documents; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
