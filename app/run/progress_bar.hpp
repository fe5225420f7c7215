#pragma once
// A done/total progress bar on stderr for long commands (`run`, `sweep`, `guideline`): the
// command's name, the bar, done/total with a unit, elapsed time and ETA. Drawn only when enabled
// (the CLI enables it when stderr is a terminal and the command is not quiet), at most ten times a
// second; it never touches stdout, so piped output and results are the same with or without it.
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

namespace moesim {

/// Thread-safe: any worker may call advance().
class ProgressBar {
 public:
  /// `done` counts units already finished before this invocation (a resumed sweep's points).
  ProgressBar(std::string name, std::string unit, std::size_t total, std::size_t done, bool enabled);
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// `n` more units finished.
  void advance(std::size_t n = 1);
  /// Ends the bar's line so later output starts on a fresh one (if anything was drawn).
  void finish();

  /// The bar as drawn for `done` of `total` after `elapsed_s` (ETA from the units done since the
  /// start), without the leading carriage return. Exposed for tests.
  static std::string render(const std::string& name, const std::string& unit, std::size_t total, std::size_t first,
                            std::size_t done, double elapsed_s);

 private:
  using Clock = std::chrono::steady_clock;
  std::string name_, unit_;
  std::size_t total_, done_, first_;
  bool enabled_, drawn_any_ = false;
  Clock::time_point start_ = Clock::now(), drawn_{};
  std::mutex mutex_;
};

}  // namespace moesim
