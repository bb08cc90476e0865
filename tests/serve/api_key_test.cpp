// The API key check: only `Authorization: Bearer <key>`, the exact key; the scheme case-insensitive (RFC 9110 11.1).
#include <gtest/gtest.h>

#include "serve/http/api_key.h"

namespace sinklm {
namespace {

TEST(ApiKey, AcceptsOnlyTheExactKeyAsABearerToken) {
  const ApiKey key("s3cret-key");
  EXPECT_TRUE(key.accepts("Bearer s3cret-key"));
  for (const char* wrong : {"", "Bearer ", "Bearer s3cret-ke", "Bearer s3cret-key ", "Bearer s3cret-keyx",
                            "Bearer S3cret-key", "s3cret-key", "Basic s3cret-key", "Bearers3cret-key",
                            "Token s3cret-key", " Bearer s3cret-key"})
    EXPECT_FALSE(key.accepts(wrong)) << "'" << wrong << "'";
}

TEST(ApiKey, TheSchemeIsCaseInsensitiveAndSpacesMaySeparateIt) {
  const ApiKey key("s3cret-key");
  for (const char* right : {"bearer s3cret-key", "BEARER s3cret-key", "bEaReR s3cret-key", "Bearer   s3cret-key"})
    EXPECT_TRUE(key.accepts(right)) << "'" << right << "'";
  for (const char* wrong : {"bearer", "bearer ", "bearer\ts3cret-key", "Bearerx s3cret-key", "earer s3cret-key"})
    EXPECT_FALSE(key.accepts(wrong)) << "'" << wrong << "'";
}

TEST(ApiKey, WithoutAKeyEveryRequestIsAccepted) {
  const ApiKey none("");
  EXPECT_TRUE(none.accepts(""));
  EXPECT_TRUE(none.accepts("Bearer anything"));
}

}  // namespace
}  // namespace sinklm
