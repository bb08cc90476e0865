#!/usr/bin/env python3
"""The tokenizer.json families people bring (label e2e), built here with Hugging Face `tokenizers`' own trainers
and pre-tokenizer classes (no model hub is reachable):
  - byte-level BPE behind a `Split` pre-tokenizer with Llama-3's (GPT-4 cl100k's) and Qwen2's patterns, ByteLevel
    without its regex, ignore_merges, NFC for Qwen2;
  - SentencePiece-style BPE with byte fallback: Metaspace (prepend always, split), Metaspace (prepend first, no
    split: Mistral's exports), and Llama-2's legacy normalizer Prepend("▁") + Replace(" ", "▁");
each gives the ids `tokenizers` gives on more than 1 MB of real text in many scripts (the translations of this
machine's programs, /usr/share/locale, with English prose) and on edge cases, and decodes as `tokenizers` does;
the special ids come from the file (eos, bos); a Split model and a Metaspace model train, stream and serve end to
end; a component sinklm does not read is refused naming it.
Exit 77 (skipped) without `tokenizers`.
"""
import gettext
import glob
import json
import os
import signal
import sys
import unicodedata

import gpt2_reference as ref
from sinklm_test import check, config, finish, run_sinklm, skip, source_path, temp_dir

sys.path.insert(0, source_path("tests", "serve"))
from serve_support import http_request, start_server  # noqa: E402

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
         r"|\s+(?!\S)|\s+")

EDGE_CASES = [
    "", " ", "a", "  two leading", "trailing   ", "it's I'M you're WE'VE he'll", "\n\n\nx\r\n\r\n \n",
    "1234567890" * 30, "3.14159 1,000 ٠١٢٣ ² ½", "naïve café Straße İstanbul e\u0301",
    "日本語のテキスト。中文文本，한국어 텍스트", "Ελληνικά и русский, עברית, العربية, हिन्दी, தமிழ்",
    "emoji 👍🏽 family 👨‍👩‍👧‍👦 🇩🇪", "spaces\u00a0nbsp\u3000ideographic\u2003em\u0085nel",
    "<s>start</s> middle <|end_of_text|>end<|endoftext|>", "▁already▁metaspace ▁ ▁▁",
    "code: def f(x):\n    return x ** 2\n\tif (a && b) { c++; }", "x" * 3000 + " " + "ab" * 1000,
]


def mixed_script_text(min_bytes):
    """Real text in many scripts: each language's translated messages from /usr/share/locale (sorted, up to 6 KB
    a language), then English prose (gpt2_reference.real_english_text) to fill up to min_bytes."""
    parts, size = [], 0
    for path in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES/*.mo")):
        language = path.split("/")[4]
        if sum(len(p.encode()) for lang, p in parts if lang == language) >= 6000:
            continue
        try:
            with open(path, "rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog
        except (OSError, UnicodeDecodeError, Exception):  # a catalog in a legacy encoding
            continue
        text = "\n".join(v for k, v in sorted(catalog.items(), key=lambda kv: str(kv[0])) if isinstance(v, str) and k)
        parts.append((language, text[:6000]))
        size += len(text[:6000].encode())
        if size >= min_bytes * 0.7:
            break
    english = ref.real_english_text(max(min_bytes - size, 200_000))
    return "\n".join(p for _, p in parts) + "\n" + english, len({lang for lang, _ in parts})


def scripts_in(text):
    """The scripts of a text's letters, by the first word of their Unicode names (LATIN, CYRILLIC, CJK, ...)."""
    names = set()
    for c in set(text):
        if c.isalpha():
            names.add(unicodedata.name(c, "?").split(" ")[0])
    return names


def byte_level(lines, pattern, nfc, specials):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(ignore_merges=True))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=3000, special_tokens=specials, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def metaspace(lines, variant, path):
    """A SentencePiece-style BPE: trained on Metaspace words with a limited alphabet (so rare characters fall back
    to bytes), then given the variant's pipeline and the 256 byte tokens <0x00>..<0xFF>; the reference is the
    saved file loaded back."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=3000, special_tokens=["<unk>", "<s>", "</s>"],
                                                       limit_alphabet=300, show_progress=False))
    if variant == "legacy":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.pre_tokenizer = None
    else:
        prepend, split = {"always-split": ("always", True), "first-whole": ("first", False)}[variant]
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prepend, split=split)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.save(path)
    with open(path) as f:
        data = json.load(f)
    vocab = data["model"]["vocab"]
    next_id = max(max(vocab.values()), max(t["id"] for t in data["added_tokens"])) + 1
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = next_id + b
    with open(path, "w") as f:
        json.dump(data, f, ensure_ascii=False)
    return Tokenizer.from_file(path)


def sinklm_ids(path, text):
    out = run_sinklm("tokenize", "--tokenizer", path, stdin=text.encode(), text=False)
    return [int(x) for x in out.stdout.split()]


def sinklm_ids_documents(path, texts):
    data = "".join(json.dumps(t) + "\n" for t in texts).encode()
    out = run_sinklm("tokenize", "--tokenizer", path, "--jsonl", stdin=data, text=False)
    return [[int(x) for x in line.split()] for line in out.stdout.decode().split("\n")[:-1]]


def sinklm_text(path, ids):
    return run_sinklm("tokenize", "--tokenizer", path, "--decode", stdin=" ".join(map(str, ids)).encode(),
                      text=False).stdout.decode()


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def compare(name, path, tok, text):
    want = tok.encode(text, add_special_tokens=False).ids
    got = sinklm_ids(path, text)
    i = first_difference(got, want)
    check(got == want, f"{name}: the ids of `tokenizers` on {len(text.encode()) / 1e6:.2f} MB of mixed-script text",
          f"{len(got)} vs {len(want)} ids, first difference at {i}: sinklm {got[i:i + 6]} tokenizers {want[i:i + 6]} "
          f"near {tok.decode(want[max(0, i - 3):i + 3])!r}")
    edge = sinklm_ids_documents(path, EDGE_CASES)
    wrong = [s[:40] for s, ids in zip(EDGE_CASES, edge) if ids != tok.encode(s, add_special_tokens=False).ids]
    check(len(edge) == len(EDGE_CASES) and not wrong, f"{name}: the ids of `tokenizers` on {len(EDGE_CASES)} edge cases",
          f"differ on {wrong}")
    sample = want[:4000]
    check(sinklm_text(path, sample) == tok.decode(sample, skip_special_tokens=False),
          f"{name}: decodes as `tokenizers` does")


def check_refusals(work, lines):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(lines[:200], trainers.BpeTrainer(vocab_size=300, special_tokens=["</s>"], show_progress=False))
    tok.save(f"{work}/whitespace.json")
    p = run_sinklm("tokenize", "--tokenizer", f"{work}/whitespace.json", stdin=b"hello", text=False, expect=None)
    said = p.stderr.decode()
    check(p.returncode != 0 and "pre_tokenizer component Whitespace" in said and "whitespace.json" in said,
          "an unsupported pre-tokenizer is refused naming the component and the file", said[-300:])
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.train_from_iterator(lines[:200], trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]"],
                                                                         show_progress=False))
    wordpiece.save(f"{work}/wordpiece.json")
    p = run_sinklm("tokenize", "--tokenizer", f"{work}/wordpiece.json", stdin=b"hello", text=False, expect=None)
    said = p.stderr.decode()
    check(p.returncode != 0 and "model type 'WordPiece'" in said, "a WordPiece model is refused naming it", said[-300:])


def end_to_end(work, name, path, text, eos):
    """prepare shards -> train (sizes and ids from the tokenizer) -> stream -> serve, on this tokenizer."""
    docs = [text[i:i + 2000] for i in range(0, 400_000, 2000)]
    with open(f"{work}/{name}.jsonl", "w") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    run_sinklm("prepare", "shards", "--tokenizer", path, "--in", f"{work}/{name}.jsonl", "--out", f"{work}/{name}-shards",
               "--validation-size", "0.05", "--test-size", "0.05", "--threads", "1")
    args = ["train", "--config", config("tiny-sink.yaml"), "--out", f"{work}/{name}-run"]
    for s in [f"data.shards={work}/{name}-shards", "model.vocab_size=-1", "model.tokenizer_vocab_size=-1",
              "train.steps=3", "train.seq_len=64", "train.global_batch_tokens=512", "train.micro_batch=8",
              "train.eval_every=0", "train.checkpoint_every=0", "data.validation_batches=1", "train.threads=1"]:
        args += ["--set", s]
    trained = run_sinklm(*args, expect=None, timeout=600)
    checkpoint = f"{work}/{name}-run/checkpoints/step_00000003"
    hf = json.load(open(f"{checkpoint}/config.json")) if trained.returncode == 0 else {}
    check(trained.returncode == 0 and hf.get("eos_token_id") == eos, f"{name}: a model trains on its shards, eos {eos}",
          f"{hf.get('eos_token_id')} {trained.stderr[-300:]}")
    with open(f"{work}/{name}.txt", "w") as f:
        f.write(text[:3000])
    streamed = run_sinklm("stream", "--checkpoint", checkpoint, "--text", f"{work}/{name}.txt", "--window", "32",
                          "--json", f"{work}/{name}-stream.json", expect=None)
    summary = json.load(open(f"{work}/{name}-stream.json")) if streamed.returncode == 0 else {}
    check(streamed.returncode == 0 and summary, f"{name}: stream reads text through it (bounded cache of 32)",
          (streamed.stdout + streamed.stderr)[-300:] + str(summary)[:300])
    proc, base = start_server(checkpoint)
    try:
        status, _, body = http_request(int(base.rsplit(":", 1)[1]), "POST", "/v1/completions",
                                       {"prompt": "Привет, мир! Hello", "max_tokens": 5, "temperature": 0})
        check(status == 200 and json.loads(body)["usage"]["prompt_tokens"] > 1, f"{name}: serve completes a prompt",
              f"{status} {body[:200]}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def main():
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        skip("needs the `tokenizers` package (scripts/setup.sh installs it into .venv)")
    text, languages = mixed_script_text(1_100_000)
    scripts = scripts_in(text)
    check(len(text.encode()) >= 1_000_000, "over 1 MB of real text",
          f"{len(text.encode()) / 1e6:.2f} MB, {languages} languages, scripts {sorted(scripts)[:12]}...")
    print(f"text: {len(text.encode()) / 1e6:.2f} MB from {languages} languages, {len(scripts)} scripts")
    lines = text.split("\n")
    with temp_dir("sinklm-tokenizer-families-") as work:
        families = [
            ("Split, Llama-3 pattern", byte_level(lines, LLAMA3, False, ["<|begin_of_text|>", "<|end_of_text|>"]),
             "<|end_of_text|>", "<|begin_of_text|>"),
            ("Split, Qwen2 pattern, NFC", byte_level(lines, QWEN2, True, ["<|endoftext|>"]), "<|endoftext|>", None),
        ]
        for variant in ("always-split", "first-whole", "legacy"):
            families.append((f"Metaspace {variant}, byte fallback", metaspace(lines, variant, f"{work}/{variant}.json"),
                             "</s>", "<s>"))
        paths = {}
        for i, (name, tok, eos, bos) in enumerate(families):
            path = f"{work}/family{i}/tokenizer.json"
            os.makedirs(os.path.dirname(path))
            tok.save(path)
            paths[name] = (path, tok.token_to_id(eos))
            compare(name, path, tok, text)
            info = run_sinklm("tokenize", "--tokenizer", path, "--decode", stdin=b"", text=False, expect=None)
            check(info.returncode == 0, f"{name}: loads", info.stderr.decode()[-200:])
        check_refusals(work, lines)
        end_to_end(work, "llama3", *paths["Split, Llama-3 pattern"][:1], text, paths["Split, Llama-3 pattern"][1])
        name = "Metaspace first-whole, byte fallback"
        end_to_end(work, "metaspace", paths[name][0], text, paths[name][1])
    finish()


if __name__ == "__main__":
    main()
