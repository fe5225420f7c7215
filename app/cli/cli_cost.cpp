// `moesim cost`: what the simulator believes one operation costs, in microseconds.
#include <cmath>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <CLI/CLI.hpp>

#include "app/cli/cli.hpp"
#include "hardware/builtin_calibration.hpp"
#include "hardware/collective_explain.hpp"
#include "hardware/collectives.hpp"
#include "hardware/cost_model.hpp"
#include "sim/network_backend.hpp"

namespace moesim {

namespace {

std::string gbps(double Bps) {
  std::ostringstream s;
  s << Bps / 1e9 << " GB/s";
  return s.str();
}

// The factors behind a GEMM's time: tiles and k-loop, or the measured curve; compute vs memory.
nlohmann::json explain_gemm(const ComputeCostModel& model, const Op& op) {
  const GpuSpec& g = model.gpu();
  const double peak = g.peak(op.dtype) > 0 ? g.peak(op.dtype) : g.peak(DType::kFp32);
  const double memory_s = op.bytes / (g.hbm_bandwidth_Bps * model.efficiency().memory);
  nlohmann::json e = {{"peak_TFLOPS", peak / 1e12}, {"memory_us", memory_s * 1e6}, {"bytes", op.bytes},
                      {"memory_efficiency", model.efficiency().memory}, {"launch_us", g.kernel_launch_us}};
  if (const EfficiencyCurve* curve = model.measured_gemm_curve(op.dtype, op.n, op.k)) {
    const double eta = curve->at(static_cast<double>(op.m));
    e["source"] = "measured";
    e["efficiency"] = eta;
    e["compute_us"] = op.flops / (peak * eta) * 1e6;
    e["bound"] = "measured (the curve is the whole kernel time)";
    return e;
  }
  const GemmEfficiencyParts p = model.gemm_efficiency_parts(op.m, op.n, op.k, 1, op.dtype);
  const double compute_s = op.flops / (peak * p.efficiency);
  e["source"] = "default";
  e["efficiency"] = p.efficiency;
  e["gemm_peak"] = model.efficiency().gemm_peak;
  e["tile_m"] = p.tile_m;
  e["tile_n"] = p.tile_n;
  e["tile_use_m"] = p.use_m;
  e["tile_use_n"] = p.use_n;
  e["k_loop"] = p.k_loop;
  e["tile_k"] = p.tile_k;
  e["tiles"] = p.tiles;
  e["split_k"] = p.split_k;
  e["waves"] = p.waves;
  e["wave_use"] = p.wave_use;
  e["sm_count"] = g.sm_count;
  e["compute_us"] = compute_s * 1e6;
  e["bound"] = compute_s >= memory_s ? "compute" : "memory";
  return e;
}

void print_gemm_explanation(const nlohmann::json& e) {
  std::cout << "  peak        " << e["peak_TFLOPS"].get<double>() << " TFLOP/s\n";
  if (e["source"] == "measured") {
    std::cout << "  efficiency  " << e["efficiency"].get<double>()
              << " from the calibration profile's measured curve for this (dtype, n, k), at this m\n";
  } else {
    std::cout << "  efficiency  " << e["efficiency"].get<double>() << " = " << e["gemm_peak"].get<double>() << " peak x "
              << e["tile_use_m"].get<double>() << " (m in " << e["tile_m"] << "-row tiles) x "
              << e["tile_use_n"].get<double>() << " (n in " << e["tile_n"] << "-column tiles) x "
              << e["k_loop"].get<double>() << " (k loop, " << e["tile_k"] << "-deep k tiles) x "
              << e["wave_use"].get<double>() << " (waves)\n"
              << "  waves       " << e["tiles"] << " tiles";
    if (e["split_k"].get<int>() > 1) std::cout << " split " << e["split_k"] << " ways over k";
    std::cout << " on " << e["sm_count"] << " SMs: " << e["waves"] << (e["waves"].get<long long>() == 1 ? " wave" : " waves")
              << ", " << e["wave_use"].get<double>() << " of the SMs busy\n";
  }
  std::cout << "  compute     " << e["compute_us"].get<double>() << " us\n"
            << "  memory      " << e["memory_us"].get<double>() << " us (" << e["bytes"].get<double>() << " bytes at "
            << e["memory_efficiency"].get<double>() << " of HBM bandwidth)\n"
            << "  bound       " << e["bound"].get<std::string>() << "\n"
            << "  launch      " << e["launch_us"].get<double>() << " us\n";
}

// What priced a GEMM by a kernel fit: the fit's parameters, its physics and its residual.
nlohmann::json explain_fitted_gemm(const ComputeCostModel& model, const GemmKernelFit& fit, const Op& op,
                                   const GpuSpec& gpu) {
  const GemmTerms t = model.gemm_terms(op);
  const double physics = model.fitted_seconds(fit, op, true);
  const double total = model.fitted_seconds(fit, op);
  return {{"source", "fit"},
          {"model", "overhead + (compute^p + memory^p)^(1/p) [+ activation quantisation], x residual"},
          {"engine", fit.engine},
          {"family", gemm_family_name(fit.family)},
          {"kernel_source", fit.kernel_source},
          {"fitted_on", fit.system},
          {"transferred", gpu.name != measured_gpu_preset(fit.system)},
          {"compute_efficiency", fit.compute_efficiency},
          {"memory_efficiency", fit.memory_efficiency},
          {"sm_bandwidth_GBps", fit.sm_bandwidth_GBps},
          {"overhead_us", fit.overhead_us},
          {"blend", fit.blend},
          {"quantises_activation", fit.quantises_activation},
          {"shape_use", t.shape_use},
          {"active_sms", t.active_sms},
          {"physics_us", physics * 1e6},
          {"residual_factor", physics > 0 ? total / physics : 1.0},
          {"fitted_rows", fit.fitted_rows},
          {"fitted_median_error_pct", fit.fitted_median_error}};
}

void print_fitted_gemm_explanation(const nlohmann::json& e) {
  std::cout << "  priced by   the " << e["engine"].get<std::string>() << " " << e["family"].get<std::string>()
            << " kernel fit (" << e["kernel_source"].get<std::string>() << ", fitted on "
            << e["fitted_on"].get<std::string>() << (e["transferred"].get<bool>() ? ", transferred to this GPU" : "")
            << "; " << e["fitted_rows"] << " rows, median error " << e["fitted_median_error_pct"].get<double>() << "%)\n"
            << "  model       " << e["model"].get<std::string>() << "\n"
            << "  parameters  compute " << e["compute_efficiency"].get<double>() << " of peak, memory "
            << e["memory_efficiency"].get<double>() << " of HBM, " << e["sm_bandwidth_GBps"].get<double>()
            << " GB/s per SM, overhead " << e["overhead_us"].get<double>() << " us, p " << e["blend"].get<double>()
            << (e["quantises_activation"].get<bool>() ? ", activation quantised in the timed kernel" : "") << "\n"
            << "  shape       " << e["shape_use"].get<double>() << " tile/wave use, " << e["active_sms"].get<double>()
            << " SMs busy\n"
            << "  physics     " << e["physics_us"].get<double>() << " us, x " << e["residual_factor"].get<double>()
            << " from the measured shapes around this one\n";
}

nlohmann::json explanation_json(const CollectiveExplanation& e) {
  nlohmann::json channels = nlohmann::json::array();
  for (const auto& ch : e.channels) channels.push_back({{"order", ch.order}, {"bottleneck_GBps", ch.bottleneck_Bps / 1e9}});
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& k : e.candidates)
    candidates.push_back({{"algorithm", nccl_algo_name(k.algo)}, {"protocol", nccl_proto_name(k.proto)},
                          {"enabled", k.enabled}, {"why_disabled", k.why_disabled}, {"latency_us", k.latency_us},
                          {"bus_GBps", k.bus_GBps}, {"alg_GBps", k.alg_GBps}, {"time_us", k.time_us}});
  nlohmann::json j = {{"model", e.model},
                      {"algorithm", e.algorithm},
                      {"protocol", e.protocol},
                      {"steps", e.steps},
                      {"step_bytes", e.step_bytes},
                      {"channels", channels},
                      {"launch_us", e.launch_us},
                      {"calibrated", e.calibrated},
                      {"efficiency", e.efficiency},
                      {"hop_latency_us", e.hop_latency_us},
                      {"bottleneck_link", e.bottleneck_link},
                      {"bottleneck_class", e.bottleneck_class},
                      {"bottleneck_GBps", e.bottleneck_Bps / 1e9},
                      {"bottleneck_bytes_per_step", e.bottleneck_bytes},
                      {"estimate_us", e.estimate_us},
                      {"simulated_us", e.simulated_us}};
  if (e.model == "nccl") {
    j["nccl"] = {{"channels", e.topology.ring_channels},
                 {"channel_GBps", e.topology.ring_bw_GBps},
                 {"nodes", e.topology.nodes},
                 {"nvlink_intra", e.topology.nvlink_intra},
                 {"bus_GBps", e.bus_GBps},
                 {"alg_GBps", e.alg_GBps},
                 {"candidates", candidates}};
  }
  return j;
}

void print_collective_explanation(const CollectiveExplanation& e) {
  std::cout << "  model       " << e.model << "\n  algorithm   " << e.algorithm << ", " << e.steps
            << (e.steps == 1 ? " step" : " steps") << " of " << e.step_bytes << " bytes per GPU";
  if (!e.channels.empty()) {
    std::cout << ", flows over " << e.channels.size() << (e.channels.size() == 1 ? " ring" : " rings") << " (ring bottlenecks";
    for (const auto& ch : e.channels) std::cout << " " << ch.bottleneck_Bps / 1e9;
    std::cout << " GB/s)";
  }
  std::cout << "\n  protocol    " << e.protocol;
  if (e.model == "nccl" && e.candidates.size() > 1) {
    const auto& t = e.topology;
    std::cout << " (NCCL 2.19's tuning: the smallest latency + bytes / bandwidth of the enabled candidates)\n"
              << "  channels    " << t.ring_channels << " x " << t.ring_bw_GBps << " GB/s ("
              << (t.nodes > 1 ? "one per rail NIC at NCCL's network speed" : t.nvlink_intra ? "NVLink at NCCL's 20 GB/s per link" : "PCIe at NCCL's rate")
              << ")\n  candidates  algorithm/protocol: latency us, bus GB/s, time us\n";
    for (const auto& k : e.candidates) {
      std::cout << "              " << nccl_algo_name(k.algo) << "/" << nccl_proto_name(k.proto) << ": ";
      if (k.enabled)
        std::cout << k.latency_us << ", " << k.bus_GBps << ", " << k.time_us
                  << "\n";
      else
        std::cout << "off (" << k.why_disabled << ")\n";
    }
    std::cout << "  bandwidth   bus " << e.bus_GBps << " GB/s, algorithm " << e.alg_GBps << " GB/s";
  } else if (e.model == "nccl") {
    std::cout << " (NCCL point-to-point" << (e.algorithm == "pairwise" ? " per pair" : "")
              << ": LL up to 16 KB, Simple above)";
    if (e.alg_GBps > 0)
      std::cout << "\n  bandwidth   " << e.alg_GBps << " GB/s (the path at NCCL's link rates"
                << (e.protocol == "LL" ? ", halved by LL's flags" : "") << ")";
  }
  std::cout << "\n  efficiency  " << e.efficiency
            << (e.calibrated ? " of line rate at this size (calibrated)"
                : e.model == "nccl" ? " of line rate (NCCL's protocol and link rates)" : " (line rate)")
            << "\n  launch      " << e.launch_us << " us ("
            << (e.calibrated ? "calibrated" : e.model == "nccl" ? "NCCL's latency, hops included" : "collective_launch_us") << ")\n";
  if (!e.bottleneck_link.empty()) {
    std::cout << "  bottleneck  " << e.bottleneck_link << " (" << e.bottleneck_class << ", " << gbps(e.bottleneck_Bps)
              << "): " << e.bottleneck_bytes << " wire bytes per step\n";
    if (e.model != "nccl") std::cout << "  hop latency " << e.hop_latency_us << " us per step (route latencies)\n";
  }
  if (e.model == "nccl" && e.algorithm != "pairwise")
    std::cout << "  estimate    NCCL's latency + bytes / algorithm bandwidth = " << e.estimate_us << " us (simulated "
              << e.simulated_us << " us; a gap is contention or pipelining the flows resolve)\n";
  else
    std::cout << "  estimate    launch + " << e.steps << " x (hop latency + bottleneck bytes / bandwidth) = "
              << e.estimate_us << " us (simulated " << e.simulated_us
              << " us; a gap is contention or pipelining the flows resolve)\n";
}

}  // namespace

nlohmann::json gemm_cost(const std::string& gpu_name, long long m, long long n, long long k, const std::string& dtype_str,
                         const std::string& calibration, bool explain, const std::string& engine) {
  // The CLI checks these as it parses; the Python module reaches here directly.
  for (const auto& [name, v] : {std::pair<const char*, long long>{"m", m}, {"n", n}, {"k", k}})
    if (v < 1 || v > (1LL << 31))
      throw InputError(SourceLocation{std::string("--") + name, 0, 0},
                       "must be a whole number in [1, 2^31], got " + std::to_string(v));
  // fp8-block names a kernel family (128-block scales), not a dtype: it runs at the fp8 peak.
  const bool block = dtype_str == "fp8-block";
  DType dt;
  if (dtype_str != "fp32" && dtype_str != "fp16" && dtype_str != "bf16" && dtype_str != "fp8" && !block &&
      dtype_str != "nvfp4")
    throw InputError(SourceLocation{"--dtype", 0, 0},
                     "dtype '" + dtype_str + "' is not one of fp32, fp16, bf16, fp8, fp8-block, nvfp4");
  parse_dtype(block ? "fp8" : dtype_str, dt);
  if (engine != "trtllm" && engine != "sglang" && engine != "vllm")
    throw InputError(SourceLocation{"--engine", 0, 0}, "engine '" + engine + "' is not one of trtllm, sglang, vllm");
  GpuSpec gpu;
  if (const auto* g = gpu_presets().find(gpu_name)) {
    gpu = g->value;
  } else if (const auto* c = cluster_presets().find(gpu_name)) {
    gpu = c->value.gpu;
  } else {
    std::vector<std::string> names = gpu_presets().names();
    for (const auto& c : cluster_presets().names()) names.push_back(c);
    throw InputError(SourceLocation{"--gpu", 0, 0}, unknown_name_message("GPU", gpu_name, names));
  }
  if (gpu.peak(dt) <= 0.0)
    throw InputError(SourceLocation{"--dtype", 0, 0}, gpu.name + " has no " + dtype_name(dt) +
                                                          " tensor cores (its " + dtype_name(dt) +
                                                          " peak is 0): choose a dtype it supports");
  ClusterSpec spec;
  spec.gpu = gpu;
  apply_calibration_choice(spec, calibration);
  ComputeCostModel model(gpu, ComputeEfficiency{}, spec.calibration);
  model.select_kernels(engine);
  const Op op = make_gemm("gemm", m, n, k, dt);
  const GemmKernelFit* fit = nullptr;
  if (!model.measured_gemm_curve(dt, n, k)) fit = block ? model.gemm_fit(GemmFamily::kFp8Block) : model.gemm_fit(dt);
  const double kernel_us = (fit ? model.fitted_seconds(*fit, op) : model.kernel_seconds(op)) * 1e6;
  const double total_us = kernel_us + gpu.kernel_launch_us;
  const double tflops = op.flops / (kernel_us * 1e-6) / 1e12;
  const std::string priced_by = fit ? "fit" : model.measured_gemm_curve(dt, n, k) ? "measured" : "datasheet";
  const std::string cal_name = calibration.empty() ? "builtin" : calibration;
  nlohmann::json j{{"op", "gemm"}, {"gpu", gpu.name}, {"dtype", block ? std::string("fp8-block") : std::string(dtype_name(dt))},
                   {"m", m}, {"n", n}, {"k", k}, {"engine", engine},
                   {"calibration", spec.calibration ? cal_name : std::string("none")},
                   {"calibrated", spec.calibration != nullptr}, {"priced_by", priced_by},
                   {"kernel_us", kernel_us}, {"time_us", total_us}, {"launch_us", gpu.kernel_launch_us},
                   {"tflops", tflops}, {"efficiency", op.flops / (kernel_us * 1e-6) / model.gpu().peak(dt)}};
  if (explain) j["explain"] = fit ? explain_fitted_gemm(model, *fit, op, gpu) : explain_gemm(model, op);
  return j;
}

int cli_cost_gemm(const std::string& gpu_name, long long m, long long n, long long k, const std::string& dtype_str,
                  const std::string& calibration, bool json, bool explain, const std::string& engine) {
  const nlohmann::json j = gemm_cost(gpu_name, m, n, k, dtype_str, calibration, explain, engine);
  if (json) {
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "gemm m=" << m << " n=" << n << " k=" << k << " " << j["dtype"].get<std::string>() << " on "
              << j["gpu"].get<std::string>() << ": " << j["kernel_us"].get<double>() << " us kernel ("
              << j["tflops"].get<double>() << " TFLOP/s), " << j["time_us"].get<double>() << " us with launch\n";
    if (explain) {
      if (j["priced_by"] == "fit") print_fitted_gemm_explanation(j["explain"]);
      else print_gemm_explanation(j["explain"]);
    }
  }
  return 0;
}

namespace {
/// The cluster a collective query runs on, its arguments checked.
Cluster collective_cluster(const std::string& kind_name, const std::string& hardware, int nodes, int gpus, double bytes,
                           const std::string& calibration, const std::string& network_model, CollectiveKind& kind,
                           const std::string& impl, const std::string& engine) {
  if (!parse_collective(kind_name.c_str(), kind))
    throw InputError(SourceLocation{"cost", 0, 0}, "unknown collective '" + kind_name +
                                                       "' (valid: allreduce, allgather, alltoall, sendrecv)");
  if (impl != "nccl" && impl != "custom")
    throw InputError(SourceLocation{"--impl", 0, 0}, "must be nccl or custom, got '" + impl + "'");
  if (impl == "custom" && kind != CollectiveKind::kAllReduce)
    throw InputError(SourceLocation{"--impl", 0, 0}, "the engines' custom kernels are all-reduces only");
  if (engine != "trtllm" && engine != "sglang" && engine != "vllm")
    throw InputError(SourceLocation{"--engine", 0, 0}, "engine '" + engine + "' is not one of trtllm, sglang, vllm");
  if (gpus < 1) throw InputError(SourceLocation{"--gpus", 0, 0}, "must be a positive whole number, got " + std::to_string(gpus));
  if (nodes < 0) throw InputError(SourceLocation{"--nodes", 0, 0}, "must be a positive whole number, got " + std::to_string(nodes));
  if (!std::isfinite(bytes) || bytes < 0.0)
    throw InputError(SourceLocation{"--bytes", 0, 0}, "must be a finite number >= 0");
  network_models().get(network_model, SourceLocation{"--network-model", 0, 0});
  cluster_presets().get(hardware, SourceLocation{"--hardware", 0, 0});
  ClusterSpec spec = calibrated_preset(hardware, calibration);
  spec.network_model = network_model;
  spec.kernel_engine = engine;
  spec.custom_all_reduce = impl == "custom";
  if (nodes > 0) spec.nodes = nodes;
  Cluster cluster(std::move(spec));
  if (gpus > cluster.num_gpus())
    throw InputError(SourceLocation{"--gpus", 0, 0}, hardware + " has only " +
                                                         std::to_string(cluster.num_gpus()) + " GPUs");
  if (kind == CollectiveKind::kSendRecv && gpus < 2)
    throw InputError(SourceLocation{"--gpus", 0, 0}, "sendrecv needs --gpus >= 2");
  return cluster;
}
}  // namespace

nlohmann::json collective_cost(const std::string& kind_name, const std::string& hardware, int nodes, int gpus,
                               double bytes, const std::string& calibration, const std::string& network_model,
                               bool explain, const std::string& impl, const std::string& engine) {
  CollectiveKind kind;
  const Cluster cluster =
      collective_cluster(kind_name, hardware, nodes, gpus, bytes, calibration, network_model, kind, impl, engine);
  const double us = ticks_to_us(collective_time(cluster, kind, gpus, bytes));
  // nccl-tests conventions: algbw = bytes / time; busbw scales by the collective's factor.
  const double algbw = us > 0 ? bytes / (us * 1e-6) / 1e9 : 0.0;
  double factor = 1.0;
  if (kind == CollectiveKind::kAllReduce) factor = 2.0 * (gpus - 1) / gpus;
  if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kAllToAll) factor = static_cast<double>(gpus - 1) / gpus;
  std::vector<int> members(static_cast<std::size_t>(std::max(gpus, 1)));
  for (int i = 0; i < gpus; ++i) members[static_cast<std::size_t>(i)] = i;
  if (kind == CollectiveKind::kSendRecv) members = {0, gpus - 1};
  const CollectiveCalibration* cal = collective_calibration(cluster, kind, members);
  // Which curve priced it: the engine's custom kernel, NCCL's measured curve, or the model.
  const bool custom = cal && cal == cluster.spec().calibration->collective(custom_all_reduce_name(engine),
                                                                           CollectiveScope::kIntraNode, gpus);
  nlohmann::json j{{"op", kind_name}, {"hardware", hardware}, {"gpus", gpus}, {"bytes", bytes},
                   {"calibrated", cal != nullptr}, {"impl", impl}, {"engine", engine},
                   {"calibration", cluster.spec().calibration ? (calibration.empty() ? std::string("builtin") : calibration)
                                                              : std::string("none")},
                   {"priced_by", custom ? "measured custom all-reduce" : cal ? "measured NCCL" : cluster.spec().collective_model},
                   {"network_model", network_model}, {"time_us", us}, {"algbw_GBps", algbw}, {"busbw_GBps", algbw * factor}};
  if (explain) j["explain"] = explanation_json(explain_collective(cluster, kind, gpus, bytes));
  return j;
}

int cli_cost_collective(const std::string& kind_name, const std::string& hardware, int nodes, int gpus, double bytes,
                        const std::string& calibration, const std::string& network_model, bool json, bool explain,
                        const std::string& impl, const std::string& engine) {
  const nlohmann::json j =
      collective_cost(kind_name, hardware, nodes, gpus, bytes, calibration, network_model, json && explain, impl, engine);
  if (json) {
    std::cout << j.dump() << "\n";
  } else {
    std::cout << kind_name << " of " << bytes << " bytes over " << gpus << " GPUs of " << hardware << ": "
              << j["time_us"].get<double>() << " us (algbw " << j["algbw_GBps"].get<double>() << " GB/s, busbw "
              << j["busbw_GBps"].get<double>() << " GB/s; " << j["priced_by"].get<std::string>() << ")\n";
    if (explain) {
      CollectiveKind kind;
      const Cluster cluster =
          collective_cluster(kind_name, hardware, nodes, gpus, bytes, calibration, network_model, kind, impl, engine);
      print_collective_explanation(explain_collective(cluster, kind, gpus, bytes));
    }
  }
  return 0;
}

CostCommand::CostCommand(CLI::App& app) {
  cost_ = app.add_subcommand("cost", "print what the cost model predicts for one operation");
  cost_->require_subcommand(1);
  gemm_ = cost_->add_subcommand("gemm", "time of C[m,n] = A[m,k]·B[k,n] on one GPU");
  gemm_->add_option("--calibration", calibration_,
                    "builtin (default: the GPU architecture's measured kernels), none (datasheet roofline), or a "
                    "profile from `moesim calibrate fit`");
  gemm_->add_option("--engine", engine_, "whose kernels: trtllm (default) | sglang | vllm")
      ->check(CLI::IsMember({"trtllm", "sglang", "vllm"}));
  gemm_->add_option("--gpu", gpu_, "GPU preset, or a hardware preset meaning its GPU")->required();
  gemm_->add_option("--m", m_, "rows")->required()->check(CLI::PositiveNumber);
  gemm_->add_option("--n", n_, "columns")->required()->check(CLI::PositiveNumber);
  gemm_->add_option("--k", k_, "inner dimension")->required()->check(CLI::PositiveNumber);
  gemm_->add_option("--dtype", dtype_, "fp32 | fp16 | bf16 | fp8 (per-tensor scales) | fp8-block (128-block scales) | nvfp4")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "fp8", "fp8-block", "nvfp4"}));
  gemm_->add_flag("--json", json_, "machine-readable output");
  gemm_->add_flag("--explain", explain_, "how the time arises: tiles, k loop, efficiency, compute vs memory bound");
  for (const char* name : {"allreduce", "allgather", "alltoall", "sendrecv"}) {
    auto* c = cost_->add_subcommand(name, std::string("time of one ") + name + " on an idle cluster");
    c->add_option("--hardware", hardware_, "hardware preset")->required();
    c->add_option("--nodes", nodes_, "nodes of the preset (default: the preset's)")->check(CLI::PositiveNumber);
    c->add_option("--gpus", gpus_, "participating GPUs (0..G-1; sendrecv: GPU 0 to GPU G-1)")->required()->check(CLI::PositiveNumber);
    c->add_option("--bytes", bytes_, "bytes per GPU buffer")->required()->check(finite_number)->check(CLI::NonNegativeNumber);
    c->add_flag("--json", json_, "machine-readable output");
    c->add_flag("--explain", explain_,
                "how the time arises: algorithm, protocol, channels, bottleneck link, efficiency, launch");
    c->add_option("--calibration", calibration_,
                  "builtin (default: NCCL and custom all-reduce curves measured on the GPU's architecture), none "
                  "(NCCL's tuning model), or a profile from `moesim calibrate fit`");
    c->add_option("--engine", engine_, "whose custom all-reduce --impl custom prices: trtllm (default) | sglang | vllm")
        ->check(CLI::IsMember({"trtllm", "sglang", "vllm"}));
    if (std::string(name) == "allreduce")
      c->add_option("--impl", impl_, "nccl (default) | custom: the engine's one-shot/two-shot kernel within a node")
          ->check(CLI::IsMember({"nccl", "custom"}));
    c->add_option("--network-model", network_model_, "network backend timing the flows (default: flow)")
        ->check(CLI::IsMember({"flow", "analytic"}));
    collectives_.push_back(c);
  }
  deepep_ = std::make_unique<DeepEpCostCommand>(*cost_);
  moe_ = std::make_unique<MoeCostCommand>(*cost_);
  attention_ = std::make_unique<AttentionCostCommand>(*cost_);
}

bool CostCommand::parsed() const { return cost_->parsed(); }

int CostCommand::run() const {
  if (gemm_->parsed()) return cli_cost_gemm(gpu_, m_, n_, k_, dtype_, calibration_, json_, explain_, engine_);
  if (deepep_->parsed()) return deepep_->run();
  if (moe_->parsed()) return moe_->run();
  if (attention_->parsed()) return attention_->run();
  for (auto* c : collectives_)
    if (c->parsed())
      return cli_cost_collective(c->get_name(), hardware_, nodes_, gpus_, bytes_, calibration_, network_model_, json_,
                                 explain_, impl_, engine_);
  return 0;
}

}  // namespace moesim
