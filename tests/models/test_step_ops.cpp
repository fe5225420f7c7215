// Serving-step attention in closed form: a step of prefill chunks and decode tokens priced by
// (query tokens, KV length). Prefill steps reproduce attention_ops exactly; attended pairs match a
// brute-force count and are conserved by chunking; decode reads the whole (windowed) KV cache,
// scaled by kv_heads; MLA decodes in the absorbed latent form; under the roofline cost model
// decode attention is memory-bound and linear in context.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "hardware/cost_model.hpp"
#include "models/operators.hpp"

namespace moesim {
namespace {

const ModelSpec& preset(const std::string& name) { return model_presets().get(name).value; }

// Returns a copy: the op lists here are temporaries.
Op find(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (name == op.name) return op;
  throw std::runtime_error("no op " + name);
}

bool has(const std::vector<Op>& ops, const std::string& name) {
  return std::any_of(ops.begin(), ops.end(), [&](const Op& op) { return name == op.name; });
}

std::vector<Op> step(const ModelSpec& m, std::vector<SeqChunk> seqs) { return attention_step_ops(m, seqs); }

void expect_same_ops(const std::vector<Op>& a, const std::vector<Op>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(what + " op " + a[i].name);
    EXPECT_EQ(a[i].kind, b[i].kind);
    EXPECT_STREQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].dtype, b[i].dtype);
    EXPECT_EQ(a[i].m, b[i].m);
    EXPECT_EQ(a[i].n, b[i].n);
    EXPECT_EQ(a[i].k, b[i].k);
    EXPECT_EQ(a[i].batch, b[i].batch);
    EXPECT_EQ(a[i].group_m, b[i].group_m);
    EXPECT_DOUBLE_EQ(a[i].flops, b[i].flops);
    EXPECT_DOUBLE_EQ(a[i].bytes, b[i].bytes);
  }
}

// Brute force: query j of a chunk sits at context + j and sees keys k <= context + j within the
// window (causal); a bidirectional query sees min(context + new, W) keys.
double brute_pairs(SeqChunk c, std::int64_t window, bool causal) {
  double n = 0;
  for (std::int64_t j = 0; j < c.new_tokens; ++j) {
    const std::int64_t q = c.context + j;
    if (!causal) {
      const std::int64_t len = c.context + c.new_tokens;
      n += static_cast<double>(window > 0 ? std::min(window, len) : len);
      continue;
    }
    for (std::int64_t k = 0; k <= q; ++k)
      if (window == 0 || q - k < window) ++n;
  }
  return n;
}

// Pairs of a step's (non-MLA or decompressed) core, from its FLOPs = 2·heads·pairs·(qk + v).
double core_pairs(const ModelSpec& m, const std::vector<SeqChunk>& seqs) {
  const std::vector<Op> ops = step(m, seqs);
  if (ops.empty()) return 0.0;
  const AttentionSpec& a = m.attention;
  return find(ops, "attn.core").flops / (2.0 * a.heads * 2.0 * a.head_dim);
}

TEST(StepOps, WholePromptStepsEqualPrefillOpsForEveryPreset) {
  for (const auto* e : model_presets().entries()) {
    const ModelSpec& m = e->value;
    for (const auto& [n, len] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {3, 100}, {2, 5000}}) {
      const std::vector<SeqChunk> seqs(static_cast<std::size_t>(n), SeqChunk{len, 0});
      const auto ops = attention_step_ops(m, seqs);
      expect_same_ops(ops, attention_ops(m, n, len), e->name + " " + std::to_string(n) + "x" + std::to_string(len));
      // The prefill core's closed form: Q, K, V read and O written once per token. (Sparse
      // attention runs prefill in the latent form: tests/models/test_hybrid_attention.cpp.)
      const AttentionSpec& a = m.attention;
      if (a.sparse()) continue;
      const bool mla = a.kind == AttentionKind::kMla;
      const double qk = mla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
      const double v = mla ? a.v_head_dim : a.head_dim;
      const double kv_heads = mla ? a.heads : a.kv_heads;
      EXPECT_DOUBLE_EQ(find(ops, "attn.core").bytes,
                       dtype_bytes(m.dtype) * n * len * (a.heads * qk + kv_heads * (qk + v) + a.heads * v))
          << e->name;
      EXPECT_FALSE(has(ops, "attn.core_latent")) << e->name;
    }
  }
}

TEST(StepOps, EmptyStepsAndEmptyChunks) {
  const ModelSpec& m = preset("mixtral-8x7b");
  EXPECT_TRUE(attention_step_ops(m, {}).empty());
  EXPECT_TRUE(step(m, {{0, 100}, {0, 0}}).empty());
  EXPECT_TRUE(attention_ops(m, 0, 100).empty());
  for (const char* name : {"mixtral-8x7b", "deepseek-v3"})
    expect_same_ops(step(preset(name), {{0, 7}, {1, 300}, {0, 0}, {64, 10}}), step(preset(name), {{1, 300}, {64, 10}}),
                    name);
}

TEST(StepOps, AttendedPairsMatchBruteForce) {
  ModelSpec m = preset("olmoe-1b-7b");  // MHA, causal
  for (const std::int64_t window : {0, 64}) {
    m.attention.window = window;
    for (const SeqChunk c : {SeqChunk{1, 0}, SeqChunk{1, 10}, SeqChunk{1, 500}, SeqChunk{30, 20}, SeqChunk{30, 60},
                             SeqChunk{100, 0}, SeqChunk{100, 37}, SeqChunk{7, 1000}})
      EXPECT_DOUBLE_EQ(core_pairs(m, {c}), brute_pairs(c, window, true))
          << "window " << window << " chunk {" << c.new_tokens << "," << c.context << "}";
    // A mixed step's core is one kernel over all chunks: pairs add up.
    EXPECT_DOUBLE_EQ(core_pairs(m, {{1, 500}, {30, 20}, {100, 0}}),
                     brute_pairs({1, 500}, window, true) + brute_pairs({30, 20}, window, true) +
                         brute_pairs({100, 0}, window, true));
  }
  // Bidirectional (encoder): every new token sees the whole (windowed) sequence.
  ModelSpec enc = preset("switch-base-8");
  EXPECT_DOUBLE_EQ(core_pairs(enc, {{10, 30}}), 10.0 * 40);
  enc.attention.window = 16;
  EXPECT_DOUBLE_EQ(core_pairs(enc, {{10, 30}}), brute_pairs({10, 30}, 16, false));
}

TEST(StepOps, ChunkingConservesAttentionWork) {
  ModelSpec m = preset("mixtral-8x7b");  // 4096-token window
  for (const std::int64_t window : {0, 64, 4096}) {
    m.attention.window = window;
    for (const auto& [a, b] : std::vector<std::pair<std::int64_t, std::int64_t>>{{50, 100}, {1, 1}, {3000, 3000}, {64, 1}}) {
      EXPECT_DOUBLE_EQ(core_pairs(m, {{a, 0}}) + core_pairs(m, {{b, a}}), core_pairs(m, {{a + b, 0}}))
          << window << " " << a << "+" << b;
      // Token by token (prefill then decode steps) as well.
      if (a + b <= 200) {
        double pairs = 0;
        for (std::int64_t t = 0; t < a + b; ++t) pairs += core_pairs(m, {{1, t}});
        EXPECT_DOUBLE_EQ(pairs, core_pairs(m, {{a + b, 0}}));
      }
    }
  }
}

TEST(StepOps, DecodeReadsTheKvCacheScaledByKvHeads) {
  const ModelSpec& gqa = preset("mixtral-8x7b");  // 32 heads, 8 KV heads, head_dim 128, bf16
  const std::int64_t ctx = 1000;
  const Op core = find(step(gqa, {{1, ctx}}), "attn.core");
  const double qo = 2.0 * 32 * 2 * 128;  // Q read + O written, bytes
  const double kv_gqa = 2.0 * (ctx + 1) * 8 * 2 * 128;
  EXPECT_DOUBLE_EQ(core.bytes, qo + kv_gqa);
  EXPECT_DOUBLE_EQ(core.flops, 2.0 * 32 * (ctx + 1) * 256);
  // The whole cache: per-token KV bytes of one layer times the positions read.
  EXPECT_DOUBLE_EQ(kv_gqa, (ctx + 1) * kv_cache_bytes_per_token_layer(gqa));
  // The same model with MHA reads heads/kv_heads times the K/V; Q/O do not change.
  ModelSpec mha = gqa;
  mha.attention.kind = AttentionKind::kMha;
  mha.attention.kv_heads = 32;
  EXPECT_DOUBLE_EQ(find(step(mha, {{1, ctx}}), "attn.core").bytes - qo, 4.0 * kv_gqa);
  ModelSpec mqa = gqa;
  mqa.attention.kind = AttentionKind::kMqa;
  mqa.attention.kv_heads = 1;
  EXPECT_DOUBLE_EQ(find(step(mqa, {{1, ctx}}), "attn.core").bytes - qo, kv_gqa / 8.0);
  // Window: a decode token reads the last W - 1 cached positions plus its own K/V.
  const Op far = find(step(gqa, {{1, 10000}}), "attn.core");
  EXPECT_DOUBLE_EQ(far.bytes, qo + 2.0 * 4096 * 8 * 2 * 128);
  EXPECT_DOUBLE_EQ(far.flops, 2.0 * 32 * 4096 * 256);
  EXPECT_EQ(far.n, 4096);
  // A chunk reads its attended cached positions once per sequence: W - 1 + new at most.
  EXPECT_DOUBLE_EQ(find(step(gqa, {{100, 10000}}), "attn.core").bytes,
                   100 * qo + 2.0 * (4095 + 100) * 8 * 2 * 128);
  // Shape fields of a mixed step.
  const Op mixed = find(step(gqa, {{1, 300}, {64, 10}, {1, 20}}), "attn.core");
  EXPECT_EQ(mixed.m, 64);
  EXPECT_EQ(mixed.n, 301);
  EXPECT_EQ(mixed.k, 128);
  EXPECT_EQ(mixed.batch, 3 * 32);
}

TEST(StepOps, KvCacheBytesPerToken) {
  for (const auto* e : model_presets().entries())
    EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token(e->value),
                     e->value.num_kv_cache_layers() * kv_cache_bytes_per_token_layer(e->value))
        << e->name;
  // MLA caches the latent and the rope key: (512 + 64) values per layer.
  const ModelSpec& v3 = preset("deepseek-v3");
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token(v3), 61.0 * (512 + 64) * dtype_bytes(v3.dtype));
  const ModelSpec& lite = preset("deepseek-v2-lite");
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_layer(lite), (512.0 + 64) * 2);
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token(preset("mixtral-8x7b")), 32.0 * 2 * 8 * 128 * 2);
}

TEST(StepOps, MlaAbsorbedRule) {
  EXPECT_FALSE(mla_absorbed({1, 0}));  // a one-token prompt is prefill
  EXPECT_TRUE(mla_absorbed({1, 1}));
  EXPECT_TRUE(mla_absorbed({1, 100000}));
  EXPECT_FALSE(mla_absorbed({2, 100}));
  EXPECT_FALSE(mla_absorbed({0, 100}));
  EXPECT_FALSE(mla_absorbed({512, 4096}));
}

TEST(StepOps, MlaDecodeRunsInTheLatentSpace) {
  const ModelSpec& v3 = preset("deepseek-v3");  // 128 heads, latent 512 + rope 64, fp8
  const std::int64_t ctx = 1000;
  const auto ops = step(v3, {{1, ctx}});
  EXPECT_FALSE(has(ops, "attn.kv_b"));
  EXPECT_FALSE(has(ops, "attn.core"));
  const Op qa = find(ops, "attn.q_absorb");
  EXPECT_EQ(qa.batch, 128);
  EXPECT_EQ(qa.n, 512);
  EXPECT_EQ(qa.k, 128);
  const Op va = find(ops, "attn.v_absorb");
  EXPECT_EQ(va.n, 128);
  EXPECT_EQ(va.k, 512);
  const Op core = find(ops, "attn.core_latent");
  EXPECT_EQ(core.kind, OpKind::kAttention);
  EXPECT_DOUBLE_EQ(core.flops, 2.0 * 128 * (ctx + 1) * (576 + 512));
  // Q (576 per head) read, O (512 per head) written, one latent copy per position for all heads.
  EXPECT_DOUBLE_EQ(core.bytes, 1.0 * (128 * (576 + 512) + (ctx + 1) * 576));
  EXPECT_DOUBLE_EQ((ctx + 1) * 576.0, (ctx + 1) * kv_cache_bytes_per_token_layer(v3));
  // Absorption reuses kv_b's weights (W^UK, W^UV): weights read still equal the attention
  // parameters (less norms).
  double weights = 0;
  for (const Op& op : ops)
    if (op.kind == OpKind::kGemm) weights += static_cast<double>(op.n) * op.k * op.batch;
  EXPECT_DOUBLE_EQ(weights, v3.attention_params() - (2 * 7168 + 512 + 1536));
  // The latent cache is far smaller than decompressed per-head K/V: 576 vs 128·(192 + 128).
  EXPECT_LT(core.bytes, (ctx + 1) * 128.0 * 320);
}

TEST(StepOps, MlaMixedStep) {
  const ModelSpec& v3 = preset("deepseek-v3");
  const auto ops = step(v3, {{100, 0}, {1, 500}, {50, 200}, {1, 30}});
  EXPECT_EQ(find(ops, "attn.q_a").m, 152);
  EXPECT_EQ(find(ops, "attn.kv_a").m, 152);
  EXPECT_EQ(find(ops, "attn.out").m, 152);
  // kv_b decompresses the prefill chunks' new tokens and the cached latents they attend.
  EXPECT_EQ(find(ops, "attn.kv_b").m, 100 + 50 + 200);
  const Op core = find(ops, "attn.core");
  EXPECT_EQ(core.batch, 2 * 128);
  EXPECT_DOUBLE_EQ(core.flops, 2.0 * 128 * (brute_pairs({100, 0}, 0, true) + brute_pairs({50, 200}, 0, true)) * 320);
  const Op latent = find(ops, "attn.core_latent");
  EXPECT_EQ(latent.batch, 2 * 128);
  EXPECT_DOUBLE_EQ(latent.flops, 2.0 * 128 * (501 + 31) * 1088);
  EXPECT_EQ(find(ops, "attn.q_absorb").m, 2);
  EXPECT_EQ(find(ops, "attn.v_absorb").m, 2);
  // MLA chunked prefill conserves the decompressed core's pairs.
  auto pairs = [&](std::vector<SeqChunk> s) { return find(step(v3, s), "attn.core").flops; };
  EXPECT_DOUBLE_EQ(pairs({{300, 0}}) + pairs({{200, 300}}), pairs({{500, 0}}));
}

TEST(StepOps, DecodeAttentionIsMemoryBoundAndLinearInContext) {
  const ComputeCostModel cost(gpu_presets().get("H100-SXM-80GB").value);
  const GpuSpec& gpu = cost.gpu();
  const ModelSpec& m = preset("mixtral-8x7b");
  const Op core = find(step(m, {{1, 4096}}), "attn.core");
  const double mem_s = core.bytes / (gpu.hbm_bandwidth_Bps * cost.efficiency().memory);
  const double compute_s = core.flops / (gpu.peak(m.dtype) * cost.efficiency().attention);
  EXPECT_GT(mem_s, 10 * compute_s);
  EXPECT_DOUBLE_EQ(cost.kernel_seconds(core), mem_s);
  // Linear in context (below Mixtral's 4K window): the core doubles with the context, and the
  // step's time is affine in it.
  auto core_s = [&](std::int64_t ctx) { return cost.kernel_seconds(find(step(m, {{1, ctx}}), "attn.core")); };
  EXPECT_NEAR(core_s(4000) / core_s(2000), 2.0, 0.01);
  auto step_t = [&](std::int64_t ctx) { return static_cast<double>(cost.ops_time(step(m, {{1, ctx}}))); };
  const double d1 = step_t(2000) - step_t(1000), d2 = step_t(4000) - step_t(2000);
  EXPECT_GT(d1, 0);
  EXPECT_NEAR(d2 / d1, 2.0, 0.01);
  // 64 decode sequences share one read of the projection weights: far less than 64 single steps.
  const std::vector<SeqChunk> batch(64, SeqChunk{1, 1024});
  const Tick one = cost.ops_time(step(m, {{1, 1024}}));
  const Tick many = cost.ops_time(attention_step_ops(m, batch));
  EXPECT_LT(many, 64 * one);
  EXPECT_LT(many, 16 * one);
  const auto qkv = [&](const std::vector<Op>& ops) { return cost.op_time(find(ops, "attn.qkv")); };
  EXPECT_LT(qkv(attention_step_ops(m, batch)), 2 * qkv(step(m, {{1, 1024}})));
  // The cores do not batch away: each sequence reads its own cache.
  EXPECT_NEAR(find(attention_step_ops(m, batch), "attn.core").bytes / find(step(m, {{1, 1024}}), "attn.core").bytes,
              64.0, 1e-9);
}

}  // namespace
}  // namespace moesim
