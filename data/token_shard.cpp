#include "data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/atomic_dir.h"
#include "core/error.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token shards are read and written in host byte order");

namespace sinklm {
namespace {

const char kMagic[8] = {'S', 'I', 'N', 'K', 'T', 'O', 'K', '\0'};

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
T get(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace

uint32_t token_bytes_for_vocab(uint32_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

void write_token_shard(const std::string& path, const std::vector<const TokenIds*>& documents, uint32_t vocab_size,
                       uint32_t end_of_text_id) {
  const uint32_t width = token_bytes_for_vocab(vocab_size);
  uint64_t tokens = 0;
  for (const TokenIds* doc : documents) tokens += doc->size() + 1;
  std::string out;
  out.reserve(kTokenShardHeaderBytes + tokens * width + (documents.size() + 1) * 8);
  out.append(kMagic, 8);
  put<uint32_t>(out, kTokenShardVersion);
  put<uint32_t>(out, width);
  put<uint64_t>(out, tokens);
  put<uint64_t>(out, documents.size());
  put<uint32_t>(out, vocab_size);
  put<uint32_t>(out, end_of_text_id);
  out.append(kTokenShardHeaderBytes - out.size(), '\0');
  auto put_token = [&](uint32_t id) {
    SINKLM_ASSERT(id < vocab_size, "token id ", id, " outside vocabulary of ", vocab_size, " while writing ", path);
    if (width == 2) put<uint16_t>(out, static_cast<uint16_t>(id));
    else put<uint32_t>(out, id);
  };
  std::vector<uint64_t> starts;
  uint64_t position = 0;
  for (const TokenIds* doc : documents) {
    starts.push_back(position);
    for (uint32_t id : *doc) put_token(id);
    put_token(end_of_text_id);
    position += doc->size() + 1;
  }
  starts.push_back(position);
  for (uint64_t s : starts) put<uint64_t>(out, s);
  write_file_durable(path, out);
}

TokenShard::TokenShard(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open token shard: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(path, ": cannot stat: ", std::strerror(errno));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < kTokenShardHeaderBytes) {
    ::close(fd);
    fail(path, ": truncated token shard (", size_, " bytes, the header alone is ", kTokenShardHeaderBytes,
         "); re-run `sinklm prepare shards`");
  }
  void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED) fail(path, ": mmap failed: ", std::strerror(errno));
  data_ = static_cast<const unsigned char*>(mapped);
  auto bad = [&](const auto&... why) {
    ::munmap(const_cast<unsigned char*>(data_), size_);
    data_ = nullptr;
    fail(path, ": ", why...);
  };
  if (std::memcmp(data_, kMagic, 8) != 0) bad("not a sinklm token shard (wrong magic)");
  uint32_t version = get<uint32_t>(data_ + 8);
  if (version != kTokenShardVersion)
    bad("token shard format version ", version, ", this sinklm reads version ", kTokenShardVersion);
  bytes_per_token_ = get<uint32_t>(data_ + 12);
  token_count_ = get<uint64_t>(data_ + 16);
  document_count_ = get<uint64_t>(data_ + 24);
  vocab_size_ = get<uint32_t>(data_ + 32);
  end_of_text_id_ = get<uint32_t>(data_ + 36);
  if (bytes_per_token_ != 2 && bytes_per_token_ != 4) bad("bytes per token is ", bytes_per_token_, " (2 or 4)");
  if (token_count_ > size_ || document_count_ > size_) bad("header counts exceed the file size of ", size_, " bytes (truncated?)");
  const uint64_t expected = kTokenShardHeaderBytes + token_count_ * bytes_per_token_ + (document_count_ + 1) * 8;
  if (expected != size_)
    bad("header says ", token_count_, " tokens and ", document_count_, " documents (", expected,
        " bytes) but the file has ", size_, " bytes; truncated or corrupt, re-run `sinklm prepare shards`");
  if (document_start(0) != 0 || document_start(document_count_) != token_count_)
    bad("document index does not span the tokens (corrupt)");
}

TokenShard::TokenShard(TokenShard&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_), token_count_(other.token_count_),
      document_count_(other.document_count_), vocab_size_(other.vocab_size_), end_of_text_id_(other.end_of_text_id_),
      bytes_per_token_(other.bytes_per_token_) {
  other.data_ = nullptr;
}

TokenShard::~TokenShard() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

uint32_t TokenShard::token(uint64_t i) const {
  SINKLM_ASSERT(i < token_count_, "token ", i, " of ", path_, " out of range");
  const unsigned char* at = data_ + kTokenShardHeaderBytes + i * bytes_per_token_;
  return bytes_per_token_ == 2 ? get<uint16_t>(at) : get<uint32_t>(at);
}

void TokenShard::copy_tokens(uint64_t begin, uint64_t count, std::vector<uint32_t>& out) const {
  SINKLM_ASSERT(begin + count <= token_count_, "tokens [", begin, ", ", begin + count, ") of ", path_, " out of range");
  const unsigned char* at = data_ + kTokenShardHeaderBytes + begin * bytes_per_token_;
  for (uint64_t i = 0; i < count; ++i, at += bytes_per_token_)
    out.push_back(bytes_per_token_ == 2 ? get<uint16_t>(at) : get<uint32_t>(at));
}

uint64_t TokenShard::document_start(uint64_t d) const {
  SINKLM_ASSERT(d <= document_count_, "document ", d, " of ", path_, " out of range");
  return get<uint64_t>(data_ + kTokenShardHeaderBytes + token_count_ * bytes_per_token_ + d * 8);
}

}  // namespace sinklm
