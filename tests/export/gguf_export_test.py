#!/usr/bin/env python3
"""`sinklm export gguf` read back by the `gguf` package, and by llama.cpp where its Python module is installed
(label e2e).

A `token`-mode model trained by `sinklm train`, exported as f32, bf16 and q8_0:
  - the header and keys llama.cpp's gptneox reads (architecture, sizes, rope dims, parallel residual, file type);
  - the vocabulary: one token per embedding row, the tokenizer.json's tokens in GPT-2's byte alphabet and its
    merges in order, the sink "<|sink|>" as the BOS with add_bos_token, eos;
  - every tensor equal to the checkpoint's (attn_qkv reordered to all queries, keys, values): f32 exactly, bf16
    as torch rounds it, q8_0 blocks byte-equal to gguf.quants' reference quantisation (ggml's own rounding);
    norms and biases f32;
  - an unknown --type, a mode llama.cpp cannot compute (gated), and a tokenizer of another size than the
    model's are refused naming them, writing nothing;
  - with `llama_cpp` importable (SINKLM_LLAMA_CPP=1 scripts/setup.sh): llama.cpp tokenizes held-out text as the
    sink then sinklm's ids, and its logits match `sinklm forward`'s within the bounds below;
  - a SentencePiece BPE vocabulary (`sinklm prepare sentencepiece`) as llama.cpp's "llama" model, whose own
    tokenizer gives the sink, then sinklm's ids.
Exit 77 (skipped) when the gguf package cannot be imported."""
import json
import os

import export_support as fx
from sinklm_test import check, config, finish, run_sinklm, skip, temp_dir

try:
    import numpy as np
    import torch
    from gguf import GGMLQuantizationType, GGUFReader
    from gguf.quants import quantize
    from safetensors.numpy import load_file
except ImportError as e:  # pragma: no cover
    skip(f"the gguf package is not importable ({e}); run scripts/setup.sh")

# llama.cpp against sinklm, max |difference| / max |logit| over 63 positions of held-out text. llama.cpp's GELU
# is ggml's tanh approximation (sinklm's and transformers' is exact erf), so f32 is not bit-for-bit.
F32_BOUND = 2e-3
Q8_0_BOUND = 3e-2

LAYER_NAMES = {"input_layernorm": "attn_norm", "attention.query_key_value": "attn_qkv",
               "attention.dense": "attn_output", "post_attention_layernorm": "ffn_norm",
               "mlp.dense_h_to_4h": "ffn_up", "mlp.dense_4h_to_h": "ffn_down"}


def gguf_name(hf):
    if hf == "gpt_neox.embed_in.weight":
        return "token_embd.weight"
    if hf == "embed_out.weight":
        return "output.weight"
    if hf.startswith("gpt_neox.final_layer_norm."):
        return "output_norm." + hf.rsplit(".", 1)[1]
    _, _, block, rest = hf.split(".", 3)
    module, kind = rest.rsplit(".", 1)
    return f"blk.{block}.{LAYER_NAMES[module]}.{kind}"


def expected_tensors(checkpoint, heads):
    """The checkpoint's tensors under llama.cpp's names, attn_qkv as [q; k; v] (float32)."""
    out = {}
    for name, t in load_file(os.path.join(checkpoint, "model.safetensors")).items():
        if "query_key_value" in name:
            rows = t.shape[0]
            t = t.reshape((heads, 3, rows // (3 * heads)) + t.shape[1:]).swapaxes(0, 1).reshape(t.shape)
        out[gguf_name(name)] = t.astype(np.float32)
    return out


def field(reader, key):
    f = reader.fields[key]
    if f.types and f.types[0].name == "STRING" and len(f.types) == 1:
        return bytes(f.parts[f.data[0]]).decode()
    if f.types and f.types[0].name == "ARRAY":
        if f.types[-1].name == "STRING":
            return [bytes(f.parts[i]).decode() for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    return f.parts[f.data[0]][0].item()


def check_keys(reader, hf_config, sink, label):
    want = {"general.architecture": "gptneox", "gptneox.block_count": hf_config["num_hidden_layers"],
            "gptneox.embedding_length": hf_config["hidden_size"],
            "gptneox.attention.head_count": hf_config["num_attention_heads"],
            "gptneox.feed_forward_length": hf_config["intermediate_size"],
            "gptneox.context_length": hf_config["max_position_embeddings"],
            "gptneox.rope.dimension_count": int(hf_config["rotary_pct"] * hf_config["hidden_size"]
                                                // hf_config["num_attention_heads"]),
            "gptneox.use_parallel_residual": hf_config["use_parallel_residual"],
            "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
            "tokenizer.ggml.bos_token_id": sink, "tokenizer.ggml.add_bos_token": True,
            "tokenizer.ggml.eos_token_id": hf_config["eos_token_id"]}
    got = {k: field(reader, k) for k in want}
    check(got == want, f"{label}: the gptneox keys and special ids llama.cpp reads", str({k: (got[k], want[k]) for k in want if got[k] != want[k]}))


def check_vocabulary(reader, checkpoint, vocab_size, sink, label):
    with open(os.path.join(checkpoint, "tokenizer.json")) as f:
        hf = json.load(f)
    tokens = field(reader, "tokenizer.ggml.tokens")
    known = {**hf["model"]["vocab"], **{t["content"]: t["id"] for t in hf["added_tokens"]}}
    check(len(tokens) == vocab_size and tokens[sink] == "<|sink|>"
          and all(tokens[i] == text for text, i in known.items()),
          f"{label}: {len(tokens)} tokens, one per embedding row, the tokenizer's and the sink at their ids")
    merges = field(reader, "tokenizer.ggml.merges")
    theirs = [m if isinstance(m, str) else " ".join(m) for m in hf["model"]["merges"]]
    check(merges == theirs, f"{label}: the {len(theirs)} merges in rank order")


def check_tensors(reader, expected, gguf_type, label):
    bad, seen = [], set()
    for t in reader.tensors:
        seen.add(t.name)
        want = expected.get(t.name)
        if want is None:
            bad.append(f"{t.name}: not in the checkpoint")
            continue
        if want.ndim == 1 or gguf_type == "f32":
            ok = t.tensor_type == GGMLQuantizationType.F32 and np.array_equal(np.asarray(t.data).reshape(want.shape), want)
        elif gguf_type == "bf16":
            ref = torch.from_numpy(want).to(torch.bfloat16).view(torch.int16).numpy()
            ok = t.tensor_type == GGMLQuantizationType.BF16 and np.array_equal(np.asarray(t.data).view(np.int16).reshape(ref.shape), ref)
        else:
            ref = quantize(want, GGMLQuantizationType.Q8_0)
            ok = t.tensor_type == GGMLQuantizationType.Q8_0 and np.array_equal(np.asarray(t.data).reshape(ref.shape), ref)
        if not ok:
            bad.append(f"{t.name} ({t.tensor_type.name})")
    check(not bad and seen == set(expected), f"{label}: all {len(expected)} tensors equal the checkpoint's "
          f"({'q8_0 blocks byte-equal to gguf.quants' if gguf_type == 'q8_0' else gguf_type})", "; ".join(bad[:5]))


def check_refusals(work, checkpoint):
    out = os.path.join(work, "bad.gguf")
    p = run_sinklm("export", "gguf", "--checkpoint", checkpoint, "--out", out, "--type", "q4_0", expect=None)
    check(p.returncode != 0 and "--type q4_0" in p.stderr and not os.path.exists(out),
          "an unknown --type is refused naming it", p.stderr[-200:])
    gated = os.path.join(work, "gated")
    run_sinklm("init", "--config", config("tiny.yaml"), "--out", gated, "--set", "model.sink.mode=gated")
    p = run_sinklm("export", "gguf", "--checkpoint", gated, "--out", out, expect=None)
    check(p.returncode != 0 and "model.sink.mode gated" in p.stderr and not os.path.exists(out),
          "a mode llama.cpp cannot compute is refused naming it", p.stderr[-200:])


def check_llama_cpp(work, checkpoint, files, sink):
    try:
        from llama_cpp import Llama
    except ImportError:
        print("NOTE llama_cpp not importable: llama.cpp's own logits not compared (SINKLM_LLAMA_CPP=1 scripts/setup.sh)")
        return
    text = fx.held_out_text()
    ours = [int(t) for t in run_sinklm("tokenize", "--tokenizer", os.path.join(checkpoint, "sinklm.tokenizer.json"),
                                       stdin=text).stdout.split()]
    logits_file = os.path.join(work, "logits.safetensors")
    run_sinklm("forward", "--checkpoint", checkpoint, "--ids", " ".join(map(str, ours[:63])), "--out", logits_file)
    reference = load_file(logits_file)["logits"]
    for gguf_type, bound in (("f32", F32_BOUND), ("q8_0", Q8_0_BOUND)):
        llm = Llama(model_path=files[gguf_type], logits_all=True, n_ctx=64, n_threads=1, verbose=False,
                    type_k=0, type_v=0, flash_attn=False)  # f32 K/V: no f16 rounding of the cache
        ids = llm.tokenize(text.encode(), add_bos=True, special=False)
        check(ids[:64] == [sink] + ours[:63], f"llama.cpp {gguf_type}: the sink (BOS), then sinklm's ids")
        llm.eval(ids[:64])
        theirs = np.array(llm.scores[:64])[:, :reference.shape[1]]
        err = float(np.abs(theirs - reference).max() / np.abs(reference).max())
        check(err <= bound, f"llama.cpp {gguf_type}: logits on held-out text within {bound:g} of sinklm's",
              f"max |diff| / max |logit| = {err:.2e}")


def check_sentencepiece(work):
    """A SentencePiece vocabulary: llama.cpp's "llama" model with the pieces and their scores; llama.cpp's own
    tokenizer gives the sink, then sinklm's ids."""
    spm = fx.sentencepiece_model(work)
    model = fx.initialized_token_model(work, "spm-init", 700)
    out = os.path.join(work, "spm.gguf")
    run_sinklm("export", "gguf", "--checkpoint", model, "--tokenizer", spm, "--out", out)
    reader = GGUFReader(out)
    tokens, scores = field(reader, "tokenizer.ggml.tokens"), field(reader, "tokenizer.ggml.scores")
    check(field(reader, "tokenizer.ggml.model") == "llama" and tokens[700] == "<|sink|>" and len(scores) == len(tokens)
          and field(reader, "tokenizer.ggml.bos_token_id") == 700 and not field(reader, "tokenizer.ggml.add_space_prefix"),
          "SentencePiece: model llama, pieces with scores, the sink as BOS, no dummy prefix (as trained)")
    other = fx.initialized_token_model(work, "spm-other", 900)
    refused = os.path.join(work, "other.gguf")
    p = run_sinklm("export", "gguf", "--checkpoint", other, "--tokenizer", spm, "--out", refused, expect=None)
    check(p.returncode != 0 and spm in p.stderr and "700 ids" in p.stderr and "900" in p.stderr
          and not os.path.exists(refused), "a tokenizer of another size than the model's is refused naming both",
          p.stderr[-300:])
    try:
        from llama_cpp import Llama
    except ImportError:
        return
    text = fx.held_out_text(20000)
    ours = [int(t) for t in run_sinklm("tokenize", "--tokenizer", spm, stdin=text).stdout.split()]
    ids = Llama(model_path=out, vocab_only=True, verbose=False).tokenize(text.encode(), add_bos=True, special=False)
    check(ids == [700] + ours, f"llama.cpp's SentencePiece tokenizer: the sink, then sinklm's {len(ours)} ids")


def main():
    with temp_dir("sinklm-gguf-export-") as work:
        _, shards = fx.prepared_shards(work)
        checkpoint = fx.trained_checkpoint(work, shards, "token", "token")
        with open(os.path.join(checkpoint, "config.json")) as f:
            hf_config = json.load(f)
        sink = hf_config["sink"]["token_ids"][0]
        expected = expected_tensors(checkpoint, hf_config["num_attention_heads"])
        files = {}
        for gguf_type in ("f32", "bf16", "q8_0"):
            files[gguf_type] = os.path.join(work, f"model-{gguf_type}.gguf")
            run_sinklm("export", "gguf", "--checkpoint", checkpoint, "--out", files[gguf_type], "--type", gguf_type)
            reader = GGUFReader(files[gguf_type])
            check_keys(reader, hf_config, sink, gguf_type)
            check_vocabulary(reader, checkpoint, hf_config["vocab_size"], sink, gguf_type)
            check_tensors(reader, expected, gguf_type, gguf_type)
        check_refusals(work, checkpoint)
        check_llama_cpp(work, checkpoint, files, sink)
        check_sentencepiece(work)
    finish()


if __name__ == "__main__":
    main()
