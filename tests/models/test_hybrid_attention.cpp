// Attention whose cost does not follow the context: Gated DeltaNet's linear attention (Qwen3.5),
// whose per-sequence state is fixed, and DeepSeek Sparse Attention (GLM-5), whose core reads at
// most top-k keys per query. Closed forms and the two properties: a linear layer's state
// is constant in the context, a sparse layer's core is flat beyond its top-k.
#include <gtest/gtest.h>

#include "models/operators.hpp"

namespace moesim {
namespace {

const ModelSpec& preset(const std::string& name) { return model_presets().get(name).value; }

const Op& find(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (name == op.name) return op;
  throw std::runtime_error("no op " + name);
}

bool has(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (name == op.name) return true;
  return false;
}

TEST(LinearAttention, LayersFollowTheFullAttentionInterval) {
  const ModelSpec& m = preset("qwen3.5-397b-a17b");
  EXPECT_TRUE(m.is_linear_attention_layer(0));
  EXPECT_TRUE(m.is_linear_attention_layer(2));
  EXPECT_FALSE(m.is_linear_attention_layer(3));
  EXPECT_FALSE(m.is_linear_attention_layer(59));
  EXPECT_EQ(m.num_kv_cache_layers(), 15);
  EXPECT_TRUE(m.interleaves_attention());
  // Only the 15 full layers keep a KV cache: 2 KV heads x 256 dims x K and V in bf16.
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_layer(m), 2.0 * 2 * 256 * 2);
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token(m), 15 * 2.0 * 2 * 256 * 2);
  // The state: 64 value heads x 128 x 128 fp32 plus 3 inputs of the 12288-channel convolution in
  // bf16, in each of the 45 linear layers.
  const double per_layer = 64.0 * 128 * 128 * 4 + 3.0 * (2 * 16 * 128 + 64 * 128) * 2;
  EXPECT_DOUBLE_EQ(linear_state_bytes_per_sequence(m), 45 * per_layer);
  // Split over 4 GPUs by heads.
  EXPECT_DOUBLE_EQ(linear_state_bytes_per_sequence_gpu(m, 4), 45 * per_layer / 4);
  ModelSpec no_linear = m;
  no_linear.linear_attention = {};
  EXPECT_EQ(linear_state_bytes_per_sequence(no_linear), 0.0);
  EXPECT_EQ(no_linear.num_kv_cache_layers(), 60);
}

TEST(LinearAttention, StateIsConstantInTheContextLength) {
  const ModelSpec& m = preset("qwen3.5-397b-a17b");
  // One decode token after 1k, 32k and 256k cached tokens: the same ops, the same FLOPs and bytes.
  const std::vector<SeqChunk> short_ctx{{1, 1024}}, long_ctx{{1, 32768}}, longest{{1, 262000}};
  const auto a = linear_attention_step_ops(m, short_ctx), b = linear_attention_step_ops(m, long_ctx),
             c = linear_attention_step_ops(m, longest);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].flops, b[i].flops) << a[i].name;
    EXPECT_EQ(a[i].bytes, c[i].bytes) << a[i].name;
  }
  // The core reads and writes the state once per sequence: 2 x 64 x 128 x 128 x 4 bytes.
  const Op& core = find(a, "lin.core");
  EXPECT_EQ(core.attention, AttentionForm::kLinear);
  EXPECT_GE(core.bytes, 2.0 * 64 * 128 * 128 * 4);
  // 6·dk·dv per value head, plus the token's one intra-chunk pair (2·(2·dk + dv)).
  EXPECT_DOUBLE_EQ(core.flops, 64.0 * (6 * 128 * 128 + 2 * (2 * 128 + 128)));
  // Two sequences read two states; a full layer's decode grows with the context instead.
  const std::vector<SeqChunk> two{{1, 1024}, {1, 1024}};
  EXPECT_NEAR(find(linear_attention_step_ops(m, two), "lin.core").bytes, 2 * core.bytes, 1e-6 * core.bytes);
  EXPECT_GT(find(attention_step_ops(m, long_ctx), "attn.core").bytes,
            16 * find(attention_step_ops(m, short_ctx), "attn.core").bytes);
}

TEST(LinearAttention, PrefillGrowsLinearlyWithThePrompt) {
  const ModelSpec& m = preset("qwen3.5-397b-a17b");
  const std::vector<SeqChunk> p4{{4096, 0}}, p8{{8192, 0}};
  // Whole 64-token chunks: the intra-chunk pairs grow with the prompt, not its square.
  const double f4 = find(linear_attention_step_ops(m, p4), "lin.core").flops;
  const double f8 = find(linear_attention_step_ops(m, p8), "lin.core").flops;
  EXPECT_DOUBLE_EQ(f8, 2 * f4);
  const double pairs = 64.0 * 65 / 2 * (4096 / 64);
  EXPECT_DOUBLE_EQ(f4, 64.0 * (4096.0 * 6 * 128 * 128 + pairs * 2 * (2 * 128 + 128)));
  // Projections: q, k (16 heads x 128 each), v and z (64 x 128 each) from the hidden state.
  const Op in = find(linear_attention_step_ops(m, p4), "lin.in_proj");
  EXPECT_EQ(in.n, 2 * 16 * 128 + 2 * 64 * 128);
  EXPECT_EQ(in.k, 4096);
}

TEST(LinearAttention, LayerDispatchPicksTheLayersForm) {
  const ModelSpec& m = preset("qwen3.5-397b-a17b");
  const std::vector<SeqChunk> s{{16, 100}};
  EXPECT_TRUE(has(layer_attention_step_ops(m, 0, s), "lin.core"));
  EXPECT_FALSE(has(layer_attention_step_ops(m, 0, s), "attn.core"));
  const auto full = layer_attention_step_ops(m, 3, s);
  EXPECT_TRUE(has(full, "attn.core"));
  // Gated attention: the query projection also yields the gate.
  EXPECT_EQ(find(full, "attn.qkv").n, (2 * 32 + 2 * 2) * 256);
  EXPECT_TRUE(has(full, "attn.gate"));
}

TEST(SparseAttention, CoreIsFlatBeyondItsTopK) {
  const ModelSpec& m = preset("glm-5");
  ASSERT_TRUE(m.attention.sparse());
  const auto core_at = [&](std::int64_t context) {
    const std::vector<SeqChunk> s{{1, context}};
    return find(attention_step_ops(m, s), "attn.core_latent");
  };
  const Op at4k = core_at(4096), at64k = core_at(65536), at1k = core_at(1000);
  EXPECT_EQ(at4k.flops, at64k.flops);
  EXPECT_EQ(at4k.bytes, at64k.bytes);
  EXPECT_EQ(at4k.n, 2048);
  // Below top-k a query attends everything there is.
  EXPECT_LT(at1k.flops, at4k.flops);
  EXPECT_DOUBLE_EQ(at4k.flops / at1k.flops, 2048.0 / 1001.0);
  // The indexer scores every key: linear in the context, and cheap beside dense MLA.
  const std::vector<SeqChunk> s4{{1, 4096}}, s64{{1, 65536}};
  const Op i4 = find(attention_step_ops(m, s4), "attn.indexer"), i64 = find(attention_step_ops(m, s64), "attn.indexer");
  EXPECT_EQ(i4.attention, AttentionForm::kIndexer);
  EXPECT_NEAR(i64.flops / i4.flops, 65537.0 / 4097.0, 1e-9);
  EXPECT_DOUBLE_EQ(i4.flops, 2.0 * 32 * 128 * 4097);
}

TEST(SparseAttention, PrefillRunsTheLatentFormWithTopKPairs) {
  const ModelSpec& m = preset("glm-5");
  const std::vector<SeqChunk> prompt{{8192, 0}};
  const auto ops = attention_step_ops(m, prompt);
  // DSA runs MLA's MQA form for prefill too: no decompressed core, no kv_b.
  EXPECT_FALSE(has(ops, "attn.core"));
  EXPECT_FALSE(has(ops, "attn.kv_b"));
  const Op& core = find(ops, "attn.core_latent");
  // Query j sees min(j + 1, 2048) keys: 2048·2049/2 + (8192 - 2048)·2048 pairs.
  const double pairs = 2048.0 * 2049 / 2 + (8192.0 - 2048) * 2048;
  EXPECT_DOUBLE_EQ(core.flops, 2.0 * 64 * pairs * (512 + 64 + 512));
  // The KV cache per token and layer: the 576-wide latent and the indexer's fp8 key and scale.
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_layer(m), 576.0 * 2 + 128 + 4);
  ModelSpec dense = m;
  dense.attention.index_topk = dense.attention.index_heads = dense.attention.index_head_dim = 0;
  EXPECT_TRUE(has(attention_step_ops(dense, prompt), "attn.core"));
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_layer(dense), 576.0 * 2);
}

TEST(SparseAttention, IndexerParametersAreCounted) {
  const ModelSpec& m = preset("glm-5");
  ModelSpec dense = m;
  dense.attention.index_topk = dense.attention.index_heads = dense.attention.index_head_dim = 0;
  // wq_b (2048 -> 32 x 128), wk (6144 -> 128), weights_proj (6144 -> 32) and the k norm.
  EXPECT_DOUBLE_EQ(m.attention_params() - dense.attention_params(),
                   2048.0 * 32 * 128 + 6144.0 * 128 + 6144.0 * 32 + 2 * 128);
}

}  // namespace
}  // namespace moesim
