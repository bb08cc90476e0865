#include "data/tokenizers/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cmath>

#include "core/error.h"

namespace sinklm {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path)
    : path_(model_path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  auto status = processor_->Load(model_path);
  if (!status.ok()) fail(model_path, ": not a SentencePiece model: ", status.ToString());
  if (processor_->eos_id() < 0) fail(model_path, ": SentencePiece model has no </s> (end-of-text) piece");
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

TokenIds SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  auto status = processor_->Encode(text, &ids);
  SINKLM_ASSERT(status.ok(), "SentencePiece encode failed: ", status.ToString());
  return TokenIds(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const TokenIds& ids) const {
  std::vector<int> signed_ids;
  for (uint32_t id : ids) {
    if (id >= vocab_size()) fail("token id ", id, " is not in the vocabulary of ", path_, " (", vocab_size(), " ids)");
    signed_ids.push_back(static_cast<int>(id));
  }
  std::string text;
  auto status = processor_->Decode(signed_ids, &text);
  SINKLM_ASSERT(status.ok(), "SentencePiece decode failed: ", status.ToString());
  return text;
}

uint32_t SentencePieceTokenizer::vocab_size() const { return static_cast<uint32_t>(processor_->GetPieceSize()); }

uint32_t SentencePieceTokenizer::end_of_text_id() const { return static_cast<uint32_t>(processor_->eos_id()); }

uint32_t SentencePieceTokenizer::begin_of_text_id() const {
  return static_cast<uint32_t>(processor_->bos_id() >= 0 ? processor_->bos_id() : processor_->eos_id());
}

int64_t SentencePieceTokenizer::padding_id() const { return processor_->pad_id(); }  // -1: none

std::string SentencePieceTokenizer::description() const {
  return str("SentencePiece, ", vocab_size(), " ids, from ", path_);
}

SentencePieceModel read_sentencepiece_model(const std::string& model_path) {
  sentencepiece::SentencePieceProcessor processor;
  auto status = processor.Load(model_path);
  if (!status.ok()) fail(model_path, ": not a SentencePiece model: ", status.ToString());
  SentencePieceModel model;
  using Kind = SentencePiece::Kind;
  for (int id = 0; id < processor.GetPieceSize(); ++id) {
    SentencePiece piece{processor.IdToPiece(id), processor.GetScore(id), Kind::Normal};
    if (processor.IsUnknown(id)) piece.kind = Kind::Unknown;
    else if (processor.IsControl(id)) piece.kind = Kind::Control;
    else if (processor.IsUnused(id)) piece.kind = Kind::Unused;
    else if (processor.IsByte(id)) piece.kind = Kind::Byte;
    // A BPE model scores each normal piece minus its merge rank (an integer); a unigram one a log-probability.
    if (piece.kind == Kind::Normal && piece.score != std::floor(piece.score)) model.bpe = false;
    model.pieces.push_back(std::move(piece));
  }
  std::vector<std::string> pieces;
  processor.Encode("a", &pieces);
  model.dummy_prefix = !pieces.empty() && pieces.front().rfind("\xE2\x96\x81", 0) == 0;
  // Full-width letters (NFKC folds them) and a double space (remove_extra_whitespaces collapses it) survive a
  // round trip only without normalisation.
  const std::string probe = "\xEF\xBD\x86\xEF\xBD\x89  x";
  std::string back;
  std::vector<int> ids;
  processor.Encode(probe, &ids);
  processor.Decode(ids, &back);
  model.identity_normalization = back == probe || back == " " + probe;
  model.unknown_id = processor.unk_id();
  model.end_of_text_id = processor.eos_id();
  model.begin_of_text_id = processor.bos_id();
  model.padding_id = processor.pad_id();
  return model;
}

void train_sentencepiece_bpe(const SentencePieceTrainingOptions& options) {
  if (options.input_files.empty()) fail("SentencePiece training: no input files");
  std::string inputs;
  for (const auto& f : options.input_files) inputs += (inputs.empty() ? "" : ",") + f;
  std::string args = str("--input=", inputs, " --model_prefix=", options.model_prefix, " --model_type=bpe",
                         " --vocab_size=", options.vocab_size, " --byte_fallback=true",
                         " --normalization_rule_name=identity --remove_extra_whitespaces=false",
                         " --add_dummy_prefix=false --split_digits=true --allow_whitespace_only_pieces=true",
                         " --character_coverage=0.9995 --max_sentence_length=16384 --shuffle_input_sentence=true",
                         " --input_sentence_size=", options.max_sentences, 
                         " --num_threads=", resolve_thread_count(options.threads),
                         " --bos_id=-1 --eos_id=1 --unk_id=0 --pad_id=-1 --minloglevel=1");
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(options.seed));
  auto status = sentencepiece::SentencePieceTrainer::Train(args);
  if (!status.ok()) fail("SentencePiece training on ", inputs, " failed: ", status.ToString());
}

}  // namespace sinklm
