#!/usr/bin/env python3
"""The trainer end to end on real text with real MPI (label dist).

Data: a small slice of the King James Bible from Debian's bible-kjv package, a 1000-id SentencePiece
vocabulary and token shards, all made by `sinklm prepare`. Then, on a tiny sink-token model:
  - 2 MPI ranks reach the weights of 1 process with the same global batch (relative error <= 1e-5);
  - ZeRO-1 reaches the weights of plain data parallelism (<= 1e-5);
  - SIGKILL at a step, or halfway through writing a checkpoint, then --resume: bit-identical losses and
    final weights to the uninterrupted run (1 process, and 2 ranks with ZeRO-1);
  - a killed rank ends the job with a message naming it; a hung rank ends it within the collective
    timeout; a NaN loss stops with the step named and the last checkpoint intact, or is skipped;
  - a run checkpointed by 1 process resumes on 2 ranks;
  - SIGUSR1 or SIGTERM on one rank of 2: every rank checkpoints that step and the job exits 75; a second
    SIGTERM during that checkpoint changes nothing; resumed, bit-identical to the uninterrupted run; a signal
    during start-up exits 75 having written nothing; train.checkpoint_minutes checkpoints by wall time;
  - TensorBoard's own reader finds every number metrics.jsonl holds, at its step, after a kill and a resume;
  - train.eval_tasks on 2 ranks: the zero-shot scores logged at the last step equal `sinklm eval` of the final
    checkpoint on one process (same sets, same document limit), TensorBoard included; an unknown set is refused
    before the first step.
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time

import numpy as np
from safetensors.numpy import load_file

import sinklm_test
from sinklm_test import BIN, check, config, finish, temp_dir

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2"]


def run(cmd, timeout=300):
    """(exit status, stdout + stderr, seconds) of cmd under ENV."""
    start = time.time()
    p = sinklm_test.run(cmd, expect=None, env=ENV, timeout=timeout)
    return p.returncode, p.stdout + p.stderr, time.time() - start


def prepare_data(work):
    cache = os.path.join(os.path.expanduser("~"), ".cache", "sinklm", "debian-packages")
    steps = [
        [BIN, "prepare", "corpus", "--out", f"{work}/corpus", "--sources", "bible-kjv", "--max-documents", "24",
         "--validation-fraction", "0.1", "--test-fraction", "0.05", "--cache", cache],
        [BIN, "prepare", "sentencepiece", "--in", f"{work}/corpus", "--out", f"{work}/sp", "--vocab-size", "1000",
         "--max-sentences", "20000"],
        [BIN, "prepare", "shards", "--tokenizer", f"{work}/sp/tokenizer.model", "--in", f"{work}/corpus",
         "--out", f"{work}/shards"],
    ]
    for cmd in steps:
        rc, out, _ = run(cmd, timeout=600)
        if rc != 0:
            print(out)
            raise SystemExit(f"data preparation failed: {' '.join(cmd)}")
    return f"{work}/shards"


def train_command(out, shards, *extra):
    settings = ["model.vocab_size=1024", "model.tokenizer_vocab_size=1000", "model.hidden_size=64",
                "model.num_heads=4", "model.num_layers=2", "model.intermediate_size=256", f"data.shards={shards}",
                "train.steps=6", "train.seq_len=32", "train.global_batch_tokens=512", "train.micro_batch=4",
                "train.eval_every=3", "train.checkpoint_every=2", "data.validation_batches=2", "train.lr=1e-3",
                "train.threads=1", "train.collective_timeout_s=8", "train.bucket_mb=1", "train.log_every=1"] + list(extra)
    cmd = [BIN, "train", "--config", config("tiny-sink.yaml"), "--out", out]
    for s in settings:
        cmd += ["--set", s]
    return cmd


def weights(run_dir, step=6):
    return load_file(f"{run_dir}/checkpoints/step_{step:08d}/model.safetensors")


def max_relative_error(a, b):
    """||a - b|| / ||b|| over the whole parameter vector.

    Element-wise comparison is meaningless for some parameters: the attention key bias has an exactly zero
    true gradient (softmax ignores a shift shared by all keys), so its gradient is pure float rounding,
    which differs with the summation order of 1 vs 2 ranks, and Adam scales that noise up to lr-sized steps.
    """
    diff = sum(float(np.sum((a[k].astype(np.float64) - b[k]) ** 2)) for k in b)
    norm = sum(float(np.sum(b[k].astype(np.float64) ** 2)) for k in b)
    return (diff / norm) ** 0.5


def losses(run_dir):
    with open(f"{run_dir}/metrics.jsonl") as f:
        records = [json.loads(line) for line in f]
    return [(r["step"], r.get("loss"), r.get("val_loss")) for r in records]


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def identical_runs(name, a, b):
    same_weights = sha(f"{a}/checkpoints/step_00000006/model.safetensors") == sha(f"{b}/checkpoints/step_00000006/model.safetensors")
    same_losses = losses(a) == losses(b)
    check(same_weights and same_losses, name, f"weights identical: {same_weights}, losses identical: {same_losses}")


def tensorboard_scalars(run_dir):
    """{(tag, step): value} as TensorBoard's own reader loads <run>/tensorboard (orphaned steps purged)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(f"{run_dir}/tensorboard", size_guidance={"scalars": 0})
    events.Reload()
    return {(tag, e.step): e.value for tag in events.Tags()["scalars"] for e in events.Scalars(tag)}


def metrics_scalars(run_dir):
    """{(key, step): float32 value} of every number in metrics.jsonl (a list as key/layer_<i>, an object as
    key/<name>)."""
    out = {}
    for line in open(f"{run_dir}/metrics.jsonl"):
        record = json.loads(line)
        for key, value in record.items():
            values = ({f"{key}/layer_{i}": v for i, v in enumerate(value)} if isinstance(value, list)
                      else {f"{key}/{k}": v for k, v in value.items()} if isinstance(value, dict) else {key: value})
            for tag, v in values.items():
                if key != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                    out[(tag, record["step"])] = float(np.float32(v))
    return out


def started_with_signal_pending(cmd, sig):
    """Runs cmd with `sig` sent before it can have installed a handler (blocked across the exec, so pending)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
    try:
        proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        proc.send_signal(sig)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    out, _ = proc.communicate(timeout=300)
    return proc.returncode, out


def stop_signals(r, shards):
    """SIGUSR1 / SIGTERM on one rank, a second SIGTERM during the save, start-up, wall-time checkpoints."""
    rc, out, _ = run(MPIRUN + train_command(r("usr1"), shards, "train.fault.step=3", "train.fault.rank=1",
                                            "train.fault.action=sigusr1"))
    done = sorted(os.listdir(r("usr1") + "/checkpoints"))
    check(rc == 75 and "stopped by SIGUSR1 after step 3" in out and done == ["step_00000002", "step_00000003"],
          "SIGUSR1 on rank 1 of 2: both ranks checkpoint step 3 and the job exits 75", f"exit {rc}, {done}: {out[-300:]}")
    rc, out, _ = run(MPIRUN + train_command(r("usr1"), shards) + ["--resume"])
    check(rc == 0 and "step_00000003" in out, "resume after SIGUSR1 completes from step 3", out[-300:])
    identical_runs("SIGUSR1 + resume == uninterrupted (2 ranks), bit for bit", r("usr1"), r("two"))

    rc, out, _ = run(MPIRUN + train_command(r("term"), shards, "train.zero=1", "train.fault.step=5",
                                            "train.fault.rank=0", "train.fault.action=sigterm"))
    intact = run([BIN, "info", r("term") + "/checkpoints/step_00000005"])[0] == 0
    check(rc == 75 and "a second SIGTERM" in out and "stopped by SIGTERM after step 5" in out and intact,
          "SIGTERM on rank 0 of 2, again during the save: step 5's checkpoint is whole and the job exits 75",
          f"exit {rc}, checkpoint verifies: {intact}: {out[-300:]}")
    rc, out, _ = run(MPIRUN + train_command(r("term"), shards, "train.zero=1") + ["--resume"])
    check(rc == 0 and "step_00000005" in out, "resume after SIGTERM completes from step 5", out[-300:])
    identical_runs("SIGTERM + resume == uninterrupted (2 ranks, ZeRO-1), bit for bit", r("term"), r("zero"))

    rc, out = started_with_signal_pending(train_command(r("early"), shards), signal.SIGTERM)
    written = os.listdir(r("early") + "/checkpoints") if os.path.isdir(r("early") + "/checkpoints") else []
    check(rc == 75 and "SIGTERM during start-up" in out and not written,
          "a SIGTERM during start-up exits 75 having written no checkpoint", f"exit {rc}, {written}: {out[-300:]}")

    rc, out, _ = run(train_command(r("clock"), shards, "train.checkpoint_every=0", "train.checkpoint_minutes=1e-9"))
    timed = out.count("by wall time (train.checkpoint_minutes)")
    check(rc == 0 and timed == 5 and sorted(os.listdir(r("clock") + "/checkpoints"))[0] == "step_00000004",
          "train.checkpoint_minutes checkpoints by wall time (steps 1-5; the newest 3 kept)", f"exit {rc}, {timed}")
    identical_runs("checkpoints by wall time leave the run bit-identical", r("clock"), r("one"))


def zero_shot_during_training(work, shards):
    run_dir, tasks, limit = os.path.join(work, "zero-shot"), "arc_easy,lambada_openai", 12
    rc, out, _ = run(MPIRUN + train_command(run_dir, shards, f"train.eval_tasks={tasks}",
                                            f"train.eval_tasks_limit={limit}", "train.eval_tasks_every=3"))
    records = [json.loads(l) for l in open(f"{run_dir}/metrics.jsonl") if '"zero_shot"' in l] if rc == 0 else []
    check(rc == 0 and [r["step"] for r in records] == [3, 6] and "step 6 zero-shot: arc_easy/acc" in out,
          "train.eval_tasks on 2 ranks: scores every 3 steps, beside the loss", out[-400:])
    if not records:
        return
    logged = records[-1]["zero_shot"]
    results = os.path.join(work, "zero-shot-eval.json")
    rc, out, _ = run([BIN, "eval", "--checkpoint", f"{run_dir}/checkpoints/step_00000006", "--tasks", tasks,
                      "--limit", str(limit), "--out", results])
    want = {f"{r['task']}/{r['metric']}": r["value"] for r in json.load(open(results))["results"]} if rc == 0 else {}
    got = {k: v for k, v in logged.items() if not k.endswith("/n")}
    close = want.keys() == got.keys() and all(abs(got[k] - want[k]) <= 1e-6 * max(1.0, abs(want[k])) for k in want)
    check(close and all(logged[f"{t}/n"] == limit for t in tasks.split(",")),
          "the last step's zero-shot scores = `sinklm eval --limit` of the final checkpoint on one process",
          f"logged {got}, eval {want}")
    board = tensorboard_scalars(run_dir)
    check(("zero_shot/arc_easy/acc", 6) in board, "TensorBoard holds the zero-shot scores", str(sorted(board)[:5]))
    rc, out, _ = run(train_command(os.path.join(work, "zero-shot-bad"), shards, "train.eval_tasks=arc_easy,nope"))
    check(rc != 0 and "nope" in out and not os.path.exists(os.path.join(work, "zero-shot-bad", "checkpoints")),
          "an unknown train.eval_tasks set is refused before the first step, named", out[-300:])


def main():
    with temp_dir("sinklm-dist-") as work:
        shards = prepare_data(work)
        r = lambda name: os.path.join(work, name)

        rc, out, _ = run(train_command(r("one"), shards))
        check(rc == 0, "1-process run completes", out[-300:] if rc else "")
        rc, out, _ = run(MPIRUN + train_command(r("two"), shards))
        check(rc == 0, "2-rank run completes", out[-300:] if rc else "")
        err = max_relative_error(weights(r("two")), weights(r("one")))
        check(err <= 1e-5, "2 ranks == 1 process (weights)", f"max rel err {err:.2e}")
        diffs = [abs(x[1] - y[1]) for x, y in zip(losses(r("one")), losses(r("two"))) if x[1] is not None]
        check(max(diffs) <= 1e-5, "2 ranks == 1 process (losses)", f"max loss diff {max(diffs):.2e}")

        rc, out, _ = run(train_command(r("one"), shards))
        check(rc == 2 and "pass --resume" in out, "a fresh run refuses a directory that holds checkpoints", out[-200:])

        rc, out, _ = run(MPIRUN + train_command(r("zero"), shards, "train.zero=1"))
        check(rc == 0, "ZeRO-1 run completes", out[-300:] if rc else "")
        err = max_relative_error(weights(r("zero")), weights(r("two")))
        check(err <= 1e-5, "ZeRO-1 == plain data parallel", f"max rel err {err:.2e}")

        rc, out, _ = run(train_command(r("killed"), shards, "train.fault.step=4", "train.fault.action=kill"))
        check(rc != 0, "SIGKILL at step 4 kills the run", f"exit {rc}")
        rc, out, _ = run(train_command(r("killed"), shards) + ["--resume"])
        check(rc == 0 and "step_00000002" in out, "resume after SIGKILL completes from step 2", out[-300:])
        identical_runs("kill + resume == uninterrupted, bit for bit", r("killed"), r("one"))
        zero_shot_during_training(work, shards)
        board, logged = tensorboard_scalars(r("killed")), metrics_scalars(r("killed"))
        check(board == logged and ("loss", 3) in board,
              "TensorBoard's reader gets every metrics.jsonl number at its step, after a kill and a resume",
              f"{len(board)} scalars read, {len(logged)} logged; differing: {sorted(set(board.items()) ^ set(logged.items()))[:6]}")

        rc, out, _ = run(train_command(r("mid"), shards, "train.fault.step=4", "train.fault.action=kill_in_checkpoint"))
        partial = os.path.isdir(r("mid") + "/checkpoints/step_00000004.partial")
        check(rc != 0 and partial, "SIGKILL halfway through a checkpoint leaves it partial", f"exit {rc}")
        rc, out, _ = run(train_command(r("mid"), shards) + ["--resume"])
        check(rc == 0 and "step_00000002" in out, "resume ignores the partial checkpoint", out[-300:])
        identical_runs("kill mid-checkpoint + resume == uninterrupted, bit for bit", r("mid"), r("one"))

        rc, out, _ = run(MPIRUN + train_command(r("zkill"), shards, "train.zero=1", "train.fault.step=5",
                                                "train.fault.rank=1"))
        check(rc != 0 and "rank 1" in out, "a killed rank ends the job, naming it", f"exit {rc}: {out[-400:]}")
        rc, out, _ = run(MPIRUN + train_command(r("zkill"), shards, "train.zero=1") + ["--resume"])
        check(rc == 0, "2-rank ZeRO-1 resume completes", out[-300:])
        identical_runs("2-rank ZeRO-1 kill + resume == uninterrupted, bit for bit", r("zkill"), r("zero"))

        rc, out, seconds = run(MPIRUN + train_command(r("hang"), shards, "train.fault.step=3", "train.fault.rank=1",
                                                      "train.fault.action=hang"), timeout=120)
        check(rc != 0 and "waited 8 s" in out and seconds < 90, "a hung rank ends the job within the timeout",
              f"exit {rc} after {seconds:.0f} s: {out[-300:]}")

        rc, out, _ = run(train_command(r("nan"), shards, "train.fault.step=3", "train.fault.action=nan"))
        intact = run([BIN, "info", r("nan") + "/checkpoints/step_00000002"])[0] == 0
        check(rc == 2 and "non-finite loss" in out and "at step 3" in out and intact,
              "a NaN loss stops the run naming the step; the checkpoint stays intact", f"exit {rc}: {out[-300:]}")
        rc, out, _ = run(train_command(r("nanskip"), shards, "train.fault.step=3", "train.fault.action=nan",
                                       "train.nan_policy=skip"))
        skipped = [json.loads(l)["step"] for l in open(r("nanskip") + "/metrics.jsonl") if '"skipped":true' in l]
        check(rc == 0 and skipped == [3], "train.nan_policy=skip skips the NaN step", f"exit {rc}, skipped {skipped}")

        stop_signals(r, shards)

        shutil.copytree(r("one"), r("grow"))
        for step in (4, 6):
            shutil.rmtree(f"{r('grow')}/checkpoints/step_{step:08d}", ignore_errors=True)
        rc, out, _ = run(MPIRUN + train_command(r("grow"), shards) + ["--resume"])
        err = max_relative_error(weights(r("grow")), weights(r("one"))) if rc == 0 else float("inf")
        check(rc == 0 and err <= 1e-5, "a 1-process checkpoint resumes on 2 ranks", f"exit {rc}, max rel err {err:.2e}")
    finish()


if __name__ == "__main__":
    main()
