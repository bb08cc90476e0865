#include "core/files/atomic_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace sinklm {
namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AtomicDirWriter, CommitReplacesAndAbandonLeavesOldIntact) {
  fs::path root = fs::temp_directory_path() / ("sinklm_atomic_" + std::to_string(::getpid()));
  fs::remove_all(root);
  std::string target = (root / "ckpt").string();
  {
    AtomicDirWriter w(target);
    write_file_durable(w.staging_path("a.txt"), "first");
    w.commit();
  }
  EXPECT_EQ(slurp(root / "ckpt" / "a.txt"), "first");
  {
    AtomicDirWriter w(target);
    write_file_durable(w.staging_path("a.txt"), "second-unfinished");
    // destroyed without commit: simulates a failure mid-write
  }
  EXPECT_EQ(slurp(root / "ckpt" / "a.txt"), "first");
  size_t entries = std::distance(fs::directory_iterator(root), fs::directory_iterator());
  EXPECT_EQ(entries, 1u) << "staging directory left behind";
  {
    AtomicDirWriter w(target);
    write_file_durable(w.staging_path("b.txt"), "second");
    w.commit();
  }
  EXPECT_FALSE(fs::exists(root / "ckpt" / "a.txt"));
  EXPECT_EQ(slurp(root / "ckpt" / "b.txt"), "second");
  fs::remove_all(root);
}

TEST(AtomicDirWriter, KeptStagingSurvivesAnAbandonedWriterAndIsReused) {
  fs::path root = fs::temp_directory_path() / ("sinklm_atomic_keep_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const std::string target = (root / "shards").string();
  {
    AtomicDirWriter w(target, ".partial", AtomicDirWriter::Staging::Keep);
    write_file_durable(w.staging_path("unit-0"), "done");
    // destroyed without commit: an interrupted resumable job
  }
  EXPECT_EQ(slurp(root / "shards.partial" / "unit-0"), "done");
  {
    AtomicDirWriter w(target, ".partial", AtomicDirWriter::Staging::Keep);
    write_file_durable(w.staging_path("unit-1"), "done too");
    w.commit();
  }
  EXPECT_EQ(slurp(root / "shards" / "unit-0"), "done");
  EXPECT_EQ(slurp(root / "shards" / "unit-1"), "done too");
  EXPECT_FALSE(fs::exists(root / "shards.partial"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace sinklm
