#!/usr/bin/env python3
"""Interoperability with the real Hugging Face implementation (label e2e).

1. transformers builds a random GPTNeoXForCausalLM and save_pretrained()s it; `sinklm forward` loads the
   directory and must reproduce transformers' logits (max relative error <= 1e-4, fp32).
2. `sinklm init` writes vanilla and token-sink checkpoints; transformers loads them with no missing or
   unexpected tensors and reproduces sinklm's logits (the sink id prepended for the token model).
Exit code 77 (skipped) only when the reference packages cannot be imported.
"""
import json
import os

from sinklm_test import check, config, finish, run_sinklm, skip, temp_dir

try:
    import numpy as np
    import torch
    from safetensors.numpy import load_file
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
except ImportError as e:  # pragma: no cover - environment without the oracle
    skip(f"reference package not importable ({e}); run scripts/setup.sh to install it")

TOLERANCE = 1e-4


def sinklm_logits(checkpoint, ids, workdir):
    out = os.path.join(workdir, "logits.safetensors")
    run = run_sinklm("forward", "--checkpoint", checkpoint, "--ids", " ".join(map(str, ids)), "--out", out)
    tensors = load_file(out)
    return tensors["logits"], tensors["input_ids"], json.loads(run.stdout)


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def relative_error(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def hf_to_sinklm(workdir, parallel_residual):
    torch.manual_seed(0)
    config = GPTNeoXConfig(vocab_size=96, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, max_position_embeddings=128, use_parallel_residual=parallel_residual,
                           rotary_pct=0.25, rotary_emb_base=10000, bos_token_id=0, eos_token_id=0)
    model = GPTNeoXForCausalLM(config).eval()
    with torch.no_grad():  # random weights of realistic magnitude, so the comparison sees every term
        for name, p in model.named_parameters():
            p.copy_(1.0 + 0.1 * torch.randn_like(p) if "layernorm" in name or "layer_norm" in name
                    else 0.15 * torch.randn_like(p))
    model.config._attn_implementation = "eager"
    directory = os.path.join(workdir, f"hf-{parallel_residual}")
    model.save_pretrained(directory, safe_serialization=True)
    ids = [int(i) for i in torch.randint(0, 96, (40,), generator=torch.Generator().manual_seed(1))]
    ours, _, _ = sinklm_logits(directory, ids, workdir)
    err = relative_error(ours, hf_logits(model, ids))
    check(err <= TOLERANCE, f"HF -> sinklm logits (parallel_residual={parallel_residual})", f"max rel err {err:.2e}")


def sinklm_to_hf(workdir, sink_mode):
    directory = os.path.join(workdir, f"sinklm-{sink_mode}")
    overrides = ["model.vocab_size=128", "model.tokenizer_vocab_size=120", "model.hidden_size=64",
                 "model.num_layers=3", "model.num_heads=4", "model.intermediate_size=256",
                 "model.max_position_embeddings=128", f"model.sink.mode={sink_mode}", "model.init_seed=9"]
    args = ["init", "--config", config("tiny.yaml"), "--out", directory]
    for o in overrides:
        args += ["--set", o]
    run_sinklm(*args)
    model, info = GPTNeoXForCausalLM.from_pretrained(directory, output_loading_info=True, attn_implementation="eager")
    model.eval()
    check(not info["missing_keys"] and not info["unexpected_keys"],
          f"transformers loads sinklm {sink_mode} checkpoint with no missing/unexpected tensors", str(info))
    ids = [int(i) for i in torch.randint(0, 120, (50,), generator=torch.Generator().manual_seed(2))]
    ours, fed_ids, _ = sinklm_logits(directory, ids, workdir)
    fed = [int(i) for i in fed_ids]
    if sink_mode == "token":
        check(fed == [120] + ids, "sinklm prepends the sink token id", str(fed[:3]))
    err = relative_error(ours, hf_logits(model, fed))
    check(err <= TOLERANCE, f"sinklm {sink_mode} -> HF logits", f"max rel err {err:.2e}")


def main():
    with temp_dir("sinklm-hf-roundtrip-") as workdir:
        hf_to_sinklm(workdir, True)
        hf_to_sinklm(workdir, False)
        sinklm_to_hf(workdir, "none")
        sinklm_to_hf(workdir, "token")
    finish()


if __name__ == "__main__":
    main()
