"""sinklm train vs a plain PyTorch training loop on the same model, batch and optimizer (CPU, fp32), one table;
then sinklm's own bf16 autocast against its fp32 (--precision-presets).

Per preset: the median tokens/s over timed steps of `sinklm train` and of a plain PyTorch loop, their ratio,
and sinklm's model FLOP/s as a fraction of the float32 matmul rate torch reaches in this run (1024^3 GEMMs, the
best of several trials, the same threads). Then data parallelism: 2 ranks x 1 thread vs 1 rank x 2 threads
on the same global batch, with the time each rank blocks in the gradient all-reduce (train.profile_steps).

The comparator is the loop a PyTorch user would write with the best plain settings: GPT-NeoX as torch.nn
modules (the weights of the same `sinklm init` checkpoint; its logits are checked against transformers'
GPTNeoXForCausalLM in the same run), scaled_dot_product_attention, fused AdamW, clip_grad_norm_ (foreach),
zero_grad(set_to_none=True), torch.set_num_threads equal to sinklm's. No torch.compile, no allocator tuning.
sinklm and the loop alternate for --rounds rounds, and the medians pool every round, so load that comes and
goes hits both. On a shared machine the best-step ratios (fastest step of each) estimate the unloaded ratio:
load from other processes only ever slows a step.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/bench/ -> the repository
SINKLM = os.environ.get("SINKLM_BIN", os.path.join(ROOT, "build", "sinklm"))
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2"]
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
# preset -> (seq_len, micro_batch); one micro-batch per step and rank.
SHAPES = {"tiny": (256, 8), "small": (512, 8), "pythia-160m": (128, 8)}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def prepare_data(cache):
    shards = os.path.join(cache, "shards")
    if os.path.exists(os.path.join(shards, "manifest.json")):
        return shards
    sh([SINKLM, "prepare", "corpus", "--out", f"{cache}/corpus", "--sources", "bible-kjv,fortunes"])
    sh([SINKLM, "prepare", "sentencepiece", "--in", f"{cache}/corpus", "--out", f"{cache}/sp", "--vocab-size", "8000",
        "--max-sentences", "50000"])
    sh([SINKLM, "prepare", "shards", "--tokenizer", f"{cache}/sp/tokenizer.model", "--in", f"{cache}/corpus",
        "--out", shards])
    return shards


MODEL_SETTINGS = ["model.sink.mode=none", "model.tokenizer_vocab_size=8000"]


def sinklm_run(preset, shards, steps, threads, ranks, samples, out, binary=SINKLM, extra=()):
    """Per-step tokens/s of the timed steps (all but the first) and the step profile (None for a --baseline
    binary, which may predate train.profile_steps) of a sinklm run with a global batch of `samples`
    (micro-batches of 8 per rank, accumulated when there are more)."""
    seq, micro = SHAPES[preset]
    profiled = binary == SINKLM
    settings = MODEL_SETTINGS + [
        f"data.shards={shards}", f"train.steps={steps}", f"train.seq_len={seq}", f"train.micro_batch={micro}",
        f"train.global_batch_tokens={seq * samples}", "train.eval_every=0", "train.checkpoint_every=0",
        "data.validation_batches=0", "train.log_every=1", f"train.threads={threads}"] + list(extra)
    if profiled:
        settings.append(f"train.profile_steps={steps - 1}")
    cmd = [binary, "train", "--config", f"{ROOT}/configs/{preset}.yaml", "--out", out]
    for s in settings:
        cmd += ["--set", s]
    sh((MPIRUN if ranks > 1 else []) + cmd, env=MPI_ENV)
    with open(f"{out}/metrics.jsonl") as f:
        rates = [json.loads(line)["tokens_per_s"] for line in f if '"tokens_per_s"' in line]
    if not profiled:
        return rates[1:], None
    with open(f"{out}/profile.json") as f:
        return rates[1:], json.load(f)


class Layer(nn.Module):
    """One GPT-NeoX layer, parallel residual, partial rotary; parameter names as in transformers."""

    def __init__(self, c):
        super().__init__()
        h, eps = c["hidden_size"], c["layer_norm_eps"]
        self.heads, self.head_dim = c["num_attention_heads"], h // c["num_attention_heads"]
        self.input_layernorm = nn.LayerNorm(h, eps=eps)
        self.post_attention_layernorm = nn.LayerNorm(h, eps=eps)
        self.attention = nn.Module()
        self.attention.query_key_value = nn.Linear(h, 3 * h)
        self.attention.dense = nn.Linear(h, h)
        self.mlp = nn.Module()
        self.mlp.dense_h_to_4h = nn.Linear(h, c["intermediate_size"])
        self.mlp.dense_4h_to_h = nn.Linear(c["intermediate_size"], h)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        qkv = self.attention.query_key_value(self.input_layernorm(x))
        q, k, v = qkv.view(B, T, self.heads, 3 * self.head_dim).transpose(1, 2).split(self.head_dim, -1)
        a = F.scaled_dot_product_attention(rotate(q, cos, sin), rotate(k, cos, sin), v, is_causal=True)
        a = self.attention.dense(a.transpose(1, 2).reshape(B, T, C))
        m = self.mlp.dense_4h_to_h(F.gelu(self.mlp.dense_h_to_4h(self.post_attention_layernorm(x))))
        return x + a + m


def rotate(x, cos, sin):
    """GPT-NeoX rotary on the first cos.size(-1) dims of x [B, H, T, D]."""
    r = cos.size(-1)
    xr, rest = x[..., :r], x[..., r:]
    half = torch.cat((-xr[..., r // 2:], xr[..., : r // 2]), -1)
    return torch.cat((xr * cos + half * sin, rest), -1)


class PlainGPTNeoX(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gpt_neox = nn.Module()
        self.gpt_neox.embed_in = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.gpt_neox.layers = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.gpt_neox.final_layer_norm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.embed_out = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        head_dim = c["hidden_size"] // c["num_attention_heads"]
        self.rotary = int(head_dim * c["rotary_pct"])
        self.base = c["rotary_emb_base"]

    def forward(self, ids):
        T = ids.size(1)
        inv_freq = 1.0 / self.base ** (torch.arange(0, self.rotary, 2, dtype=torch.float64) / self.rotary)
        angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq
        angles = torch.cat((angles, angles), -1)
        cos, sin = angles.cos().float(), angles.sin().float()  # [T, R]
        x = self.gpt_neox.embed_in(ids)
        for layer in self.gpt_neox.layers:
            x = layer(x, cos, sin)
        return self.embed_out(self.gpt_neox.final_layer_norm(x))


def plain_model(preset, work):
    init = f"{work}/{preset}-init"
    if not os.path.exists(init):
        cmd = [SINKLM, "init", "--config", f"{ROOT}/configs/{preset}.yaml", "--out", init]
        for s in MODEL_SETTINGS:
            cmd += ["--set", s]
        sh(cmd)
    with open(f"{init}/config.json") as f:
        config = json.load(f)
    assert config.get("use_parallel_residual", True) and config.get("hidden_act", "gelu") == "gelu", config
    model = PlainGPTNeoX(config)
    missing, _ = model.load_state_dict(load_file(f"{init}/model.safetensors"), strict=False)
    assert not missing, missing
    return model, config, init


def check_against_transformers(model, init, seq):
    """Max |logit difference| between the plain model and transformers on the same weights and ids."""
    from transformers import GPTNeoXForCausalLM

    reference = GPTNeoXForCausalLM.from_pretrained(init, attn_implementation="sdpa").eval()
    ids = torch.randint(0, 8000, (2, seq - 1))
    with torch.no_grad():
        return (model(ids) - reference(ids).logits).abs().max().item()


def python_rates(model, seq, micro, steps):
    # weight decay as sinklm applies it: on weight matrices and embeddings, not on LayerNorms or biases
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8, fused=True)
    ids = torch.randint(0, 8000, (micro, seq))
    rates = []
    model.train()
    for _ in range(steps):
        start = time.perf_counter()
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        rates.append(micro * seq / (time.perf_counter() - start))
    return rates[1:]


def run_losses(out):
    with open(f"{out}/metrics.jsonl") as f:
        return [json.loads(line)["loss"] for line in f if '"loss"' in line]


def matmul_flops(threads, n=1024, dtype=torch.float32):
    """GEMM rate of `dtype`: the best of 5 trials of ~0.2 s, as train/monitor/throughput.cpp probes it (float32)."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = 0.0
    for _ in range(5):
        start, reps = time.perf_counter(), 0
        while time.perf_counter() - start < 0.2:
            a @ b
            reps += 1
        best = max(best, 2.0 * n ** 3 * reps / (time.perf_counter() - start))
    return best


def flops_per_token(c, seq):
    h, layers, v, i = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"]
    params = layers * (4 * h * h + 2 * h * i) + v * h  # matmul weights incl. embed_out (embed_in is a lookup)
    return 6.0 * params + 12.0 * layers * h * seq


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8, help="steps per run; the first is warm-up")
    parser.add_argument("--rounds", type=int, default=2, help="sinklm and the Python loop alternate this often")
    parser.add_argument("--presets", default="tiny,small")
    parser.add_argument("--dp-presets", default="tiny,small", help="presets of the 2x1 vs 1x2 table ('' = none)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache", default=os.path.join(ROOT, "runs", "bench-data"))
    parser.add_argument("--baseline", help="another sinklm binary (e.g. an older build) timed in the same rounds")
    parser.add_argument("--precision-presets", default="small",
                        help="presets of the train.precision bf16 vs fp32 table ('' = none)")
    parser.add_argument("--precision-steps", type=int, default=30, help="steps per run of the precision table")
    args = parser.parse_args()
    shards = prepare_data(args.cache)
    load = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {args.threads} threads, fp32, one micro-batch of 8 per step and rank, "
          f"median of {args.rounds} x {args.steps - 1} timed steps; load average {load:.1f} at start")
    with tempfile.TemporaryDirectory() as work:
        baseline_header = f" {'baseline tok/s':>14}" if args.baseline else ""
        print(f"\n{'preset':<8} {'tok/step':>8}{baseline_header} {'sinklm tok/s':>12} {'python tok/s':>12} {'ratio':>6} "
              f"{'best-step ratio':>15} {'matmul GFLOP/s':>14} {'model GFLOP/s':>13} {'% of matmul':>11} "
              f"{'|logit diff| vs HF':>18}")
        for preset in [p for p in args.presets.split(",") if p]:
            seq, micro = SHAPES[preset]
            torch.set_num_threads(args.threads)
            model, config, init = plain_model(preset, work)
            diff = check_against_transformers(model, init, seq)
            ours, theirs, peaks, before = [], [], [], []
            for r in range(args.rounds):
                if args.baseline:
                    before += sinklm_run(preset, shards, args.steps, args.threads, 1, micro, f"{work}/{preset}-b{r}",
                                         args.baseline)[0]
                ours += sinklm_run(preset, shards, args.steps, args.threads, 1, micro, f"{work}/{preset}-{r}")[0]
                torch.set_num_threads(args.threads)
                theirs += python_rates(model, seq, micro, args.steps)
                peaks.append(matmul_flops(args.threads))
            # load from other processes only ever slows a step: the best steps show the unloaded ratio
            best_ratio = max(ours) / max(theirs)
            ours, theirs, peak = statistics.median(ours), statistics.median(theirs), max(peaks)
            model_flops = ours * flops_per_token(config, seq)
            baseline = f" {statistics.median(before):>14.0f}" if args.baseline else ""
            print(f"{preset:<8} {micro * seq:>8}{baseline} {ours:>12.0f} {theirs:>12.0f} {ours / theirs:>5.2f}x {best_ratio:>14.2f}x "
                  f"{peak / 1e9:>14.1f} {model_flops / 1e9:>13.1f} {100 * model_flops / peak:>10.0f}% {diff:>18.1e}",
                  flush=True)
        dp = [p for p in args.dp_presets.split(",") if p]
        if dp:
            print(f"\n{'preset':<8} {'tok/step':>8} {'1x2 tok/s':>10} {'2x1 tok/s':>10} {'2x1/1x2':>8} "
                  f"{'best-step ratio':>15} {'all-reduce blocked ms/step (rank 0, 1)':>40} {'step ms 2x1':>11}")
        for preset in dp:
            seq, micro = SHAPES[preset]
            one, two, blocked, step_ms = [], [], [], []
            for r in range(args.rounds):
                # the same global batch of 2 micro-batches: 1 rank accumulates both, 2 ranks take one each
                one += sinklm_run(preset, shards, args.steps, 2, 1, 2 * micro, f"{work}/{preset}-1x2-{r}")[0]
                rates, profile = sinklm_run(preset, shards, args.steps, 1, 2, 2 * micro, f"{work}/{preset}-2x1-{r}")
                two += rates
                blocked.append([rank["allreduce"] for rank in profile["ms_per_step_by_rank"]])
                step_ms.append(profile["ms_per_step"]["total"])
            a, b, best_ratio = statistics.median(one), statistics.median(two), max(two) / max(one)
            ranks_blocked = ", ".join(f"{statistics.median(x):.1f}" for x in zip(*blocked))
            print(f"{preset:<8} {micro * seq * 2:>8} {a:>10.0f} {b:>10.0f} {b / a:>7.2f}x {best_ratio:>14.2f}x {ranks_blocked:>40} "
                  f"{statistics.median(step_ms):>11.1f}", flush=True)
        precision = [p for p in args.precision_presets.split(",") if p]
        if precision:
            precision_table(precision, shards, args.precision_steps, args.rounds, args.threads, work)


def precision_table(presets, shards, steps, rounds, threads, work):
    """sinklm train.precision=bf16 (CPU autocast) vs fp32 on the same preset, data, seed and steps: median
    tokens/s of each, their ratio beside the ratio of the two dtypes' GEMM rates (the bound a matmul-only model
    would reach), and both loss curves."""
    print(f"\n{'preset':<8} {'tok/step':>8} {'fp32 tok/s':>10} {'bf16 tok/s':>10} {'bf16/fp32':>9} "
          f"{'best-step ratio':>15} {'GEMM bf16/fp32 (bound)':>22} {'mean |loss diff|':>16} {'max':>7}")
    curves = {}
    for preset in presets:
        seq, micro = SHAPES[preset]
        rates = {"fp32": [], "bf16": []}
        for r in range(rounds):
            for precision in rates:
                out = f"{work}/{preset}-{precision}-{r}"
                rates[precision] += sinklm_run(preset, shards, steps, threads, 1, micro, out,
                                               extra=[f"train.precision={precision}"])[0]
                curves[(preset, precision)] = run_losses(out)
        gemm = matmul_flops(threads, dtype=torch.bfloat16) / matmul_flops(threads)
        fp32, bf16 = statistics.median(rates["fp32"]), statistics.median(rates["bf16"])
        diffs = [abs(a - b) for a, b in zip(curves[(preset, "fp32")], curves[(preset, "bf16")])]
        print(f"{preset:<8} {micro * seq:>8} {fp32:>10.0f} {bf16:>10.0f} {bf16 / fp32:>8.2f}x "
              f"{max(rates['bf16']) / max(rates['fp32']):>14.2f}x {gemm:>21.2f}x {statistics.mean(diffs):>16.4f} "
              f"{max(diffs):>7.4f}", flush=True)
    for (preset, precision), losses in curves.items():
        print(f"loss {preset} {precision}: " + " ".join(f"{x:.4f}" for x in losses))


if __name__ == "__main__":
    sys.exit(main())
