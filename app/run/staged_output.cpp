// An output folder written all or nothing (app/run/staged_output.hpp).
#include "app/run/staged_output.hpp"

#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

namespace moesim {

void write_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    // An unwritable output is the user's to fix (exit 2), with the OS's reason.
    const auto fail = [&] { throw std::filesystem::filesystem_error("cannot write", tmp, std::error_code(errno, std::generic_category())); };
    if (!out) fail();
    out << text;
    if (!out.flush()) fail();
  }
  // A path that is a directory (or on another device) fails the rename: the temporary goes, and
  // the error names the path asked for, not the .tmp.
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw std::filesystem::filesystem_error("cannot write", path, ec);
  }
}

namespace fs = std::filesystem;

StagedOutput::StagedOutput(fs::path target) : target_(std::move(target)) {
  // Beside the target, so the final moves are renames within one file system.
  const fs::path parent = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
  fs::create_directories(parent);
  const std::string name = target_.filename().empty() ? std::string("out") : target_.filename().string();
  stage_ = parent / ("." + name + ".staging-" + std::to_string(::getpid()));
  std::error_code ignored;
  fs::remove_all(stage_, ignored);  // a crashed run's leftover of the same process id
  fs::create_directories(stage_);
}

StagedOutput::~StagedOutput() {
  std::error_code ignored;
  fs::remove_all(stage_, ignored);
}

void StagedOutput::commit() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(stage_)) files.push_back(e.path());
  // Every destination is checked before any file moves, so a refusal leaves the target as it was.
  if (fs::exists(target_) && !fs::is_directory(target_))
    throw fs::filesystem_error("cannot write", target_, std::make_error_code(std::errc::not_a_directory));
  for (const fs::path& f : files)
    if (fs::is_directory(target_ / f.filename()))
      throw fs::filesystem_error("cannot write", target_ / f.filename(), std::make_error_code(std::errc::is_a_directory));
  fs::create_directories(target_);
  for (const fs::path& f : files) fs::rename(f, target_ / f.filename());
  committed_ = true;
}

}  // namespace moesim
