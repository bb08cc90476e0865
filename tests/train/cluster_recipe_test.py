#!/usr/bin/env python3
"""The documented cluster recipe, dry-run on the CPU through real MPI (label dist).

docs/training.md "Pretraining Pythia-160M on your corpus" step by step, at the tiny preset's scale:
  - a JSONL corpus of real English and a byte-level BPE tokenizer.json trained on it (Hugging Face `tokenizers`);
  - `sinklm prepare shards` on 2 ranks: the shard directory holds a copy of the tokenizer, its sha256 in the
    manifest;
  - scripts/slurm_train.sbatch run outside Slurm (mpirun, 2 ranks, the tiny sink preset), then run again with
    more steps as a requeued job is: it resumes from its newest checkpoint;
  - the script sent USR1 mid-run, as `--signal=B:USR1@300` sends it: the ranks checkpoint and exit 75, the
    script requeues (outside Slurm: runs itself again), and the run ends bit-identical to an uninterrupted one;
  - the checkpoint carries the tokenizer; `eval`, `stream` and `serve` use it with no --tokenizer flag (a
    served completion is text in that tokenizer, and the window past the trained length is warned about);
  - the same checkpoint with its tokenizer taken out is refused with an error naming --tokenizer, and
    `--tokenizer bytes` is the explicit way round it; a data.tokenizer other than the shards' is refused.
Exit 77 (skipped) without `tokenizers` or mpirun.
"""
import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time

import sys

import gpt2_reference as ref
import sinklm_test
from sinklm_test import BIN, check, finish, skip, source_path, temp_dir

sys.path.insert(0, source_path("tests", "serve"))
from serve_support import http_request, start_server  # noqa: E402

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2"]
SCRIPT = source_path("scripts", "slurm_train.sbatch")
TINY = ["model.vocab_size=1024", "train.seq_len=64", "train.global_batch_tokens=1024", "train.micro_batch=4",
        "train.checkpoint_every=2", "train.eval_every=2", "train.log_every=1", "data.validation_batches=1"]


def run(cmd, expect=0, env=None, timeout=600):
    return sinklm_test.run(cmd, expect=expect, env=env or ENV, timeout=timeout)


def make_corpus(path):
    text = ref.real_english_text(400_000)
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, len(text), 1500):
            f.write(json.dumps({"text": text[start:start + 1500]}) + "\n")
    return text


def train_tokenizer(text, path, vocab_size):
    from tokenizers import ByteLevelBPETokenizer
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator([text], vocab_size=vocab_size, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  show_progress=False)
    tokenizer.save(path)
    return tokenizer.get_vocab_size()


def recipe(run_dir, shards, steps, vocab, *extra, expect=0):
    settings = [f"model.tokenizer_vocab_size={vocab}", f"train.steps={steps}", *TINY, *extra]
    env = dict(ENV, RANKS="2", THREADS="1", CONFIG=source_path("configs", "tiny-sink.yaml"), SHARDS=shards,
               RUN_DIR=run_dir, SINKLM=BIN)
    return run(["bash", SCRIPT] + [a for s in settings for a in ("--set", s)], expect=expect, env=env)


def preempted_recipe(run_dir, shards, steps, vocab, *extra):
    """The recipe sent USR1 once its run has logged step 2, as Slurm's --signal=B:USR1@300 sends it to the
    batch script; (exit status, output) once it ended, requeue included."""
    settings = [f"model.tokenizer_vocab_size={vocab}", f"train.steps={steps}", *TINY, *extra]
    env = dict(ENV, RANKS="2", THREADS="1", CONFIG=source_path("configs", "tiny-sink.yaml"), SHARDS=shards,
               RUN_DIR=run_dir, SINKLM=BIN)
    proc = subprocess.Popen(["bash", SCRIPT] + [a for s in settings for a in ("--set", s)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metrics, deadline = os.path.join(run_dir, "metrics.jsonl"), time.time() + 300
    while proc.poll() is None and time.time() < deadline and logged_steps(metrics) < 2:
        time.sleep(0.01)
    proc.send_signal(signal.SIGUSR1)
    out, _ = proc.communicate(timeout=600)
    return proc.returncode, out


def logged_steps(metrics):
    steps = [0]
    if os.path.exists(metrics):
        for line in open(metrics):
            try:
                steps.append(json.loads(line).get("step", 0))
            except json.JSONDecodeError:  # a line being written
                pass
    return max(steps)


def checkpoint_digest(run_dir, step):
    with open(os.path.join(run_dir, "checkpoints", f"step_{step:08d}", "model.safetensors"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def without_tokenizer(checkpoint, copy):
    """`checkpoint` as a run that never had a tokenizer writes it: the files and the manifest without one."""
    shutil.copytree(checkpoint, copy)
    manifest_path = os.path.join(copy, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    for name in ("sinklm.tokenizer.json", "tokenizer.json", "tokenizer_config.json"):  # the run's, Hugging Face's
        os.remove(os.path.join(copy, name))
        del manifest["files"][name]
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    return copy


def main():
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        skip("needs the `tokenizers` package (scripts/setup.sh installs it into .venv)")
    if shutil.which("mpirun") is None:
        skip("needs mpirun (scripts/setup.sh installs OpenMPI)")
    with temp_dir("sinklm-cluster-recipe-") as work:
        corpus = os.path.join(work, "corpus.jsonl")
        text = make_corpus(corpus)
        tokenizer = os.path.join(work, "tokenizer", "tokenizer.json")
        os.makedirs(os.path.dirname(tokenizer))
        vocab = train_tokenizer(text, tokenizer, 1000)

        shards = os.path.join(work, "shards")
        run(MPIRUN + [BIN, "prepare", "shards", "--tokenizer", tokenizer, "--in", corpus, "--out", shards,
                      "--validation-size", "0.05", "--test-size", "0.05", "--threads", "1"])
        with open(os.path.join(shards, "manifest.json")) as f:
            manifest = json.load(f)
        with open(tokenizer, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        check(manifest.get("tokenizer_files") == ["tokenizer/tokenizer.json"] and manifest.get("tokenizer_sha256") == digest
              and os.path.exists(os.path.join(shards, "tokenizer", "tokenizer.json")),
              "the shard directory holds a copy of the tokenizer, its sha256 in the manifest",
              str({k: manifest.get(k) for k in ("tokenizer_files", "tokenizer_sha256")}))

        run_dir = os.path.join(work, "runs", "tiny-sink")
        first = recipe(run_dir, shards, 2, vocab)
        check(os.path.isdir(os.path.join(run_dir, "checkpoints", "step_00000002")),
              "the recipe's script (2 MPI ranks, tiny sink preset) trains and checkpoints", first.stderr[-400:])
        again = recipe(run_dir, shards, 4, vocab)
        output = again.stdout + again.stderr
        check("resum" in output.lower() and os.path.isdir(os.path.join(run_dir, "checkpoints", "step_00000004")),
              "run again as a requeued job: it resumes and trains on to step 4", output[-400:])
        steps, sparse = 40, "train.checkpoint_every=1000"
        recipe(os.path.join(work, "runs", "whole"), shards, steps, vocab, sparse)
        rc, output = preempted_recipe(os.path.join(work, "runs", "preempted"), shards, steps, vocab, sparse)
        stopped = [line for line in output.splitlines() if "stopped by SIGUSR1 after step" in line]
        check(rc == 0 and stopped and "running again (a requeue)" in output and "resumed from" in output,
              "USR1 to the script mid-run: the ranks checkpoint and exit 75, the script requeues, the run resumes",
              f"exit {rc}: {stopped} {output[-600:]}")
        same = checkpoint_digest(os.path.join(work, "runs", "whole"), steps) == \
            checkpoint_digest(os.path.join(work, "runs", "preempted"), steps)
        check(same, "preempted, requeued and finished == uninterrupted, bit for bit (final weights)")

        checkpoint = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "step_*")))[-1]
        with open(os.path.join(checkpoint, "sinklm.tokenizer.json"), "rb") as f:
            check(hashlib.sha256(f.read()).hexdigest() == digest,
                  "the checkpoint carries the shards' tokenizer (sinklm.tokenizer.json), though no data.tokenizer was given")

        scored = run([BIN, "eval", "--checkpoint", checkpoint, "--tasks", "arc_easy", "--limit", "8"])
        check("arc_easy" in scored.stdout and "bytes" not in scored.stderr,
              "eval scores the checkpoint with no --tokenizer flag", scored.stdout[-300:] + scored.stderr[-300:])

        proc, base = start_server(checkpoint, "--window", "1024", "--session-dir", os.path.join(work, "sessions"),
                                  stderr=subprocess.PIPE, env=ENV)
        try:
            port = int(base.rsplit(":", 1)[1])
            status, _, body = http_request(port, "POST", "/v1/completions",
                                           {"prompt": "The licence", "max_tokens": 8, "temperature": 0})
            _, _, card = http_request(port, "GET", "/v1/models")
            body = json.loads(body) if status == 200 else {"choices": [{"text": ""}], "error": body}
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=60)
        tokenizer_named = json.loads(card)["data"][0]["sinklm"]["tokenizer"] if card.startswith(b"{") else str(card)
        check(status == 200 and body["choices"][0]["text"] != "" and not tokenizer_named.startswith("bytes"),
              "serve answers a completion with the checkpoint's tokenizer, no --tokenizer flag",
              f"{status} {str(body)[:200]} {tokenizer_named[:300]}")
        check("--window 1024" in err and "1023" in err and "trained on 64 positions" in err,
              "serve --window 1024 on a 64-position checkpoint warns with both numbers", err[-500:])

        bare = without_tokenizer(checkpoint, os.path.join(work, "bare"))
        refused = run([BIN, "eval", "--checkpoint", bare, "--tasks", "arc_easy", "--limit", "8"], expect=None)
        check(refused.returncode != 0 and "--tokenizer" in refused.stderr and "1000" in refused.stderr,
              "a checkpoint without its tokenizer is refused, the error naming --tokenizer", refused.stderr[-400:])
        served = run([BIN, "stream", "--checkpoint", bare, "--text", corpus, "--max-tokens", "64", "--window", "32",
                      "--tokenizer", "bytes"], expect=None)
        check(served.returncode == 0, "... and --tokenizer bytes is the explicit way round it", served.stderr[-300:])

        other = os.path.join(work, "other", "tokenizer.json")
        os.makedirs(os.path.dirname(other))
        train_tokenizer(text[: len(text) // 2], other, 900)
        mismatch = recipe(os.path.join(work, "runs", "mismatch"), shards, 2, vocab, f"data.tokenizer={other}",
                          expect=None)
        check(mismatch.returncode != 0 and "is not the tokenizer data.shards" in mismatch.stderr,
              "a data.tokenizer other than the one the shards were made with is refused", mismatch.stderr[-400:])
    finish()


if __name__ == "__main__":
    main()
