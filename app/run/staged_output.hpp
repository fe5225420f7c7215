#pragma once
// A command's output folder written all or nothing: files go to a staging folder beside it, and
// only when the command has succeeded are they moved into the folder (created then). A command
// that fails part-way leaves neither a half-written folder nor stray files (a first policy's
// trace, a requests.csv without its result.json).
#include <filesystem>
#include <string>

namespace moesim {

/// Writes `text` to `path` through a temporary file, so a failure never leaves a partial file.
void write_atomically(const std::filesystem::path& path, const std::string& text);

/// Stages the files of one output folder; the staging folder is removed when this goes out of
/// scope without commit() (an exception on the way out).
class StagedOutput {
 public:
  /// `target` is the folder the files are meant for (it may exist; its other files are kept).
  explicit StagedOutput(std::filesystem::path target);
  ~StagedOutput();
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;

  /// Where to write the files meanwhile.
  const std::filesystem::path& dir() const { return stage_; }
  /// Moves every staged file into the target folder, creating it. Throws
  /// std::filesystem::filesystem_error naming the target path when one cannot take its file (a
  /// directory there), before any file is moved.
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path stage_;
  bool committed_ = false;
};

}  // namespace moesim
