#pragma once
// Runs the moesim command line in-process with captured output (for CLI contract tests).
#include <gtest/gtest.h>

#include <string>
#include <sstream>
#include <fstream>
#include <filesystem>
#include <vector>

#include "app/cli/cli.hpp"

namespace moesim::testing_support {

/// What one invocation printed and returned.
struct CliResult {
  int code = 0;
  std::string out;
  std::string err;
};

/// Runs `moesim ARGS...` and captures stdout and stderr.
inline CliResult run_cli_captured(std::vector<std::string> args) {
  args.insert(args.begin(), "moesim");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  CliResult r;
  r.code = run_cli(static_cast<int>(argv.size()), argv.data());
  r.out = testing::internal::GetCapturedStdout();
  r.err = testing::internal::GetCapturedStderr();
  return r;
}

/// The whole file at `path` as bytes ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace moesim::testing_support
