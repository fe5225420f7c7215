// libFuzzer target: the JSON readers of `moesim compare` and `moesim sweep merge` (issue 30, "fuzz
// targets extended to ... the JSON readers of `compare` and `sweep merge`").
//
// The first byte picks the reader, the rest is the text it reads: a result.json compared (as a
// table, as CSV, or with `--metric`s named on its first line), a results.jsonl read back by a
// resume, or sweep folders (sweep.json, a blank line, results.jsonl) merged alone, with a shard
// of a fixed sweep, or as the --out a fixed sweep is merged into (tests/fuzz/fuzz_inputs.hpp).
// The files live in a scratch folder of this process under /tmp, removed at exit. A merge that
// succeeds must leave a folder that reads back as the whole sweep. InputError is the expected
// answer to bad input; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "core/diagnostics.hpp"
#include "tests/fuzz/fuzz_inputs.hpp"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_json: internal error: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    moesim::fuzz::json_input(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const moesim::InputError&) {
  } catch (const std::exception& e) {
    finding(e.what());
  } catch (...) {
    finding("a non-standard exception");
  }
  return 0;
}
