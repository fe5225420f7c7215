#pragma once
// What the robustness tests of issue 30 share: the base serving scenario, a fresh scratch
// folder per test, and a file written into it.
#include <filesystem>
#include <fstream>
#include <string>

namespace moesim::testing_support {

/// Issue 30's base scenario: Mixtral cut to 2 layers, 20 requests on a DGX A100 (runs in ms).
inline constexpr const char* kHostileBase =
    "name: h3-serving\n"
    "seed: 1\n"
    "model: {preset: mixtral-8x7b, layers: 2}\n"
    "hardware: dgx-a100\n"
    "workload: {kind: serving, requests: 20, warmup_requests: 2, arrival: {process: poisson, rate_per_s: 50}, "
    "prompt_tokens: 64, output_tokens: 8, routing: {kind: uniform}}\n"
    "policy: static-ep\n";

/// An empty folder `moesim-<name>` under the temporary directory.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / ("moesim-" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

/// Writes `text` to `dir`/`name` and returns its path.
inline std::filesystem::path write(const std::filesystem::path& dir, const std::string& name,
                                   const std::string& text) {
  std::ofstream(dir / name) << text;
  return dir / name;
}

/// Whether `part` occurs in `text`.
inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace moesim::testing_support
