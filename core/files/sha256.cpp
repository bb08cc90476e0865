#include "core/files/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "core/error.h"

namespace sinklm {
namespace {

struct DigestContext {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  DigestContext() { SINKLM_ASSERT(ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1); }
  ~DigestContext() { EVP_MD_CTX_free(ctx); }
  void update(const void* data, size_t size) { SINKLM_ASSERT(EVP_DigestUpdate(ctx, data, size) == 1); }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    SINKLM_ASSERT(EVP_DigestFinal_ex(ctx, digest, &length) == 1);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < length; ++i) {
      out += digits[digest[i] >> 4];
      out += digits[digest[i] & 15];
    }
    return out;
  }
};

}  // namespace

std::string sha256_bytes(const void* data, size_t size) {
  DigestContext digest;
  digest.update(data, size);
  return digest.hex();
}

std::string sha256_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) fail(path, ": cannot open for hashing");
  DigestContext digest;
  std::vector<char> buffer(1 << 20);
  size_t got;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), file.get())) > 0) digest.update(buffer.data(), got);
  if (std::ferror(file.get())) fail(path, ": read error while hashing");
  return digest.hex();
}

}  // namespace sinklm
