// KV snapshots of a session's stream, so a restart replays only the tokens logged after the newest one
// (serve/sessions/session_log.h holds every token; serve/sessions/session_store.h puts the two together).
//
// On disk: `<session dir>/snapshot-<L>/`, L = the stream length it holds, 12 digits so names sort; written
// into a staging directory, fsync'ed and renamed into place (core/files/atomic_dir.h), so a crash mid-snapshot
// leaves the previous snapshots as they were (and a `snapshot-<L>.tmp-<pid>` directory that is ignored and
// removed at the next start).
//   state.json  {"format": 1, "cache", "window", "sinks", "positions", "kv_dtype" ("fp32" | "bf16" | "int8" |
//                "int8-all", the cache's storage, decode/cache/kv_format.h; absent = fp32), "stream_length",
//                "held_tokens", "kv_sha256"}
//                (held_tokens: the ids at the held positions, sinks then the recent run; the policy fields
//                are decode/cache/kv_cache_policy.h's cache_policy_json, for `heads` also "retrieval_window" and
//                "head_policy", the head-policy file's fields, so a session never needs that file again)
//   kv.pt       torch::save of a list of tensors: the keys of every layer, then the values, each [H, N, D]
//               float32 in cache order with keys un-rotated (CacheSnapshot; `heads`: one per layer and head
//               group, [H_g, N_g, D]); absent for recompute caches. Whatever the format: the entries are what
//               the cache read back (bf16 and int8 ones exactly representable), and restored at the same
//               positions an int8 cache quantises them back to the bytes it held (tested), its sinks exact.
// A snapshot that fails to parse, to load or its sha256 is corrupt: the reader falls back to the next older.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "decode/cached_decoder.h"

namespace sinklm {

// Writes the stream's snapshot and removes all but the newest `keep` snapshots.
// Test hook: with SINKLM_FAULT_KILL_IN_SNAPSHOT=1 in the environment the process SIGKILLs itself after
// the staging directory is written and before it is committed (the crash test uses it).
void write_session_snapshot(const std::string& session_dir, const DecoderStream& stream, int keep);

// Stream lengths of the committed snapshots, oldest first.
std::vector<int64_t> session_snapshot_lengths(const std::string& session_dir);

// The newest snapshot that reads back whole and holds at most `max_length` tokens, as a stream; corrupt
// ones are skipped with a warning on stderr naming `session`. nullptr when none is usable.
std::unique_ptr<DecoderStream> read_session_snapshot(const std::string& session_dir, const std::string& session,
                                                     int64_t max_length, KeyRotation rotation,
                                                     const ModelConfig& model, torch::Device device);

// Removes staging directories a crash left behind.
void remove_snapshot_leftovers(const std::string& session_dir);

}  // namespace sinklm
