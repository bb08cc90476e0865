// The pieces of `sinklm prepare shards` on real files: streamed readers for plain, gzip and multi-frame zstd
// JSONL and text, byte-range pieces that hold every line exactly once, record decoding and its problems, the
// hash split, the work plan and its rank assignment, and the streaming shard writer.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "data/prepare/document_reader.h"
#include "data/prepare/document_record.h"
#include "data/prepare/hash_split.h"
#include "data/prepare/input_files.h"
#include "data/prepare/prepare_plan.h"
#include "data/io/read_file.h"
#include "data/shards/token_shard.h"
#include "test_dir.h"

namespace sinklm {
namespace {

using testing::TestDir;

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string jsonl_lines(int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += "{\"text\": \"line " + std::to_string(i) + std::string(i % 13, 'x') + "\"}\n";
  return out;
}

std::vector<RawRecord> read_all(const InputFile& file, uint64_t begin, uint64_t end, uint64_t* lines = nullptr) {
  DocumentReader reader(file, begin, end);
  std::vector<RawRecord> out;
  for (RawRecord r; reader.next(r);) out.push_back(r);
  if (lines) *lines = reader.lines();
  return out;
}

InputFile input(const std::string& path, bool text_blocks = false) {
  return expand_inputs({path}, InputOptions{text_blocks}).at(0);
}

// Reading `file` cut into units of `step` bytes gives the records of reading it whole, each once, with the
// same file line numbers (piece-relative lines + the line counts of the pieces before).
void expect_pieces_read_like_whole(const InputFile& file, size_t records, const std::vector<uint64_t>& steps) {
  ASSERT_TRUE(file.splittable());
  const std::vector<RawRecord> whole = read_all(file, 0, file.disk_bytes);
  ASSERT_EQ(whole.size(), records);
  for (uint64_t step : steps) {
    std::vector<WorkUnit> units = plan_work_units({file}, step);
    std::vector<std::vector<uint64_t>> lines(units.size());
    std::vector<std::vector<std::vector<RawRecord>>> got(units.size());
    for (const WorkUnit& u : units)
      for (const InputPiece& p : u.pieces) {
        uint64_t n = 0;
        got[u.index].push_back(read_all(file, p.begin, p.end, &n));
        lines[u.index].push_back(n);
      }
    const auto first = first_lines_of_pieces(units, lines);
    size_t k = 0;
    for (const WorkUnit& u : units)
      for (size_t p = 0; p < u.pieces.size(); ++p)
        for (const RawRecord& r : got[u.index][p]) {
          ASSERT_LT(k, whole.size()) << "unit bytes " << step;
          EXPECT_EQ(r.text, whole[k].text) << "unit bytes " << step;
          EXPECT_EQ(first[u.index][p] + r.line - 1, whole[k].line) << "unit bytes " << step;
          ++k;
        }
    EXPECT_EQ(k, whole.size()) << "unit bytes " << step;
    uint64_t bytes = 0;
    for (const WorkUnit& u : units)
      for (const InputPiece& p : u.pieces) {
        DocumentReader reader(file, p.begin, p.end);
        for (RawRecord r; reader.next(r);) {
        }
        bytes += reader.bytes_read();
      }
    EXPECT_EQ(bytes, file.disk_bytes) << "the pieces' bytes add up to the file, unit bytes " << step;
  }
}

TEST(DocumentReader, JsonlByteRangesHoldEveryLineOnceWithFileLineNumbers) {
  TestDir dir;
  write(dir / "a.jsonl", jsonl_lines(200));
  expect_pieces_read_like_whole(input(dir / "a.jsonl"), 200, {1, 7, 33, 100, 4096});
}

TEST(DocumentReader, TextBlockByteRangesHoldEveryBlockOnceWithItsFirstLine) {
  TestDir dir;
  std::string text;
  for (int b = 0; b < 60; ++b) {
    for (int l = 0; l <= b % 4; ++l) text += "block " + std::to_string(b) + " line " + std::to_string(l) + "\n";
    text += b % 3 == 0 ? "\n" : b % 3 == 1 ? " \t\n\n" : "\r\n\n\n";
  }
  write(dir / "blocks.txt", text);
  expect_pieces_read_like_whole(input(dir / "blocks.txt", /*text_blocks=*/true), 60, {1, 5, 17, 64, 333});
}

TEST(DocumentReader, GzipAndMultiFrameZstdReadLikeThePlainFile) {
  TestDir dir;
  const std::string text = jsonl_lines(3000);
  write(dir / "a.jsonl", text);
  gzFile gz = gzopen((dir / "a.jsonl.gz").c_str(), "wb");
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  std::string zst;
  for (size_t at = 0; at < text.size(); at += 20000) {  // several frames back to back
    const std::string part = text.substr(at, 20000);
    std::string frame(ZSTD_compressBound(part.size()), '\0');
    frame.resize(ZSTD_compress(frame.data(), frame.size(), part.data(), part.size(), 3));
    zst += frame;
  }
  write(dir / "a.jsonl.zst", zst);
  const auto plain = read_all(input(dir / "a.jsonl"), 0, text.size());
  for (const char* name : {"a.jsonl.gz", "a.jsonl.zst"}) {
    const InputFile file = input(dir / name);
    EXPECT_FALSE(file.splittable());
    const auto got = read_all(file, 0, file.disk_bytes);
    ASSERT_EQ(got.size(), plain.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].text, plain[i].text) << name;
    DocumentReader reader(file, 0, file.disk_bytes);
    for (RawRecord r; reader.next(r);) {
    }
    EXPECT_EQ(reader.disk_offset(), file.disk_bytes) << name;
    EXPECT_EQ(reader.bytes_read(), text.size()) << name;
  }
  write(dir / "cut.jsonl.zst", zst.substr(0, zst.size() / 2));
  EXPECT_THROW(read_all(input(dir / "cut.jsonl.zst"), 0, 1), UserError);
  write(dir / "cut.jsonl.gz", read_file(dir / "a.jsonl.gz").substr(0, 500));
  EXPECT_THROW(read_all(input(dir / "cut.jsonl.gz"), 0, 1), UserError);
}

TEST(DocumentReader, TextFilesAreOneDocumentOrBlankLineSeparatedBlocks) {
  TestDir dir;
  write(dir / "book.txt", "\n\nFirst block\nsecond line\r\n  \t\n\n\nSecond block\n\nThird");
  const uint64_t size = read_file(dir / "book.txt").size();
  auto whole = read_all(input(dir / "book.txt"), 0, size);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].text, read_file(dir / "book.txt"));
  auto blocks = read_all(input(dir / "book.txt", true), 0, size);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].text, "First block\nsecond line");
  EXPECT_EQ(blocks[0].line, 3u);
  EXPECT_EQ(blocks[1].text, "Second block");
  EXPECT_EQ(blocks[1].line, 8u);
  EXPECT_EQ(blocks[2].text, "Third");
  EXPECT_EQ(blocks[2].line, 10u);
}

TEST(DocumentRecord, MalformedLinesSayWhy) {
  TestDir dir;
  write(dir / "a.jsonl", "");
  const InputFile file = input(dir / "a.jsonl");
  auto problem = [&](std::string line, const std::string& field = "text") {
    RawRecord raw{std::move(line), 1};
    return decode_record(file, field, raw).problem;
  };
  EXPECT_EQ(problem(R"({"text": "ok", "meta": {"a": [1, 2]}})"), "");
  EXPECT_NE(problem(R"({"text": "unterminated)").find("not JSON"), std::string::npos);
  EXPECT_NE(problem(R"({"body": "x"})").find("no \"text\" field"), std::string::npos);
  EXPECT_EQ(problem(R"({"body": "x"})", "body"), "");
  EXPECT_NE(problem(R"({"text": 3})").find("number, not a string"), std::string::npos);
  EXPECT_NE(problem(R"(["text"])").find("array"), std::string::npos);
  EXPECT_NE(problem("{\"text\": \"a\xff\"}").find("invalid UTF-8 at byte 12"), std::string::npos);
  EXPECT_NE(problem(R"({"text": "\ud800"})").find("not JSON"), std::string::npos);  // lone surrogate escape
  RawRecord raw{R"({"text": "caf\u00e9 \"q\""})", 1};
  EXPECT_EQ(decode_record(file, "text", raw).text, "caf\xc3\xa9 \"q\"");
}

TEST(HashSplit, DependsOnlyOnSeedAndTextAndHitsTheFractions) {
  HashSplitter split(7, SplitFractions{0.1, 0.2});
  std::map<Split, int> counts;
  for (int i = 0; i < 20000; ++i) {
    const std::string text = "document " + std::to_string(i);
    const Split s = split(text);
    ASSERT_EQ(s, HashSplitter(7, SplitFractions{0.1, 0.2})(text));
    ++counts[s];
  }
  EXPECT_NEAR(counts[Split::Validation] / 20000.0, 0.1, 0.01);
  EXPECT_NEAR(counts[Split::Test] / 20000.0, 0.2, 0.01);
  // A fixed point of the hash (tests/data/prepare_inputs_test.py reimplements it in Python).
  EXPECT_DOUBLE_EQ(split_draw(99, "hello"), 0.584993080031987);
  EXPECT_NE(split_draw(99, "hello"), split_draw(100, "hello"));
  EXPECT_THROW(HashSplitter(1, SplitFractions{0.6, 0.4}), UserError);
}

TEST(HashSplit, SizesAreFractionsOrTokenCounts) {
  EXPECT_DOUBLE_EQ(SplitSize::parse("0.01", "--x").fraction, 0.01);
  EXPECT_FALSE(SplitSize::parse("0", "--x").is_tokens());
  EXPECT_EQ(SplitSize::parse("5M", "--x").tokens, 5000000u);
  EXPECT_EQ(SplitSize::parse("1234", "--x").tokens, 1234u);
  EXPECT_EQ(parse_count("64K", "--unit-bytes", true), 65536u);
  for (const char* bad : {"1.5", "-3", "abc", "5Q", ""}) {
    try {
      SplitSize::parse(bad, "--validation-size");
      ADD_FAILURE() << bad;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("--validation-size"), std::string::npos);
    }
  }
}

TEST(PreparePlan, UnitsCoverEveryByteOnceAndRanksShareThem) {
  TestDir dir;
  write(dir / "a.jsonl", std::string(1000, '\n'));
  write(dir / "b.jsonl.zst", std::string(300, 'z'));
  write(dir / "c.txt", std::string(10, 'c'));
  write(dir / "d.txt", std::string(10, 'd'));
  write(dir / "e.jsonl", std::string(250, '\n'));
  std::vector<InputFile> files = expand_inputs({dir.path()}, InputOptions{});
  ASSERT_EQ(files.size(), 5u);
  const auto units = plan_work_units(files, 256);
  std::map<size_t, uint64_t> covered;
  for (const WorkUnit& u : units) {
    uint64_t bytes = 0;
    for (const InputPiece& p : u.pieces) {
      EXPECT_EQ(p.begin, covered[p.file]) << "pieces of a file are contiguous and in order";
      covered[p.file] = p.end;
      bytes += p.end - p.begin;
      if (!files[p.file].splittable()) EXPECT_EQ(p.end - p.begin, files[p.file].disk_bytes);
    }
    EXPECT_EQ(bytes, u.disk_bytes);
  }
  for (size_t f = 0; f < files.size(); ++f) EXPECT_EQ(covered[f], files[f].disk_bytes);
  // a: 3 x 256, then its last 232 bytes alone (b, whole and >= 256, starts a unit of its own); c + d + the first
  // 236 bytes of e; the rest of e.
  EXPECT_EQ(units.size(), 7u);
  for (int world : {1, 2, 3, 8}) {
    std::multiset<size_t> all;
    for (int r = 0; r < world; ++r)
      for (size_t u : units_of_rank(units, r, world)) all.insert(u);
    EXPECT_EQ(all.size(), units.size());
    EXPECT_EQ(std::set<size_t>(all.begin(), all.end()).size(), units.size()) << world << " ranks";
  }
}

TEST(TokenShardWriter, StreamsTheSameFileAsTheWholeShardWriter) {
  TestDir dir;
  std::vector<TokenIds> docs = {{1, 2, 3}, {}, {65535, 7}};
  {
    TokenShardWriter writer(dir / "s.bin", 70000, 69999);
    for (const auto& d : docs) writer.add_document(d);
    EXPECT_FALSE(std::filesystem::exists(dir / "s.bin")) << "only complete shards carry the final name";
    writer.finish();
  }
  TokenShard shard(dir / "s.bin");
  EXPECT_EQ(shard.bytes_per_token(), 4u);
  EXPECT_EQ(shard.document_count(), 3u);
  EXPECT_EQ(shard.token_count(), 8u);
  EXPECT_EQ(shard.document_start(2), 5u);
  EXPECT_EQ(shard.token(5), 65535u);
  EXPECT_EQ(shard.token(7), 69999u);
  { TokenShardWriter abandoned(dir / "t.bin", 100, 0); }
  EXPECT_FALSE(std::filesystem::exists(dir / "t.bin.partial"));
}

}  // namespace
}  // namespace sinklm
