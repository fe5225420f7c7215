// DeepEP V1 dispatch/combine in closed form (deepep.hpp). Sources are DeepEP at 567632d unless
// noted: `git show 567632d:<path>` of github.com/deepseek-ai/DeepEP.
#include "hardware/deepep.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/diagnostics.hpp"
#include "hardware/nccl_tuning.hpp"

namespace moesim {

namespace {

// NCCL src/graph/search.cc sm90SpeedArrayInter: the fastest per-NIC channel speed NCCL's search
// tries on Hopper is 48 GB/s, for a 400 Gb/s (50 GB/s) NIC: the achievable share of a NIC's line
// rate. DeepEP's README: "CX7 InfiniBand 400 Gb/s RDMA network card (~50 GB/s maximum bandwidth)".
constexpr double kRdmaAchievable = 48.0 / 50.0;

// DeepEP's normal kernels copy with SMs; their rate per SM, in the bytes DeepEP counts, from the
// only published SM sweep of them: the hybrid-ep branch's docs/README_Hybrid-EP.md (6ad6896,
// "DeepEP" baseline rows), B200 EP8, 4096 tokens, at 16 SMs (the least link-bound point):
// FP8 dispatch 246 GB/s, BF16 dispatch 348 GB/s, combine 302 GB/s. (B200 rows: none of them is
// among the H800 rows moesim compares against.)
constexpr double kSmGBpsDispatchFp8 = 246.0 / 16;
constexpr double kSmGBpsDispatchBf16 = 348.0 / 16;
constexpr double kSmGBpsCombine = 302.0 / 16;

// csrc/kernels/configs.cuh NUM_MAX_NVL_PEERS: internode normal kernels assume 8 GPUs per node.
constexpr int kNvlPeers = 8;

double align16(double b) { return std::ceil(b / 16.0) * 16.0; }

[[noreturn]] void reject(const char* option, const std::string& why) {
  throw InputError(SourceLocation{option, 0, 0}, why);
}

// C(m - a, k) / C(m, k): the chance that k of m items drawn without replacement miss a given a.
double miss_all(double m, double a, int k) {
  double r = 1.0;
  for (int i = 0; i < k; ++i) {
    if (m - a - i <= 0) return 0.0;
    r *= (m - a - i) / (m - i);
  }
  return r;
}

int ep_nodes(const Cluster& c, int ep) {
  const int g = c.spec().gpus_per_node;
  return (ep + g - 1) / g;
}

void check(const Cluster& c, const DeepEpParams& p) {
  if (p.ep < 1) reject("--ep", "EP size must be at least 1");
  if (p.ep > c.num_gpus())
    reject("--ep", "EP " + std::to_string(p.ep) + " exceeds the cluster's " + std::to_string(c.num_gpus()) +
                       " GPUs (use --nodes to add nodes)");
  if (p.experts % p.ep != 0)
    reject("--experts", std::to_string(p.experts) + " experts do not divide over EP " + std::to_string(p.ep));
  if (p.top_k < 1 || p.top_k > p.experts) reject("--top-k", "top-k must be in 1..experts");
  if (p.tokens < 0) reject("--tokens", "tokens must be non-negative");
  if (p.fp8 && p.hidden % 128 != 0)
    reject("--hidden", "FP8 dispatch needs hidden to be a multiple of 128 (one scale per 128 channels)");
  const int nodes = ep_nodes(c, p.ep);
  if (nodes > 1) {
    if (c.spec().nics_per_node <= 0 || c.spec().nic_bandwidth_Gbps <= 0)
      reject("--hardware", c.spec().name + " has no RDMA NICs: DeepEP across nodes needs them");
    if (p.ep % c.spec().gpus_per_node != 0)
      reject("--ep", "across nodes EP must be a multiple of the GPUs per node (" +
                         std::to_string(c.spec().gpus_per_node) + ")");
    if (p.kernel == DeepEpKernel::kNormal && c.spec().gpus_per_node != kNvlPeers)
      reject("--hardware", "DeepEP's internode normal kernels need 8 GPUs per node (NUM_MAX_NVL_PEERS)");
  }
  if (p.kernel == DeepEpKernel::kLowLatency && !p.ll_nvlink && c.spec().nics_per_node <= 0)
    reject("--hardware", c.spec().name + " has no RDMA NICs: the low-latency kernels without NVLink need them");
  if (p.topk_groups < 0) reject("--topk-groups", "must be 0 (no limit) or more");
  if (p.kernel == DeepEpKernel::kNormal && (p.sms < 2 || p.sms % 2 != 0))
    reject("--sms", "DeepEP's SM budget must be even and at least 2 (Buffer.set_num_sms asserts it)");
}

// NVLink per GPU at NCCL's link rates (nccl_tuning: 20 GB/s per 25 GB/s link on SM80/SM90;
// DeepEP's README measures "~160 GB/s" for H800's 8 links). One GPU per node: no NVLink.
double nvlink_GBps(const Cluster& c) {
  if (c.spec().gpus_per_node < 2) return 0.0;
  return nccl_path_GBps(c, 0, 1);
}

// Each GPU's share of its node's NICs at the achievable rate.
double rdma_GBps(const Cluster& c) {
  const auto& s = c.spec();
  if (s.nics_per_node <= 0) return 0.0;
  const double nics_per_gpu = static_cast<double>(s.nics_per_node) / s.gpus_per_node;
  return s.nic_bandwidth_Gbps / 8.0 * kRdmaAchievable * nics_per_gpu;
}

double sm_GBps(const DeepEpParams& p) {
  if (p.kernel == DeepEpKernel::kLowLatency) return 0.0;  // no SM budget: the kernel takes what it needs
  const double per_sm = p.op == DeepEpOp::kCombine ? kSmGBpsCombine : p.fp8 ? kSmGBpsDispatchFp8 : kSmGBpsDispatchBf16;
  return per_sm * p.sms;
}

// The latency floor: the last copy and the flag that announces it (DeepEP sends the count or tail
// pointer behind the data on the same queue pair or NVLink path, internode_ll.cu ~l.334,
// internode.cu's tail updates) arrive after one traversal of the farthest peer path.
double fixed_us(const Cluster& c, int ep) {
  Tick worst = 0;
  for (int dst = 1; dst < ep; ++dst) worst = std::max(worst, c.route_latency(c.gpu_endpoint(0), c.gpu_endpoint(dst)));
  return ticks_to_us(worst);
}

// The calibration's fit for this call: by kernel, op and whether the EP group spans nodes.
const DeepEpKernelFit* deepep_fit_of(const Cluster& c, const DeepEpParams& p) {
  if (!c.spec().calibration) return nullptr;
  return c.spec().calibration->deepep_fit(deepep_kernel_name(p.kernel), p.op == DeepEpOp::kCombine ? "combine" : "dispatch",
                                          ep_nodes(c, p.ep) > 1);
}

}  // namespace

const char* deepep_kernel_name(DeepEpKernel k) { return k == DeepEpKernel::kNormal ? "deepep-normal" : "deepep-ll"; }

DeepEpRouting deepep_routing(const Cluster& c, const DeepEpParams& p) {
  check(c, p);
  DeepEpRouting r;
  r.nodes = ep_nodes(c, p.ep);
  // DeepEP's tests (test_internode.py): scores grouped by node, the top `num_topk_groups` nodes
  // kept, then the top-k experts among theirs; random scores make that a uniform draw.
  const int groups = p.topk_groups > 0 ? std::min(p.topk_groups, r.nodes) : r.nodes;
  const double pool = static_cast<double>(p.experts) * groups / r.nodes;  // experts the token draws from
  const double per_rank = static_cast<double>(p.experts) / p.ep;
  const double per_node = static_cast<double>(p.experts) / r.nodes;
  const double p_group = static_cast<double>(groups) / r.nodes;  // P(a given node is among the groups)
  r.p_rank = p_group * (1.0 - miss_all(pool, per_rank, p.top_k));
  r.p_node = p_group * (1.0 - miss_all(pool, per_node, p.top_k));
  r.ranks_per_token = r.p_rank * p.ep;
  r.nodes_per_token = r.p_node * r.nodes;
  return r;
}

DeepEpMessageBytes deepep_message_bytes(const DeepEpParams& p) {
  const double scales = p.fp8 ? p.hidden / 128.0 * 4.0 : 0.0;         // float per 128 channels
  const double data = p.fp8 ? p.hidden : 2.0 * p.hidden;               // e4m3 or bf16
  DeepEpMessageBytes b;
  if (p.kernel == DeepEpKernel::kNormal) {
    // internode.cu get_num_bytes_per_token: align16(hidden bytes + SourceMeta (8) + scales + top-k
    // indices + top-k weights); combine carries no scales and no indices. Tests count hidden bytes
    // plus scales (fp8_factor = (1 + 4/128) / 2 of BF16).
    if (p.op == DeepEpOp::kDispatch) {
      b.record = align16(data + 8 + scales + 4.0 * p.top_k + 4.0 * p.top_k);
      b.counted = data + scales;
    } else {
      b.record = align16(2.0 * p.hidden + 8 + 4.0 * p.top_k);
      b.counted = 2.0 * p.hidden;
    }
  } else {
    // internode_ll.cu num_bytes_per_msg = sizeof(int4) + (FP8 ? hidden + scales : 2·hidden);
    // combine sends hidden · sizeof(bf16). test_low_latency.py counts the FP8 message with its
    // header and the BF16 one without.
    if (p.op == DeepEpOp::kDispatch) {
      b.record = 16.0 + data + scales;
      b.counted = p.fp8 ? b.record : data;
    } else {
      b.record = b.counted = 2.0 * p.hidden;
    }
  }
  return b;
}

DeepEpCost deepep_cost(const Cluster& c, const DeepEpParams& p) {
  DeepEpCost out;
  out.routing = deepep_routing(c, p);
  const DeepEpRouting& r = out.routing;
  const DeepEpMessageBytes b = deepep_message_bytes(p);
  const double t = static_cast<double>(p.tokens);
  const double local_gpus = std::min(p.ep, c.spec().gpus_per_node);
  if (p.kernel == DeepEpKernel::kNormal) {
    // Per GPU, by symmetry, sent and received alike. NVLink carries every (token, GPU) copy except
    // the one staying on the GPU that holds it: intranode straight from the source, internode from
    // the forwarder (same local rank), which is a destination itself with P(rank | node).
    out.nvlink_bytes = t * r.ranks_per_token * (local_gpus - 1) / local_gpus * b.record;
    // RDMA: one copy per destination node other than the token's own.
    out.rdma_bytes = r.nodes > 1 ? t * (r.nodes_per_token - r.p_node) * b.record : 0.0;
    // test_intranode.py counts received tokens (per GPU); test_internode.py tokens x nodes.
    out.counted_bytes = t * (r.nodes > 1 ? r.nodes_per_token : r.ranks_per_token) * b.counted;
    out.bandwidth_label = r.nodes > 1 ? "RDMA" : "NVLink";
  } else {
    // One message per (token, selection). Same-node messages (1/nodes of them; 1/ep to the GPU
    // itself, a local copy) go over NVLink when P2P is allowed, all of them through the NIC when not.
    const double messages = t * p.top_k;
    const double same_node = 1.0 / r.nodes, self = 1.0 / p.ep;
    if (p.ll_nvlink) {
      out.nvlink_bytes = messages * (same_node - self) * b.record;
      out.rdma_bytes = messages * (1.0 - same_node) * b.record;
    } else {
      out.rdma_bytes = messages * b.record;  // NVSHMEM_DISABLE_P2P: loopback through the NIC too
    }
    out.counted_bytes = messages * b.counted;
    out.bandwidth_label = "RDMA";
  }
  out.nvlink_GBps = nvlink_GBps(c);
  out.rdma_GBps = rdma_GBps(c);
  out.sm_GBps = sm_GBps(p);
  out.fixed_us = fixed_us(c, p.ep);
  const DeepEpKernelFit* fit = deepep_fit_of(c, p);
  if (fit) {
    // Measured: the fixed cost and the fraction of each nominal rate the kernels reach.
    out.nvlink_GBps *= fit->nvlink_efficiency;
    out.rdma_GBps *= fit->rdma_efficiency;
    out.sm_GBps *= fit->sm_efficiency;
    out.fixed_us = fit->overhead_us;
    out.fitted = true;
  }
  double drain_us = 0.0;
  out.bottleneck = "nvlink";
  const auto consider = [&](double bytes, double GBps, const char* name) {
    if (bytes <= 0.0 || GBps <= 0.0) return;
    const double us = bytes / (GBps * 1e3);
    if (us > drain_us) {
      drain_us = us;
      out.bottleneck = name;
    }
  };
  consider(out.nvlink_bytes, out.nvlink_GBps, "nvlink");
  consider(out.rdma_bytes, out.rdma_GBps, "rdma");
  consider(out.counted_bytes, out.sm_GBps, "sm");
  out.time_us = out.fixed_us + drain_us;
  if (fit) out.time_us *= fit->residual_factor(static_cast<double>(p.tokens), static_cast<double>(p.hidden) * p.top_k, p.ep);
  out.bandwidth_GBps = out.time_us > 0 ? out.counted_bytes / (out.time_us * 1e3) : 0.0;
  return out;
}

std::vector<DeepEpGpuTraffic> deepep_traffic(const Cluster& c, const DeepEpParams& p, std::span<const int> home,
                                             std::span<const std::vector<int>> dests) {
  check(c, p);
  if (home.size() != dests.size()) throw std::invalid_argument("deepep_traffic: one home GPU per token");
  const std::size_t n = static_cast<std::size_t>(p.ep);
  const int per_node = c.spec().gpus_per_node;
  const DeepEpMessageBytes b = deepep_message_bytes(p);
  const bool combine = p.op == DeepEpOp::kCombine;
  std::vector<DeepEpGpuTraffic> out(n);
  std::vector<double> copied(n, 0.0);                                 // bytes each GPU's SMs move
  std::vector<std::vector<char>> feeds(n, std::vector<char>(n, 0));  // feeds[to][from]
  // One copy from `a` to `b` (dispatch direction; combine runs it backwards).
  const auto copy = [&](int a, int bb, bool rdma) {
    if (a == bb) return;
    const int from = combine ? bb : a, to = combine ? a : bb;
    auto& f = out[static_cast<std::size_t>(from)];
    auto& t = out[static_cast<std::size_t>(to)];
    (rdma ? f.rdma_send : f.nvlink_send) += b.record;
    (rdma ? t.rdma_recv : t.nvlink_recv) += b.record;
    copied[static_cast<std::size_t>(from)] += b.record;
    feeds[static_cast<std::size_t>(to)][static_cast<std::size_t>(from)] = 1;
  };
  std::vector<int> gpus, nodes;
  for (std::size_t i = 0; i < home.size(); ++i) {
    const int h = home[i];
    for (int d : dests[i])
      if (d < 0 || d >= p.ep || h < 0 || h >= p.ep) throw std::invalid_argument("deepep_traffic: GPU outside the EP group");
    if (p.kernel == DeepEpKernel::kLowLatency) {
      for (int d : dests[i]) copy(h, d, !p.ll_nvlink || d / per_node != h / per_node);
      continue;
    }
    gpus.assign(dests[i].begin(), dests[i].end());
    std::sort(gpus.begin(), gpus.end());
    gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
    nodes.clear();
    for (int d : gpus)
      if (nodes.empty() || nodes.back() != d / per_node) nodes.push_back(d / per_node);
    for (int node : nodes) {
      // Internode: to the same local rank on that node over RDMA (its own node: itself), then on.
      const int fwd = node == h / per_node ? h : node * per_node + h % per_node;
      copy(h, fwd, true);
      for (int d : gpus)
        if (d / per_node == node) copy(fwd, d, false);
    }
  }
  const DeepEpKernelFit* fit = deepep_fit_of(c, p);
  // bytes per us, at the measured fractions of the nominal rates where a fit has them
  const double nv = nvlink_GBps(c) * 1e3 * (fit ? fit->nvlink_efficiency : 1.0);
  const double rd = rdma_GBps(c) * 1e3 * (fit ? fit->rdma_efficiency : 1.0);
  const double sm = sm_GBps(p) * 1e3 * (fit ? fit->sm_efficiency : 1.0);
  std::vector<double> own(n, 0.0);
  for (std::size_t g = 0; g < n; ++g) {
    const auto& x = out[g];
    const double nvb = std::max(x.nvlink_send, x.nvlink_recv), rdb = std::max(x.rdma_send, x.rdma_recv);
    if (nvb > 0) own[g] = std::max(own[g], nv > 0 ? nvb / nv : 0.0);
    if (rdb > 0) own[g] = std::max(own[g], rd > 0 ? rdb / rd : 0.0);
    if (sm > 0) own[g] = std::max(own[g], copied[g] / sm);
  }
  const double fixed = fit ? fit->overhead_us : fixed_us(c, p.ep);
  // The residual at this call's mean tokens per rank (the tables time uniform calls).
  const double factor = fit ? fit->residual_factor(static_cast<double>(home.size()) / static_cast<double>(n),
                                                   static_cast<double>(p.hidden) * p.top_k, p.ep)
                            : 1.0;
  for (std::size_t g = 0; g < n; ++g) {
    double worst = own[g];
    for (std::size_t s = 0; s < n; ++s)
      if (feeds[g][s]) worst = std::max(worst, own[s]);
    out[g].finish_us = (fixed + worst) * factor;
  }
  return out;
}

}  // namespace moesim
