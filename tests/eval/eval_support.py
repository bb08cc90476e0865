"""Shared fixtures of the eval tests: a small byte-level BPE tokenizer trained with Hugging Face `tokenizers`,
GPT-NeoX checkpoints saved by transformers (vanilla, and a `token` sink model via config.json's sink block),
and a tiny corpus directory in `sinklm prepare corpus` layout. Nothing here is used by sinklm itself.
Checks, the binary and the exit code come from tests/support/sinklm_test.py."""
import json
import os

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")

# Held-out prose and dictionary text for `sinklm eval build-tasks` (validation/test) and a train split.
PROSE = [
    ("bible-kjv/Ruth", "And it came to pass in the days when the judges ruled, that there was a famine in the land. "
     "And a certain man of Bethlehem went to sojourn in the country of Moab, he, and his wife, and his two sons. "
     "And the name of the man was Elimelech, and the name of his wife Naomi. "
     "And they came into the country of Moab, and continued there.\n\n"
     "And Elimelech Naomi's husband died; and she was left, and her two sons. "
     "And they took them wives of the women of Moab; the name of the one was Orpah. "
     "And they dwelled there about ten years, and then both of the sons died in that land."),
    ("fortunes/fortunes", "A day for firm decisions is a day when nothing else will do. Or is it the day before?\n\n"
     "You will be given a gift of great value by someone you have never met before today. "
     "Keep it in a safe place and tell nobody where you have put it, not even your own dog."),
    ("linux-doc/admin-guide/example.rst", "The example driver exposes one file in sysfs for each device it finds. "
     "Writing a number to that file changes the brightness of the light on the board. "
     "Reading the file returns the brightness that was last written by any process on the system.\n\n"
     "The driver was written for testing and should not be used on production machines at all. "
     "It may disappear from the kernel tree at any time without a warning to its users or anyone else."),
]
DICTIONARY = [
    ("dict-gcide/ca", "Cabin, n. [F. cabane.]\nA small house or hut built of wood, usually in the country.\n\n"
     "Candle, n. [AS. candel, fr. L. candela.]\nA slender stick of tallow or wax with a wick, burned to give light.\n\n"
     "Canoe, n. [Sp. canoa, of Haitian origin.]\n(Naut.) A light narrow boat moved by paddles.\n\n"
     "Carrot, n. [F. carotte.]\nAn orange root eaten as a vegetable, raw or cooked."),
    ("dict-devil/ab", "ABSENT, adj.  Peculiarly exposed to the tooth of detraction; vilified.\n\n"
     "ACCIDENT, n.  An inevitable occurrence due to the action of immutable natural laws."),
    ("wordnet/noun.animal", "dog, domestic dog: a member of the genus Canis that has been domesticated by man; \"the dog barked all night\"\n"
     "cat, true cat: feline mammal usually having thick soft fur and no ability to roar; \"cats sleep a lot\"\n"
     "horse, Equus caballus: solid-hoofed herbivorous quadruped domesticated since prehistoric times\n"),
]


def write_corpus(directory):
    os.makedirs(directory, exist_ok=True)
    splits = {"validation": PROSE[:2] + DICTIONARY[:2], "test": PROSE[2:] + DICTIONARY[2:],
              "train": [("fortunes/train", "Training text is never used for the proxy tasks.")]}
    for split, docs in splits.items():
        with open(os.path.join(directory, split + ".jsonl"), "w") as f:
            for doc_id, text in docs:
                f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    return directory


def fixture_texts():
    texts = []
    for name in sorted(os.listdir(FIXTURES)):
        with open(os.path.join(FIXTURES, name)) as f:
            texts.append(f.read())
    return texts + [t for _, t in PROSE + DICTIONARY]


def train_tokenizer(path, vocab_size=400):
    from tokenizers import ByteLevelBPETokenizer
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(fixture_texts(), vocab_size=vocab_size, min_frequency=2,
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    tokenizer.save(path)
    return tokenizer.get_vocab_size()


def save_model(directory, tokenizer_path, n_tokens, sink_mode, seed):
    """A GPT-NeoX with random weights of realistic magnitude (so scores differ clearly between choices),
    saved by transformers; `token` adds sinklm's sink block to config.json (sink id = n_tokens)."""
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    torch.manual_seed(seed)
    sinks = 1 if sink_mode == "token" else 0
    config = GPTNeoXConfig(vocab_size=n_tokens + 8, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                           intermediate_size=128, max_position_embeddings=256, rotary_pct=0.25,
                           rotary_emb_base=10000, bos_token_id=0, eos_token_id=0)
    model = GPTNeoXForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1.0 + 0.1 * torch.randn_like(p) if "layernorm" in name or "layer_norm" in name
                    else 0.12 * torch.randn_like(p))
    model.save_pretrained(directory, safe_serialization=True)
    with open(os.path.join(directory, "config.json")) as f:
        hf = json.load(f)
    hf["sink"] = {"mode": sink_mode, "count": max(sinks, 1), "tokenizer_vocab_size": n_tokens,
                  "token_ids": [n_tokens] if sinks else []}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(hf, f, indent=2)
    with open(tokenizer_path) as src, open(os.path.join(directory, "tokenizer.json"), "w") as dst:
        dst.write(src.read())
    return directory


def load_hf(directory):
    from transformers import GPTNeoXForCausalLM
    model = GPTNeoXForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    return model
