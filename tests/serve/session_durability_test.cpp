// Durable sessions: the token log's records and torn tails, and a session rebuilt from a snapshot plus the
// logged tokens after it giving the same next-token logits as the uninterrupted session.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serve/sessions/session_snapshot.h"
#include "serve/sessions/session_store.h"
#include "tests/decode/decode_test_support.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

using namespace testing_support;

struct TempDir {
  std::string path;
  TempDir() {
    path = (fs::temp_directory_path() / ("sinklm-sessions-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name())).string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void append_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes;
}

TEST(SessionLog, RecordsReadBackAndATornTailIsCut) {
  TempDir dir;
  const std::string path = dir.path + "/tokens.log";
  SessionLog::create(path);
  {
    SessionLog log(path);
    log.append({1, 2, 3});
    log.append({70000, 5});
    log.sync();
  }
  const auto whole_size = fs::file_size(path);
  append_bytes(path, std::string("\x04\x00\x00\x00\x12\x34", 6));  // half a record header: a crash mid-write
  {
    SessionLog log(path);
    EXPECT_EQ(log.torn_bytes(), 6);
    EXPECT_EQ(log.size(), 5);
    EXPECT_EQ(fs::file_size(path), whole_size);
    EXPECT_EQ(log.read_from(0), (std::vector<int64_t>{1, 2, 3, 70000, 5}));
    EXPECT_EQ(log.read_from(3), (std::vector<int64_t>{70000, 5}));
    log.append({9});
  }
  {  // a whole-length record whose payload was not all written: the checksum fails
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  SessionLog log(path);
  EXPECT_EQ(log.torn_bytes(), 12);
  EXPECT_EQ(log.read_from(0), (std::vector<int64_t>{1, 2, 3, 70000, 5}));
  EXPECT_NE(user_error_of([&] { SessionLog bad(dir.path + "/missing.log"); }).find("missing.log"), std::string::npos);
}

// What the server does with a session for one request: log the new tokens, feed the unfed ones and them,
// fsync (and snapshot when due). Returns the logits after the last token [V].
torch::Tensor converse(SessionStore& store, CachedDecoder& decoder, const std::string& id, const std::vector<int64_t>& ids) {
  auto session = store.acquire(id);
  session->log->append(ids);
  std::vector<int64_t> feed = session->unfed;
  feed.insert(feed.end(), ids.begin(), ids.end());
  auto logits = stream_logits(decoder, *session->stream, feed, 7);
  session->unfed.clear();
  store.finish_request(*session);
  store.release(session);
  return logits[-1];
}

class RestoredSession : public ::testing::TestWithParam<std::string> {};

// A session with history is interrupted (the store dropped without saving, as by SIGKILL) after its last
// snapshot; a new store rebuilds it from the newest snapshot (or, when that is corrupt, the previous one, or
// with none the whole log) and the next request's logits equal those of the session that went on.
TEST_P(RestoredSession, NextTokenLogitsEqualTheUninterruptedSession) {
  auto model = random_tiny_model(GetParam());
  CachedDecoder decoder(model);
  const auto& config = model->config();
  StreamSettings settings;
  settings.cache.window = 16;
  SessionDurability durability;
  durability.snapshot_every = 10;
  const auto ids = random_token_ids(60, config.tokenizer_vocab_size, 5);
  auto part = [&](int64_t from, int64_t to) { return std::vector<int64_t>(ids.begin() + from, ids.begin() + to); };

  for (const std::string damage : {"none", "newest snapshot", "all snapshots"}) {
    TempDir dir;
    torch::Tensor expected;
    std::string id;
    {
      SessionStore live(dir.path, 4, 10, settings, config, torch::kCPU, durability);
      id = live.create();
      converse(live, decoder, id, part(0, 12));   // snapshot at 12
      converse(live, decoder, id, part(12, 25));  // snapshot at 25
      converse(live, decoder, id, part(25, 31));  // logged only
      // `live` goes on; the copy on disk is what a crash right now would leave.
      fs::copy(dir.path, dir.path + "-crash", fs::copy_options::recursive);
      expected = converse(live, decoder, id, part(31, 60));
    }
    fs::remove_all(dir.path);
    fs::rename(dir.path + "-crash", dir.path);
    const std::string session_dir = dir.path + "/" + id;
    EXPECT_EQ(session_snapshot_lengths(session_dir), (std::vector<int64_t>{12, 25}));
    if (damage != "none") {
      std::fstream kv(session_dir + "/snapshot-000000000025/kv.pt", std::ios::binary | std::ios::in | std::ios::out);
      kv.seekp(100);
      kv.put('\x55');
    }
    if (damage == "all snapshots") fs::remove_all(session_dir + "/snapshot-000000000012");

    SessionStore restarted(dir.path, 4, 10, settings, config, torch::kCPU, durability);
    {
      auto session = restarted.acquire(id);
      const int64_t from = damage == "none" ? 25 : damage == "newest snapshot" ? 12 : 0;
      EXPECT_EQ(session->stream->length(), from) << damage;
      EXPECT_EQ(session->unfed, part(from, 31)) << damage;
      restarted.release(session);
    }
    const auto got = converse(restarted, decoder, id, part(31, 60));
    EXPECT_LE(relative_error(got, expected), 1e-5) << GetParam() << ", damage: " << damage;
  }
}

// An int8 session (decode/cache/kv_format.h) saved and restored after a crash decodes exactly what the
// uninterrupted session decodes: the same logits bit for bit, so the same greedy tokens. The snapshot names
// its format, and its float32 entries quantise back to the bytes the cache held.
TEST(RestoredInt8Session, DecodesTheSameTokensAsTheUninterruptedSession) {
  auto model = random_tiny_model("token", {"model.hidden_size=64", "model.num_heads=4"});  // D = 16: the kernels
  CachedDecoder decoder(model);
  const auto& config = model->config();
  StreamSettings settings;
  settings.cache.window = 16;
  settings.cache.kv_format = KvFormat::Int8;
  SessionDurability durability;
  durability.snapshot_every = 10;
  const auto ids = random_token_ids(25, config.tokenizer_vocab_size, 5);
  // Greedy decoding, one token a request: the tokens and the logits of each.
  const auto greedy = [&](SessionStore& store, const std::string& id, int64_t first, int64_t count) {
    std::vector<int64_t> tokens{first};
    std::vector<torch::Tensor> logits;
    for (int64_t i = 0; i < count; ++i) {
      logits.push_back(converse(store, decoder, id, {tokens.back()}));
      tokens.push_back(logits.back().argmax().item<int64_t>());
    }
    return std::make_pair(tokens, torch::stack(logits));
  };
  TempDir dir;
  std::string id;
  std::pair<std::vector<int64_t>, torch::Tensor> expected;
  {
    SessionStore live(dir.path, 4, 10, settings, config, torch::kCPU, durability);
    id = live.create();
    converse(live, decoder, id, std::vector<int64_t>(ids.begin(), ids.begin() + 12));  // snapshot at 12
    converse(live, decoder, id, std::vector<int64_t>(ids.begin() + 12, ids.end()));     // snapshot at 25
    fs::copy(dir.path, dir.path + "-crash", fs::copy_options::recursive);
    expected = greedy(live, id, 7, 30);  // past the window: the ring wraps
  }
  fs::remove_all(dir.path);
  fs::rename(dir.path + "-crash", dir.path);
  std::ifstream state(dir.path + "/" + id + "/snapshot-000000000025/state.json");
  EXPECT_EQ(nlohmann::json::parse(state)["kv_dtype"], "int8");
  SessionStore restarted(dir.path, 4, 10, settings, config, torch::kCPU, durability);
  {
    auto session = restarted.acquire(id);
    EXPECT_EQ(session->stream->length(), 25);
    EXPECT_EQ(session->stream->policy().kv_format(), KvFormat::Int8);
    restarted.release(session);
  }
  const auto got = greedy(restarted, id, 7, 30);
  EXPECT_EQ(got.first, expected.first);
  EXPECT_TRUE(torch::equal(got.second, expected.second)) << relative_error(got.second, expected.second);
}

INSTANTIATE_TEST_SUITE_P(EverySinkMode, RestoredSession, ::testing::ValuesIn(testing_support::sink_mode_names()));

}  // namespace
}  // namespace sinklm
