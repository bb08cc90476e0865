// Durable, atomic creation of a directory of files (checkpoints, shards, run artefacts).
// Files are written into a hidden sibling "<dir>.tmp-<pid>", fsync'ed, then the directory is moved into
// place with one rename (or an atomic exchange when <dir> already exists), so a reader sees either the
// old complete directory or the new complete one, never a mix, and a crash never loses the old one.
#pragma once
#include <string>

namespace sinklm {

// Write `size` bytes to `path` and fsync it. Throws UserError naming the path on failure.
void write_file_durable(const std::string& path, const void* data, size_t size);
void write_file_durable(const std::string& path, const std::string& text);
void fsync_directory(const std::string& path);
// One file replaced atomically: written to "<path>.tmp-<pid>", fsync'ed, renamed over `path`.
void write_file_atomic(const std::string& path, const std::string& text);

class AtomicDirWriter {
 public:
  // Fresh: the staging directory starts empty and is removed unless commit() succeeds. Keep: a resumable job
  // (`prepare shards`) reuses what an interrupted run left in it, and it stays when the writer goes away.
  enum class Staging { Fresh, Keep };

  // The staging directory is "<final_dir><staging_suffix>" (default ".tmp-<pid>"). Several processes that
  // fill one staging directory together (the ranks of a training job) pass the same suffix.
  explicit AtomicDirWriter(std::string final_dir, const std::string& staging_suffix = "",
                           Staging staging = Staging::Fresh);
  ~AtomicDirWriter();  // removes a Fresh temporary directory unless commit() succeeded
  AtomicDirWriter(const AtomicDirWriter&) = delete;
  AtomicDirWriter& operator=(const AtomicDirWriter&) = delete;

  const std::string& staging_dir() const { return staging_; }
  std::string staging_path(const std::string& file_name) const { return staging_ + "/" + file_name; }
  void commit();

 private:
  std::string final_;
  std::string staging_;
  bool committed_ = false;
  Staging mode_;
};

}  // namespace sinklm
