#!/usr/bin/env bash
# `sinklm eval` and `sinklm analyze` as a user runs them: scoring fixtures with a byte-level model, results
# files and tables, --compare, deterministic proxy tasks, the analysis outputs, and the errors a user sees.
set -uo pipefail
bin="${SINKLM_BIN:?}"; src="${SINKLM_SOURCE_DIR:?}"; py="${PYTHON:-python3}"
fixtures="$src/tests/eval/fixtures"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
source "$src/tests/cli_expect.sh"

small=(--set model.num_layers=2 --set model.hidden_size=64 --set model.intermediate_size=128)
"$bin" init --config "$src/configs/tiny.yaml" --out "$work/vanilla" "${small[@]}" >/dev/null || exit 1
"$bin" init --config "$src/configs/tiny-sink.yaml" --out "$work/sink" "${small[@]}" --set model.init_seed=7 >/dev/null || exit 1

expect "eval all fixture tasks (bytes)" 0 "\| winogrande \| acc \(%\) \|" -- \
  "$bin" eval --tokenizer bytes --checkpoint "$work/vanilla" --tasks all --data "$fixtures" --out "$work/a.json"
expect "results markdown beside the JSON" 0 "lambada_openai \| perplexity" -- cat "$work/a.md"
expect "results JSON lists metric, value, stderr, n" 0 '"metric": "acc_norm"' -- cat "$work/a.json"
expect "sink model evaluates with --limit" 0 "\| piqa \| acc \(%\) \|.*\| 2 \|" -- \
  "$bin" eval --tokenizer bytes --checkpoint "$work/sink" --tasks piqa,arc_easy --data "$fixtures" --limit 2 --out "$work/b.json"
expect "--compare prints both runs and differences" 0 "\| piqa \| acc \(%\) \| [0-9.]+ \| [0-9.]+ \| [-+][0-9.]+ \|" -- \
  "$bin" eval --compare "$work/a.json" "$work/b.json"
expect "--compare marks tasks only one run has" 0 "\| winogrande \| acc \(%\) \| [0-9.]+ \| - \| - \| - \|" -- \
  "$bin" eval --compare "$work/a.json" "$work/b.json"

expect "unknown task lists the known ones" 2 "unknown task 'arc-easy' \(known: arc_challenge, arc_easy" -- \
  "$bin" eval --tokenizer bytes --checkpoint "$work/vanilla" --tasks arc-easy --data "$fixtures"
expect "missing task file names the path" 2 "nowhere/piqa.jsonl: cannot open task file" -- \
  "$bin" eval --tokenizer bytes --checkpoint "$work/vanilla" --tasks piqa --data "$work/nowhere"
mkdir -p "$work/bad"; printf '{"sentence": "no blank here", "option1": "a", "option2": "b", "answer": "1"}\n' >"$work/bad/winogrande.jsonl"
expect "malformed document names file:line" 2 "winogrande.jsonl:1: 'sentence' has no '_' blank" -- \
  "$bin" eval --tokenizer bytes --checkpoint "$work/vanilla" --tasks winogrande --data "$work/bad"
expect "--compare of a non-results file" 2 "not a sinklm eval results file" -- "$bin" eval --compare "$work/a.json" "$work/sink/config.json"

# The official sets ship inside the binary: a copy of it elsewhere, run from /, needs no --data and no tree.
mkdir -p "$work/bin" && cp "$bin" "$work/bin/sinklm"
official() { (cd / && "$work/bin/sinklm" eval --tokenizer bytes "$@"); }
official --checkpoint "$work/vanilla" --tasks all --limit 3 --out "$work/off3.json" >"$work/off3.out" 2>&1
expect "--tasks all without --data scores the seven official sets" 0 "^7 tasks, 13 rows$" -- bash -c \
  "rows=\$(grep '| official, first 3 of [0-9]* |\$' '$work/off3.out'); echo \$(cut -d'|' -f2 <<<\"\$rows\" | sort -u | wc -l) tasks, \$(wc -l <<<\"\$rows\") rows"
expect "results JSON marks official tasks and keeps per-document outcomes" 0 '"per_document": \[[01],[01],[01]\]' -- \
  grep -A3 '"official": true' "$work/off3.json"
expect "the table says what official means" 0 "^\*official\*: the published evaluation split" -- cat "$work/off3.md"
expect "hellaswag is labelled as llama.cpp's text form" 0 \
  "^\| hellaswag \*\(llama.cpp text form\)\* \| acc_norm \(%\) \| [0-9.]+ \| [0-9.]+ \| 3 \| official, first 3 of 10042 \|$" -- \
  cat "$work/off3.md"
expect "the table says what the llama.cpp text form is" 0 "^\*llama.cpp text form\*: HellaSwag as llama.cpp's" -- cat "$work/off3.md"
expect "a task with no official copy asks for --data" 2 \
  "proxy_hellaswag: sinklm ships no official copy.*give --data DIR holding proxy_hellaswag.jsonl" -- \
  "$bin" eval --tokenizer bytes --checkpoint "$work/vanilla" --tasks proxy_hellaswag
"$py" - "$work/bin/sinklm" "$src/eval/benchmarks/piqa.jsonl.gz" "$work/bin/sinklm-damaged" <<'PY'
import os, sys
binary, blob = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
at = binary.find(blob)
assert at >= 0, "piqa.jsonl.gz is not embedded in the binary"
damaged = bytearray(binary)
damaged[at + len(blob) // 2] ^= 0x55
open(sys.argv[3], "wb").write(damaged)
os.chmod(sys.argv[3], 0o755)
PY
expect "a damaged embedded set is an error naming the file" 2 \
  "eval/benchmarks/piqa.jsonl.gz \(embedded in sinklm\): corrupt gzip data.*restore eval/benchmarks/ with git and rebuild" -- \
  "$work/bin/sinklm-damaged" eval --tokenizer bytes --checkpoint "$work/vanilla" --tasks piqa --limit 1

# Paired comparison on the same documents: B - A, its paired SE (checked against the per-document values
# here) and whether it exceeds 2 SE; different documents are not paired.
official --checkpoint "$work/vanilla" --limit 40 --tasks piqa,lambada_openai --out "$work/pa.json" >/dev/null 2>&1
official --checkpoint "$work/sink" --limit 40 --tasks piqa,lambada_openai --out "$work/pb.json" >/dev/null 2>&1
"$bin" eval --compare "$work/pa.json" "$work/pb.json" >"$work/paired.md" 2>&1
expect "--compare pairs per document" 0 \
  "^\| piqa \| acc \(%\) \| [0-9.]+ \| [0-9.]+ \| [-+][0-9.]+ \| [0-9.]+ \| (yes|no) \| 40 \| official, first 40 of 1838 \|$" -- \
  cat "$work/paired.md"
expect "--compare pairs perplexity too" 0 "^\| lambada_openai \| perplexity \| .* \| [0-9.]+ \| (yes|no) \| 40 \|" -- cat "$work/paired.md"
expect "paired SE = stdev(b - a) / sqrt(n) of the per-document outcomes" 0 "^same$" -- "$py" - "$work" <<'PY'
import json, math, statistics, sys
work = sys.argv[1]
def docs(name):
    results = json.load(open(f"{work}/{name}"))["results"]
    return next(r["per_document"] for r in results if r["task"] == "piqa" and r["metric"] == "acc")
d = [b - a for a, b in zip(docs("pa.json"), docs("pb.json"))]
se = statistics.stdev(d) / math.sqrt(len(d))
row = next(line for line in open(f"{work}/paired.md") if line.startswith("| piqa | acc (%)"))
shown = float(row.split("|")[6])
print("same" if abs(shown - 100 * se) <= 0.005 + 1e-9 else f"table {shown}, recomputed {100 * se}")
PY
expect "--compare does not pair different documents" 0 "\| piqa \| acc \(%\) \| .* \| - \| not paired: n 3 vs 40 \|" -- \
  "$bin" eval --compare "$work/off3.json" "$work/pb.json"

"$py" -c "import sys; sys.path.insert(0, '$src/tests/eval'); import eval_support; eval_support.write_corpus('$work/corpus')"
expect "build-tasks writes three proxy tasks" 0 "proxy_definitions: [1-9][0-9]* documents \(proxy\)" -- \
  "$bin" eval build-tasks --corpus "$work/corpus" --out "$work/proxy1"
"$bin" eval build-tasks --corpus "$work/corpus" --out "$work/proxy2" >/dev/null
expect "build-tasks is deterministic" 0 "^same$" -- bash -c "diff -r '$work/proxy1' '$work/proxy2' && echo same"
"$bin" eval build-tasks --corpus "$work/corpus" --out "$work/proxy3" --seed 99 >/dev/null
expect "another seed changes the tasks" 1 "differ" -- diff -rq "$work/proxy1" "$work/proxy3"
expect "proxy tasks never use the train split" 0 "^absent$" -- bash -c "grep -rq 'never used' '$work/proxy1' || echo absent"
expect "proxy tasks are labelled in the table" 0 "proxy_hellaswag \*\(proxy\)\*.*" -- \
  "$bin" eval --tokenizer bytes --checkpoint "$work/vanilla" --tasks proxy_lambada,proxy_hellaswag,proxy_definitions --data "$work/proxy1"
expect "empty held-out splits are an error" 2 "yield no proxy task documents" -- \
  bash -c "mkdir -p '$work/empty' && : >'$work/empty/validation.jsonl' && : >'$work/empty/test.jsonl' && '$bin' eval build-tasks --corpus '$work/empty' --out '$work/p'"

expect "analyze a token-sink model" 0 "\| layer \| mean mass on sink token" -- \
  "$bin" analyze --tokenizer bytes --checkpoint "$work/sink" --text "$src/README.md" --out "$work/an" --tokens 64 --segments 2
"$bin" init --config "$src/configs/tiny.yaml" --out "$work/logit" "${small[@]}" --set model.sink.mode=logit >/dev/null || exit 1
expect "analyze a sink-logit model reports the implicit sink" 0 "\| layer \| mean mass on sink column \| largest head \| head \| mean mass on position 0 \|" -- \
  "$bin" analyze --tokenizer bytes --checkpoint "$work/logit" --text "$src/README.md" --out "$work/an-logit" --tokens 32 --segments 1
expect "heads.json of a logit model has implicit_sink" 0 '"implicit_sink"' -- cat "$work/an-logit/heads.json"
expect "analyze a vanilla model: the sink is position 0" 0 "\| layer \| mean mass on position 0 \| largest head \| head \| value norm" -- \
  "$bin" analyze --tokenizer bytes --checkpoint "$work/vanilla" --text "$src/README.md" --out "$work/an-vanilla" --tokens 32 --segments 1
expect "analyze writes PNGs" 0 "^3$" -- bash -c "ls '$work/an'/*.png | wc -l"
expect "PNG signature" 0 "PNG" -- head -c 4 "$work/an/sink_mass.png"
expect "heads.json has per-head sink mass" 0 '"sink_token"' -- cat "$work/an/heads.json"
printf 'too short' >"$work/short.txt"
expect "analyze rejects too little text" 2 "short.txt: 9 tokens, fewer than one segment of 64" -- \
  "$bin" analyze --tokenizer bytes --checkpoint "$work/vanilla" --text "$work/short.txt" --out "$work/an2" --tokens 64
# The mechanism: query classes at chosen characters, value norms, and the interventions (a vanilla model's
# first 4 positions; a newline in their place by default, '#' here).
expect "analyze splits the queries at trigger characters" 0 "mass on position 0: triggers / elsewhere" -- \
  "$bin" analyze --tokenizer bytes --checkpoint "$work/vanilla" --text "$src/README.md" --out "$work/an-mech" --tokens 32 \
  --segments 2 --trigger-tokens ' e' --substitute '#'
"$py" - "$work/an-mech/heads.json" <<'PY' || exit 1
import json, sys
h = json.load(open(sys.argv[1]))
m = h["mechanism"]
r = m["interventions"]
assert r["sinks"] == 4 and r["substitute"] == {"text": "#", "id": 35} and r["targets"] == 2 * 15, r
assert 0 < m["query_classes"]["trigger_queries"] < 2 * 16 and r["trigger_targets"] > 0, m
for name in ("intact", "evicted", "masked", "substituted"):
    assert all(r["nll"][name][part] > 0 for part in ("all", "trigger", "other")), (name, r["nll"][name])
assert abs(r["nll"]["masked"]["all"] - r["nll"]["evicted"]["all"]) < 1e-4 * r["nll"]["evicted"]["all"], r["nll"]
head = h["layers"][0]["heads"][0]
assert head["value_norm"] > 0 and head["sink_value_norm"] > 0 and 0 <= head["sink_at_trigger"] <= 1, head
# Per segment: each segment alone gives the figures whose mean over the equal-sized segments is the pooled one.
seg = m["per_segment"]
assert len(seg["masked"]["all"]) == 2 and len(seg["sink_mass"]) == 2 and len(seg["sink_mass"][0]) == 2, seg
pooled = r["nll"]["masked"]["all"] - r["nll"]["intact"]["all"]
assert abs(sum(seg["masked"]["all"]) / 2 - pooled) < 1e-6, (seg["masked"]["all"], pooled)
layer0 = sum(x["first_positions"][0] for x in h["layers"][0]["heads"]) / len(h["layers"][0]["heads"])
assert abs((seg["sink_mass"][0][0] + seg["sink_mass"][1][0]) / 2 - layer0) < 1e-6, (seg["sink_mass"], layer0)
assert h["segment_stride"] == 32 and h["input_tokens"] == 2 * 32, h["segment_stride"]
PY
# --spread: the same segments' count, one every input_tokens / S tokens of the whole input instead of its first.
"$bin" analyze --tokenizer bytes --checkpoint "$work/vanilla" --text "$src/README.md" --out "$work/an-spread" --tokens 32 \
  --segments 2 --trigger-tokens ' e' --substitute '#' --spread >/dev/null || exit 1
"$py" - "$work/an-mech/heads.json" "$work/an-spread/heads.json" "$src/README.md" <<'PY' || exit 1
import json, sys
first, spread = (json.load(open(p)) for p in sys.argv[1:3])
size = len(open(sys.argv[3], "rb").read())
assert spread["input_tokens"] == size and spread["segment_stride"] == size // 2, (spread["input_tokens"], size)
a, b = (h["mechanism"]["per_segment"]["masked"]["all"] for h in (first, spread))
assert a[0] == b[0] and a[1] != b[1], (a, b)  # segment 0 starts at 0 either way; segment 1 is elsewhere
PY
expect "a substitute of two tokens is refused" 2 "--substitute 'ab': encodes to 2 tokens, not one" -- \
  "$bin" analyze --tokenizer bytes --checkpoint "$work/vanilla" --text "$src/README.md" --out "$work/an4" --tokens 32 --substitute ab
expect "too many sink positions are refused" 2 "--sinks 16: the interventions need 1 .. 15 sink positions" -- \
  "$bin" analyze --tokenizer bytes --checkpoint "$work/vanilla" --text "$src/README.md" --out "$work/an5" --tokens 32 --sinks 16
expect "analyze rejects a bad layer" 2 "--layers: '9' is not a layer index in \[0, 2\)" -- \
  "$bin" analyze --tokenizer bytes --checkpoint "$work/vanilla" --text "$src/README.md" --out "$work/an3" --layers 0,9

expect_summary
