#!/usr/bin/env python3
"""`sinklm eval` against EleutherAI's lm-evaluation-harness itself (label e2e).

lm-eval (pip package lm-eval) runs offline: its own task definitions (the installed arc_easy, hellaswag, ...
YAMLs, included by absolute path) re-pointed at our local fixture JSONL files through the `json` dataset
builder, and its HFLM on a local transformers checkpoint with our tokenizer.json. Both must report the same
acc / acc_norm and LAMBADA perplexity (rel 1e-4), and the same log-likelihood for every request (abs 2e-4),
on the same vanilla checkpoint. (A token-sink model needs
its sink id before every context, which HFLM has no option for; eval_reference_test.py covers it.)
lm-eval's hellaswag YAML scores the proxy_hellaswag fixture, HellaSwag in its Hugging Face layout; sinklm's
`hellaswag` is llama.cpp's text form, for which lm-eval has no task (eval_reference_test.py covers it).
Exit code 77 (skipped) when lm_eval cannot be imported by this Python.
"""
import json
import os

from sinklm_test import check, finish, run_sinklm, skip, temp_dir

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
try:
    import lm_eval
    from lm_eval.tasks import TaskManager
except ImportError as e:  # pragma: no cover
    skip(f"lm_eval not importable ({e}); pip install lm-eval (scripts/setup.sh does)")

from eval_support import FIXTURES, save_model, train_tokenizer  # noqa: E402

TASKS = {  # our task name -> lm-eval's YAML (relative to lm_eval/tasks) and the split it evaluates
    "arc_easy": ("arc/arc_easy.yaml", "test"),
    "arc_challenge": ("arc/arc_challenge.yaml", "test"),
    "proxy_hellaswag": ("hellaswag/hellaswag.yaml", "validation"),
    "lambada_openai": ("lambada/lambada_openai.yaml", "test"),
    "openbookqa": ("openbookqa/openbookqa.yaml", "test"),
    "piqa": ("piqa/piqa.yaml", "validation"),
    "winogrande": ("winogrande/default.yaml", "validation"),
}


def write_task_yamls(directory, data=FIXTURES, tasks=TASKS):
    """lm-eval task YAMLs local_<task>: its own task definition, reading <data>/<task>.jsonl."""
    tasks_root = os.path.join(os.path.dirname(lm_eval.__file__), "tasks")
    for task, (yaml, split) in tasks.items():
        with open(os.path.join(directory, f"local_{task}.yaml"), "w") as f:
            f.write(f"include: {os.path.join(tasks_root, yaml)}\n"
                    f"task: local_{task}\n"
                    "tag: []\n"
                    "dataset_path: json\n"
                    "dataset_name: null\n"
                    f"dataset_kwargs:\n  data_files:\n    {split}: {os.path.join(data, task + '.jsonl')}\n"
                    "training_split: null\n"
                    + "".join(f"{s}_split: {split if s == split else 'null'}\n" for s in ("validation", "test")))


def sinklm_eval_scores(checkpoint, work, tasks=TASKS, data=FIXTURES, limit=0):
    """`sinklm eval` on `tasks` (from `data`; None: the shipped official sets), the first `limit` documents (0:
    all): ({(task, metric): value}, {(task, doc): [log-likelihood per request]})."""
    out, samples = os.path.join(work, "ours.json"), os.path.join(work, "ours.samples.jsonl")
    run_sinklm("eval", "--checkpoint", checkpoint, "--tasks", ",".join(tasks), *(["--data", data] if data else []),
               "--limit", str(limit), "--out", out, "--samples", samples)
    ours = {(r["task"], r["metric"]): r["value"] for r in json.load(open(out))["results"]}
    our_lls = {}
    with open(samples) as f:
        for line in map(json.loads, f):
            our_lls[(line["task"], line["doc"])] = line["logprobs"]
    return ours, our_lls


def compare_with_lm_eval(result, ours, our_lls, label="", tasks=TASKS):
    """lm-eval's logged requests and metrics (`result` of simple_evaluate with log_samples) against sinklm
    eval's: `ours` {(task, metric): value}, `our_lls` {(task, doc): [log-likelihood per request]}."""
    for task in tasks:
        logged = result["samples"][f"local_{task}"]  # resps: per request [(loglikelihood, is_greedy)]
        diffs = [abs(float(resp[0][0]) - ours_ll) for s in logged
                 for resp, ours_ll in zip(s["resps"], our_lls.get((task, s["doc_id"]), []))]
        n_requests = sum(len(s["resps"]) for s in logged)
        check(len(diffs) == n_requests and max(diffs) <= 2e-4, f"{label}{task}: log-likelihood of {n_requests} requests",
              f"max abs diff {max(diffs):.2e}")
        theirs = result["results"][f"local_{task}"]
        for key, value in theirs.items():
            metric = key.split(",")[0]
            if metric not in ("acc", "acc_norm", "perplexity") or key.split(",")[0].endswith("stderr"):
                continue
            got = ours.get((task, metric))
            ok = got is not None and (abs(got - value) <= 1e-4 * value if metric == "perplexity" else got == value)
            check(ok, f"{label}{task} {metric}: lm-eval {value:.4f}", f"sinklm {got}")


def main():
    with temp_dir("sinklm-lm-eval-") as work:
        tokenizer = os.path.join(work, "tokenizer.json")
        n_tokens = train_tokenizer(tokenizer)
        checkpoint = save_model(os.path.join(work, "model"), tokenizer, n_tokens, "none", seed=3)
        ours, our_lls = sinklm_eval_scores(checkpoint, work)

        yamls = os.path.join(work, "tasks")
        os.makedirs(yamls)
        write_task_yamls(yamls)
        result = lm_eval.simple_evaluate(
            model="hf", model_args=f"pretrained={checkpoint},tokenizer={checkpoint},dtype=float32",
            tasks=[f"local_{t}" for t in TASKS], task_manager=TaskManager(include_path=yamls), batch_size=1,
            device="cpu", num_fewshot=0, bootstrap_iters=0, log_samples=True)
        compare_with_lm_eval(result, ours, our_lls)
    finish()


if __name__ == "__main__":
    main()
