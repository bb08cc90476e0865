"""One JSON summary of a scripts/gpu/gpu_train_check.sh run: every stage's exit status and time, and the figures
and comparisons read from the stages' logs; with --markdown FILE also the one-screen table the check prints.
usage: gpu_check_summary.py OUT_DIR [--markdown FILE] (prints the JSON)."""
import argparse
import json
import os
import statistics

args = argparse.ArgumentParser()
args.add_argument("out")
args.add_argument("--markdown")
args = args.parse_args()
out = args.out
logs = os.path.join(out, "logs")


def load_json(name):
    try:
        with open(os.path.join(logs, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def metrics(run):
    try:
        with open(os.path.join(logs, run + ".metrics.jsonl")) as f:
            return [json.loads(line) for line in f if '"loss"' in line and '"tokens_per_s"' in line]
    except OSError:
        return []


def losses(run):
    return [r["loss"] for r in metrics(run)]


def max_abs_difference(a, b):
    if not a or len(a) != len(b):
        return None
    return max(abs(x - y) for x, y in zip(a, b))


stages = {}
with open(os.path.join(out, "stages.tsv")) as f:
    for line in f:
        name, rc, seconds = line.rstrip("\n").split("\t")
        ran = rc != "not run"  # a stage this device cannot run (NCCL or bf16 on the CPU dry run)
        stages[name] = {"exit": int(rc) if ran else None, "seconds": int(seconds), "ok": rc == "0", "ran": ran}

device = open(os.path.join(out, "device.txt")).read().strip() if os.path.exists(os.path.join(out, "device.txt")) else "cuda"
summary = {"device": device, "stages": stages}
info = open(os.path.join(logs, "info.log")).read() if os.path.exists(os.path.join(logs, "info.log")) else ""
summary["torch"] = next((l for l in info.splitlines() if l.startswith("torch ")), None)

summary["gpu_tests"] = {}
for name in sorted(os.listdir(logs)):
    gtest = load_json(name) if name.startswith("test_") and name.endswith("_gpu.json") else None
    for suite in gtest["testsuites"] if gtest else []:
        for t in suite["testsuite"]:
            summary["gpu_tests"][suite["name"] + "." + t["name"]] = "FAILED" if t.get("failures") else t.get("result", "?")

# Training paths, same initialisation and data: CPU vs CUDA (fp32: float reassociation only), the NCCL
# communicator vs the world-of-one default (identical arithmetic: must be bit-equal), bf16 (close).
reference = losses("tiny_cuda_fp32")
summary["tiny_losses"] = {run: losses(run) for run in
                          ["tiny_cpu", "tiny_cuda_fp32", "tiny_cuda_nccl1", "tiny_cuda_nccl1_zero", "tiny_cuda_2proc",
                           "tiny_cuda_bf16"]}
summary["tiny_max_loss_difference_vs_cuda_fp32"] = {
    run: max_abs_difference(losses(run), reference)
    for run in ["tiny_cpu", "tiny_cuda_nccl1", "tiny_cuda_nccl1_zero", "tiny_cuda_2proc", "tiny_cuda_bf16"]}

def training_figures(run):
    rows = metrics(run)
    steady = rows[len(rows) // 3:]
    if not steady:
        return None
    log = os.path.join(logs, run + ".log")
    return {
        "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in steady),
        "median_mfu": statistics.median(r["mfu"] for r in steady),
        "steps": [steady[0]["step"], steady[-1]["step"]],
        "losses": [r["loss"] for r in rows],
        "memory": [l.strip() for l in open(log) if "memory" in l] if os.path.exists(log) else [],
    }


summary["pythia160m_sink_bf16"] = training_figures("pythia160m_bf16")
summary["pythia160m_sink_bf16_micro2x"] = training_figures("pythia160m_bf16_micro2x")
summary["pythia160m_sink_bf16_checkpointing"] = training_figures("pythia160m_bf16_checkpointing")
summary["modes"] = {name[len("mode_"):]: training_figures(name) for name in stages if name.startswith("mode_")}
summary["python_loop_bf16"] = load_json("python_baseline.json")
if summary["python_loop_bf16"] and summary["pythia160m_sink_bf16"]:
    summary["sinklm_vs_python_loop"] = (summary["pythia160m_sink_bf16"]["median_tokens_per_s"] /
                                        summary["python_loop_bf16"]["python_loop_tokens_per_s"])

cpu, cuda = load_json("stream_cpu.json"), load_json("stream_cuda.json")
if cpu and cuda:
    a, b = cpu["runs"][0], cuda["runs"][0]
    summary["stream_ppl"] = {"cpu": a.get("ppl"), "cuda": b.get("ppl")}
    if a.get("ppl") and b.get("ppl"):
        summary["stream_ppl"]["relative_difference"] = abs(a["ppl"] - b["ppl"]) / a["ppl"]
summary["decode_cuda"] = {k: load_json(f"decode_cuda_{k}.json") for k in (1, 16, 64)}
# Two ranks on one GPU: NCCL cannot; what matters is that sinklm refuses it with the hint, before NCCL fails.
two = os.path.join(logs, "tiny_cuda_2proc.log")
summary["two_ranks_one_gpu"] = ("not run" if "tiny_cuda_2proc" not in stages else  # left out by --stages
                                "trained" if stages["tiny_cuda_2proc"]["ok"] else
                                "refused with the one-GPU-per-rank hint" if os.path.exists(two) and
                                "one GPU per rank" in open(two).read() else "failed")
summary["all_stages_ok"] = all(s["ok"] or not s["ran"] for name, s in stages.items() if name != "tiny_cuda_2proc") and \
    summary["two_ranks_one_gpu"] != "failed"


def top_kernels(name, count=3):
    """The `count` largest rows of a trace_top.txt table (model/analysis/kernel_trace.cpp's format): (ms/step, share, name)."""
    path = os.path.join(logs, name)
    if not os.path.exists(path):
        return []
    rows = []
    for line in open(path).read().splitlines()[2:]:
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[3] != "(all)":
            rows.append((parts[0], parts[1], parts[3][:70]))
    return rows[:count]


summary["top_kernels"] = {"sinklm": top_kernels("pythia160m_bf16.trace_top.txt"),
                          "python_loop": top_kernels("python_baseline.trace_top.txt")}


def figure(value, fmt):
    return format(value, fmt) if isinstance(value, (int, float)) else "-"


def markdown():
    """The one screen the check prints: stages, one row per sink mode, the comparisons."""
    lines = [f"# GPU check: {device}", "", "| stage | exit | s |", "|---|---|---|"]
    lines += [f"| {n} | {'not run' if not s['ran'] else s['exit']} | {s['seconds']} |" for n, s in stages.items()]
    lines += ["", f"all stages ok: {summary['all_stages_ok']}; two ranks on one device: {summary['two_ranks_one_gpu']}",
              "", "| sink mode | tokens/s | MFU | memory (last line) |", "|---|---|---|---|"]
    for mode, f in summary["modes"].items():
        memory = f["memory"][-1].split(": ", 1)[-1][:60] if f and f["memory"] else "-"
        lines.append(f"| {mode} | {figure(f and f['median_tokens_per_s'], ',.0f')} | "
                     f"{figure(f and f['median_mfu'], '.1%')} | {memory} |")
    main, loop = summary["pythia160m_sink_bf16"], summary["python_loop_bf16"]
    lines += ["", f"long model: {figure(main and main['median_tokens_per_s'], ',.0f')} tokens/s, MFU "
              f"{figure(main and main['median_mfu'], '.1%')}; plain PyTorch loop "
              f"{figure(loop and loop.get('python_loop_tokens_per_s'), ',.0f')} tokens/s; sinklm / loop "
              f"{figure(summary.get('sinklm_vs_python_loop'), '.2f')}"]
    for who, rows in summary["top_kernels"].items():
        lines.append(f"top kernels, {who}: " + "; ".join(f"{n} {ms} ms ({share})" for ms, share, n in rows))
    decode = {k: figure(v and v.get("tokens_per_second"), ",.0f") for k, v in summary["decode_cuda"].items()}
    lines.append(f"decode tokens/s, 1 / 16 / 64 streams: {decode[1]} / {decode[16]} / {decode[64]}; "
                 f"stream perplexity CPU vs device: {summary.get('stream_ppl')}")
    return "\n".join(lines) + "\n"


if args.markdown:
    with open(args.markdown, "w") as f:
        f.write(markdown())
print(json.dumps(summary, indent=2))
