// A tokenizer as Hugging Face `tokenizers` reads it: the tokenizer.json JSON of any tokenizer file sinklm
// reads, so that a checkpoint can be handed to transformers (and lm-eval's `hf` backend) with its tokenizer.
//   tokenizer.json   the file's own JSON, post_processor and sink tokens removed (sinklm never applies one nor
//                    reads the other; the caller sets what a model needs, e.g. its sink tokens:
//                    export/hf_tokenizer_files.h)
//   vocab.json + merges.txt, *.tiktoken
//                    byte-level BPE: model {type BPE, vocab (GPT-2's byte alphabet), merges [[l, r], ...]
//                    in rank order, ignore_merges for tiktoken}, pre_tokenizer ByteLevel (GPT-2's pattern),
//                    decoder ByteLevel, added_tokens (<|endoftext|>)
//   *.model          SentencePiece BPE with identity normalisation (as `sinklm prepare sentencepiece` trains):
//                    model {type BPE, vocab, merges, byte_fallback, unk_token, fuse_unk}, pre_tokenizer
//                    Metaspace (prepend_scheme "first" with a dummy prefix, else "never"; split false: the
//                    text is one piece, as SentencePiece encodes it), decoder Replace("▁", " ") + ByteFallback
//                    + Fuse (+ Strip of the dummy prefix); its control pieces (</s>, <s>) are added tokens.
//                    The merges are every split of a piece into two pieces, ranked by the piece's score, the
//                    conversion transformers itself makes. A unigram model or one that normalises is refused.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace sinklm {

// `tokenizer_file` as load_tokenizer() takes it (the file, not a directory). UserError naming the file when
// it cannot be expressed.
nlohmann::json hf_tokenizer_json(const std::string& tokenizer_file);

}  // namespace sinklm
