#!/usr/bin/env python3
"""lm-evaluation-harness's `local-completions` model against `sinklm serve` (label e2e).

The harness scores every request through the server's OpenAI completions API (`echo: true, max_tokens: 1,
logprobs: 1` on token-id prompts, reading choices[].logprobs.token_logprobs / top_logprobs) over loopback,
offline, on our fixture tasks (tests/eval/fixtures through lm-eval's own task YAMLs). Every request's
log-likelihood must equal `sinklm eval`'s on the same checkpoint (abs 2e-4) and so must acc / acc_norm /
LAMBADA perplexity; for a vanilla and a token-sink model (the server puts the sink first, as eval does).
Both sides must see the same tokens: `sinklm eval` keeps the last 256 positions (the model's context, sinks
included) of a request, and the server, at --window 256, reports the max_length the harness needs for that in
/v1/models (`max_model_len`; a LAMBADA fixture passage is longer than it, so a wrong figure fails).
Exit 77 (skipped) when lm_eval cannot be imported."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "eval"))
import lm_eval_agreement_test as agreement  # noqa: E402  (exits 77 without lm_eval)
from eval_support import save_model, train_tokenizer  # noqa: E402
from serve_support import http_request, start_server  # noqa: E402
from sinklm_test import finish, temp_dir  # noqa: E402

import lm_eval  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402


CONTEXT = 256  # max_position_embeddings of eval_support.save_model's models


def main():
    with temp_dir("sinklm-serve-lm-eval-") as work:
        tokenizer = os.path.join(work, "tokenizer.json")
        n_tokens = train_tokenizer(tokenizer)
        yamls = os.path.join(work, "tasks")
        os.makedirs(yamls)
        agreement.write_task_yamls(yamls)
        for mode in ("none", "token"):
            checkpoint = save_model(os.path.join(work, mode), tokenizer, n_tokens, mode, seed=3)
            ours, our_lls = agreement.sinklm_eval_scores(checkpoint, os.path.join(work, mode))
            proc, base = start_server(checkpoint, "--threads", "1", "--window", str(CONTEXT), "--model-name", "fixture")
            try:
                status, _, body = http_request(int(base.rsplit(":", 1)[1]), "GET", "/v1/models")
                max_length = json.loads(body)["data"][0]["max_model_len"]
                result = lm_eval.simple_evaluate(
                    model="local-completions",
                    model_args=f"base_url={base}/v1/completions,model=fixture,tokenizer={checkpoint},"
                               f"tokenizer_backend=huggingface,num_concurrent=4,max_retries=1,"
                               f"max_length={max_length}",
                    tasks=[f"local_{t}" for t in agreement.TASKS], task_manager=TaskManager(include_path=yamls),
                    num_fewshot=0, bootstrap_iters=0, log_samples=True)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            agreement.compare_with_lm_eval(result, ours, our_lls, label=f"[{mode}] ")
    finish()


if __name__ == "__main__":
    main()
