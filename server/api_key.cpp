#include "server/api_key.h"

#include <openssl/crypto.h>

#include "core/sha256.h"

namespace sinklm {
namespace {

constexpr const char* kScheme = "Bearer ";

std::string digest_of(const std::string& key) { return sha256_bytes(key.data(), key.size()); }

}  // namespace

ApiKey::ApiKey(const std::string& key) : required_(!key.empty()), digest_(digest_of(key)) {}

bool ApiKey::accepts(const std::string& authorization) const {
  if (!required_) return true;
  const std::string scheme(kScheme);
  if (authorization.compare(0, scheme.size(), scheme) != 0) return false;  // the scheme is public, the key not
  const std::string presented = digest_of(authorization.substr(scheme.size()));  // 64 hex digits, as digest_
  return CRYPTO_memcmp(presented.data(), digest_.data(), digest_.size()) == 0;
}

}  // namespace sinklm
