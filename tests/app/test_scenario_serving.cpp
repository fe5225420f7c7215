// Serving scenarios (workload.kind: serving, serving:, deployment:): fields, resolved YAML, and
// every bad input reported at its file:line:col (the scenario's, or the trace CSV's).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "app/scenario/scenario.hpp"

namespace moesim {
namespace {

const char* kFull = R"(name: serve
seed: 5
model: mixtral-8x7b
hardware: 2x-dgx-a100
workload:
  kind: serving
  requests: 1000
  warmup_requests: 50
  arrival: {process: poisson, rate_per_s: 20}
  prompt_tokens: 512
  output_tokens: {dist: uniform, min: 100, max: 500}
  routing: {kind: skewed, alpha: 0.5, hot_experts: 4}
serving:
  max_num_seqs: 128
  max_batched_tokens: 4096
  chunked_prefill: false
  kv_block_tokens: 32
  preemption: swap
  gpu_memory_utilization: 0.85
  slo: {ttft_ms: 2000, tpot_ms: 100}
deployment: {prefill_gpus: 8, decode_gpus: 8}
policy: static-ep
)";

// A serving scenario on 2 DGX A100 nodes (16 GPUs) with the arrival on line 7, prompt_tokens on
// line 8, output_tokens on line 9 and `extra` from line 10.
std::string serving(const std::string& arrival, const std::string& prompt = "512",
                    const std::string& output = "128", const std::string& extra = "",
                    const std::string& hardware = "2x-dgx-a100") {
  return "name: t\nmodel: mixtral-8x7b\nhardware: " + hardware +
         "\nworkload:\n  kind: serving\n  requests: 100\n  arrival: " + arrival + "\n  prompt_tokens: " + prompt +
         "\n  output_tokens: " + output + "\n" + extra;
}

std::vector<Diagnostic> errors_of(const std::string& text, const std::vector<std::string>& sets = {},
                                  const std::string& base_dir = ".") {
  try {
    load_scenario_text(text, "s.yaml", sets, base_dir);
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  return {};
}

std::string joined(const std::vector<Diagnostic>& d) {
  std::string out;
  for (const auto& x : d) out += x.to_string() + "\n";
  return out;
}

// The 1-based column of `token` on 1-based `line` of `text`.
int column_of(const std::string& text, int line, const std::string& token) {
  std::size_t start = 0;
  for (int i = 1; i < line; ++i) start = text.find('\n', start) + 1;
  const std::string l = text.substr(start, text.find('\n', start) - start);
  const auto pos = l.find(token);
  EXPECT_NE(pos, std::string::npos) << "'" << token << "' not on line " << line << ": " << l;
  return static_cast<int>(pos) + 1;
}

// `text` fails with an error containing `message` at line:col, where col is where `token` starts.
void expect_error(const std::string& text, int line, const std::string& token, const std::string& message,
                  const std::vector<std::string>& sets = {}, const std::string& base_dir = ".") {
  const auto d = errors_of(text, sets, base_dir);
  const std::string want =
      "s.yaml:" + std::to_string(line) + ":" + std::to_string(column_of(text, line, token)) + ": error: ";
  bool found = false;
  for (const auto& x : d) {
    const std::string s = x.to_string();
    found = found || (s.rfind(want, 0) == 0 && s.find(message) != std::string::npos);
  }
  EXPECT_TRUE(found) << "wanted " << want << "..." << message << "\ngot:\n" << joined(d);
}

std::filesystem::path temp_dir() {
  const auto dir = std::filesystem::temp_directory_path() / "moesim_test_scenario_serving";
  std::filesystem::create_directories(dir);
  return dir;
}

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

std::string source_root() {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  return root ? root : ".";
}

}  // namespace

TEST(ScenarioServing, FullScenarioLandsInTheScenario) {
  const Scenario s = load_scenario_text(kFull, "s.yaml");
  EXPECT_EQ(s.workload_kind, WorkloadKind::kServing);
  const ServingWorkload& w = s.serving_workload;
  EXPECT_EQ(w.requests, 1000);
  EXPECT_EQ(w.warmup_requests, 50);
  EXPECT_EQ(w.arrival.process, ArrivalSpec::Process::kPoisson);
  EXPECT_DOUBLE_EQ(w.arrival.rate_per_s, 20.0);
  EXPECT_EQ(w.prompt.kind, LengthDist::Kind::kFixed);
  EXPECT_EQ(w.prompt.fixed, 512);
  EXPECT_EQ(w.output.kind, LengthDist::Kind::kUniform);
  EXPECT_EQ(w.output.min, 100);
  EXPECT_EQ(w.output.max, 500);
  EXPECT_EQ(s.serving.max_num_seqs, 128);
  EXPECT_EQ(s.serving.max_batched_tokens, 4096);
  EXPECT_FALSE(s.serving.chunked_prefill);
  EXPECT_EQ(s.serving.kv_block_tokens, 32);
  EXPECT_EQ(s.serving.preemption, Preemption::kSwap);
  EXPECT_DOUBLE_EQ(s.serving.gpu_memory_utilization, 0.85);
  ASSERT_TRUE(s.serving.slo_ttft_ms.has_value());
  EXPECT_DOUBLE_EQ(*s.serving.slo_ttft_ms, 2000.0);
  EXPECT_DOUBLE_EQ(s.serving.slo_tpot_ms.value_or(0.0), 100.0);
  EXPECT_EQ(s.deployment.prefill_gpus, 8);
  EXPECT_EQ(s.deployment.decode_gpus, 8);
  EXPECT_TRUE(s.deployment.disaggregated());
  EXPECT_EQ(s.routing.kind, "skewed");
  EXPECT_EQ(s.model.max_context, 32768);
  // The representative prefill shape: one sequence per GPU at the mean prompt length.
  EXPECT_EQ(s.workload.batch_size, 16);
  EXPECT_EQ(s.workload.seq_len, 512);
  EXPECT_EQ(s.workload.batches, 1);
  // Locations for later checks.
  EXPECT_EQ(s.serving_workload_where.line, 6);
  EXPECT_EQ(s.arrival_where.line, 9);
  EXPECT_EQ(s.prompt_where.line, 10);
  EXPECT_EQ(s.serving_where.line, 14);
  EXPECT_EQ(s.deployment_where.line, 21);
  // Requests are generated from the scenario's seed.
  const auto reqs = generate_requests(w, s.seed);
  ASSERT_EQ(reqs.size(), 1000u);
  EXPECT_EQ(reqs[3].prompt_tokens, 512);
}

TEST(ScenarioServing, ResolvedYamlSpellsOutEveryServingValue) {
  const Scenario s = load_scenario_text(kFull, "s.yaml");
  const YAML::Node r = s.resolved;
  EXPECT_EQ(r["workload"]["kind"].as<std::string>(), "serving");
  EXPECT_EQ(r["workload"]["requests"].as<int>(), 1000);
  EXPECT_EQ(r["workload"]["warmup_requests"].as<int>(), 50);
  EXPECT_EQ(r["workload"]["arrival"]["process"].as<std::string>(), "poisson");
  EXPECT_DOUBLE_EQ(r["workload"]["arrival"]["rate_per_s"].as<double>(), 20.0);
  EXPECT_EQ(r["workload"]["prompt_tokens"].as<int>(), 512);
  EXPECT_EQ(r["workload"]["output_tokens"]["dist"].as<std::string>(), "uniform");
  EXPECT_EQ(r["workload"]["output_tokens"]["max"].as<int>(), 500);
  EXPECT_EQ(r["workload"]["routing"]["kind"].as<std::string>(), "skewed");
  EXPECT_FALSE(r["workload"]["batch_size"]);
  EXPECT_EQ(r["serving"]["max_num_seqs"].as<int>(), 128);
  EXPECT_EQ(r["serving"]["preemption"].as<std::string>(), "swap");
  EXPECT_FALSE(r["serving"]["chunked_prefill"].as<bool>());
  EXPECT_DOUBLE_EQ(r["serving"]["slo"]["tpot_ms"].as<double>(), 100.0);
  EXPECT_EQ(r["deployment"]["decode_gpus"].as<int>(), 8);
  EXPECT_EQ(r["model"]["max_context"].as<int>(), 32768);

  // Defaults are spelled out too: a gamma's cv, a normal's upper bound, the scheduler, colocation.
  const Scenario d = load_scenario_text(serving("{process: gamma, rate_per_s: 5}", "{dist: normal, mean: 400, std: 50}",
                                                "{dist: zipf, min: 10, max: 300}"),
                                        "s.yaml");
  const YAML::Node dr = d.resolved;
  EXPECT_DOUBLE_EQ(dr["workload"]["arrival"]["cv"].as<double>(), 1.0);
  EXPECT_EQ(dr["workload"]["prompt_tokens"]["max"].as<int>(), 600);
  EXPECT_EQ(dr["workload"]["prompt_tokens"]["min"].as<int>(), 1);
  EXPECT_DOUBLE_EQ(dr["workload"]["output_tokens"]["s"].as<double>(), 1.0);
  EXPECT_EQ(dr["serving"]["max_batched_tokens"].as<int>(), 8192);
  EXPECT_TRUE(dr["serving"]["chunked_prefill"].as<bool>());
  EXPECT_EQ(dr["serving"]["preemption"].as<std::string>(), "recompute");
  EXPECT_TRUE(dr["serving"]["slo"]["ttft_ms"].IsNull());
  EXPECT_EQ(dr["deployment"]["prefill_gpus"].as<int>(), 0);
  EXPECT_FALSE(d.deployment.disaggregated());
  EXPECT_FALSE(d.serving.slo_ttft_ms.has_value());
  EXPECT_EQ(d.workload.seq_len, 400);

  // The resolved scenario loads again to the same values.
  YAML::Emitter out;
  out << s.resolved;
  const Scenario again = load_scenario_text(out.c_str(), "resolved.yaml");
  EXPECT_EQ(again.serving_workload.requests, 1000);
  EXPECT_EQ(again.serving_workload.output.max, 500);
  EXPECT_EQ(again.serving.preemption, Preemption::kSwap);
  EXPECT_EQ(again.deployment.decode_gpus, 8);
}

TEST(ScenarioServing, PrefillScenariosAreUnchangedAndRejectServingKeys) {
  const std::string prefill =
      "name: p\nmodel: switch-base-8\nhardware: dgx1-v100\nworkload:\n  batch_size: 8\n  seq_len: 32\n";
  const Scenario s = load_scenario_text(prefill, "s.yaml");
  EXPECT_EQ(s.workload_kind, WorkloadKind::kPrefill);
  EXPECT_EQ(s.workload.batch_size, 8);
  EXPECT_FALSE(s.resolved["serving"]);
  EXPECT_FALSE(s.resolved["deployment"]);
  const std::string bad = prefill + "  requests: 10\nserving: {max_num_seqs: 4}\ndeployment: {prefill_gpus: 4}\n";
  expect_error(bad, 7, "requests", "unknown option 'requests'");
  expect_error(bad, 8, "serving", "'serving' is only allowed with workload.kind: serving");
  expect_error(bad, 9, "deployment", "'deployment' is only allowed with workload.kind: serving");
  // And prefill keys are unknown under serving.
  expect_error(serving("poisson", "512", "128", "  batch_size: 8\n"), 10, "batch_size", "unknown option 'batch_size'");
  expect_error(serving("poisson") + "  kind2: x\n", 10, "kind2", "unknown option 'kind2'");
  expect_error("name: t\nmodel: mixtral-8x7b\nhardware: dgx-a100\nworkload: {kind: servng}\n", 4, "servng",
               "did you mean 'serving'");
}

TEST(ScenarioServing, ArrivalProcessesAndTheirErrors) {
  const Scenario g = load_scenario_text(serving("{process: gamma, rate_per_s: 4, cv: 2}"), "s.yaml");
  EXPECT_EQ(g.serving_workload.arrival.process, ArrivalSpec::Process::kGamma);
  EXPECT_DOUBLE_EQ(g.serving_workload.arrival.cv, 2.0);
  const Scenario c = load_scenario_text(serving("{process: closed, clients: 8, think_s: 0.5}"), "s.yaml");
  EXPECT_EQ(c.serving_workload.arrival.clients, 8);
  EXPECT_DOUBLE_EQ(c.serving_workload.arrival.think_s, 0.5);
  const Scenario k = load_scenario_text(serving("constant"), "s.yaml");  // a name alone
  EXPECT_EQ(k.serving_workload.arrival.process, ArrivalSpec::Process::kConstant);

  std::string t = serving("{process: poisson, rate_per_s: 0}");
  expect_error(t, 7, "0}", "'rate_per_s' must be > 0");
  t = serving("{process: constant, rate_per_s: -2}");
  expect_error(t, 7, "-2", "'rate_per_s' must be >= 0");
  t = serving("{process: poisson, rate_per_s: .nan}");
  expect_error(t, 7, ".nan", "expected a finite number");
  t = serving("{process: gamma, rate_per_s: .inf}");
  expect_error(t, 7, ".inf", "expected a finite number");
  t = serving("{process: gamma, rate_per_s: 1, cv: 0}");
  expect_error(t, 7, "0}", "'cv' must be >= 0.001");
  t = serving("{process: gamma, rate_per_s: 1, cv: 1e300}");
  expect_error(t, 7, "1e300", "'cv' must be <= 1000");
  t = serving("{process: closed, clients: 0, think_s: -1}");
  expect_error(t, 7, "0,", "'clients' must be >= 1");
  expect_error(t, 7, "-1", "'think_s' must be >= 0");
  t = serving("{process: poison, rate_per_s: 1}");
  expect_error(t, 7, "poison", "unknown arrival process 'poison'; did you mean 'poisson'?");
  expect_error(t, 7, "poison", "poisson, gamma, constant, trace, closed");
  t = serving("{process: poisson, cv: 2}");
  expect_error(t, 7, "cv", "unknown option 'cv'");
}

TEST(ScenarioServing, LengthDistributionsAndTheirErrors) {
  const Scenario s = load_scenario_text(
      serving("poisson", "{dist: zipf, s: 1.5, min: 64, max: 4096}", "{dist: normal, mean: 200, std: 40, min: 10, max: 400}"),
      "s.yaml");
  EXPECT_EQ(s.serving_workload.prompt.kind, LengthDist::Kind::kZipf);
  EXPECT_DOUBLE_EQ(s.serving_workload.prompt.s, 1.5);
  EXPECT_EQ(s.serving_workload.output.kind, LengthDist::Kind::kNormal);
  EXPECT_EQ(s.serving_workload.output.largest(), 400);
  EXPECT_EQ(s.workload.seq_len, std::llround(s.serving_workload.prompt.expected()));

  std::string t = serving("poisson", "512", "0");
  expect_error(t, 9, "0", "'output_tokens' must be >= 1 token, got 0");
  t = serving("poisson", "-3", "{dist: uniform, min: 0, max: 10}");
  expect_error(t, 8, "-3", "'prompt_tokens' must be >= 1 token");
  expect_error(t, 9, "0,", "'min' of 'output_tokens' must be >= 1");
  t = serving("poisson", "{dist: uniform, min: 50, max: 10}");
  expect_error(t, 8, "10}", "'max' (10) of 'prompt_tokens' is smaller than 'min' (50)");
  t = serving("poisson", "{dist: normal, mean: 100, std: -1}");
  expect_error(t, 8, "-1", "'std' must be >= 0");
  t = serving("poisson", "512", "{dist: zipf, s: 0, min: 1, max: 100}");
  expect_error(t, 9, "0,", "'s' (the zipf exponent) must be > 0");
  t = serving("poisson", "{dist: unifrom, min: 1, max: 2}");
  expect_error(t, 8, "unifrom", "unknown length distribution 'unifrom'; did you mean 'uniform'?");
  expect_error(t, 8, "unifrom", "fixed, uniform, normal, zipf");
  t = serving("poisson", "{min: 1, max: 2}");
  expect_error(t, 8, "{", "must be an integer or a mapping with 'dist'");
  t = serving("poisson", "12.5");
  expect_error(t, 8, "12.5", "must be an integer number of tokens");
  t = serving("poisson", "{dist: uniform, min: 1}");
  expect_error(t, 8, "{", "missing required key 'max'");
}

TEST(ScenarioServing, RequestsLongerThanTheContextAreErrors) {
  const std::string t = serving("poisson", "{dist: uniform, min: 1, max: 32000}", "1000");
  expect_error(t, 8, "{", "is 33000 tokens, longer than the model's context (32768 tokens, model.max_context)");
  EXPECT_TRUE(errors_of(t, {"model.max_context=40000"}).empty());
  EXPECT_TRUE(errors_of(serving("poisson", "31768", "1000")).empty());  // exactly the context
  expect_error(serving("poisson", "{dist: normal, mean: 30000, std: 1000}", "1000"), 8, "{", "longer than the model's context");
  // A custom model without max_context is not checked.
  EXPECT_EQ(load_scenario_text("name: t\nmodel: {preset: mixtral-8x7b, max_context: 0}\nhardware: dgx-a100\n"
                               "workload: {kind: serving, prompt_tokens: 1000000}\n",
                               "s.yaml")
                .serving_workload.prompt.fixed,
            1000000);
}

TEST(ScenarioServing, WarmupMustLeaveRequestsToMeasure) {
  const std::string t = serving("poisson", "512", "128", "  warmup_requests: 100\n");
  expect_error(t, 10, "100", "'warmup_requests' (100) must be fewer than the requests (100)");
  EXPECT_TRUE(errors_of(serving("poisson", "512", "128", "  warmup_requests: 99\n")).empty());
}

TEST(ScenarioServing, TraceArrivalsReadTheCsv) {
  const std::string dir = source_root() + "/scenarios/serving";
  const std::string text = "name: t\nmodel: mixtral-8x7b\nhardware: dgx-a100\nworkload:\n  kind: serving\n"
                           "  arrival: {process: trace, file: traces/example.csv}\n";
  const Scenario s = load_scenario_text(text, "s.yaml", {}, dir);
  const ServingWorkload& w = s.serving_workload;
  EXPECT_EQ(w.arrival.process, ArrivalSpec::Process::kTrace);
  EXPECT_EQ(w.requests, 200);  // every row by default
  EXPECT_EQ(w.prompt.smallest(), 100);
  EXPECT_EQ(w.prompt.largest(), 2000);
  EXPECT_EQ(s.workload.seq_len, 544);  // the trace's mean prompt
  EXPECT_EQ(s.resolved["workload"]["arrival"]["file"].as<std::string>(), w.arrival.resolved_file);
  EXPECT_EQ(s.resolved["workload"]["requests"].as<int>(), 200);
  EXPECT_FALSE(s.resolved["workload"]["prompt_tokens"]);
  EXPECT_EQ(generate_requests(w, s.seed).size(), 200u);
  const Scenario fewer = load_scenario_text(text + "  requests: 20\n", "s.yaml", {}, dir);
  EXPECT_EQ(generate_requests(fewer.serving_workload, 1).size(), 20u);

  // Lengths cannot also be given; nor can a missing or unreadable file.
  expect_error(text + "  prompt_tokens: 100\n", 7, "prompt_tokens", "cannot be set with arrival.process: trace", {}, dir);
  const std::string missing = "name: t\nmodel: mixtral-8x7b\nhardware: dgx-a100\nworkload:\n  kind: serving\n"
                              "  arrival: {process: trace, file: nope.csv}\n";
  expect_error(missing, 6, "nope.csv", "does not exist", {}, dir);
  expect_error(serving("{process: trace, file: traces}"), 7, "traces", "is a directory", {}, dir);
  expect_error(serving("trace"), 7, "trace", "arrival process 'trace' needs 'file'");
  expect_error(serving("{process: trace}"), 7, "{", "missing required key 'file'");
}

TEST(ScenarioServing, BadTracesAreLocatedInTheCsv) {
  const auto dir = temp_dir();
  write(dir / "cols.csv", "arrived_at_s,prompt_tokens\n0,10\n");
  write(dir / "unsorted.csv", "arrived_at_s,prompt_tokens,output_tokens\n1,10,5\n0.5,10,5\n");
  write(dir / "long.csv", "arrived_at_s,prompt_tokens,output_tokens\n0,10,5\n1,32000,1000\n");
  auto trace_text = [](const std::string& file) {
    return "name: t\nmodel: mixtral-8x7b\nhardware: dgx-a100\nworkload:\n  kind: serving\n"
           "  arrival: {process: trace, file: " + file + "}\n";
  };
  auto errs = [&](const std::string& file) { return joined(errors_of(trace_text(file), {}, dir.string())); };
  const std::string cols = errs("cols.csv");
  EXPECT_NE(cols.find((dir / "cols.csv").string() + ":1:1: error: request trace header lacks column 'output_tokens'"),
            std::string::npos)
      << cols;
  const std::string unsorted = errs("unsorted.csv");
  EXPECT_NE(unsorted.find((dir / "unsorted.csv").string() + ":3:1: error: 'arrived_at_s' (0.5) is earlier"),
            std::string::npos)
      << unsorted;
  const std::string long_rows = errs("long.csv");
  EXPECT_NE(long_rows.find((dir / "long.csv").string() +
                           ":3:1: error: request 1 (32000 prompt + 1000 output tokens) is longer than the model's context"),
            std::string::npos)
      << long_rows;
  std::filesystem::remove_all(dir);
}

TEST(ScenarioServing, DeploymentPoolsMustFitTheCluster) {
  // 2 nodes x 8 GPUs.
  EXPECT_TRUE(errors_of(serving("poisson", "512", "128", "deployment: {prefill_gpus: 8, decode_gpus: 8}\n")).empty());
  std::string t = serving("poisson", "512", "128", "deployment: {prefill_gpus: 16, decode_gpus: 8}\n");
  expect_error(t, 10, "{", "prefill_gpus + decode_gpus (24) exceeds the cluster's 16 GPUs");
  t = serving("poisson", "512", "128", "deployment: {prefill_gpus: 8}\n");
  expect_error(t, 10, "{", "'decode_gpus' is 0 but 'prefill_gpus' is not");
  t = serving("poisson", "512", "128", "deployment:\n  prefill_gpus: 0\n  decode_gpus: 8\n");
  expect_error(t, 11, "0", "'prefill_gpus' is 0 but 'decode_gpus' is not");
  t = serving("poisson", "512", "128", "deployment: {prefill_gpus: 4, decode_gpus: 12}\n");
  expect_error(t, 10, "4,", "'prefill_gpus' (4) is neither a whole number of nodes (8 GPUs each) nor within a single-node cluster");
  expect_error(t, 10, "12}", "'decode_gpus' (12) is neither a whole number of nodes");
  // One node: any split of its GPUs.
  EXPECT_TRUE(errors_of(serving("poisson", "512", "128", "deployment: {prefill_gpus: 3, decode_gpus: 5}\n", "dgx-a100"))
                  .empty());
  t = serving("poisson", "512", "128", "deployment: {prefill_gpus: 3, decode_gpus: 6}\n", "dgx-a100");
  expect_error(t, 10, "{", "exceeds the cluster's 8 GPUs");
  t = serving("poisson", "512", "128", "deployment: {prefill_gpu: 3}\n", "dgx-a100");
  expect_error(t, 10, "prefill_gpu:", "did you mean 'prefill_gpus'");
}

TEST(ScenarioServing, DeploymentLayoutsAreCheckedAtTheirKeys) {
  // Mixtral: 32 heads; 2 DGX A100 nodes of 8 GPUs.
  std::string t = serving("poisson", "512", "128", "deployment:\n  tensor_parallel: 3\n");
  expect_error(t, 11, "3", "tensor_parallel (3) must divide the model's 32 attention heads");
  expect_error(t, 11, "3", "must divide the GPUs of a node (8) or be a multiple of them");
  // A group of whole nodes: TP16 over the two nodes, its all-reduces across the NICs.
  EXPECT_TRUE(errors_of(serving("poisson", "512", "128", "deployment: {tensor_parallel: 16}\n")).empty());
  t = serving("poisson", "512", "128", "deployment: {tensor_parallel: 4, data_parallel: 2, instances: 3}\n");
  expect_error(t, 10, "3}", "tensor_parallel x data_parallel x instances (4 x 2 x 3) needs more GPUs than the 16 it has");
  t = serving("poisson", "512", "128", "deployment: {tensor_parallel: 2, data_parallel: many}\n");
  expect_error(t, 10, "many}", "'data_parallel' must be auto or a whole number");
  t = serving("poisson", "512", "128", "deployment: {tensor_parallel: 4, data_parallel: 3}\n");
  expect_error(t, 10, "3}", "an instance of 12 GPUs is neither part of one node nor whole nodes");
  t = serving("poisson", "512", "128", "deployment: {expert_parallel: false}\npolicy: eplb\n");
  expect_error(t, 11, "eplb", "policy 'eplb' needs expert parallelism");
  EXPECT_TRUE(errors_of(serving("poisson", "512", "128", "deployment: {expert_parallel: false}\npolicy: tp-experts\n")).empty());
  t = serving("poisson", "512", "128", "deployment: {prefill_gpus: 8, decode_gpus: 8, tensor_parallel: 2}\n");
  expect_error(t, 10, "2}", "'tensor_parallel' applies to a colocated deployment");
  // Resolution: instances auto fills the cluster with TP x DP instances.
  const Scenario s = load_scenario_text(
      serving("poisson", "512", "128", "deployment: {tensor_parallel: 2, data_parallel: 2}\n"), "s.yaml");
  EXPECT_EQ(s.deployment.colocated.instances, 4);
  const Scenario d = load_scenario_text(serving("poisson", "512", "128", ""), "d.yaml");
  EXPECT_EQ(d.deployment.colocated.data_parallel, 16);
  EXPECT_EQ(d.deployment.colocated.instances, 1);
  const Scenario p = load_scenario_text(
      serving("poisson", "512", "128",
              "deployment:\n  prefill: {gpus: 8, tensor_parallel: 8}\n  decode: {gpus: 8, data_parallel: 8}\n"),
      "p.yaml");
  EXPECT_EQ(p.deployment.prefill_gpus, 8);
  EXPECT_EQ(p.deployment.prefill.tensor_parallel, 8);
  EXPECT_EQ(p.deployment.prefill.instances, 1);
  EXPECT_EQ(p.deployment.decode.data_parallel, 8);
}

TEST(ScenarioServing, EngineProfilesGiveTheSchedulerDefaults) {
  const Scenario none = load_scenario_text(serving("poisson", "512", "128", ""), "n.yaml");
  EXPECT_EQ(none.serving.engine.name, "none");
  EXPECT_EQ(none.serving.max_num_seqs, 256);
  const Scenario trt = load_scenario_text(serving("poisson", "512", "128", "serving: {engine: trtllm}\n"), "t.yaml");
  EXPECT_EQ(trt.serving.admission, Admission::kReserveFull);
  EXPECT_TRUE(trt.serving.kv_cache_free_memory_fraction.has_value());
  const Scenario own = load_scenario_text(
      serving("poisson", "512", "128", "serving: {engine: {preset: vllm, host_step_us: 50}, max_num_seqs: 64}\n"), "o.yaml");
  EXPECT_EQ(own.serving.max_num_seqs, 64);
  EXPECT_DOUBLE_EQ(own.serving.engine.host_step_us, 50.0);
  EXPECT_TRUE(own.serving.engine.cuda_graphs);
  std::string t = serving("poisson", "512", "128", "serving:\n  engine: {preset: vllm, graph_batch_sizes: [8, 4]}\n");
  expect_error(t, 11, "[8", "'graph_batch_sizes' must be ascending");
  t = serving("poisson", "512", "128", "serving:\n  engine: sglangg\n");
  expect_error(t, 11, "sglangg", "did you mean 'sglang'");
}

TEST(ScenarioServing, SchedulerKeysAreValidated) {
  std::string t = serving("poisson", "512", "128", "serving:\n  gpu_memory_utilization: 0\n  preemption: swapp\n");
  expect_error(t, 11, "0", "'gpu_memory_utilization' must be in (0, 1]");
  expect_error(t, 12, "swapp", "did you mean 'swap'");
  t = serving("poisson", "512", "128", "serving:\n  gpu_memory_utilization: 1.5\n  max_num_seqs: 0\n  slo: {ttft_ms: 0}\n");
  expect_error(t, 11, "1.5", "'gpu_memory_utilization' must be <= 1");
  expect_error(t, 12, "0", "'max_num_seqs' must be >= 1");
  expect_error(t, 13, "0}", "'ttft_ms' must be > 0");
  t = serving("poisson", "512", "128", "serving:\n  max_seqs: 8\n  slo: {ttft: 5}\n");
  expect_error(t, 11, "max_seqs", "unknown option 'max_seqs'");
  expect_error(t, 12, "ttft", "unknown option 'ttft' (valid: ttft_ms, tpot_ms)");
  const Scenario s = load_scenario_text(serving("poisson", "512", "128", "serving: {slo: {tpot_ms: 50}}\n"), "s.yaml");
  EXPECT_FALSE(s.serving.slo_ttft_ms.has_value());
  EXPECT_DOUBLE_EQ(s.serving.slo_tpot_ms.value_or(0.0), 50.0);
}

TEST(ScenarioServing, EveryProblemIsReportedAtOnce) {
  const std::string t = serving("{process: poisson, rate_per_s: 0}", "{dist: uniform, min: 9, max: 3}", "0",
                                "serving: {kv_block_tokens: 0}\ndeployment: {prefill_gpus: 5, decode_gpus: 5}\n");
  const auto d = errors_of(t);
  EXPECT_GE(d.size(), 5u) << joined(d);
  expect_error(t, 7, "0}", "'rate_per_s' must be > 0");
  expect_error(t, 8, "3}", "smaller than 'min'");
  expect_error(t, 9, "0", "'output_tokens' must be >= 1");
  expect_error(t, 10, "0}", "'kv_block_tokens' must be >= 1");
  expect_error(t, 11, "5,", "'prefill_gpus' (5) is neither a whole number of nodes");
}

}  // namespace moesim
