// moesim-calibrate: measures cuBLAS GEMMs, copies and NCCL collectives on this machine's GPUs and
// writes one "moesim-measurements/1" JSON file for `moesim calibrate fit`. Kept thin: parsing is
// in options.cpp, each measured operation in its own file, the writer in json_out.cpp.
#include <cstdio>
#include <string>

#include "benchmarks.hpp"
#include "common.hpp"
#include "options.hpp"
#include "results.hpp"

int main(int argc, char** argv) {
  using namespace moesim::calib;
  const Options options = parse_options(argc, argv);
  if (options.help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }

  // Before anything else touches CUDA: a machine without a GPU gets one clear line and exit 3.
  const int devices = require_devices();
  if (options.gpus > devices) {
    fail(kExitUsage, "--gpus " + std::to_string(options.gpus) + ": only " + std::to_string(devices) +
                         " CUDA device(s) visible");
  }

  Results results;
  describe_environment(devices, results);
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i > 0 ? " " : "") + std::string(argv[i]);
  results.environment["command_line"] = command_line;

  // The file is rewritten after every section, so a run stopped in NCCL keeps its GEMMs.
  struct Section {
    const char* name;
    void (*run)(const Options&, Results&);
  };
  const Section sections[] = {{"gemm", run_gemm},
                              {"grouped-gemm", run_grouped_gemm},
                              {"memcpy", run_memcpy},
                              {"nccl", run_nccl}};
  for (const Section& s : sections) {
    if (!wants(options, s.name)) continue;
    s.run(options, results);
    write_json(results, options.out);
  }

  std::printf("moesim-calibrate: %s: %zu GEMM, %zu memcpy and %zu collective samples on %s (%zu skipped)\n",
              options.out.c_str(), results.gemm.size(), results.memcpy.size(), results.collectives.size(),
              results.device.c_str(), results.skipped.size());
  constexpr std::size_t kShown = 20;  // the full list is in the file
  for (std::size_t i = 0; i < results.skipped.size() && i < kShown; ++i) {
    std::printf("  skipped: %s\n", results.skipped[i].c_str());
  }
  if (results.skipped.size() > kShown) {
    std::printf("  ... and %zu more in %s\n", results.skipped.size() - kShown, options.out.c_str());
  }
  return 0;
}
