#include "data/shards/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/files/atomic_dir.h"
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
  TokenShardWriter writer(path, vocab_size, end_of_text_id);
  for (const TokenIds* doc : documents) writer.add_document(*doc);
  writer.finish();
}

TokenShardWriter::TokenShardWriter(std::string path, uint32_t vocab_size, uint32_t end_of_text_id)
    : path_(std::move(path)),
      partial_path_(path_ + ".partial"),
      vocab_size_(vocab_size),
      end_of_text_id_(end_of_text_id),
      width_(token_bytes_for_vocab(vocab_size)) {
  fd_ = ::open(partial_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(partial_path_, ": cannot create: ", std::strerror(errno));
  buffer_.assign(kTokenShardHeaderBytes, '\0');  // the header is written last, once the counts are known
}

TokenShardWriter::~TokenShardWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(partial_path_.c_str());
}

void TokenShardWriter::add_document(const TokenIds& ids) {
  SINKLM_ASSERT(fd_ >= 0, path_, " is already finished");
  auto put_token = [&](uint32_t id) {
    SINKLM_ASSERT(id < vocab_size_, "token id ", id, " outside vocabulary of ", vocab_size_, " while writing ", path_);
    if (width_ == 2) put<uint16_t>(buffer_, static_cast<uint16_t>(id));
    else put<uint32_t>(buffer_, id);
  };
  for (uint32_t id : ids) put_token(id);
  put_token(end_of_text_id_);
  starts_.push_back(starts_.back() + ids.size() + 1);
  if (buffer_.size() >= (1u << 20)) flush_buffer();
}

void TokenShardWriter::flush_buffer() {
  const char* bytes = buffer_.data();
  size_t left = buffer_.size();
  while (left > 0) {
    ssize_t wrote = ::write(fd_, bytes, left);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) fail(partial_path_, ": write failed: ", std::strerror(errno), " (is the disk full?)");
    bytes += wrote;
    left -= static_cast<size_t>(wrote);
  }
  buffer_.clear();
}

void TokenShardWriter::finish() {
  SINKLM_ASSERT(fd_ >= 0, path_, " is already finished");
  for (uint64_t s : starts_) put<uint64_t>(buffer_, s);
  flush_buffer();
  std::string header(kMagic, 8);
  put<uint32_t>(header, kTokenShardVersion);
  put<uint32_t>(header, width_);
  put<uint64_t>(header, token_count());
  put<uint64_t>(header, document_count());
  put<uint32_t>(header, vocab_size_);
  put<uint32_t>(header, end_of_text_id_);
  header.append(kTokenShardHeaderBytes - header.size(), '\0');
  if (::pwrite(fd_, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()) || ::fsync(fd_) != 0)
    fail(partial_path_, ": write/fsync failed: ", std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0 || ::rename(partial_path_.c_str(), path_.c_str()) != 0)
    fail(path_, ": cannot move the finished shard into place: ", std::strerror(errno));
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
