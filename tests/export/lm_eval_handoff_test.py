#!/usr/bin/env python3
"""lm-evaluation-harness on a sink checkpoint, as a user runs it, against `sinklm eval` (label e2e).

A `token`-mode model trained by `sinklm train`, scored on the first 300 documents of the official ARC-Easy set
that sinklm ships (eval/benchmarks/arc_easy.jsonl.gz) through lm-eval's own arc_easy task definition:
  - the `hf` backend on the checkpoint directory alone (pretrained=DIR: its tokenizer.json puts the sink first);
  - the `local-completions` backend against `sinklm serve DIR --window P` (P: the model's positions, the context
    `sinklm eval` scores with), with max_length read from the server's /v1/models `max_model_len` (nothing
    computed by the user), tokenizer=DIR;
each must give every request's log-likelihood of `sinklm eval` (abs 2e-4) and its acc and acc_norm exactly.
Exit 77 (skipped) when lm_eval cannot be imported."""
import gzip
import json
import os
import sys

import export_support as fx
from sinklm_test import check, finish, source_path, temp_dir

sys.path.insert(0, source_path("tests", "eval"))
sys.path.insert(0, source_path("tests", "serve"))
# lm-eval offline, and exit 77 (skipped) when it cannot be imported: as the agreement test it shares.
import lm_eval_agreement_test as agreement  # noqa: E402
from serve_support import http_request, start_server  # noqa: E402

import lm_eval  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

DOCUMENTS = 300
TASKS = {"arc_easy": agreement.TASKS["arc_easy"]}


def official_subset(directory):
    """The first DOCUMENTS lines of the shipped ARC-Easy test split, as lm-eval's json builder reads them."""
    os.makedirs(directory)
    with gzip.open(source_path("eval", "benchmarks", "arc_easy.jsonl.gz"), "rt") as src, \
            open(os.path.join(directory, "arc_easy.jsonl"), "w") as dst:
        for _, line in zip(range(DOCUMENTS), src):
            dst.write(line)
    return directory


def run_harness(model, model_args, yamls, **kwargs):
    return lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=["local_arc_easy"],
                                   task_manager=TaskManager(include_path=yamls), num_fewshot=0, bootstrap_iters=0,
                                   log_samples=True, **kwargs)


def served_max_model_len(base):
    status, _, body = http_request(int(base.rsplit(":", 1)[1]), "GET", "/v1/models")
    model = json.loads(body)["data"][0] if status == 200 else {}
    check("max_model_len" in model, "the server reports max_model_len in /v1/models", body[:200])
    return model.get("max_model_len", 0)


def main():
    with temp_dir("sinklm-lm-eval-handoff-") as work:
        _, shards = fx.prepared_shards(work)
        checkpoint = fx.trained_checkpoint(work, shards, "token", "token")
        data, yamls = official_subset(os.path.join(work, "data")), os.path.join(work, "tasks")
        os.makedirs(yamls)
        agreement.write_task_yamls(yamls, data=data, tasks=TASKS)
        ours, our_lls = agreement.sinklm_eval_scores(checkpoint, work, tasks=TASKS, data=None, limit=DOCUMENTS)

        result = run_harness("hf", f"pretrained={checkpoint},dtype=float32", yamls, batch_size=8, device="cpu")
        agreement.compare_with_lm_eval(result, ours, our_lls, label="[hf] ", tasks=TASKS)

        # The server's cache as long as the model's positions, the context `sinklm eval` scores with.
        with open(os.path.join(checkpoint, "config.json")) as f:
            positions = json.load(f)["max_position_embeddings"]
        proc, base = start_server(checkpoint, "--threads", "1", "--model-name", "handoff", "--window", str(positions))
        try:
            max_length = served_max_model_len(base)
            result = run_harness("local-completions",
                                 f"base_url={base}/v1/completions,model=handoff,tokenizer={checkpoint},"
                                 f"tokenizer_backend=huggingface,num_concurrent=4,max_retries=1,"
                                 f"max_length={max_length}", yamls)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        agreement.compare_with_lm_eval(result, ours, our_lls, label="[local-completions] ", tasks=TASKS)
    finish()


if __name__ == "__main__":
    main()
