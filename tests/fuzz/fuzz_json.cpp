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
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_inputs.hpp"
#include "tests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return moesim::fuzz::run_input("fuzz_json", [&] { moesim::fuzz::json_input(std::string_view(reinterpret_cast<const char*>(data), size)); });
}
