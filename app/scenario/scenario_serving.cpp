#include "app/scenario/scenario_serving.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>

#include "app/scenario/scenario.hpp"
#include "app/scenario/scenario_speculative.hpp"
#include "serving/request_trace.hpp"

namespace moesim {
namespace {

// The longest prompt or output a length distribution may give (tokens): past any context window,
// short of the 32-bit token counts it would overflow downstream.
constexpr double kMaxRequestTokens = 1e8;
constexpr const char* kDefaultPrompt = "512";
constexpr const char* kDefaultOutput = "128";

ParamSpec int_param(const std::string& name, const std::string& def, const std::string& unit, const std::string& help,
                    std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt) {
  return ParamSpec{name, ParamType::kInt, def, unit, help, min, max, {}};
}
ParamSpec float_param(const std::string& name, const std::string& def, const std::string& unit,
                      const std::string& help, std::optional<double> min = std::nullopt,
                      std::optional<double> max = std::nullopt) {
  return ParamSpec{name, ParamType::kFloat, def, unit, help, min, max, {}};
}

SourceLocation loc(const SourceMap& src, const YAML::Node& n, const YAML::Node& parent) {
  return n ? src.locate(n) : src.locate(parent);
}
// Where a key of a set is: its value when written, else the mapping (or `fallback`).
SourceLocation at_key(const ParamSet& p, const std::string& key, const SourceLocation& fallback) {
  const SourceLocation w = p.where(key);
  return w.line ? w : fallback;
}

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(12);
  os << v;
  return os.str();
}

bool parse_process(const std::string& name, ArrivalSpec::Process& out) {
  const auto& names = arrival_process_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) return false;
  out = static_cast<ArrivalSpec::Process>(it - names.begin());
  return true;
}
bool parse_dist(const std::string& name, LengthDist::Kind& out) {
  const auto& names = length_dist_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) return false;
  out = static_cast<LengthDist::Kind>(it - names.begin());
  return true;
}

// `workload.arrival`: a process name or {process, <its parameters>}. Trace rows are returned in
// `rows` (empty unless a trace was read without errors).
ArrivalSpec read_arrival(const YAML::Node& node, const YAML::Node& parent, Scenario& s, const SourceMap& src,
                         Diagnostics& diags, std::vector<TraceRequest>& rows, YAML::Node& res) {
  ArrivalSpec a;
  s.arrival_where = loc(src, node, parent);
  report_null_value(node, "arrival", src, diags);
  const bool given = node.IsDefined() && !node.IsNull();
  YAML::Node map;  // the options, when a mapping
  YAML::Node name_node;
  bool named = false;
  if (given && node.IsScalar()) {
    name_node.reset(node);
    named = true;
  } else if (given && node.IsMap()) {
    map.reset(node);
    // A const mapping without the key yields an invalid node, which reset() refuses: look first.
    named = node["process"].IsDefined();
    if (named) name_node.reset(node["process"]);
    if (!named) {
      diags.error(s.arrival_where, "'arrival' needs a 'process' (valid: " + [] {
        std::string v;
        for (const auto& n : arrival_process_names()) v += (v.empty() ? "" : ", ") + n;
        return v;
      }() + ")");
      return a;
    }
  } else if (given) {
    diags.error(s.arrival_where, "'arrival' must be a process name or a mapping with 'process'");
    return a;
  }
  const std::string name = named ? (name_node.IsScalar() ? name_node.Scalar() : std::string()) : "poisson";
  if (!parse_process(name, a.process)) {
    diags.error(src.locate(name_node),
                unknown_name_message("arrival process", name, arrival_process_names()));
    return a;
  }
  if (a.process == ArrivalSpec::Process::kTrace && !map.IsMap()) {
    diags.error(s.arrival_where, "arrival process 'trace' needs 'file' (write {process: trace, file: PATH.csv})");
    return a;
  }
  const ParamSet p = read_params(map, arrival_specs(a.process), src, diags, {"process"});
  res = p.to_yaml();
  res["process"] = name;
  using P = ArrivalSpec::Process;
  if (a.process == P::kPoisson || a.process == P::kGamma || a.process == P::kConstant) {
    a.rate_per_s = p.get_float("rate_per_s");
    if (a.rate_per_s <= 0.0)
      diags.error(at_key(p, "rate_per_s", s.arrival_where), "'rate_per_s' must be > 0, got " + fmt(a.rate_per_s));
  }
  if (a.process == P::kGamma) a.cv = p.get_float("cv");
  if (a.process == P::kClosed) {
    a.clients = static_cast<int>(p.get_int("clients"));
    a.think_s = p.get_float("think_s");
  }
  if (a.process == P::kTrace && p.given("file")) {
    a.file = p.get_string("file");
    const std::filesystem::path path = std::filesystem::path(a.file).is_absolute()
                                           ? std::filesystem::path(a.file)
                                           : std::filesystem::path(s.base_dir) / a.file;
    a.resolved_file = path.string();
    // Absolute, so scenario.resolved.yaml re-runs from its results folder.
    res["file"] = std::filesystem::absolute(path).lexically_normal().string();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      diags.error(p.where("file"), "request trace '" + a.resolved_file + "' does not exist");
    } else if (std::filesystem::is_directory(path, ec)) {
      diags.error(p.where("file"), "request trace '" + a.resolved_file + "' is a directory, not a CSV file");
    } else {
      try {
        rows = read_request_trace(a.resolved_file);
      } catch (const InputError& e) {
        for (const auto& d : e.diagnostics())
          diags.error(d.where.line ? d.where : p.where("file"), d.message);
      }
    }
  }
  return a;
}

// A token-length distribution: an int, or {dist: fixed|uniform|normal|zipf, <its parameters>}.
LengthDist read_length(const YAML::Node& node, const std::string& key, const std::string& def,
                       const YAML::Node& parent, const SourceMap& src, Diagnostics& diags, YAML::Node& res) {
  LengthDist d;
  const SourceLocation where = loc(src, node, parent);
  report_null_value(node, key, src, diags);
  const bool given = node.IsDefined() && !node.IsNull();
  if (!given || node.IsScalar()) {
    const std::string text = given ? node.Scalar() : def;
    double v = 0.0;
    try {
      v = YAML::Load(text).as<double>();
    } catch (const YAML::Exception&) {
      diags.error(where, "'" + key + "' must be an integer number of tokens or a mapping with 'dist', got '" +
                             text + "'");
      return d;
    }
    if (!std::isfinite(v) || std::floor(v) != v) {
      diags.error(where, "'" + key + "' must be an integer number of tokens, got '" + text + "'");
      return d;
    }
    if (v > kMaxRequestTokens) {
      diags.error(where, "'" + key + "' must be at most 100000000 tokens, got " + text);
      return d;
    }
    if (v < 1.0) diags.error(where, "'" + key + "' must be >= 1 token, got " + text);
    d.kind = LengthDist::Kind::kFixed;
    d.fixed = static_cast<std::int64_t>(v);
    res = d.fixed;
    return d;
  }
  if (!node.IsMap() || !node["dist"] || !node["dist"].IsScalar()) {
    diags.error(where, "'" + key + "' must be an integer or a mapping with 'dist' (" + [] {
      std::string v;
      for (const auto& n : length_dist_names()) v += (v.empty() ? "" : ", ") + n;
      return v;
    }() + ")");
    return d;
  }
  const std::string name = node["dist"].Scalar();
  if (!parse_dist(name, d.kind)) {
    diags.error(src.locate(node["dist"]), unknown_name_message("length distribution", name, length_dist_names()));
    return d;
  }
  const ParamSet p = read_params(node, length_dist_specs(d.kind), src, diags, {"dist"});
  using K = LengthDist::Kind;
  switch (d.kind) {
    case K::kFixed:
      d.fixed = p.get_int("value");
      if (d.fixed < 1) diags.error(at_key(p, "value", where), "'" + key + "' must be >= 1 token, got " + std::to_string(d.fixed));
      break;
    case K::kUniform:
    case K::kZipf:
    case K::kNormal:
      d.min = p.get_int("min");
      d.max = p.get_int("max");
      if (d.min < 1)
        diags.error(at_key(p, "min", where), "'min' of '" + key + "' must be >= 1 (every request has at least one " +
                                                 "token), got " + std::to_string(d.min));
      if (d.kind == K::kZipf) {
        d.s = p.get_float("s");
        if (d.s <= 0.0) diags.error(at_key(p, "s", where), "'s' (the zipf exponent) must be > 0, got " + fmt(d.s));
      }
      if (d.kind == K::kNormal) {
        d.mean = p.get_float("mean");
        d.std = p.get_float("std");
      }
      // Without `max` a normal is truncated at mean + 4·std, which must respect the limit too.
      if (d.kind == K::kNormal && !p.given("max") && d.largest() > static_cast<std::int64_t>(kMaxRequestTokens))
        diags.error(at_key(p, "std", where), "'" + key + "': a normal without 'max' is truncated at mean + 4 std = " +
                                                 std::to_string(d.largest()) +
                                                 " tokens, past the 100000000-token limit; give 'max'");
      if (d.min > d.max && (d.kind != K::kNormal || p.given("max")))
        diags.error(at_key(p, "max", where), "'max' (" + std::to_string(d.max) + ") of '" + key +
                                                 "' is smaller than 'min' (" + std::to_string(d.min) + ")");
      break;
  }
  res = p.to_yaml();
  res["dist"] = name;
  if (d.kind == K::kNormal) res["max"] = d.largest();  // spelled out when defaulted
  return d;
}

// Finds the key node of `key` in `map` (for errors about the key itself).
YAML::Node key_node(const YAML::Node& map, const std::string& key) {
  if (map && map.IsMap())
    for (const auto& kv : map)
      if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.first;
  return YAML::Node();
}

}  // namespace

const std::vector<std::string>& arrival_process_names() {
  // Order matches ArrivalSpec::Process.
  static const std::vector<std::string> names{"poisson", "gamma", "constant", "trace", "closed"};
  return names;
}

const std::vector<std::string>& length_dist_names() {
  // Order matches LengthDist::Kind.
  static const std::vector<std::string> names{"fixed", "uniform", "normal", "zipf"};
  return names;
}

std::vector<ParamSpec> serving_workload_specs() {
  return {
      ParamSpec{"kind", ParamType::kString, "prefill", "", "workload kind", {}, {}, {"prefill", "serving"}},
      // Every request is held for the whole run (its timings feed the percentiles): the bound keeps
      // that memory to a few GB, where 10^9 requests would pass validation and then exhaust it.
      int_param("requests", "100", "requests",
                "requests to simulate (with a trace: default every row, at most the rows; rows beyond it are ignored)", 1.0, 1e7),
      int_param("warmup_requests", "0", "requests",
                "the first requests (by id) are simulated but left out of the metrics; fewer than requests", 0.0, 1e7),
      ParamSpec{"arrival", ParamType::kString, "poisson", "",
                "arrival process: a name or {process: poisson|gamma|constant|trace|closed, ...}", {}, {}, {}},
      int_param("prompt_tokens", kDefaultPrompt, "tokens",
                "prompt length: an integer or {dist: uniform|normal|zipf|fixed, ...} (not with a trace)", 1.0),
      int_param("output_tokens", kDefaultOutput, "tokens",
                "output length: an integer or {dist: uniform|normal|zipf|fixed, ...} (not with a trace)", 1.0),
      ParamSpec{"prompt_cached", ParamType::kBool, "false", "",
                "requests arrive with their prompt already in the KV cache of the rank that decodes them: "
                "only decode steps run (steady-state decode measurements)", {}, {}, {}},
  };
}

std::vector<ParamSpec> arrival_specs(ArrivalSpec::Process process) {
  using P = ArrivalSpec::Process;
  switch (process) {
    case P::kPoisson:
      return {float_param("rate_per_s", "1", "requests/s", "mean arrival rate (exponential gaps)", 0.0)};
    case P::kGamma:
      return {float_param("rate_per_s", "1", "requests/s", "mean arrival rate (gaps have mean 1/rate)", 0.0),
              float_param("cv", "1", "",
                          "coefficient of variation of the gaps (1: Poisson; > 1: bursty; within 0.001 and 1000, "
                          "past which the gamma's shape 1/cv^2 leaves the floating-point range)",
                          1e-3, 1e3)};
    case P::kConstant:
      return {float_param("rate_per_s", "1", "requests/s", "arrival rate: request i arrives at i/rate", 0.0)};
    case P::kTrace:
      return {ParamSpec{"file", ParamType::kString, "", "",
                        "CSV with columns arrived_at_s,prompt_tokens,output_tokens (relative to the scenario)",
                        {}, {}, {}}};
    case P::kClosed:
      return {int_param("clients", "1", "", "concurrent clients, each with one request in flight", 1.0, 1e7),
              float_param("think_s", "0", "s", "pause between a client's response and its next request", 0.0)};
  }
  return {};
}

std::vector<ParamSpec> length_dist_specs(LengthDist::Kind kind) {
  using K = LengthDist::Kind;
  const double t = kMaxRequestTokens;
  switch (kind) {
    case K::kFixed: return {int_param("value", "", "tokens", "every request's length", 1.0, t)};
    case K::kUniform:
      return {int_param("min", "", "tokens", "smallest length (inclusive)", -t, t),
              int_param("max", "", "tokens", "largest length (inclusive)", -t, t)};
    case K::kNormal:
      return {float_param("mean", "", "tokens", "mean before truncation", -t, t),
              float_param("std", "", "tokens", "standard deviation before truncation", 0.0, t),
              int_param("min", "1", "tokens", "lower truncation (inclusive)", -t, t),
              int_param("max", "0", "tokens", "upper truncation (inclusive; 0: mean + 4 std, rounded up)", 0.0, t)};
    case K::kZipf:
      return {float_param("s", "1", "", "exponent: P(n) ∝ (n - min + 1)^-s, favouring short lengths", 0.0, 100.0),
              int_param("min", "", "tokens", "smallest length (inclusive), the most likely", -t, t),
              int_param("max", "", "tokens", "largest length (inclusive)", -t, t)};
  }
  return {};
}

std::vector<ParamSpec> scheduler_specs(const EngineProfile& e) {
  return {
      int_param("max_num_seqs", std::to_string(e.max_num_seqs), "sequences",
                "running sequences per rank (vLLM max_num_seqs; default: the engine's)", 1.0, 1e7),
      int_param("max_batched_tokens", std::to_string(e.max_batched_tokens), "tokens",
                "new tokens per rank per step (vLLM max_num_batched_tokens; default: the engine's)", 1.0, 1e9),
      ParamSpec{"chunked_prefill", ParamType::kBool, e.chunked_prefill ? "true" : "false", "",
                "a prompt may be split over steps", {}, {}, {}},
      int_param("kv_block_tokens", "16", "tokens", "tokens per paged KV-cache block", 1.0, 1e6),
      ParamSpec{"preemption", ParamType::kString, "recompute", "",
                "what happens to a preempted sequence's KV cache", {}, {}, {"recompute", "swap"}},
      ParamSpec{"admission", ParamType::kString, e.admission, "",
                "on-demand: KV blocks taken as contexts grow, the newest request preempted when full (vLLM); "
                "reserve-full: blocks for prompt + every output token reserved at admission, never preempting "
                "(TensorRT-LLM GUARANTEED_NO_EVICT)",
                {}, {}, {"on-demand", "reserve-full"}},
      ParamSpec{"step_mix", ParamType::kString, e.step_mix, "",
                "mixed: decodes and prompt chunks share a step (vLLM V1, TensorRT-LLM in-flight batching); "
                "prefill-first: a step prefills whenever there is prefill to run, else decodes (SGLang without "
                "--enable-mixed-chunk)",
                {}, {}, {"mixed", "prefill-first"}},
      float_param("gpu_memory_utilization", fmt(e.gpu_memory_utilization), "",
                  "fraction of GPU memory the engine may use, in (0, 1]", 0.0, 1.0),
      float_param("kv_cache_free_memory_fraction", e.kv_cache_free_memory_fraction ? fmt(*e.kv_cache_free_memory_fraction) : "~", "",
                  "KV cache = this fraction of the memory left after weights and activations (TensorRT-LLM "
                  "kv_cache_free_gpu_mem_fraction; absent: gpu_memory_utilization applies)", 0.0, 1.0),
      float_param("progress_interval_s", "0.5", "s", "CLI progress refresh (does not affect results)", 0.0),
      int_param("layer_sampling", "1", "MoE layers",
                "approximation for large searches: each step plans one MoE layer in every N consecutive ones "
                "(rotating with the step), and its times and bytes count N times over; 1 = every layer (exact), "
                "N >= the model's MoE layers = one MoE layer per step. "
                "Measured error and speed: docs/benchmarks.md, Serving speed",
                1.0, 256.0),
      ParamSpec{"two_batch_overlap", ParamType::kBool, "false", "",
                "split each step into two micro-batches whose computation overlaps the other's expert dispatch and "
                "combine (SGLang --enable-two-batch-overlap; DeepSeek's inference system)", {}, {}, {}},
  };
}


std::vector<ParamSpec> slo_specs() {
  return {float_param("ttft_ms", "~", "ms", "time-to-first-token SLO for goodput (absent: none)", 0.0),
          float_param("tpot_ms", "~", "ms", "time-per-output-token SLO for goodput (absent: none)", 0.0)};
}

std::vector<ParamSpec> layout_specs(bool pool) {
  std::vector<ParamSpec> v{
      int_param("tensor_parallel", "1", "GPUs",
                "GPUs of one attention group: heads split, hidden state all-reduced after attention and after the "
                "FFN/MoE block (vLLM --tensor-parallel-size, SGLang --tp, TensorRT-LLM tp_size)", 1.0, 1024.0),
      ParamSpec{"data_parallel", ParamType::kString, "auto", "groups",
                "attention groups per instance, each with its own scheduler and KV cache (SGLang --dp with "
                "--enable-dp-attention, TensorRT-LLM enable_attention_dp, vLLM --data-parallel-size); auto: the "
                "GPUs left for one instance of tensor_parallel-GPU groups, 1 when instances is auto too and "
                "tensor_parallel is set", {}, {}, {}},
      ParamSpec{"expert_parallel", ParamType::kBool, "true", "",
                "experts spread over the instance's tensor_parallel x data_parallel GPUs by the policy; false: "
                "every expert tensor-parallel inside its attention group (vLLM without --enable-expert-parallel, "
                "TensorRT-LLM moe_tp_size = tp_size)", {}, {}, {}},
      int_param("moe_expert_parallel", "1", "GPUs",
                "with expert_parallel: false, each attention group's experts split over this many of its GPUs and "
                "each expert sharded over the other tensor_parallel / N (TensorRT-LLM moe_ep_size = N, moe_tp_size = "
                "tp_size / N; e.g. --tp 8 --ep 2); 1: every expert sharded over the whole group", 1.0, 1024.0),
      ParamSpec{"instances", ParamType::kString, "auto", "",
                "independent copies of the model (auto: GPUs / (tensor_parallel x data_parallel), or 1 when "
                "data_parallel is auto); a request goes to the least loaded rank of any instance", {}, {}, {}},
  };
  if (pool) v.insert(v.begin(), int_param("gpus", "0", "GPUs", "GPUs of the pool (or prefill_gpus/decode_gpus)", 0.0, 1e6));
  return v;
}

std::vector<ParamSpec> deployment_specs() {
  std::vector<ParamSpec> v{
      int_param("prefill_gpus", "0", "GPUs", "prefill pool: GPUs [0, prefill_gpus) (0 with decode_gpus 0: colocated)", 0.0, 1e6),
      int_param("decode_gpus", "0", "GPUs", "decode pool: the next decode_gpus GPUs", 0.0, 1e6),
      int_param("attention_gpus", "0", "GPUs",
                "attention-FFN disaggregation: GPUs [0, attention_gpus) run every layer's attention data-parallel "
                "(each request's KV cache on one), the next expert_gpus host the experts; run in the serving "
                "engine's layer-queue mode (policy amoe: AMoE's μ-queues, or ping-pong with micro_batches). 0: no split",
                0.0, 1e6),
      int_param("expert_gpus", "0", "GPUs", "attention-FFN disaggregation: the expert GPUs, after the attention GPUs",
                0.0, 1e6),
      ParamSpec{"alltoall", ParamType::kString, "nccl", "",
                "kernels of an expert-parallel policy's token dispatch and combine: nccl (pairwise sends on the "
                "flow network), deepep-normal or deepep-ll (DeepEP's normal / low-latency kernels, priced in closed "
                "form: SGLang --moe-a2a-backend deepep with --deepep-mode normal / low_latency)",
                {}, {}, {"nccl", "deepep-normal", "deepep-ll"}}};
  for (ParamSpec& p : layout_specs(false)) v.push_back(std::move(p));
  return v;
}

namespace {

// "auto" (0) or a whole number in [1, 10^6]; a located error otherwise.
int auto_or_count(const ParamSet& p, const std::string& key, const SourceLocation& fallback, Diagnostics& diags) {
  const std::string text = p.get_string(key);
  if (text == "auto") return 0;
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 1 && v <= 1000000) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  diags.error(at_key(p, key, fallback), "'" + key + "' must be auto or a whole number from 1 to 1000000, got '" + text + "'");
  return 1;
}

// `serving.engine`: a preset name, or {preset: NAME, <any part overridden>}.
EngineProfile read_engine(const YAML::Node& node, const YAML::Node& parent, const SourceMap& src, Diagnostics& diags,
                          YAML::Node& res) {
  const Registry<EngineProfile>& reg = engine_profiles();
  EngineProfile e = reg.get("none").value;
  if (report_null_value(node, "engine", src, diags) || !node || node.IsNull()) {
    res = "none";
    return e;
  }
  YAML::Node name_node = node.IsMap() && node["preset"] ? node["preset"] : node;
  if (!name_node.IsScalar()) {
    diags.error(loc(src, node, parent), "'engine' must be an engine name (" + [&] {
      std::string v;
      for (const auto& n : reg.names()) v += (v.empty() ? "" : ", ") + n;
      return v;
    }() + ") or a mapping {preset: NAME, ...}");
    res = "none";
    return e;
  }
  const std::string name = node.IsMap() && !node["preset"] ? std::string("none") : name_node.Scalar();
  const auto* entry = reg.find(name);
  if (!entry) {
    diags.error(src.locate(name_node), unknown_name_message(reg.family(), name, reg.names()));
    res = "none";
    return e;
  }
  e = entry->value;
  if (!node.IsMap()) {
    res = name;
    return e;
  }
  const ParamSet p = read_params(node, engine_profile_specs(e), src, diags);
  apply_engine_params(p, e);
  const auto& sizes = e.graph_batch_sizes;
  for (std::size_t i = 1; i < sizes.size(); ++i)
    if (sizes[i] <= sizes[i - 1]) {
      diags.error(at_key(p, "graph_batch_sizes", src.locate(node)),
                  "'graph_batch_sizes' must be ascending without repeats, got " + std::to_string(sizes[i - 1]) +
                      " before " + std::to_string(sizes[i]));
      break;
    }
  res = p.to_yaml();
  res["preset"] = name;
  return e;
}

// A pool's layout, its auto values resolved against the pool's `gpus` (when known: cluster_ok).
ParallelLayout read_layout(const ParamSet& p, int gpus, const std::string& what, const Scenario& s,
                           const SourceLocation& where, bool cluster_ok, Diagnostics& diags, YAML::Node& res) {
  ParallelLayout l;
  l.tensor_parallel = static_cast<int>(p.get_int("tensor_parallel"));
  l.expert_parallel = p.get_bool("expert_parallel");
  l.moe_expert_parallel = static_cast<int>(p.get_int("moe_expert_parallel"));
  const int dp = auto_or_count(p, "data_parallel", where, diags);
  const int inst = auto_or_count(p, "instances", where, diags);
  const int tp = std::max(1, l.tensor_parallel);
  const int heads = s.model.attention.heads;
  if (heads > 0 && heads % tp != 0)
    diags.error(at_key(p, "tensor_parallel", where),
                what + "tensor_parallel (" + std::to_string(tp) + ") must divide the model's " + std::to_string(heads) +
                    " attention heads (each GPU of a group runs the same number of heads)");
  const int per_node = s.hardware.gpus_per_node;
  // A group is part of one node or whole nodes: its all-reduces run over NVLink inside a node, and
  // over NVLink and the NICs (NCCL's inter-node algorithms) when it spans nodes (TP16 on two DGXs).
  if (cluster_ok && per_node > 0 && per_node % tp != 0 && tp % per_node != 0)
    diags.error(at_key(p, "tensor_parallel", where),
                what + "tensor_parallel (" + std::to_string(tp) + ") must divide the GPUs of a node (" +
                    std::to_string(per_node) + ") or be a multiple of them: an attention group is part of one node "
                    "or whole nodes");
  if (l.moe_expert_parallel > 1 && (l.expert_parallel || tp % l.moe_expert_parallel != 0))
    diags.error(at_key(p, "moe_expert_parallel", where),
                what + "moe_expert_parallel (" + std::to_string(l.moe_expert_parallel) +
                    ") splits the experts inside an attention group: it needs expert_parallel: false and must divide "
                    "tensor_parallel (" + std::to_string(tp) + ")");
  else if (l.moe_expert_parallel > 1 && s.model.experts % l.moe_expert_parallel != 0)
    diags.error(at_key(p, "moe_expert_parallel", where),
                what + "moe_expert_parallel (" + std::to_string(l.moe_expert_parallel) + ") must divide the model's " +
                    std::to_string(s.model.experts) + " experts");
  l.gpus = gpus;
  if (!cluster_ok || gpus <= 0) {
    l.data_parallel = dp > 0 ? dp : 1;
    l.instances = inst > 0 ? inst : 1;
  } else if (dp > 0) {
    l.data_parallel = dp;
    l.instances = inst > 0 ? inst : gpus / (tp * dp);
  } else if (inst > 0) {
    l.instances = inst;
    l.data_parallel = gpus / (tp * inst);
  } else {
    // Neither given: one instance of every GPU (attention data-parallel over single GPUs, as
    // before deployments had groups), or of single groups when tensor_parallel is set.
    l.data_parallel = p.given("tensor_parallel") ? 1 : gpus / tp;
    l.instances = gpus / (tp * std::max(1, l.data_parallel));
  }
  if (cluster_ok && gpus > 0) {
    const long long used = static_cast<long long>(tp) * l.data_parallel * l.instances;
    if (l.data_parallel < 1 || l.instances < 1 || used > gpus)
      diags.error(p.given("instances") ? at_key(p, "instances", where) : at_key(p, "data_parallel", at_key(p, "tensor_parallel", where)),
                  what + "tensor_parallel x data_parallel x instances (" + std::to_string(tp) + " x " +
                      std::to_string(l.data_parallel) + " x " + std::to_string(l.instances) + ") needs more GPUs than the " +
                      std::to_string(gpus) + " it has");
    const int per_instance = tp * std::max(1, l.data_parallel);
    if (per_node > 0 && s.hardware.nodes > 1 && per_instance % per_node != 0 && per_node % per_instance != 0)
      diags.error(at_key(p, "data_parallel", where),
                  what + "an instance of " + std::to_string(per_instance) + " GPUs is neither part of one node nor whole nodes (" +
                      std::to_string(per_node) + " GPUs each)");
  }
  res["tensor_parallel"] = l.tensor_parallel;
  res["data_parallel"] = l.data_parallel;
  res["expert_parallel"] = l.expert_parallel;
  res["moe_expert_parallel"] = l.moe_expert_parallel;
  res["instances"] = l.instances;
  return l;
}

// `workload:` with kind serving (all but `routing`): requests, arrivals, lengths, and the
// representative prefill shape policies profile with.
namespace {

/// With arrival.process: trace, the trace gives each request's lengths: `requests` defaults to its
/// rows (and may not exceed them), and the length distributions hold the used rows' bounds.
void read_trace_lengths(const YAML::Node& wl, const ParamSet& w, const std::vector<TraceRequest>& rows,
                        ServingWorkload& sw, YAML::Node& workload_res, const SourceMap& src, Diagnostics& diags) {
  // Lengths come from the trace; the distributions hold its bounds (for limits and checks).
  for (const char* k : {"prompt_tokens", "output_tokens"})
    if (wl[k])
      diags.error(src.locate(key_node(wl, k)), std::string("'") + k +
                                                   "' cannot be set with arrival.process: trace (the trace gives "
                                                   "each request's lengths)");
  if (!w.given("requests") && !rows.empty()) sw.requests = static_cast<std::int64_t>(rows.size());
  if (w.given("requests") && !rows.empty() && sw.requests > static_cast<std::int64_t>(rows.size()))
    diags.error(w.where("requests"), "'requests' (" + std::to_string(sw.requests) + ") is more than the trace's " +
                                         std::to_string(rows.size()) +
                                         " rows: give at most that many, or leave 'requests' out for every row");
  workload_res["requests"] = sw.requests;
  const std::size_t used = std::min(rows.size(), static_cast<std::size_t>(sw.requests));
  if (used > 0) {
    sw.prompt.kind = sw.output.kind = LengthDist::Kind::kUniform;
    sw.prompt.min = sw.output.min = std::numeric_limits<std::int64_t>::max();
    sw.prompt.max = sw.output.max = 0;
    for (std::size_t i = 0; i < used; ++i) {
      sw.prompt.min = std::min(sw.prompt.min, rows[i].prompt_tokens);
      sw.prompt.max = std::max(sw.prompt.max, rows[i].prompt_tokens);
      sw.output.min = std::min(sw.output.min, rows[i].output_tokens);
      sw.output.max = std::max(sw.output.max, rows[i].output_tokens);
    }
  }
}

/// Every request must fit in the model's context: each used trace row, or the longest prompt and
/// output the distributions give.
void check_context(const Scenario& s, const std::vector<TraceRequest>& rows, bool trace, Diagnostics& diags) {
  const ServingWorkload& sw = s.serving_workload;
  const std::int64_t ctx = s.model.max_context;
  if (ctx > 0 && trace) {
    const std::size_t used = std::min(rows.size(), static_cast<std::size_t>(sw.requests));
    for (std::size_t i = 0; i < used; ++i) {
      if (rows[i].prompt_tokens + rows[i].output_tokens <= ctx) continue;
      diags.error(SourceLocation{sw.arrival.resolved_file, rows[i].line, 1},
                  "request " + std::to_string(i) + " (" + std::to_string(rows[i].prompt_tokens) + " prompt + " +
                      std::to_string(rows[i].output_tokens) + " output tokens) is longer than the model's context (" +
                      std::to_string(ctx) + " tokens, model.max_context)");
      break;
    }
  } else if (ctx > 0 && sw.prompt.smallest() >= 1 && sw.output.smallest() >= 1 && sw.prompt.largest() >= 1 &&
             sw.output.largest() >= 1) {
    const std::int64_t longest = sw.prompt.largest() + sw.output.largest();
    if (longest > ctx)
      diags.error(s.prompt_where, "the longest prompt (" + std::to_string(sw.prompt.largest()) +
                                      " tokens) plus the longest output (" + std::to_string(sw.output.largest()) +
                                      ") is " + std::to_string(longest) + " tokens, longer than the model's context (" +
                                      std::to_string(ctx) + " tokens, model.max_context)");
  }
}

/// The shape policies and predictors profile with (they see a prefill batch): one sequence per
/// GPU at the mean prompt length, one batch.
void set_profiling_shape(Scenario& s, const std::vector<TraceRequest>& rows, bool trace) {
  const ServingWorkload& sw = s.serving_workload;
  double mean_prompt = 0.0;
  if (trace) {
    const std::size_t used = std::min(rows.size(), static_cast<std::size_t>(sw.requests));
    for (std::size_t i = 0; i < used; ++i) mean_prompt += static_cast<double>(rows[i].prompt_tokens);
    if (used > 0) mean_prompt /= static_cast<double>(used);
  } else {
    mean_prompt = sw.prompt.expected();
  }
  s.workload.batch_size = std::max(1, s.hardware.num_gpus());
  s.workload.seq_len = std::max<std::int64_t>(1, std::llround(mean_prompt));
  s.workload.batches = 1;
  s.workload.warmup_batches = 0;
}

}  // namespace

void read_serving_workload(const YAML::Node& root, Scenario& s, const SourceMap& src, Diagnostics& diags,
                           YAML::Node& workload_res) {
  const YAML::Node wl = root["workload"];
  s.workload_kind = WorkloadKind::kServing;
  s.serving_workload_where = loc(src, wl, root);
  ServingWorkload& sw = s.serving_workload;

  // Plain keys; arrival and the lengths are read below.
  std::vector<ParamSpec> plain;
  for (const ParamSpec& spec : serving_workload_specs())
    if (spec.name != "arrival" && spec.name != "prompt_tokens" && spec.name != "output_tokens") plain.push_back(spec);
  const ParamSet w = read_params(wl, plain, src, diags, {"routing", "arrival", "prompt_tokens", "output_tokens"});
  sw.requests = w.get_int("requests");
  sw.warmup_requests = w.get_int("warmup_requests");
  sw.prompt_cached = w.get_bool("prompt_cached");
  workload_res = w.to_yaml();
  workload_res["kind"] = "serving";

  std::vector<TraceRequest> rows;
  YAML::Node arrival_res;
  sw.arrival = read_arrival(wl["arrival"], wl, s, src, diags, rows, arrival_res);
  workload_res["arrival"] = arrival_res;
  const bool trace = sw.arrival.process == ArrivalSpec::Process::kTrace;

  s.prompt_where = loc(src, wl["prompt_tokens"], wl);
  s.output_where = loc(src, wl["output_tokens"], wl);
  if (trace) {
    read_trace_lengths(wl, w, rows, sw, workload_res, src, diags);
  } else {
    YAML::Node prompt_res, output_res;
    sw.prompt = read_length(wl["prompt_tokens"], "prompt_tokens", kDefaultPrompt, wl, src, diags, prompt_res);
    sw.output = read_length(wl["output_tokens"], "output_tokens", kDefaultOutput, wl, src, diags, output_res);
    workload_res["prompt_tokens"] = prompt_res;
    workload_res["output_tokens"] = output_res;
  }

  // Warm-up must leave something to measure.
  const std::int64_t effective = trace && !rows.empty() ? std::min<std::int64_t>(sw.requests, static_cast<std::int64_t>(rows.size()))
                                                        : sw.requests;
  if (sw.warmup_requests >= effective && (!trace || !rows.empty()))
    diags.error(at_key(w, "warmup_requests", s.serving_workload_where),
                "'warmup_requests' (" + std::to_string(sw.warmup_requests) + ") must be fewer than the requests (" +
                    std::to_string(effective) + "): nothing would be measured");

  check_context(s, rows, trace, diags);
  set_profiling_shape(s, rows, trace);
}

// `serving:`: the engine preset, the scheduler, the SLOs and speculative decoding.
void read_scheduler(const YAML::Node& root, Scenario& s, const SourceMap& src, Diagnostics& diags,
                    YAML::Node& serving_res) {
  const ServingWorkload& sw = s.serving_workload;
  // serving: the engine first (its preset gives the scheduler's defaults), then the scheduler.
  const YAML::Node sv = root["serving"];
  s.serving_where = loc(src, sv, root);
  SchedulerConfig& cfg = s.serving;
  const YAML::Node eng = sv && sv.IsMap() ? sv["engine"] : YAML::Node();
  YAML::Node engine_res;
  cfg.engine = read_engine(eng, sv, src, diags, engine_res);
  const ParamSet sc = read_params(sv, scheduler_specs(cfg.engine), src, diags, {"slo", "engine", "speculative"});
  cfg.max_num_seqs = sc.get_int("max_num_seqs");
  cfg.max_batched_tokens = sc.get_int("max_batched_tokens");
  cfg.chunked_prefill = sc.get_bool("chunked_prefill");
  cfg.kv_block_tokens = sc.get_int("kv_block_tokens");
  cfg.preemption = sc.get_string("preemption") == "swap" ? Preemption::kSwap : Preemption::kRecompute;
  cfg.admission = sc.get_string("admission") == "reserve-full" ? Admission::kReserveFull : Admission::kOnDemand;
  cfg.step_mix = sc.get_string("step_mix") == "prefill-first" ? StepMix::kPrefillFirst : StepMix::kMixed;
  cfg.gpu_memory_utilization = sc.get_float("gpu_memory_utilization");
  if (sc.given("kv_cache_free_memory_fraction") || cfg.engine.kv_cache_free_memory_fraction) {
    const YAML::Node v = sc.to_yaml()["kv_cache_free_memory_fraction"];
    if (v && v.IsScalar() && v.Scalar() != "~" && v.Scalar() != "null") {
      cfg.kv_cache_free_memory_fraction = sc.get_float("kv_cache_free_memory_fraction");
      if (*cfg.kv_cache_free_memory_fraction <= 0.0)
        diags.error(at_key(sc, "kv_cache_free_memory_fraction", s.serving_where),
                    "'kv_cache_free_memory_fraction' must be in (0, 1], got " + fmt(*cfg.kv_cache_free_memory_fraction));
    }
  }
  cfg.progress_interval_s = sc.get_float("progress_interval_s");
  if (cfg.gpu_memory_utilization <= 0.0)
    diags.error(at_key(sc, "gpu_memory_utilization", s.serving_where),
                "'gpu_memory_utilization' must be in (0, 1], got " + fmt(cfg.gpu_memory_utilization));
  const YAML::Node slo_node = sv && sv.IsMap() ? sv["slo"] : YAML::Node();
  const ParamSet slo = read_params(slo_node, slo_specs(), src, diags);
  for (const char* k : {"ttft_ms", "tpot_ms"}) {
    if (!slo.given(k)) continue;
    const double v = slo.get_float(k);
    if (v <= 0.0) diags.error(slo.where(k), std::string("'") + k + "' must be > 0, got " + fmt(v));
    (std::string(k) == "ttft_ms" ? cfg.slo_ttft_ms : cfg.slo_tpot_ms) = v;
  }
  // Without chunked prefill a prefill runs whole in one step, so the longest must fit the token
  // budget or its request never runs (the engine stalls). A recompute preemption prefills the
  // prompt again with the tokens generated so far (up to output − 1); swap re-prefills prompts only,
  // and under reserve-full admission nothing is ever preempted.
  if (!cfg.chunked_prefill && sw.prompt.largest() >= 1 && sw.output.largest() >= 1) {
    const bool recompute = cfg.preemption == Preemption::kRecompute && cfg.admission == Admission::kOnDemand;
    const std::int64_t longest = sw.prompt.largest() + (recompute ? sw.output.largest() - 1 : 0);
    if (longest > cfg.max_batched_tokens)
      diags.error(at_key(sc, "max_batched_tokens", s.serving_where),
                  "'max_batched_tokens' (" + std::to_string(cfg.max_batched_tokens) +
                      ") is smaller than the longest prefill (" + std::to_string(longest) + " tokens: the longest prompt" +
                      (recompute ? " plus the longest output − 1, re-prefilled after a recompute preemption" : "") +
                      ") with chunked_prefill off: it would never be scheduled (raise it, or turn chunked_prefill on)");
  }
  cfg.two_batch_overlap = sc.get_bool("two_batch_overlap");
  cfg.layer_sampling = static_cast<int>(sc.get_int("layer_sampling"));
  if (cfg.layer_sampling > 1 && cfg.two_batch_overlap)
    diags.error(at_key(sc, "layer_sampling", s.serving_where),
                "'layer_sampling' and 'two_batch_overlap' do not combine (the two micro-batches interleave every "
                "layer's work): turn one off");
  YAML::Node speculative_res;
  cfg.speculative = read_speculative_section(sv && sv.IsMap() ? sv["speculative"] : YAML::Node(), s.model, src, diags,
                                             s.serving_where, speculative_res);
  serving_res = sc.to_yaml();
  serving_res["slo"] = slo.to_yaml();
  serving_res["speculative"] = speculative_res;
  serving_res["engine"] = engine_res;
  if (sw.prompt_cached && cfg.admission == Admission::kReserveFull) {
    // Nothing to forbid: reserved blocks include the cached prompt.
  }
}

// deployment.attention_gpus / expert_gpus: both or neither, no other split or layout beside them,
// and together the cluster's GPUs.
void read_attention_expert_split(const ParamSet& dp, Scenario& s, bool cluster_ok, Diagnostics& diags) {
  DeploymentConfig& d = s.deployment;
  d.attention_gpus = static_cast<int>(dp.get_int("attention_gpus"));
  d.expert_gpus = static_cast<int>(dp.get_int("expert_gpus"));
  if ((d.attention_gpus == 0) != (d.expert_gpus == 0)) {
    const char* zero = d.attention_gpus == 0 ? "attention_gpus" : "expert_gpus";
    const char* other = d.attention_gpus == 0 ? "expert_gpus" : "attention_gpus";
    diags.error(at_key(dp, zero, s.deployment_where), std::string("'") + zero + "' is 0 but '" + other +
                                                          "' is not: an attention-FFN split needs both (0 and 0: none)");
    return;
  }
  if (!d.attention_expert_split()) return;
  for (const char* k : {"prefill_gpus", "decode_gpus", "tensor_parallel", "data_parallel", "expert_parallel",
                        "moe_expert_parallel", "instances"})
    if (dp.given(k))
      diags.error(dp.where(k), std::string("'") + k + "' does not apply to an attention-FFN split (attention_gpus, "
                                   "expert_gpus): its attention is data-parallel and its experts one per expert GPU");
  if (cluster_ok && d.attention_gpus + d.expert_gpus != s.hardware.num_gpus())
    diags.error(dp.where("expert_gpus"), "attention_gpus + expert_gpus (" + std::to_string(d.attention_gpus) + " + " +
                                             std::to_string(d.expert_gpus) + ") must be the cluster's " +
                                             std::to_string(s.hardware.num_gpus()) + " GPUs");
}

// `deployment:`: a colocated layout, or prefill and decode pools, or an attention-FFN split.
void read_deployment(const YAML::Node& root, Scenario& s, const SourceMap& src, Diagnostics& diags, bool cluster_ok,
                     YAML::Node& deployment_res) {
  // deployment:
  const YAML::Node dep = root["deployment"];
  s.deployment_where = loc(src, dep, root);
  const ParamSet dp = read_params(dep, deployment_specs(), src, diags, {"prefill", "decode"});
  DeploymentConfig& d = s.deployment;
  d.prefill_gpus = static_cast<int>(dp.get_int("prefill_gpus"));
  d.decode_gpus = static_cast<int>(dp.get_int("decode_gpus"));
  read_attention_expert_split(dp, s, cluster_ok, diags);
  const std::string a2a = dp.get_string("alltoall");
  d.alltoall = a2a == "deepep-normal" ? MoeAllToAll::kDeepEpNormal
               : a2a == "deepep-ll"   ? MoeAllToAll::kDeepEpLowLatency
                                      : MoeAllToAll::kNccl;
  deployment_res = YAML::Node(YAML::NodeType::Map);
  deployment_res["alltoall"] = a2a;
  const int cluster_gpus = cluster_ok ? s.hardware.num_gpus() : 0;
  // The pools' own mappings: {gpus, tensor_parallel, data_parallel, expert_parallel, instances}.
  YAML::Node pool_res[2];
  ParamSet pool_params[2];
  const char* pool_keys[2] = {"prefill", "decode"};
  bool pool_maps = false;
  for (int i = 0; i < 2; ++i) {
    const YAML::Node n = dep && dep.IsMap() ? dep[pool_keys[i]] : YAML::Node();
    pool_params[i] = read_params(n, layout_specs(true), src, diags);
    if (!n || n.IsNull()) continue;
    pool_maps = true;
    int& gpus = i == 0 ? d.prefill_gpus : d.decode_gpus;
    const char* shorthand = i == 0 ? "prefill_gpus" : "decode_gpus";
    if (pool_params[i].given("gpus") && dp.given(shorthand))
      diags.error(pool_params[i].where("gpus"), std::string("'") + pool_keys[i] + ".gpus' and '" + shorthand +
                                                     "' both give the pool's GPUs: keep one");
    else if (pool_params[i].given("gpus"))
      gpus = static_cast<int>(pool_params[i].get_int("gpus"));
  }
  if ((d.prefill_gpus == 0) != (d.decode_gpus == 0)) {
    const char* zero = d.prefill_gpus == 0 ? "prefill_gpus" : "decode_gpus";
    const char* other = d.prefill_gpus == 0 ? "decode_gpus" : "prefill_gpus";
    diags.error(at_key(dp, zero, s.deployment_where),
                std::string("'") + zero + "' is 0 but '" + other +
                    "' is not: a disaggregated deployment needs both pools (set both to 0 for colocated)");
  }
  if (d.disaggregated()) {
    for (const char* k : {"tensor_parallel", "data_parallel", "expert_parallel", "moe_expert_parallel", "instances"})
      if (dp.given(k))
        diags.error(dp.where(k), std::string("'") + k + "' applies to a colocated deployment; a disaggregated one sets it " +
                                     "per pool (deployment.prefill." + k + ", deployment.decode." + k + ")");
    for (int i = 0; i < 2; ++i) {
      ParallelLayout& l = i == 0 ? d.prefill : d.decode;
      const int gpus = i == 0 ? d.prefill_gpus : d.decode_gpus;
      const YAML::Node n = dep && dep.IsMap() ? dep[pool_keys[i]] : YAML::Node();
      const SourceLocation where = n && !n.IsNull() ? src.locate(n) : s.deployment_where;
      l = read_layout(pool_params[i], gpus, std::string("deployment.") + pool_keys[i] + ": ", s, where,
                      cluster_ok && gpus > 0, diags, pool_res[i]);
      deployment_res[pool_keys[i]] = pool_res[i];  // its GPUs: the shorthand below
    }
  } else {
    if (pool_maps)
      diags.error(s.deployment_where, "'prefill' and 'decode' need both pools' GPUs (deployment.prefill.gpus and "
                                      "deployment.decode.gpus, or prefill_gpus and decode_gpus)");
    YAML::Node lres;
    d.colocated = read_layout(dp, cluster_gpus, "", s, s.deployment_where, cluster_ok, diags, lres);
    for (const auto& kv : lres) deployment_res[kv.first.Scalar()] = kv.second;
  }
  deployment_res["prefill_gpus"] = d.prefill_gpus;
  deployment_res["decode_gpus"] = d.decode_gpus;
  deployment_res["attention_gpus"] = d.attention_gpus;
  deployment_res["expert_gpus"] = d.expert_gpus;
  if (cluster_ok && d.disaggregated()) {
    const ClusterSpec& c = s.hardware;
    if (d.prefill_gpus + d.decode_gpus > c.num_gpus())
      diags.error(s.deployment_where, "prefill_gpus + decode_gpus (" + std::to_string(d.prefill_gpus + d.decode_gpus) +
                                          ") exceeds the cluster's " + std::to_string(c.num_gpus()) + " GPUs");
    if (c.nodes > 1)
      for (int i = 0; i < 2; ++i) {
        const char* k = i == 0 ? "prefill_gpus" : "decode_gpus";
        const int n = i == 0 ? d.prefill_gpus : d.decode_gpus;
        const SourceLocation at = dp.given(k) ? dp.where(k) : pool_params[i].given("gpus") ? pool_params[i].where("gpus") : s.deployment_where;
        if (n > 0 && n % c.gpus_per_node != 0)
          diags.error(at, std::string("'") + k + "' (" + std::to_string(n) + ") is neither a whole number of nodes (" +
                              std::to_string(c.gpus_per_node) + " GPUs each) nor within a single-node cluster (this one has " +
                              std::to_string(c.nodes) + " nodes)");
      }
  }
}

}  // namespace

void read_serving_sections(const YAML::Node& root, Scenario& s, const SourceMap& src, Diagnostics& diags,
                           bool cluster_ok, YAML::Node& workload_res, YAML::Node& serving_res,
                           YAML::Node& deployment_res) {
  read_serving_workload(root, s, src, diags, workload_res);
  read_scheduler(root, s, src, diags, serving_res);
  read_deployment(root, s, src, diags, cluster_ok, deployment_res);
}

}  // namespace moesim
