// Issue 17, "Fuzzing", and issue 30 (traces, length distributions, the JSON of `compare` and
// `sweep merge`): every input the libFuzzer targets (tests/fuzz/) found crashing, fed through
// the same library API the target calls. Each named test pins one finding's expected answer (a
// located input error); the replay test runs every saved input in tests/fuzz/regressions/ the way
// its target does, so a saved input that is not yet a named test is still covered.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "calibrate/measurements.hpp"
#include "core/diagnostics.hpp"
#include "sim/tick.hpp"
#include "tests/fuzz/fuzz_inputs.hpp"
#include "tests/support/diagnostics.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;
namespace cal = calibration;

fs::path source_root() {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  return root ? root : ".";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// What fuzz_scenario does: leading "--set " lines are overrides, the rest is the scenario;
/// load it and check that it fits. Returns the diagnostics (empty when it loads).
std::vector<Diagnostic> scenario_errors(std::string_view text) {
  constexpr std::string_view kSet = "--set ";
  std::vector<std::string> sets;
  while (text.starts_with(kSet)) {
    const auto nl = text.find('\n');
    sets.emplace_back(text.substr(kSet.size(), nl == std::string_view::npos ? nl : nl - kSet.size()));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  try {
    const Scenario s = load_scenario_text(std::string(text), "fuzz.yaml", sets, "scenarios");
    check_scenario_fits(s);
  } catch (const InputError& e) {
    return e.diagnostics();
  } catch (const TimeRangeError& e) {
    return {Diagnostic{SourceLocation{"fuzz.yaml", 0, 0}, e.what()}};
  }
  return {};
}

/// What fuzz_measurements does for selector byte `selector` (importers 0-6 and 8-9; 7 =
/// load_measurements, which needs a file). Returns the diagnostics; an import that succeeds must read back from JSON.
std::vector<Diagnostic> measurement_errors(unsigned char selector, const std::string& text) {
  try {
    cal::Measurements m;
    switch (selector % 10) {
      case 0: m = cal::import_nccl_tests(text, "fuzz.txt"); break;
      case 1: m = cal::import_nccl_tests(text, "fuzz.txt", "all_gather_perf"); break;
      case 2: m = cal::import_nccl_tests(text, "fuzz.txt", "alltoall_perf"); break;
      case 3: m = cal::import_nccl_tests(text, "fuzz.txt", "sendrecv"); break;
      case 4: m = cal::import_vidur_network_csv(text, "fuzz.csv"); break;
      case 5: m = cal::import_vidur_mlp_csv(text, "fuzz.csv"); break;
      case 6: m = cal::import_llmcompass_matmul_csv(text, "fuzz.csv"); break;
      case 8: m = cal::import_collective_sweep_csv(text, "fuzz.csv", "all_reduce"); break;
      case 9: m = cal::import_collective_sweep_csv(text, "fuzz.csv", "all_gather"); break;
      default: {
        const fs::path p = fs::temp_directory_path() / "moesim-fuzz-regression.txt";
        std::ofstream(p, std::ios::binary) << text;
        m = cal::load_measurements(p.string());
      }
    }
    EXPECT_NO_THROW(cal::Measurements::from_json(m.to_json()));
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  return {};
}

/// What fuzz_trace, fuzz_lengths and fuzz_json do with one input (tests/fuzz/fuzz_inputs.hpp):
/// returns the diagnostics (empty when it is accepted); an accepted input that breaks a promise
/// of its reader is a test failure.
template <typename Replay>
std::vector<Diagnostic> issue30_errors(Replay replay, const std::string& data) {
  try {
    replay(data);
  } catch (const InputError& e) {
    return e.diagnostics();
  } catch (const TimeRangeError& e) {
    return {Diagnostic{SourceLocation{"fuzz", 0, 0}, e.what()}};
  } catch (const fuzz::BrokenProperty& e) {
    ADD_FAILURE() << e.what();
  }
  return {};
}
std::vector<Diagnostic> trace_errors(const std::string& text) {
  return issue30_errors([](const std::string& d) { fuzz::trace_input(d); }, text);
}
std::vector<Diagnostic> length_errors(const std::string& data) {
  return issue30_errors([](const std::string& d) { fuzz::length_input(d); }, data);
}
std::vector<Diagnostic> json_errors(const std::string& data) {
  return issue30_errors([](const std::string& d) { fuzz::json_input(d); }, data);
}

using testing_support::mentions;

std::string all(const std::vector<Diagnostic>& d) {
  std::string s;
  for (const auto& x : d) s += x.to_string() + "\n";
  return s;
}

}  // namespace

// Finding in scenario loading: `workload.arrival` as a mapping without `process` (here a --set of
// `arrival.rate_per_s` onto a file whose `arrival:` key is misspelt) was an internal error
// (yaml-cpp's "invalid node") instead of the located "'arrival' needs a 'process'".
TEST(FuzzRegressions, ArrivalMappingWithoutProcessIsLocated) {
  const std::string file = "name: x\nmodel: mixtral-8x7b\nhardware: dgx-a100\nworkload:\n  kind: serving\n"
                           "  arrival: {rate_per_s: 40}\npolicy: static-ep\n";
  const auto d = scenario_errors(file);
  EXPECT_TRUE(mentions(d, "fuzz.yaml:6:12: error: 'arrival' needs a 'process'")) << all(d);
  const auto set = scenario_errors("--set workload.arrival.rate_per_s=50\nname: x\nmodel: mixtral-8x7b\n"
                                   "hardware: dgx-a100\nworkload:\n  kind: serving\n  arrioal: {process: poisson}\n"
                                   "policy: static-ep\n");
  EXPECT_TRUE(mentions(set, "'arrival' needs a 'process'")) << all(set);
}

// Finding in scenario loading: a value of the wrong type for an optional key (default none), here
// `serving.slo.ttft_ms: abc`, was reported and then read anyway as its null default: an internal
// error (yaml-cpp's "bad conversion") instead of the located type error.
TEST(FuzzRegressions, OptionalValueOfTheWrongTypeIsLocated) {
  const auto d = scenario_errors(
      "model: {preset: switch-base-8, layers: 2}\nhardware: hgx-a100-4gpu-nvlink\n"
      "workload: {kind: serving, requests: 4, prompt_tokens: 16, output_tokens: 2}\n"
      "serving: {slo: {ttft_ms: abc}}\npolicy: [static-ep]\n");
  EXPECT_TRUE(mentions(d, "fuzz.yaml:4:26: error: 'ttft_ms'")) << all(d);
}

// Finding in scenario loading: a YAML complex key (`? {...}`, here `? routing: ...` left by a
// mangled line) was an internal error (yaml-cpp's "bad conversion" reading the key as a name).
TEST(FuzzRegressions, ComplexMappingKeyIsLocated) {
  const auto d = scenario_errors(
      "model: {preset: switch-base-8, layers: 2}\nhardware: hgx-a100-4gpu-nvlink\nworkload:\n  batch_size: 1\n"
      "? routing: {kind: uniform}\npolicy: [static-ep]\n");
  EXPECT_TRUE(mentions(d, "fuzz.yaml:5:3: error: a key must be a plain name, not a mapping or a list")) << all(d);
}

// Finding in scenario loading: a ',' at the top level of a document (here a comment line that lost
// its '#') made yaml-cpp's LoadAll yield empty documents without end: `moesim validate` grew to
// 24 GB and was killed. Now a located error, however the stray comma is reached.
TEST(FuzzRegressions, StrayCommaAtTheTopLevelIsLocatedNotEndless) {
  EXPECT_TRUE(mentions(scenario_errors(",no#i 25 GbE, as (x): batch 128,\n"),
                       "fuzz.yaml:1:1: error: malformed YAML: ',' outside a [list] or {mapping}"));
  EXPECT_TRUE(mentions(scenario_errors("# a comment\n,\n"), "fuzz.yaml:2:1: error: malformed YAML: ','"));
  EXPECT_TRUE(mentions(scenario_errors("---\n,\n"), "fuzz.yaml:2:1: error: malformed YAML: ','"));
  const auto second = scenario_errors("model: switch-base-8\n---\nmodel: switch-base-8\n");
  EXPECT_TRUE(mentions(second, "fuzz.yaml:2:1: error: a second YAML document")) << all(second);
}

// Findings in the measurement importers: sizes near int64's limit overflowed the arithmetic on
// them (UBSan: signed overflow), and sizes past int's range were silently truncated into the
// sample's `int` fields, giving measurements that the JSON reader then rejects.

TEST(FuzzRegressions, NcclTestsThreadsTimesGpusPastTheLimitIsLocated) {
  const auto d = measurement_errors(0, "#  nThread 9223372036854775807 nGpus 2\n"
                                       "#  size  count  type  redop  root  time  algbw  busbw\n"
                                       "  1024  256  float  sum  -1  10.0  0.1  0.1\n");
  EXPECT_TRUE(mentions(d, "fuzz.txt:1:")) << all(d);
  EXPECT_TRUE(mentions(d, "nThread: must be at most 1048576")) << all(d);
  const auto product = measurement_errors(0, "#  nThread 65536 nGpus 65536\n"
                                             "#  size  count  type  redop  root  time  algbw  busbw\n"
                                             "  1024  256  float  sum  -1  10.0  0.1  0.1\n");
  EXPECT_TRUE(mentions(product, "nThread x nGpus: 4294967296 GPUs")) << all(product);
}

TEST(FuzzRegressions, NcclTestsGpusPastIntAreRefusedNotTruncated) {
  const auto d = measurement_errors(0, "#  nThread 4294967296 nGpus 1\n"
                                       "#  size  count  type  redop  root  time  algbw  busbw\n"
                                       "  1024  256  float  sum  -1  10.0  0.1  0.1\n");
  EXPECT_TRUE(mentions(d, "fuzz.txt:1:")) << all(d);
  EXPECT_TRUE(mentions(d, "must be at most")) << all(d);
}

TEST(FuzzRegressions, NcclTestsHugeCountDoesNotOverflowTheReduceScatterCheck) {
  // The count is compared with size / (element bytes x GPUs) instead of multiplied out.
  const auto d = measurement_errors(0, "#  nThread 1 nGpus 2\n"
                                       "#  size  count  type  redop  root  time  algbw  busbw\n"
                                       "  9223372036854775807  9223372036854775807  float  sum  -1  10.0  0.1  0.1\n");
  EXPECT_TRUE(d.empty()) << all(d);  // an all_reduce row, as before
  const auto rs = cal::import_nccl_tests("#  nThread 1 nGpus 2\n#  size  count  type  redop  root  time\n"
                                         "  1024  128  float  sum  -1  10.0\n", "rs.txt");
  EXPECT_TRUE(rs.collectives.empty());  // 128 x 4 bytes x 2 GPUs = 1024: reduce_scatter, still skipped
}

// A Rank line with "on HOST" twice (two lines run together) counted two nodes for one GPU: the
// import succeeded but its measurements did not read back ("2 nodes cannot hold 1 GPUs").
TEST(FuzzRegressions, NcclTestsRankLineNamesOneHost) {
  const auto d = measurement_errors(7, "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576\n"
                                       "#  Rank  0 Group  0 Pid  4 on dgx-a100-01 device  0 [0x07] NVIDIA A100 Group  0 "
                                       "Pid  5 on dgx-a100-02 device  7 [0xbd] NVIDIA A100-SXM4-80GB\n"
                                       "#       size   count   type   redop    root     time   algbw   busbw  #wrong\n"
                                       "     1048576  524288   half     sum      -1   464.00    2.26    4.24       0\n");
  EXPECT_TRUE(d.empty()) << all(d);
  const auto m = cal::import_nccl_tests("#  nThread 1 nGpus 1\n#  Rank  0 Group  0 Pid  4 on a device 0 on b\n"
                                        "#  size  count  type  redop  root  time\n  1024  256  float  sum  -1  10.0\n",
                                        "n.txt", "all_reduce");
  ASSERT_EQ(m.collectives.size(), 1u);
  EXPECT_EQ(m.collectives[0].nodes, 1);
}

TEST(FuzzRegressions, VidurNetworkWorkersPastTheLimitAreLocated) {
  const auto d = measurement_errors(4, "num_workers,devices_per_node,size,time_stats.all_reduce.median\n"
                                       "9223372036854775807,2,1024,0.5\n");
  EXPECT_TRUE(mentions(d, "fuzz.csv:2:1: error: num_workers: must be at most 1048576")) << all(d);
}

TEST(FuzzRegressions, VidurMlpWidthPastTheLimitIsLocated) {
  const auto d = measurement_errors(5, "num_tokens,n_embd,n_expanded_embd,use_gated_mlp,num_tensor_parallel_workers,"
                                       "time_stats.mlp_up_proj.median,time_stats.mlp_down_proj.median\n"
                                       "8,4096,9223372036854775807,True,1,0.1,0.1\n");
  EXPECT_TRUE(mentions(d, "fuzz.csv:2:8: error: n_expanded_embd: must be at most 2147483647")) << all(d);
}

TEST(FuzzRegressions, LlmcompassDimensionPastIntIsLocated) {
  const auto d = measurement_errors(6, "64, 4294967296, 8, 0.19ms, 1Tflops\n");
  EXPECT_TRUE(mentions(d, "fuzz.csv:1:5: error: N: must be at most 2147483647")) << all(d);
}

TEST(FuzzRegressions, MeasurementJsonGroupSizesPastTheLimitAreRefused) {
  const auto d = measurement_errors(7, R"({"format": "moesim-measurements/1", "gemm": [{"dtype": "fp16", "m": 1, "n": 8,
    "k": 8, "group_m": [9223372036854775807, 1], "time_us": 1.0}]})");
  EXPECT_TRUE(mentions(d, "gemm[0].group_m[0]: must be at most 2147483647")) << all(d);
}

// A vidur time of 1e306 ms is finite, but 1e309 us after the unit conversion: the sample wrote
// `null` to JSON and failed to read back. Times and bandwidths are now at most 1e15.
TEST(FuzzRegressions, MeasuredTimesPastTheBoundAreLocated) {
  const auto d = measurement_errors(4, "num_workers,devices_per_node,size,time_stats.send_recv.median\n2,2,1024,1e306\n");
  EXPECT_TRUE(mentions(d, "fuzz.csv:2:10: error: time_stats.send_recv.median: must be at most 1e15, got 1e306")) << all(d);
}

// A JSON number past double's range: nlohmann throws out_of_range (406), not parse_error, which
// escaped as an internal error.
TEST(FuzzRegressions, MeasurementJsonNumberPastDoubleIsAnInputError) {
  const auto d = measurement_errors(7, "{\"format\": 2e308}");
  EXPECT_TRUE(mentions(d, "invalid JSON: [json.exception.out_of_range.406] number overflow")) << all(d);
}

TEST(FuzzRegressions, MeasurementJsonGpusPastIntAreRefusedNotTruncated) {
  const auto d = measurement_errors(7, R"({"format": "moesim-measurements/1", "collectives": [{"op": "all_reduce",
    "gpus": 4294967298, "nodes": 1, "bytes": 1024, "time_us": 5.0}]})");
  EXPECT_TRUE(mentions(d, "collectives[0].gpus: must be at most 1048576")) << all(d);
  const auto u = measurement_errors(7, R"({"format": "moesim-measurements/1", "collectives": [{"op": "all_reduce",
    "gpus": 18446744073709551615, "nodes": 1, "bytes": 1024, "time_us": 5.0}]})");
  EXPECT_TRUE(mentions(u, "collectives[0].gpus: must be at most 1048576, got 18446744073709551615")) << all(u);
}

// Finding in the request-trace reader (issue 30): a token count past int64's range (1e30, -1e300)
// was reported and then converted to int64 anyway (UBSan: float-cast-overflow).
TEST(FuzzRegressions, TraceTokenCountPastInt64IsLocatedNotConverted) {
  const auto d = trace_errors("arrived_at_s,prompt_tokens,output_tokens\n0,1e30,1\n0,2,-1e300\n");
  EXPECT_TRUE(mentions(d, "fuzz.csv:2:3: error: 'prompt_tokens' must be a whole number of tokens, got 1e30")) << all(d);
  EXPECT_TRUE(mentions(d, "fuzz.csv:3:5: error: 'output_tokens' must be a whole number of tokens, got -1e300")) << all(d);
}

// Finding in `moesim compare` (issue 30): a run whose "policy" (or label, predictor) is not a
// string was an internal error (nlohmann's type_error 302) instead of a located input error.
TEST(FuzzRegressions, CompareRunIdentityOfTheWrongTypeIsLocated) {
  const auto d = json_errors(std::string(1, '\0') + R"({"runs": [{"policy": 3, "metrics": {"makespan_ms": 1}}]})");
  EXPECT_TRUE(mentions(d, "result.json:1:1: error: not a moesim result: a run's \"policy\" must be a string")) << all(d);
  const auto label = json_errors(std::string(1, '\1') + R"({"runs": [{"label": [], "metrics": {}}]})");
  EXPECT_TRUE(mentions(label, "a run's \"label\" must be a string")) << all(label);
}

// Every saved input ends in a located input error or loads; nothing else (a crash, an internal
// error) is acceptable. The run is under the sanitizers in `make sanitize`.
TEST(FuzzRegressions, EverySavedInputIsAnInputErrorOrLoads) {
  const fs::path dir = source_root() / "tests" / "fuzz" / "regressions";
  int replayed = 0;
  for (const auto& e : fs::directory_iterator(dir / "fuzz_scenario")) {
    if (e.path().filename().string().starts_with(".")) continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_FATAL_FAILURE(scenario_errors(read_file(e.path())));
    ++replayed;
  }
  for (const auto& e : fs::directory_iterator(dir / "fuzz_measurements")) {
    if (e.path().filename().string().starts_with(".")) continue;
    SCOPED_TRACE(e.path().string());
    const std::string data = read_file(e.path());
    if (!data.empty()) measurement_errors(static_cast<unsigned char>(data[0]), data.substr(1));
    ++replayed;
  }
  for (const auto& [target, replay] : {std::pair{"fuzz_trace", &trace_errors}, std::pair{"fuzz_lengths", &length_errors},
                                       std::pair{"fuzz_json", &json_errors}})
    for (const auto& e : fs::directory_iterator(dir / target)) {
      if (e.path().filename().string().starts_with(".")) continue;
      SCOPED_TRACE(e.path().string());
      replay(read_file(e.path()));
      ++replayed;
    }
  EXPECT_GT(replayed, 0);
}

}  // namespace moesim
