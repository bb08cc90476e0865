"""Step profile of `sinklm train` on 1 and 2 ranks (see scripts/bench/profile_train).

Both runs take the same global batch of 2 micro-batches of 8 samples: 1 rank accumulates both on all cores,
each of 2 ranks takes one on cores / 2 threads. The first step warms up; the next --steps - 1 are timed.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_train import MODEL_SETTINGS, MPI_ENV, MPIRUN, ROOT, SHAPES, SINKLM, prepare_data  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="small", choices=sorted(SHAPES))
    parser.add_argument("--steps", type=int, default=6, help="steps per run; the first is warm-up")
    parser.add_argument("--ranks", default="1,2", help="comma-separated rank counts (1 or 2)")
    parser.add_argument("--out", default=None, help="run directories (default runs/profile-<preset>)")
    parser.add_argument("--cache", default=os.path.join(ROOT, "runs", "bench-data"))
    parser.add_argument("--set", action="append", default=[], help="extra config override, repeatable")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step is not timed)")
    out = args.out or os.path.join(ROOT, "runs", f"profile-{args.preset}")
    shards = prepare_data(args.cache)
    seq, micro = SHAPES[args.preset]
    for ranks in [int(r) for r in args.ranks.split(",")]:
        run = os.path.join(out, f"{ranks}-rank")
        subprocess.run(["rm", "-rf", run], check=True)
        settings = MODEL_SETTINGS + [
            f"data.shards={shards}", f"train.steps={args.steps}", f"train.seq_len={seq}",
            f"train.micro_batch={micro}", f"train.global_batch_tokens={2 * micro * seq}", "train.eval_every=0",
            "train.checkpoint_every=0", "data.validation_batches=0", f"train.log_every={args.steps}",
            f"train.profile_steps={args.steps - 1}"] + args.set
        cmd = [SINKLM, "train", "--config", f"{ROOT}/configs/{args.preset}.yaml", "--out", run]
        for s in settings:
            cmd += ["--set", s]
        print(f"== {args.preset}, {ranks} rank(s), {2 * micro * seq} tokens per step", flush=True)
        result = subprocess.run((MPIRUN[:-1] + [str(ranks)] if ranks > 1 else []) + cmd, env=MPI_ENV,
                                capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"profile_train: {' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
        table = result.stderr[result.stderr.index("step profile ("):]
        print(table, flush=True)


if __name__ == "__main__":
    sys.exit(main())
