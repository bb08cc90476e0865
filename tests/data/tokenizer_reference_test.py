"""Reference test: `sinklm tokenize` must give the same ids as tiktoken (rank file) and the Hugging Face
`tokenizers` library (tokenizer.json, vocab.json + merges.txt) on >= 1 MB of real English text and on
hand-written edge cases, and --decode must give back the input bytes. Exit 77 (skipped) when the GPT-2
rank file (PyPI openai-whisper) or a reference library is not installed."""
import json
import os

import gpt2_reference as ref
from sinklm_test import check, finish, run_sinklm, skip, temp_dir

EDGE_CASES = [
    "",
    " ",
    "a",
    "Hello world",
    " leading and trailing spaces   ",
    "it's I'm you're we've he'll she'd IT'S 'tis ''s",
    " " * 10000 + "x",
    "\n" * 500 + "\t \t\r\n \r\n",
    "a  b   c    d\n\n\nnew paragraph\n \n",
    "1234567890" * 20000,
    "3.14159 -2e10 1,000,000 ٠١٢٣ ² ½ Ⅻ ①②",
    "naïve café Ærø São Paulo Straße İstanbul",
    "日本語のテキスト。中文文本，한국어 텍스트",
    "Ελληνικά κείμενα и русский текст, עברית, العربية",
    "emoji 👍🏽 family 👨‍👩‍👧‍👦 flags 🇩🇪🇫🇷 keycap 1️⃣",
    "combining e\u0301 a\u0308 n\u0303 Z\u0335\u0321\u0322",
    "spaces\u00a0nbsp\u3000ideographic\u2003em\u180emongolian\u0085nel\u2028ls\u2029ps\u200bzwsp\ufeffbom",
    "x  \u180e\u180e y \t\u180e z\u3000\u3000\u180e \u0085\u0085q",  # white space and its look-alikes
    "<|endoftext|>",
    "first<|endoftext|>second <|endoftext|> third<|endoftext|><|endoftext|>",
    "<|endoftext partial <|endof|> <||>",
    "tabs\tand\tcontrol\x00\x01\x1f\x7f chars",
    "punctuation!!!??? ... --- ((([[[{{{ }}}]]]))) @#$%^&*_+=~`|\\/<>",
    "code: def f(x):\n    return x ** 2  # square\n\tif (a && b) { c++; }",
    "URL https://example.com/path?q=1&r=two#frag mail@example.org",
    "\U0001F600\U00010348\U0010FFFD private \ue000\uf8ff",
    "x" * 5000 + " " + "ab" * 3000,
]

# Byte strings that are not valid UTF-8 (no reference library accepts them as text; see invalid_utf8_reference).
INVALID_UTF8 = [
    b"\xff",
    b"abc\xffdef",
    b"caf\xc3",
    b"\xc3\x28 \xa0\xa1 \xe2\x28\xa1 \xe2\x82\x28 \xf0\x28\x8c\xbc \xf0\x90\x28\xbc",
    b"overlong \xc0\xaf surrogate \xed\xa0\x80 too big \xf4\x90\x80\x80",
    b"!\x80\x81? word\xfeword 12\xff34  \xff  ",
]


_encoded = {}


def sinklm_encode(tokenizer_path, data):
    """`sinklm tokenize` ids (memoised: one process per tokenizer and input)."""
    if (tokenizer_path, data) not in _encoded:
        _encoded[tokenizer_path, data] = run_sinklm_encode(tokenizer_path, data)
    return _encoded[tokenizer_path, data]


def run_sinklm_encode(tokenizer_path, data):
    out = run_sinklm("tokenize", "--tokenizer", tokenizer_path, stdin=data, text=False)
    return [int(x) for x in out.stdout.split()]


def sinklm_encode_documents(tokenizer_path, texts):
    data = "".join(json.dumps(t) + "\n" for t in texts).encode()
    out = run_sinklm("tokenize", "--tokenizer", tokenizer_path, "--jsonl", stdin=data, text=False)
    lines = out.stdout.decode().split("\n")[:-1]
    assert len(lines) == len(texts), f"--jsonl gave {len(lines)} lines for {len(texts)} documents"
    return [[int(x) for x in line.split()] for line in lines]


def sinklm_decode(tokenizer_path, ids):
    return run_sinklm("tokenize", "--tokenizer", tokenizer_path, "--decode", stdin=" ".join(map(str, ids)).encode(),
                      text=False).stdout


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def invalid_utf8_reference(encoding, data):
    """GPT-2's pattern over the text with each invalid byte as a lone surrogate (Python's surrogateescape),
    then tiktoken's BPE of each piece's bytes."""
    import regex

    text = data.decode("utf-8", errors="surrogateescape")
    ids = []
    for piece in regex.findall(ref.GPT2_PATTERN, text):
        ids += encoding._encode_single_piece(piece.encode("utf-8", errors="surrogateescape"))
    return ids


def main():
    rank_path = ref.gpt2_rank_file()
    if rank_path is None:
        skip("openai-whisper (GPT-2 rank file) not installed; run scripts/setup.sh")
    try:
        encoding = ref.tiktoken_encoding(rank_path)
        import tokenizers  # noqa: F401
    except ImportError as e:
        skip(f"reference library missing: {e}")
    with temp_dir("sinklm-tokref-") as work:
        run_checks(work, rank_path, encoding)
    finish()


def run_checks(work, rank_path, encoding):
    # One check per input and oracle; they print only when they fail (quiet), a line per oracle says what ran.
    plain = ref.write_hf_files(rank_path, os.path.join(work, "plain"))
    neox_like = ref.write_hf_files(rank_path, os.path.join(work, "neox"), add_prefix_space=True, nfc=True)
    text = ref.real_english_text(1_200_000)
    assert len(text.encode()) >= 1_000_000, "not enough real text on this machine"
    print(f"real text: {len(text.encode()) / 1e6:.2f} MB; {len(EDGE_CASES)} edge cases; {len(INVALID_UTF8)} invalid UTF-8 cases")

    oracles = [
        ("tiktoken rank file", rank_path, lambda s: encoding.encode(s, allowed_special="all")),
        ("tokenizer.json", os.path.join(work, "plain", "tokenizer.json"), lambda s: plain.encode(s).ids),
        ("vocab.json+merges.txt", os.path.join(work, "plain", "vocab.json"), lambda s: plain.encode(s).ids),
        ("tokenizer.json (NFC, prefix space)", os.path.join(work, "neox", "tokenizer.json"),
         lambda s: neox_like.encode(s).ids),
    ]
    for name, path, reference in oracles:
        # The real text as one input; the edge cases as documents of one --jsonl call (encoded in parallel).
        edge_ids = sinklm_encode_documents(path, EDGE_CASES)
        _encoded.update({(path, s.encode()): ids for s, ids in zip(EDGE_CASES, edge_ids)})
        for label, sample in [("real text", text)] + [(f"edge case {i}", s) for i, s in enumerate(EDGE_CASES)]:
            want = reference(sample)
            got = sinklm_encode(path, sample.encode("utf-8"))
            i = first_difference(got, want)
            check(got == want, f"{name}, {label}: sinklm's ids = the reference's",
                  f"{len(got)} vs {len(want)} ids, first difference at {i}: sinklm {got[i:i + 8]} reference {want[i:i + 8]}",
                  quiet=True)
        print(f"{name}: compared real text and {len(EDGE_CASES)} edge cases")

    # Round trip (no normaliser): every input comes back byte for byte, including invalid UTF-8.
    tiktoken_path = rank_path
    for i, sample in enumerate([text.encode()] + [s.encode() for s in EDGE_CASES] + INVALID_UTF8):
        ids = sinklm_encode(tiktoken_path, sample)
        back = sinklm_decode(tiktoken_path, ids)
        check(back == sample, f"round trip {i}: decode(encode(x)) = x",
              f"differs at byte {first_difference(back, sample)}", quiet=True)
        if i > 0 and i <= len(EDGE_CASES):
            check(sample.decode() == encoding.decode(ids), f"round trip {i}: tiktoken decodes sinklm's ids to the input",
                  quiet=True)
    print(f"round trips: real text, {len(EDGE_CASES)} edge cases, {len(INVALID_UTF8)} invalid UTF-8 inputs")
    for i, sample in enumerate(INVALID_UTF8):
        got = sinklm_encode(tiktoken_path, sample)
        want = invalid_utf8_reference(encoding, sample)
        check(got == want, f"invalid UTF-8 case {i} {sample!r}: sinklm's ids = the reference's",
              f"sinklm {got} reference {want}", quiet=True)
    print(f"invalid UTF-8: {len(INVALID_UTF8)} cases compared")


if __name__ == "__main__":
    main()
