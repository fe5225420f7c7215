#include "serving/engine_profile.hpp"

#include <algorithm>
#include <sstream>

namespace moesim {

std::int64_t EngineProfile::graph_size_for(std::int64_t batch) const {
  if (!cuda_graphs || batch <= 0) return 0;
  const auto it = std::lower_bound(graph_batch_sizes.begin(), graph_batch_sizes.end(), batch);
  if (it == graph_batch_sizes.end() || (!graph_padding && *it != batch)) return 0;
  return *it;
}

double EngineProfile::host_us(std::int64_t seqs, std::int64_t tokens) const {
  return host_step_us + host_per_seq_us * static_cast<double>(seqs) + host_per_token_us * static_cast<double>(tokens);
}

namespace {

std::vector<std::int64_t> sizes(std::initializer_list<std::int64_t> head, std::int64_t from, std::int64_t to,
                                std::int64_t step) {
  std::vector<std::int64_t> out(head);
  for (std::int64_t b = from; b <= to; b += step) out.push_back(b);
  return out;
}

EngineProfile none() {
  EngineProfile e;
  e.source = "no engine costs: kernels and collectives only (moesim before engine profiles)";
  return e;
}

// vLLM V1 (0.11 and later). Scheduler: vllm/engine/arg_utils.py get_batch_defaults (GPUs with
// >= 70 GiB other than A100: max_num_seqs 1024, max_num_batched_tokens 8192 for `vllm serve`);
// chunked prefill always on in V1 ("# V1 always uses chunked prefills."); the V1 scheduler
// (vllm/v1/core/sched/scheduler.py) gives running requests the token budget before waiting ones
// and preempts the last running request when blocks run out, as RankScheduler does. CUDA graphs
// (cudagraph_mode FULL_AND_PIECEWISE from 0.11): vllm/config/vllm.py _set_cudagraph_sizes
// (0.11.1+) captures [1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16) with max =
// min(2 x max_num_seqs, 512) = 512; a batch is padded up to the next captured size, larger
// batches run eagerly. Async scheduling (the next step's host work overlaps this step) is on by
// default from 0.14 (PR #27614). gpu_memory_utilization 0.9. Host time per step: no published
// measurement per batch size: 0 unless set. Eager issue time: no source publishes it; 345 us
// per layer is fitted to measured serving points (validation/serving/fit_serving.py, the points
// sample's fit split `every-other-model`, runs without issue time; its held-back models' TTFT
// improves, docs/validation.md "Eager issue time"). It stands for all a non-graph step spends
// per layer beyond the kernel tables (mixed steps of up to 512 tokens replay piecewise graphs in
// vLLM, which moesim runs eagerly). Serial host time: 467 us per step, fitted the same way on the
// runs with that issue time (the increment still missing; the held-back models' TPOT improves):
// what async scheduling does not hide, which no source measures per step.
EngineProfile vllm() {
  EngineProfile e;
  e.name = "vllm";
  e.kernels = "vllm";
  e.host_overlap = true;
  e.eager_layer_us = 345.0;
  e.host_serial_us = 467.0;
  e.cuda_graphs = true;
  e.graph_batch_sizes = sizes({1, 2, 4}, 8, 248, 8);
  for (std::int64_t b = 256; b <= 512; b += 16) e.graph_batch_sizes.push_back(b);
  e.max_num_seqs = 1024;
  e.max_batched_tokens = 8192;
  e.chunked_prefill = true;
  e.admission = "on-demand";
  e.gpu_memory_utilization = 0.9;
  e.source = "vLLM V1 0.11-0.19: vllm/engine/arg_utils.py (get_batch_defaults), vllm/config/vllm.py (capture "
             "sizes), vllm/v1/core/sched/scheduler.py; async scheduling default from 0.14";
  return e;
}

// SGLang 0.5.3 and later (python/sglang/srt/server_args.py, _handle_gpu_memory_settings and
// _generate_cuda_graph_batch_sizes): the overlap ("zero-overhead") scheduler is on by default
// (--disable-overlap-schedule turns it off): "the scheduler runs one batch ahead"; CUDA graphs
// for decode batches [1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512,
// max + 1, 32), cuda_graph_max_bs 512 on B200 and at TP >= 4 on H100/H200 (256 below TP 4:
// set graph_batch_sizes); chunked_prefill_size 8192 below 160 GB of GPU memory (16384 above:
// set max_batched_tokens on B200); mem_fraction_static ~0.88; max_running_requests =
// max_total_tokens / 2 (bounded here by the KV cache itself). Prefill and decode do not share a
// step unless --enable-mixed-chunk (python/sglang/srt/managers/scheduler.py,
// get_next_batch_to_run: "Run prefill first if possible", else decode the running batch):
// step_mix prefill-first. Host time: no published per-step measurement: 0 unless set.
EngineProfile sglang() {
  EngineProfile e;
  e.name = "sglang";
  e.kernels = "sglang";
  e.host_overlap = true;
  e.cuda_graphs = true;
  e.graph_batch_sizes = sizes({1, 2, 4, 8, 12}, 16, 256, 8);
  for (std::int64_t b = 272; b < 512; b += 16) e.graph_batch_sizes.push_back(b);
  e.graph_batch_sizes.push_back(512);
  e.max_num_seqs = 4096;
  e.max_batched_tokens = 8192;
  e.chunked_prefill = true;
  e.admission = "on-demand";
  e.step_mix = "prefill-first";
  e.gpu_memory_utilization = 0.88;
  e.source = "SGLang 0.5.3+: python/sglang/srt/server_args.py (_handle_gpu_memory_settings, "
             "_generate_cuda_graph_batch_sizes), python/sglang/srt/managers/scheduler.py";
  return e;
}

// TensorRT-LLM 0.17, TensorRT engine path as trtllm-bench throughput runs it
// (tensorrt_llm/bench/benchmark/throughput.py, bench/dataclasses/configuration.py): in-flight
// batching with the GUARANTEED_NO_EVICT capacity scheduler (blocks of the whole request reserved
// at admission: reserve-full), chunked context on (FIRST_COME_FIRST_SERVED), KV cache in
// kv_cache_free_gpu_mem_fraction = 0.90 of the memory free after the engine loads, CUDA graphs off
// (PerformanceOptions.cuda_graphs = False; only `trtllm-bench latency` turns them on). Batch
// limits are the engine's build values (trtllm-bench build sizes them from the dataset; see
// validation/serving/make_scenarios.py): 4096 sequences (the heuristic's cap) and 8192 tokens
// unless set. Host time: the C++ batch manager's per-step cost is not published: 0 unless set.
EngineProfile trtllm() {
  EngineProfile e;
  e.name = "trtllm";
  e.kernels = "trtllm";
  e.cuda_graphs = false;
  e.max_num_seqs = 4096;
  e.max_batched_tokens = 8192;
  e.chunked_prefill = true;
  e.admission = "reserve-full";
  e.kv_cache_free_memory_fraction = 0.9;
  e.source = "TensorRT-LLM 0.17: tensorrt_llm/bench/benchmark/throughput.py, tensorrt_llm/bench/dataclasses/configuration.py";
  return e;
}

// TensorRT-LLM 1.x, PyTorch backend (the default from 1.0; trtllm-serve and the LLM API:
// tensorrt_llm/llmapi/llm_args.py TorchLlmArgs): CUDA graphs on (cuda_graph_config defaults to
// CudaGraphConfig()) for decode batches 1-31, 32, 64 and 128 (max_batch_size 0 -> 128,
// _generate_cuda_graph_batch_sizes) without padding (enable_padding False: any other batch runs
// eagerly); the overlap scheduler on (disable_overlap_scheduler False); chunked prefill off
// (enable_chunked_prefill False); max_batch_size 2048 and max_num_tokens 8192 (BuildConfig, the
// trtllm-serve options); KvCacheConfig.free_gpu_memory_fraction 0.9; the GUARANTEED_NO_EVICT
// capacity scheduler (blocks of the whole request reserved at admission). Host time: not
// published: 0 unless set. Eager issue time (prefill and mixed steps run without graphs): not
// published; 453 us per layer and 1,413 us more per MoE layer are fitted to measured serving
// points (validation/serving/fit_serving.py, the points sample's fit split `every-other-model`,
// runs without issue time; its held-back models' TTFT and TPOT improve, docs/validation.md).
EngineProfile trtllm_pytorch() {
  EngineProfile e;
  e.name = "trtllm-pytorch";
  e.kernels = "trtllm";
  e.host_overlap = true;
  e.eager_layer_us = 453.0;
  e.eager_moe_layer_us = 1413.0;
  e.cuda_graphs = true;
  e.graph_batch_sizes = sizes({}, 1, 32, 1);
  e.graph_batch_sizes.insert(e.graph_batch_sizes.end(), {64, 128});
  e.graph_padding = false;
  e.max_num_seqs = 2048;
  e.max_batched_tokens = 8192;
  e.chunked_prefill = false;
  e.admission = "reserve-full";
  e.kv_cache_free_memory_fraction = 0.9;
  e.source = "TensorRT-LLM 1.0-1.3, PyTorch backend: tensorrt_llm/llmapi/llm_args.py (TorchLlmArgs, CudaGraphConfig, "
             "KvCacheConfig, SchedulerConfig), tensorrt_llm/builder.py (BuildConfig), tensorrt_llm/commands/serve.py";
  return e;
}

std::string list_text(const std::vector<std::int64_t>& v) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
  return os.str();
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(12);
  os << v;
  return os.str();
}

}  // namespace

Registry<EngineProfile>& engine_profiles() {
  static Registry<EngineProfile> r = [] {
    Registry<EngineProfile> reg("serving engine");
    reg.add("none", "no engine step costs: the model's kernels and collectives only", none());
    reg.add("vllm", "vLLM V1: decode-first token budget, CUDA graphs up to 512, on-demand KV blocks", vllm());
    reg.add("sglang", "SGLang: overlap scheduler hides host time, CUDA graphs up to 160, on-demand KV", sglang());
    reg.add("trtllm", "TensorRT-LLM 0.17 TensorRT engine (trtllm-bench): in-flight batching, whole-request KV "
                      "reservation, no CUDA graphs", trtllm());
    reg.add("trtllm-pytorch", "TensorRT-LLM 1.x PyTorch backend (trtllm-serve): CUDA graphs 1-32/64/128 unpadded, "
                              "overlap scheduler, whole-request KV reservation, no chunked prefill", trtllm_pytorch());
    return reg;
  }();
  return r;
}

std::vector<ParamSpec> engine_profile_specs(const EngineProfile& b) {
  auto f = [](const std::string& name, double def, const std::string& unit, const std::string& help, double max) {
    return ParamSpec{name, ParamType::kFloat, num(def), unit, help, 0.0, max, {}};
  };
  const auto flag = [](const std::string& name, bool def, const std::string& help) {
    return ParamSpec{name, ParamType::kBool, def ? "true" : "false", "", help, {}, {}, {}};
  };
  return {
      ParamSpec{"preset", ParamType::kString, b.name, "", "engine whose defaults apply", {}, {}, engine_profiles().names()},
      f("host_step_us", b.host_step_us, "us", "host time of every step (scheduling, input preparation, sampling)", 1e7),
      f("host_per_seq_us", b.host_per_seq_us, "us", "host time per sequence in the step (busiest rank)", 1e6),
      f("host_per_token_us", b.host_per_token_us, "us", "host time per new token in the step (busiest rank)", 1e6),
      f("host_serial_us", b.host_serial_us, "us", "host time of every step that the overlap scheduler does not hide", 1e7),
      f("eager_layer_us", b.eager_layer_us, "us",
        "host time to issue one layer's kernels in an eager (non-graph) step, added before its kernels", 1e6),
      f("eager_moe_layer_us", b.eager_moe_layer_us, "us", "added per MoE layer to eager_layer_us", 1e6),
      flag("host_overlap", b.host_overlap, "host work of the next step overlaps this step's GPU work"),
      flag("cuda_graphs", b.cuda_graphs, "decode-only steps within the captured sizes replay a CUDA graph"),
      ParamSpec{"graph_batch_sizes", ParamType::kIntList, list_text(b.graph_batch_sizes), "sequences",
                "captured decode batch sizes per rank, ascending (a batch is padded to the next one)", 1.0, 1e6, {}},
      flag("graph_padding", b.graph_padding,
           "a decode batch between captured sizes is padded to the next one (false: it runs eagerly)"),
      ParamSpec{"kernels", ParamType::kString, b.kernels.empty() ? "none" : b.kernels, "",
                "whose measured kernels price GEMMs and attention, and whose custom all-reduce runs in a node "
                "(none: the datasheet model and NCCL)", {}, {}, {"trtllm", "sglang", "vllm", "none"}},
      f("graph_launch_us", b.graph_launch_us, "us", "host time of one graph launch (graph steps)", 1e6),
      f("graph_kernel_us", b.graph_kernel_us, "us", "per-kernel overhead inside a replayed graph (eager: gpu.kernel_launch_us)", 1e6),
  };
}

void apply_engine_params(const ParamSet& p, EngineProfile& e) {
  e.host_step_us = p.get_float("host_step_us");
  e.host_per_seq_us = p.get_float("host_per_seq_us");
  e.host_per_token_us = p.get_float("host_per_token_us");
  e.host_serial_us = p.get_float("host_serial_us");
  e.eager_layer_us = p.get_float("eager_layer_us");
  e.eager_moe_layer_us = p.get_float("eager_moe_layer_us");
  e.host_overlap = p.get_bool("host_overlap");
  e.cuda_graphs = p.get_bool("cuda_graphs");
  e.graph_batch_sizes = p.get_int_list("graph_batch_sizes");
  e.graph_padding = p.get_bool("graph_padding");
  e.kernels = p.get_string("kernels") == "none" ? std::string() : p.get_string("kernels");
  e.graph_launch_us = p.get_float("graph_launch_us");
  e.graph_kernel_us = p.get_float("graph_kernel_us");
}

}  // namespace moesim
