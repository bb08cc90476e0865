"""GPT-2's vocabulary in every format sinklm reads, built from the rank file that ships in the PyPI package
openai-whisper, plus the reference encoders (tiktoken, Hugging Face `tokenizers`) for it.

A test oracle: used by the tokenizer and `prepare` tests in tests/data, and by scripts/bench/bench_tokenize and
scripts/bench/bench_prepare. Nothing here is used by sinklm itself.
"""
import importlib.util
import json
import os

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"


def gpt2_rank_file():
    """Path of whisper/assets/gpt2.tiktoken, or None when openai-whisper is not installed."""
    spec = importlib.util.find_spec("whisper")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "assets", "gpt2.tiktoken")
    return path if os.path.exists(path) else None


def bytes_to_unicode():
    """GPT-2's byte-level alphabet (encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tiktoken_encoding(rank_path):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(rank_path)
    return tiktoken.Encoding("gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={END_OF_TEXT: len(ranks)})


def write_hf_files(rank_path, out_dir, add_prefix_space=False, nfc=False, name="tokenizer.json"):
    """Write vocab.json, merges.txt and a tokenizer.json (ByteLevel BPE) equivalent to the rank file.
    Returns the `tokenizers.Tokenizer` built from them (the reference encoder)."""
    from tiktoken.load import load_tiktoken_bpe
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    ranks = load_tiktoken_bpe(rank_path)
    alphabet = bytes_to_unicode()
    as_text = lambda b: "".join(alphabet[x] for x in b)
    vocab = {as_text(token): rank for token, rank in ranks.items()}
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        splits = [(token[:k], token[k:]) for k in range(1, len(token)) if token[:k] in ranks and token[k:] in ranks]
        for left, right in sorted(splits, key=lambda s: (ranks[s[0]], ranks[s[1]])):
            merges.append((as_text(left), as_text(right)))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({**vocab, END_OF_TEXT: len(ranks)}, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    tokenizer = Tokenizer(models.BPE(vocab, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tokenizer.decoder = decoders.ByteLevel()
    if nfc:
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.add_special_tokens([END_OF_TEXT])
    tokenizer.save(os.path.join(out_dir, name))
    return tokenizer


def real_english_text(min_bytes):
    """At least min_bytes of real English prose present on every Debian system: the licence texts and the
    packages' copyright files (deduplicated, in sorted order so the text is the same on every run)."""
    paths = sorted(os.path.join("/usr/share/common-licenses", n) for n in os.listdir("/usr/share/common-licenses"))
    doc = "/usr/share/doc"
    paths += sorted(os.path.join(doc, p, "copyright") for p in os.listdir(doc))
    seen, parts, size = set(), [], 0
    for path in paths:
        if size >= min_bytes:
            break
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if text in seen:
            continue
        seen.add(text)
        parts.append(text)
        size += len(text.encode("utf-8"))
    return "\n".join(parts)
