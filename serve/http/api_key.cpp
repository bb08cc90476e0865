#include "serve/http/api_key.h"

#include <openssl/crypto.h>

#include <cctype>
#include <optional>
#include <string_view>

#include "core/files/sha256.h"

namespace sinklm {
namespace {

// RFC 9110 11.1/11.4: the scheme is case-insensitive and one or more spaces separate it from the credentials.
// Returns the credentials, or nullopt when `authorization` is not of the Bearer scheme.
std::optional<std::string> bearer_credentials(const std::string& authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() || authorization[kScheme.size()] != ' ') return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return std::nullopt;
  const size_t start = authorization.find_first_not_of(' ', kScheme.size());
  return start == std::string::npos ? std::string() : authorization.substr(start);
}

std::string digest_of(const std::string& key) { return sha256_bytes(key.data(), key.size()); }

}  // namespace

ApiKey::ApiKey(const std::string& key) : required_(!key.empty()), digest_(digest_of(key)) {}

bool ApiKey::accepts(const std::string& authorization) const {
  if (!required_) return true;
  const std::optional<std::string> credentials = bearer_credentials(authorization);
  if (!credentials) return false;  // the scheme is public, the key not
  const std::string presented = digest_of(*credentials);  // 64 hex digits, as digest_
  return CRYPTO_memcmp(presented.data(), digest_.data(), digest_.size()) == 0;
}

}  // namespace sinklm
