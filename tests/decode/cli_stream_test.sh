#!/usr/bin/env bash
# `sinklm stream` end to end on a tiny byte-vocabulary model: the JSON summary, the per-token NLL file, the
# KV count over time, the --compare table, the recall probe, and errors that name the bad option;
# `sinklm bench-decode`.
set -euo pipefail
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$SINKLM_BIN" init --config "$SINKLM_SOURCE_DIR/configs/tiny-sink.yaml" --out "$work/ckpt" \
  --set model.vocab_size=264 --set model.tokenizer_vocab_size=256 >/dev/null
head -c 3000 "$SINKLM_SOURCE_DIR/README.md" >"$work/text.txt"

"$SINKLM_BIN" stream --threads 1 --checkpoint "$work/ckpt" --text "$work/text.txt" --cache sink_window --window 64 \
  --segment 500 --chunk 50 --nll-out "$work/nll.tsv" --json "$work/full.json" >"$work/summary.json" 2>/dev/null
"$SINKLM_BIN" stream --threads 1 --checkpoint "$work/ckpt" --text "$work/text.txt" --window 64 --weights bf16 \
  --max-tokens 100 --json "$work/bf16.json" >/dev/null 2>&1
"$PYTHON" - "$work" <<'PY'
import json, math, sys
work = sys.argv[1]
# The format the projections hold, for a bound in the products' dtype (scripts/bench/bench_prefill).
assert json.load(open(f"{work}/full.json"))["weights"] == "fp32"
assert json.load(open(f"{work}/bf16.json"))["weights"] == "bf16"
s = json.load(open(f"{work}/summary.json"))
text_tokens = len(open(f"{work}/text.txt", "rb").read())  # bytes = tokens
nll = [float(l.split("\t")[1]) for l in open(f"{work}/nll.tsv") if not l.startswith("#")]
assert s["config"] == "1+63" and s["sinks"] == 1, s["config"]  # a token model's default: its one sink token
assert s["scored_tokens"] == len(nll) == text_tokens - 1, (s["scored_tokens"], len(nll), text_tokens)
assert abs(math.exp(sum(nll) / len(nll)) - s["ppl"]) < 1e-3 * s["ppl"]
# stream position p predicts text token p: the cache first holds more than 64 entries at p = 64 (1 sink + 63 text)
assert s["eviction_starts_at"] == 63, s["eviction_starts_at"]
before = math.exp(sum(nll[:63]) / 63)
assert abs(before - s["ppl_before_eviction"]) < 1e-3 * before
assert len(s["segments"]) == math.ceil(len(nll) / 500)
assert s["max_kv_entries"] == 64 and all(n <= 64 for _, n in s["kv_entries"]) and s["kv_entries"][-1][1] == 64
print("stream summary ok")
PY

"$SINKLM_BIN" stream --threads 1 --checkpoint "$work/ckpt" --text "$work/text.txt" --window 64 --compare --max-tokens 800 \
  2>/dev/null >"$work/table.md"
grep -q '^| model | 0+64 | 1+63 | 2+62 | 4+60 |$' "$work/table.md" || { cat "$work/table.md"; exit 1; }
grep -Eq '^\| .+ \(token\) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$' "$work/table.md" || { cat "$work/table.md"; exit 1; }

expect_error() {  # expect_error <text in the message> <args...>
  local want="$1"; shift
  if "$SINKLM_BIN" stream --threads 1 --checkpoint "$work/ckpt" --text "$work/text.txt" "$@" >/dev/null 2>"$work/err"; then
    echo "expected failure for: $*"; exit 1
  fi
  grep -q -- "$want" "$work/err" || { echo "message for '$*' lacks '$want':"; cat "$work/err"; exit 1; }
}
expect_error "unknown cache policy 'sliding'" --cache sliding
expect_error "leave no room" --window 4 --sinks 4
expect_error "at most 100 entries" --cache full --window 100
expect_error "expected cache or stream" --positions absolute
# The recall probe (`stream --recall`) on a small recall source: every policy at every distance, the KV count of
# each (full holds the whole stream, window and sink_window W), and errors that name the input.
"$SINKLM_BIN" prepare synthetic --task recall --out "$work/recall" --train-tokens 2000 --validation-tokens 500 \
  --test-tokens 500 >/dev/null 2>&1
"$SINKLM_BIN" stream --threads 1 --checkpoint "$work/ckpt" --recall "$work/recall" --window 32 --distances 8,40 \
  --pairs 5 --json "$work/recall.json" 2>/dev/null >"$work/recall.md"
grep -q '^| policy | d=8 | d=40 (>W) | filler NLL after eviction | agreement with full | K/V KiB per stream |$' "$work/recall.md" ||
  { cat "$work/recall.md"; exit 1; }
"$PYTHON" - "$work" <<'PY'
import json, sys
r = json.load(open(f"{sys.argv[1]}/recall.json"))
assert [p["label"] for p in r["policies"]] == ["full", "window 0+32", "sink_window 1+31"], r["policies"]
assert r["chance"] == 1 / 24 and r["distances"] == [8, 40] and r["source"]["keys"] == 16, r
for policy in r["policies"]:
    for point in policy["points"]:
        assert point["queries"] == 5 and 0 <= point["accuracy"] <= 1, point
        assert point["max_kv_entries"] == (point["kv_entries"][-1][0] if policy["label"] == "full" else 32), point
full = r["policies"][0]["points"]
assert all(p["agreement_with_reference"] == 1 for p in full)
print("recall probe ok")
PY
# The head-aware cache: a head policy from `analyze --classify-heads`, probed beside a sink_window of equal
# K/V memory (4 of 16 heads keep 64 entries, 12 keep 32: 40 per head), the bytes the same in bench-decode.
"$SINKLM_BIN" analyze --threads 1 --checkpoint "$work/ckpt" --recall "$work/recall" --classify-heads "$work/heads.json" \
  --window 32 --retrieval-window 64 --retrieval-heads 4 --score attention-mass --tokens 96 >/dev/null
heads=(--head-policy "$work/heads.json" --window 32 --retrieval-window 64)
"$SINKLM_BIN" stream --threads 1 --checkpoint "$work/ckpt" --recall "$work/recall" "${heads[@]}" \
  --recall-policies sink_window:40,heads --distances 8,48 --pairs 5 --json "$work/heads-probe.json" >/dev/null 2>&1
"$SINKLM_BIN" bench-decode --threads 1 --checkpoint "$work/ckpt" --cache heads "${heads[@]}" --streams 2 --decode 3 \
  >"$work/heads-bench.json" 2>/dev/null
"$PYTHON" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
policy = json.load(open(f"{work}/heads.json"))
assert sum(map(len, policy["retrieval"])) == 4 and policy["score"] == "attention-mass", policy
r = json.load(open(f"{work}/heads-probe.json"))
assert [p["label"] for p in r["policies"]] == ["sink_window 1+39", "heads 1+31/1+63"], r["policies"]
equal = 16 * 40 * 32 * 2 * 4  # head caches x entries x D x (K, V) x fp32
assert [p["kv_bytes_per_stream"] for p in r["policies"]] == [equal, equal], r["policies"]
assert all(pt["max_kv_entries"] == 64 for pt in r["policies"][1]["points"]), r["policies"][1]
b = json.load(open(f"{work}/heads-bench.json"))
assert b["kv_bytes_per_stream"] == equal and b["kv_entries_per_head"] == 40 and b["config"] == "1+31/1+63", b
print("head-aware cache ok")
PY
expect_error "needs --head-policy FILE" --cache heads --window 32
expect_error "apply to the heads cache only" --cache sink_window --head-policy "$work/heads.json"
echo '{"format": "sinklm-head-policy", "layers": 4, "heads": 4, "retrieval": [[9], [], [], []]}' >"$work/bad-heads.json"
expect_error "bad-heads.json: \"retrieval\"\[0\] has 9" --cache heads --head-policy "$work/bad-heads.json"

expect_recall_error() {  # expect_recall_error <text in the message> <args...>
  local want="$1"; shift
  if "$SINKLM_BIN" stream --threads 1 --checkpoint "$work/ckpt" "$@" >/dev/null 2>"$work/err"; then
    echo "expected failure for: $*"; exit 1
  fi
  grep -q -- "$want" "$work/err" || { echo "message for '$*' lacks '$want':"; cat "$work/err"; exit 1; }
}
"$SINKLM_BIN" prepare synthetic --out "$work/backcopy" --train-tokens 2000 --validation-tokens 500 --test-tokens 500 \
  >/dev/null 2>&1
expect_recall_error "--recall $work/backcopy: not a recall source" --recall "$work/backcopy"
expect_recall_error "option --distances must be in .4, 1e+12., got 2" --recall "$work/recall" --distances 8,2
expect_recall_error "--recall-policies heads:$work/bad-heads.json: \"retrieval\"\[0\] has 9" --recall "$work/recall" \
  --recall-policies "heads:$work/bad-heads.json"
expect_recall_error "give exactly one of" --recall "$work/recall" --text "$work/text.txt"
if "$SINKLM_BIN" prepare synthetic --task recall --triggers 3 --out "$work/r2" >/dev/null 2>"$work/err"; then
  echo "prepare synthetic --task recall --triggers should fail"; exit 1
fi
grep -q -- "--triggers does not apply to --task recall" "$work/err" || { cat "$work/err"; exit 1; }

# --shards DIR: the test split as training reads it. Two shards written here in token_shard.h's format; the
# reader must give their documents in manifest order, each followed by the end-of-text id, exactly what --ids
# of those tokens (written from the documents' own bytes) scores. analyze reads it too.
"$PYTHON" - "$work" <<'PY'
import json, os, struct, sys
work, eot = sys.argv[1], 3
docs = [[f"Document {s}.{d}: " + "the sink keeps the stream stable. " * (2 + d) for d in range(3)] for s in range(2)]
os.makedirs(f"{work}/shards")
ids = []
for s, shard in enumerate(docs):
    tokens, starts = [], []
    for text in shard:
        starts.append(len(tokens))
        tokens += list(text.encode()) + [eot]
    starts.append(len(tokens))
    header = b"SINKTOK\0" + struct.pack("<IIQQII", 1, 2, len(tokens), len(shard), 256, eot) + bytes(24)
    with open(f"{work}/shards/test-00000{s}-0000.bin", "wb") as f:
        f.write(header + struct.pack(f"<{len(tokens)}H", *tokens) + struct.pack(f"<{len(starts)}Q", *starts))
    ids += tokens
manifest = {"format": "sinklm-shards", "format_version": 1, "vocab_size": 256, "end_of_text_id": eot,
            "splits": {"test": {"shards": ["test-000000-0000.bin", "test-000001-0000.bin"]}}}
json.dump(manifest, open(f"{work}/shards/manifest.json", "w"))
open(f"{work}/test.ids", "w").write(" ".join(map(str, ids)))
PY
"$SINKLM_BIN" stream --threads 1 --checkpoint "$work/ckpt" --shards "$work/shards" --window 64 \
  --nll-out "$work/nll-shards.tsv" --json "$work/source-shards.json" >/dev/null 2>&1
"$SINKLM_BIN" stream --threads 1 --checkpoint "$work/ckpt" --ids "$work/test.ids" --window 64 \
  --nll-out "$work/nll-ids.tsv" >/dev/null 2>&1
cmp "$work/nll-shards.tsv" "$work/nll-ids.tsv" || { echo "--shards and --ids of its tokens differ"; exit 1; }
grep -q "\"source\": \"--shards $work/shards (test split)\"" "$work/source-shards.json" ||
  { cat "$work/source-shards.json"; exit 1; }
"$SINKLM_BIN" analyze --threads 1 --checkpoint "$work/ckpt" --shards "$work/shards" --tokens 64 --segments 2 \
  --out "$work/analysis" >/dev/null 2>&1
grep -q "\"text\": \"--shards $work/shards (test split)\"" "$work/analysis/heads.json" ||
  { head -20 "$work/analysis/heads.json"; exit 1; }
"$SINKLM_BIN" init --config "$SINKLM_SOURCE_DIR/configs/tiny-sink.yaml" --out "$work/ckpt300" \
  --set model.vocab_size=308 --set model.tokenizer_vocab_size=300 >/dev/null
expect_shards_error() {  # expect_shards_error <checkpoint> <text in the message> <args...>
  local ckpt="$1" want="$2"; shift 2
  if "$SINKLM_BIN" stream --threads 1 --checkpoint "$ckpt" "$@" >/dev/null 2>"$work/err"; then
    echo "expected failure for: $*"; exit 1
  fi
  grep -q -- "$want" "$work/err" || { echo "message for '$*' lacks '$want':"; cat "$work/err"; exit 1; }
}
expect_shards_error "$work/ckpt300" "--shards $work/shards: its tokenizer has 256 ids, the model's 300" \
  --tokenizer bytes --shards "$work/shards"
expect_shards_error "$work/ckpt" "$work/text.txt/manifest.json" --shards "$work/text.txt"
expect_shards_error "$work/ckpt" "give exactly one of --text FILE, --ids FILE, --shards DIR" \
  --shards "$work/shards" --ids "$work/test.ids"
echo "--shards ok"

# `sinklm bench-decode`: 4 streams batched, the bounds beside the figure, --trace's operator table, and a
# --trace that is not a directory named in the error.
"$SINKLM_BIN" bench-decode --threads 1 --checkpoint "$work/ckpt" --window 64 --streams 4 --decode 3 \
  --trace "$work/trace" >"$work/bench.json" 2>/dev/null
"$PYTHON" - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
b = json.load(open(f"{work}/bench.json"))
assert b["streams"] == 4 and b["kv_entries"] == 64 and b["tokens_per_second"] > 0, b
assert b["roofline_tokens_per_second"] == min(b["bound_tokens_per_second"], b["compute_bound_tokens_per_second"]) > 0, b
assert b["read_bandwidth_gbs"] > 0, b
assert b["flops_per_token"] > 0 and b["matmul_gflops"] > 0, b
assert "aten::" in open(f"{work}/trace/trace_top.txt").read()
assert os.path.getsize(f"{work}/trace/trace.json") > 0
print("bench-decode ok")
PY
if "$SINKLM_BIN" bench-decode --threads 1 --checkpoint "$work/ckpt" --decode 1 --trace "$work/text.txt" \
  >/dev/null 2>"$work/err"; then
  echo "bench-decode --trace FILE should fail"; exit 1
fi
grep -q -- "--trace $work/text.txt: cannot use it as the trace directory" "$work/err" || { cat "$work/err"; exit 1; }
echo "cli stream ok"
