"""The Python stack's figure beside sinklm's on a GPU: the same checkpoint (from `sinklm init`) trained with
transformers' GPTNeoXForCausalLM in a plain PyTorch loop with its best plain settings: SDPA attention, bf16
autocast, fp32 loss over fp32 logits, fused AdamW, clip_grad_norm_, zero_grad(set_to_none=True), the same
micro-batch, sequence length and gradient accumulation; no torch.compile. Prints one JSON line (median
tokens/s over the steps after the first third, and MFU against the same 989 TFLOP/s sinklm uses).
On the CPU (--device cpu, the check's dry run) it runs in fp32 with the unfused AdamW: the plumbing, not a figure.
usage: gpu_python_baseline.py CHECKPOINT [--device cuda] [--micro-batch 16] [--seq 2048] [--accumulation 4] [--steps 30]"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from transformers import GPTNeoXForCausalLM

PEAK_BF16 = 989e12  # H100/H200 dense bf16, as train/monitor/throughput.cpp


def write_kernel_table(step, path, cuda, steps=2):
    """The table model/analysis/kernel_trace.cpp writes, from torch.profiler over `steps` steps: total time per CUDA
    kernel/copy/memset name per step, largest first (on the CPU: per operator, inclusive)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
    totals = {}
    wanted = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    for e in prof.profiler.kineto_results.events():
        if e.device_type() == wanted:
            ns, calls = totals.get(e.name(), (0, 0))
            totals[e.name()] = (ns + e.duration_ns(), calls + 1)
    all_ns = sum(ns for ns, _ in totals.values())
    with open(path, "w") as f:
        what = ("CUDA kernels, copies and memsets", "the shares add up to the device's busy time") if cuda else \
            ("CPU operators (inclusive)", "nested: shares overlap")
        f.write(f"{what[0]} per step over {steps} traced steps; {what[1]}\n{'ms/step':>10} {'share':>7} {'calls':>9}  name\n")
        for name, (ns, calls) in sorted(totals.items(), key=lambda kv: -kv[1][0])[:40]:
            f.write(f"{ns / 1e6 / steps:10.3f} {100 * ns / all_ns:6.1f}% {calls / steps:9.1f}  {name[:300]}\n")
        f.write(f"{all_ns / 1e6 / steps:10.3f} {100.0:6.1f}% {'':>9}  (all)\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--micro-batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--accumulation", type=int, default=4)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--trace", help="also write the CUDA kernel table of 2 steps here (sinklm's trace_top.txt format)")
    a = p.parse_args()
    cuda = a.device == "cuda"
    model = GPTNeoXForCausalLM.from_pretrained(a.checkpoint, attn_implementation="sdpa").to(a.device).train()
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=cuda)
    vocab = model.config.vocab_size
    ids = torch.randint(0, min(50277, vocab), (a.accumulation, a.micro_batch, a.seq + 1), device=a.device)
    tokens = a.accumulation * a.micro_batch * a.seq

    def step():
        for m in range(a.accumulation):
            with torch.autocast(a.device, dtype=torch.bfloat16, enabled=cuda):
                logits = model(ids[m, :, :-1]).logits
            loss = F.cross_entropy(logits.float().reshape(-1, vocab), ids[m, :, 1:].reshape(-1)) / a.accumulation
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()

    rates = []
    for _ in range(a.steps):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        rates.append(tokens / (time.perf_counter() - start))
    if a.trace:
        write_kernel_table(step, a.trace, cuda)
    steady = rates[len(rates) // 3:]
    c = model.config
    n = sum(q.numel() for q in model.parameters()) - c.vocab_size * c.hidden_size  # embed_in is a lookup
    flops_per_token = 6 * n + 12 * c.num_hidden_layers * c.hidden_size * a.seq  # as train/monitor/throughput.cpp
    tps = statistics.median(steady)
    print(json.dumps({"python_loop_tokens_per_s": tps, "mfu": tps * flops_per_token / PEAK_BF16,
                      "micro_batch": a.micro_batch, "seq": a.seq, "accumulation": a.accumulation,
                      "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if cuda else "cpu dry run"}))


if __name__ == "__main__":
    main()
