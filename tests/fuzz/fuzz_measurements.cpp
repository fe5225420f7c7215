// libFuzzer target: the measurement importers (issue 17, "Fuzzing").
//
// The first byte picks the importer, the rest is the file's text: nccl-tests output (with no op
// hint, or with each hint), vidur's network and MLP CSVs, LLMCompass's matmul CSV and collective
// sweep CSV (as all-reduce and as all-gather), or
// load_measurements, which recognises the format by content (moesim JSON included) from a file.
// Whatever an importer accepts must survive the JSON round trip that `moesim calibrate` relies on.
// InputError is the expected answer to bad input; anything else is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "calibrate/measurements.hpp"
#include "core/diagnostics.hpp"

namespace {

namespace cal = moesim::calibration;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_measurements: internal error: %s\n", what);
  std::abort();
}

/// load_measurements reads a file: one per fuzzing process, rewritten for every input.
const std::string& scratch_file() {
  static const std::string path = "/tmp/moesim-fuzz-measurements-" + std::to_string(getpid()) + ".txt";
  return path;
}

cal::Measurements import(std::uint8_t selector, const std::string& text) {
  switch (selector % 10) {
    case 0: return cal::import_nccl_tests(text, "fuzz.txt");
    case 1: return cal::import_nccl_tests(text, "fuzz.txt", "all_gather_perf");
    case 2: return cal::import_nccl_tests(text, "fuzz.txt", "alltoall_perf");
    case 3: return cal::import_nccl_tests(text, "fuzz.txt", "sendrecv");
    case 4: return cal::import_vidur_network_csv(text, "fuzz.csv");
    case 5: return cal::import_vidur_mlp_csv(text, "fuzz.csv");
    case 6: return cal::import_llmcompass_matmul_csv(text, "fuzz.csv");
    case 8: return cal::import_collective_sweep_csv(text, "fuzz.csv", "all_reduce");
    case 9: return cal::import_collective_sweep_csv(text, "fuzz.csv", "all_gather");
    default: {
      std::ofstream(scratch_file(), std::ios::binary | std::ios::trunc) << text;
      return cal::load_measurements(scratch_file());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  cal::Measurements m;
  try {
    m = import(data[0], text);
  } catch (const moesim::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    finding(e.what());
  } catch (...) {
    finding("a non-standard exception");
  }
  try {
    (void)cal::Measurements::from_json(m.to_json());
  } catch (const std::exception& e) {
    finding((std::string("imported measurements do not read back: ") + e.what()).c_str());
  }
  return 0;
}
