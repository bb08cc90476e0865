// The server's API key check: a request must carry `Authorization: Bearer <key>`, the only form accepted
// (OpenAI's; the openai clients, lm-evaluation-harness and the chat page send it).
//
// The comparison must not tell an attacker how much of a guess is right: a byte-by-byte `!=` returns at the
// first difference, so its time grows with the matching prefix. Both keys are hashed to SHA-256 digests
// (equal length whatever the keys' lengths) and the digests compared with OpenSSL's CRYPTO_memcmp, whose time
// depends on the length only. OpenSSL is already a dependency (core/files/sha256.cpp).
#pragma once
#include <string>

namespace sinklm {

class ApiKey {
 public:
  explicit ApiKey(const std::string& key);  // "": no key required
  // Whether an `Authorization` header value (empty when absent) carries the key.
  bool accepts(const std::string& authorization) const;

 private:
  bool required_;
  std::string digest_;  // of the configured key
};

}  // namespace sinklm
