#include "data/prepare/prepare_unit.h"

#include <future>
#include <map>
#include <memory>

#include "core/error.h"
#include "data/prepare/document_reader.h"
#include "data/prepare/document_record.h"
#include "core/system/parallel_for.h"
#include "data/shards/shard_directory.h"
#include "data/shards/token_shard.h"

namespace sinklm {
namespace {

struct PendingRecord {
  RawRecord raw;
  size_t piece = 0;
};

struct EncodedRecord {
  DocumentRecord doc;
  TokenIds ids;
  Split split = Split::Train;
  bool empty = false;  // a well-formed record with no text
};

// Reads the unit's pieces in order, a batch of records at a time.
class UnitReader {
 public:
  UnitReader(const WorkUnit& unit, const std::vector<InputFile>& files, PrepareCounters& counters)
      : unit_(unit), files_(files), counters_(counters), piece_lines_(unit.pieces.size(), 0) {}

  // Records up to about `bytes` of text; empty at the end of the unit.
  std::vector<PendingRecord> next_batch(size_t bytes) {
    std::vector<PendingRecord> batch;
    size_t taken = 0;
    while (taken < bytes && piece_ < unit_.pieces.size()) {
      const InputPiece& piece = unit_.pieces[piece_];
      if (!reader_) reader_ = std::make_unique<DocumentReader>(files_[piece.file], piece.begin, piece.end);
      PendingRecord record;
      if (reader_->next(record.raw)) {
        record.piece = piece_;
        taken += record.raw.text.size();
        batch.push_back(std::move(record));
        continue;
      }
      piece_lines_[piece_] = reader_->lines();
      finished_pieces_disk_ += piece.end - piece.begin;
      finished_pieces_input_ += reader_->bytes_read();
      reader_.reset();
      ++piece_;
    }
    report_progress();
    return batch;
  }

  const std::vector<uint64_t>& piece_lines() const { return piece_lines_; }
  uint64_t input_bytes() const { return finished_pieces_input_; }

 private:
  void report_progress() {
    uint64_t disk = finished_pieces_disk_, input = finished_pieces_input_;
    if (reader_) {
      const InputPiece& piece = unit_.pieces[piece_];
      disk += std::min(reader_->disk_offset(), piece.end) - std::min(piece.begin, reader_->disk_offset());
      input += reader_->bytes_read();
    }
    counters_.disk_bytes += disk - reported_disk_;
    counters_.input_bytes += input - reported_input_;
    reported_disk_ = disk;
    reported_input_ = input;
  }

  const WorkUnit& unit_;
  const std::vector<InputFile>& files_;
  PrepareCounters& counters_;
  std::vector<uint64_t> piece_lines_;
  size_t piece_ = 0;
  std::unique_ptr<DocumentReader> reader_;
  uint64_t finished_pieces_disk_ = 0, finished_pieces_input_ = 0, reported_disk_ = 0, reported_input_ = 0;
};

// The shards of one split of one unit.
class SplitShards {
 public:
  SplitShards(Split split, size_t unit, const UnitSettings& settings, const UnitEnvironment& env)
      : split_(split), unit_(unit), settings_(settings), env_(env) {}

  // The name of the shard the document went into.
  const std::string& add(const TokenIds& ids) {
    if (!writer_) {
      names_.push_back(shard_file_name(split_, unit_, names_.size()));
      writer_ = std::make_unique<TokenShardWriter>(env_.out_dir + "/" + names_.back(), env_.tokenizer.vocab_size(),
                                                   env_.tokenizer.end_of_text_id());
    }
    writer_->add_document(ids);
    tokens_ += ids.size() + 1;
    ++documents_;
    const std::string& name = names_.back();
    if (writer_->token_count() >= settings_.shard_tokens) close();
    return name;
  }

  void close() {
    if (!writer_) return;
    writer_->finish();
    writer_.reset();
    if (env_.after_shard) env_.after_shard();
  }

  nlohmann::json summary() const {
    return {{"shards", names_}, {"tokens", tokens_}, {"documents", documents_}};
  }

 private:
  Split split_;
  size_t unit_;
  const UnitSettings& settings_;
  const UnitEnvironment& env_;
  std::unique_ptr<TokenShardWriter> writer_;
  std::vector<std::string> names_;
  uint64_t tokens_ = 0, documents_ = 0;
};

std::vector<EncodedRecord> encode_batch(std::vector<PendingRecord>& batch, const WorkUnit& unit,
                                        const UnitSettings& settings, const UnitEnvironment& env) {
  std::vector<EncodedRecord> out(batch.size());
  parallel_for(batch.size(), settings.threads, [&](size_t i) {
    const InputFile& file = env.files[unit.pieces[batch[i].piece].file];
    EncodedRecord& r = out[i];
    r.doc = decode_record(file, settings.text_field, batch[i].raw);
    if (!r.doc.problem.empty()) return;
    r.empty = r.doc.text.empty();
    if (r.empty) return;
    r.ids = env.tokenizer.encode(r.doc.text);
    r.split = file.split ? *file.split : env.splitter(r.doc.text);
    r.doc.text = std::string();  // free the text early; only the ids are kept
  });
  return out;
}

}  // namespace

std::optional<nlohmann::json> process_unit(const WorkUnit& unit, const UnitSettings& settings,
                                           const UnitEnvironment& env) {
  UnitReader reader(unit, env.files, env.counters);
  std::map<Split, SplitShards> shards;
  for (Split s : all_splits()) shards.emplace(s, SplitShards(s, unit.index, settings, env));
  nlohmann::json bad = nlohmann::json::array(), documents = nlohmann::json::array();
  uint64_t empty = 0;
  bool with_ids = false;
  for (const InputPiece& piece : unit.pieces) with_ids |= env.files[piece.file].has_ids;

  std::vector<PendingRecord> batch = reader.next_batch(settings.batch_bytes);
  while (!batch.empty()) {
    if (env.stop) return std::nullopt;
    // Read the next batch while this one is tokenized.
    auto next = std::async(std::launch::async, [&] { return reader.next_batch(settings.batch_bytes); });
    std::vector<EncodedRecord> encoded;
    try {
      encoded = encode_batch(batch, unit, settings, env);
    } catch (...) {
      next.wait();
      throw;
    }
    uint64_t tokens = 0, docs = 0, bad_count = 0, records = 0;
    for (size_t i = 0; i < encoded.size(); ++i) {
      EncodedRecord& r = encoded[i];
      ++records;
      if (!r.doc.problem.empty()) {
        bad.push_back({batch[i].piece, batch[i].raw.line, r.doc.problem});
        ++bad_count;
        continue;
      }
      if (r.empty) {
        ++empty;
        continue;
      }
      const std::string& shard = shards.at(r.split).add(r.ids);
      if (with_ids) documents.push_back({r.doc.id, split_name(r.split), shard, r.ids.size()});
      tokens += r.ids.size() + 1;
      ++docs;
    }
    env.counters.tokens += tokens;
    env.counters.documents += docs;
    env.counters.bad_lines += bad_count;
    env.counters.records += records;
    batch = next.get();
  }
  nlohmann::json splits = nlohmann::json::object();
  for (auto& [split, s] : shards) {
    s.close();
    splits[split_name(split)] = s.summary();
  }
  nlohmann::json record = {{"unit", unit.index},
                           {"disk_bytes", unit.disk_bytes},
                           {"input_bytes", reader.input_bytes()},
                           {"piece_lines", reader.piece_lines()},
                           {"splits", splits},
                           {"empty_documents", empty},
                           {"bad_lines", bad}};
  if (with_ids) record["documents"] = documents;
  return record;
}

}  // namespace sinklm
