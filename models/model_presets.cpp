// Model presets with the numbers of each model's published Hugging Face config.json (cited per
// preset). Parameter totals they imply are checked against the model cards in
// tests/models/test_model_spec.cpp.
#include "models/model_spec.hpp"

namespace moesim {

Registry<ModelSpec>& model_presets() {
  static Registry<ModelSpec> registry("model");
  return registry;
}

namespace {

AttentionSpec standard_attention(AttentionKind kind, int heads, int kv_heads, int head_dim,
                                 std::int64_t window = 0, bool causal = true) {
  AttentionSpec a;
  a.kind = kind;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = head_dim;
  a.window = window;
  a.causal = causal;
  return a;
}

AttentionSpec mla(int heads, int q_lora_rank, int kv_lora_rank) {
  // DeepSeek-V2/V3 use the same head shapes: 128 no-rope + 64 rope dims for q/k, 128 for v.
  AttentionSpec a;
  a.kind = AttentionKind::kMla;
  a.heads = heads;
  a.kv_heads = heads;
  a.head_dim = 128 + 64;
  a.q_lora_rank = q_lora_rank;
  a.kv_lora_rank = kv_lora_rank;
  a.qk_nope_head_dim = 128;
  a.qk_rope_head_dim = 64;
  a.v_head_dim = 128;
  return a;
}

// google/switch-base-{8,64,128,256} config.json: d_model 768, d_ff 3072, num_heads 12, d_kv 64,
// num_layers 12, encoder_sparse_step 2 (layers 1, 3, ..., 11 are MoE), ReLU, top-1,
// vocab_size 32128. T5 has relative position buckets and no position limit; max_context 512 is the
// sequence length T5, which Switch builds on, was pre-trained with (Raffel et al. 2020, §3.1.2).
// HarMoEny §V-A and MoEShard §4 serve the 12-layer *encoder* (non-causal, no LM head: one
// embedding matrix). HarMoEny ran V100s and reports 18 MB per Switch expert and
// 33 MB per Qwen expert, i.e. 4 bytes per parameter, so the Switch presets are fp32.
ModelSpec switch_base(int experts) {
  ModelSpec m;
  m.name = "switch-base-" + std::to_string(experts);
  m.layers = 12;
  m.moe_every = 2;
  m.moe_offset = 1;
  m.hidden = 768;
  m.expert_ffn = 3072;
  m.dense_ffn = 3072;
  m.experts = experts;
  m.top_k = 1;
  m.activation = Activation::kRelu;
  m.attention = standard_attention(AttentionKind::kMha, 12, 12, 64, 0, /*causal=*/false);
  m.dtype = DType::kFp32;
  m.vocab = 32128;
  m.tied_embeddings = true;
  m.max_context = 512;
  return m;
}

// Qwen/Qwen1.5-MoE-A2.7B config.json: hidden 2048, 24 layers, 60 experts of
// moe_intermediate_size 1408, top-4, shared_expert_intermediate_size 5632 (one shared expert),
// 16 heads MHA (head_dim 128), SiLU-GLU, vocab 151936, max_position_embeddings 8192, bfloat16.
// (HarMoEny ran it in fp32.)
ModelSpec qwen15_moe() {
  ModelSpec m;
  m.name = "qwen1.5-moe-a2.7b";
  m.layers = 24;
  m.hidden = 2048;
  m.expert_ffn = 1408;
  m.dense_ffn = 5632;
  m.experts = 60;
  m.top_k = 4;
  m.shared_experts = 1;
  m.shared_expert_ffn = 5632;
  m.attention = standard_attention(AttentionKind::kMha, 16, 16, 128);
  m.vocab = 151936;
  m.max_context = 8192;
  return m;
}

// mistralai/Mixtral-8x7B-v0.1 config.json: 32 layers, hidden 4096, 8 experts of 14336, top-2,
// 32 heads / 8 KV heads, head_dim 128, vocab 32000, max_position_embeddings 32768, bfloat16. Window 4096 as in the Mistral
// paper and MoE-GPS §4 ("a 4K sliding window").
ModelSpec mixtral_8x7b() {
  ModelSpec m;
  m.name = "mixtral-8x7b";
  m.layers = 32;
  m.hidden = 4096;
  m.expert_ffn = 14336;
  m.experts = 8;
  m.top_k = 2;
  m.attention = standard_attention(AttentionKind::kGqa, 32, 8, 128, 4096);
  m.vocab = 32000;
  m.max_context = 32768;
  return m;
}

// mistralai/Mixtral-8x22B-Instruct-v0.1 config.json: 56 layers, hidden 6144, 8 experts of 16384,
// top-2, 48 heads / 8 KV heads, head_dim 128, no sliding window, vocab 32768,
// max_position_embeddings 65536, bfloat16.
ModelSpec mixtral_8x22b() {
  ModelSpec m;
  m.name = "mixtral-8x22b";
  m.layers = 56;
  m.hidden = 6144;
  m.expert_ffn = 16384;
  m.experts = 8;
  m.top_k = 2;
  m.attention = standard_attention(AttentionKind::kGqa, 48, 8, 128);
  m.vocab = 32768;
  m.max_context = 65536;
  return m;
}

// allenai/OLMoE-1B-7B-0924 config.json: 16 layers, hidden 2048, 64 experts of 1024, top-8,
// 16 heads MHA (head_dim 128), SwiGLU, vocab 50304, untied, max_position_embeddings 4096, bfloat16.
ModelSpec olmoe() {
  ModelSpec m;
  m.name = "olmoe-1b-7b";
  m.layers = 16;
  m.hidden = 2048;
  m.expert_ffn = 1024;
  m.experts = 64;
  m.top_k = 8;
  m.attention = standard_attention(AttentionKind::kMha, 16, 16, 128);
  m.vocab = 50304;
  m.max_context = 4096;
  return m;
}

// deepseek-ai/DeepSeek-V2-Lite config.json: 27 layers, hidden 2048, first_k_dense_replace 1
// (intermediate_size 10944), 64 routed experts of moe_intermediate_size 1408, top-6,
// n_shared_experts 2, MLA with 16 heads, q_lora_rank null, kv_lora_rank 512, vocab 102400, bf16,
// max_position_embeddings 163840 (YaRN-extended from 4096).
ModelSpec deepseek_v2_lite() {
  ModelSpec m;
  m.name = "deepseek-v2-lite";
  m.layers = 27;
  m.first_dense_layers = 1;
  m.hidden = 2048;
  m.expert_ffn = 1408;
  m.dense_ffn = 10944;
  m.experts = 64;
  m.top_k = 6;
  m.shared_experts = 2;
  m.shared_expert_ffn = 1408;
  m.attention = mla(16, 0, 512);
  m.vocab = 102400;
  m.max_context = 163840;
  return m;
}

// Qwen/Qwen3-30B-A3B config.json: 48 layers, hidden 2048, 128 experts of 768, top-8,
// 32 heads / 4 KV heads, head_dim 128, vocab 151936, untied, max_position_embeddings 40960, bfloat16.
ModelSpec qwen3_30b() {
  ModelSpec m;
  m.name = "qwen3-30b-a3b";
  m.layers = 48;
  m.hidden = 2048;
  m.expert_ffn = 768;
  m.dense_ffn = 6144;
  m.experts = 128;
  m.top_k = 8;
  m.attention = standard_attention(AttentionKind::kGqa, 32, 4, 128);
  m.vocab = 151936;
  m.max_context = 40960;
  return m;
}

// deepseek-ai/DeepSeek-V3 config.json: 61 layers, hidden 7168, first_k_dense_replace 3
// (intermediate_size 18432), 256 routed experts of 2048, top-8, 1 shared expert, MLA with
// 128 heads, q_lora_rank 1536, kv_lora_rank 512, vocab 129280, max_position_embeddings 163840,
// weights in fp8 (e4m3).
// The multi-token-prediction module (14B) is not part of the 671B and is left out.
ModelSpec deepseek_v3() {
  ModelSpec m;
  m.name = "deepseek-v3";
  m.layers = 61;
  m.first_dense_layers = 3;
  m.hidden = 7168;
  m.expert_ffn = 2048;
  m.dense_ffn = 18432;
  m.experts = 256;
  m.top_k = 8;
  m.shared_experts = 1;
  m.shared_expert_ffn = 2048;
  m.attention = mla(128, 1536, 512);
  m.dtype = DType::kFp8;
  m.fp8_block_scales = true;  // quantization_config fp8, weight_block_size [128, 128]
  m.vocab = 129280;
  m.max_context = 163840;
  m.mtp_layers = 1;  // num_nextn_predict_layers: the MTP module, not counted in the 671B
  return m;
}

// deepseek-ai/DeepSeek-R1 config.json (tests/data/hf/deepseek-r1.json): DeepSeek-V3's
// architecture and numbers, fp8 block-quantised (quantization_config fp8, 128x128 blocks), one
// MTP module (num_nextn_predict_layers 1).
ModelSpec deepseek_r1() {
  ModelSpec m = deepseek_v3();
  m.name = "deepseek-r1";
  return m;
}

// moonshotai/Kimi-K2-Instruct config.json (DeepseekV3ForCausalLM; tests/data/hf/kimi-k2.json):
// 61 layers, hidden 7168, first_k_dense_replace 1 (intermediate_size 18432), 384 routed experts
// of 2048, top-8, 1 shared expert, MLA with 64 heads (q_lora_rank 1536, kv_lora_rank 512), vocab
// 163840, max_position_embeddings 131072, fp8 (block 128x128), no MTP module.
ModelSpec kimi_k2() {
  ModelSpec m = deepseek_v3();
  m.name = "kimi-k2";
  m.first_dense_layers = 1;
  m.experts = 384;
  m.attention = mla(64, 1536, 512);
  m.vocab = 163840;
  m.max_context = 131072;
  m.mtp_layers = 0;
  return m;
}

// Qwen/Qwen3-235B-A22B config.json (tests/data/hf/qwen3-235b-a22b.json): 94 layers, hidden 4096,
// 128 experts of moe_intermediate_size 1536, top-8, decoder_sparse_step 1 (every layer MoE),
// 64 heads / 4 KV heads of head_dim 128, intermediate_size 12288 (unused: no dense layer), vocab
// 151936, untied, max_position_embeddings 40960, bfloat16.
ModelSpec qwen3_235b() {
  ModelSpec m;
  m.name = "qwen3-235b-a22b";
  m.layers = 94;
  m.hidden = 4096;
  m.expert_ffn = 1536;
  m.dense_ffn = 12288;
  m.experts = 128;
  m.top_k = 8;
  m.attention = standard_attention(AttentionKind::kGqa, 64, 4, 128);
  m.vocab = 151936;
  m.max_context = 40960;
  return m;
}

// MiniMaxAI/MiniMax-M2.5 config.json (tests/data/hf/minimax-m2.5.json): 62 layers, every one
// MoE, hidden 3072, 256 experts of intermediate_size 1536, top-8, no shared expert
// (shared_intermediate_size 0), 48 heads / 8 KV heads of head_dim 128 in every layer, vocab
// 200064, untied, max_position_embeddings 196608, three MTP modules (use_mtp, num_mtp_modules);
// block-scaled FP8 checkpoint (quantization_config fp8, weight_block_size [128, 128]).
ModelSpec minimax_m25() {
  ModelSpec m;
  m.name = "minimax-m2.5";
  m.layers = 62;
  m.hidden = 3072;
  m.expert_ffn = 1536;
  m.experts = 256;
  m.top_k = 8;
  m.attention = standard_attention(AttentionKind::kGqa, 48, 8, 128);
  m.dtype = DType::kFp8;
  m.fp8_block_scales = true;
  m.vocab = 200064;
  m.max_context = 196608;
  m.mtp_layers = 3;
  return m;
}

// Dense decoders, for the measured serving points that ran them: no experts (experts 0, so no
// layer is MoE), an FFN of intermediate_size in every layer, bf16, untied embeddings.
// meta-llama/Meta-Llama-3.1-{8B,70B} config.json (tests/data/hf/llama-3.1-*.json): vocab 128256,
// max_position_embeddings 131072, GQA with 8 KV heads of head_dim 128; 8B: 32 layers, hidden
// 4096, 32 heads, FFN 14336; 70B: 80 layers, hidden 8192, 64 heads, FFN 28672.
// Qwen/Qwen3-32B config.json (tests/data/hf/qwen3-32b.json): 64 layers, hidden 5120, 64 heads /
// 8 KV heads of head_dim 128, FFN 25600, vocab 151936, max_position_embeddings 40960.
ModelSpec dense(const char* name, int layers, std::int64_t hidden, std::int64_t ffn, int heads, std::int64_t vocab,
                std::int64_t max_context) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.dense_ffn = ffn;
  m.experts = 0;
  m.top_k = 0;
  m.attention = standard_attention(AttentionKind::kGqa, heads, 8, 128);
  m.vocab = vocab;
  m.max_context = max_context;
  return m;
}

// Qwen/Qwen3.5-397B-A17B config.json, text_config (tests/data/hf/qwen3.5-397b-a17b.json): 60
// layers, hidden 4096, 512 experts of moe_intermediate_size 1024, top-10, one shared expert of
// 1024, every layer MoE; layer_types: every fourth layer (full_attention_interval 4) gated full
// attention (attn_output_gate) with 32 heads / 2 KV heads of head_dim 256, the other 45 Gated
// DeltaNet with 16 key heads and 64 value heads of 128 dims and a 4-wide convolution, its state
// in float32 (mamba_ssm_dtype); vocab 248320, untied, max_position_embeddings 262144, bfloat16,
// one MTP layer (mtp_num_hidden_layers). The vision tower is not simulated.
ModelSpec qwen35_397b() {
  ModelSpec m;
  m.name = "qwen3.5-397b-a17b";
  m.layers = 60;
  m.hidden = 4096;
  m.expert_ffn = 1024;
  m.experts = 512;
  m.top_k = 10;
  m.shared_experts = 1;
  m.shared_expert_ffn = 1024;
  m.attention = standard_attention(AttentionKind::kGqa, 32, 2, 256);
  m.attention.output_gate = true;
  m.full_attention_every = 4;
  m.linear_attention.key_heads = 16;
  m.linear_attention.value_heads = 64;
  m.linear_attention.key_head_dim = 128;
  m.linear_attention.value_head_dim = 128;
  m.linear_attention.conv_kernel = 4;
  m.linear_attention.state_dtype = DType::kFp32;
  m.vocab = 248320;
  m.max_context = 262144;
  m.mtp_layers = 1;
  return m;
}

// zai-org/GLM-5 config.json (tests/data/hf/glm-5.json): DeepSeek-V3's layout at 78 layers, hidden
// 6144, the first 3 dense (intermediate_size 12288), 256 experts of 2048 top-8 + 1 shared; MLA
// with 64 heads, q_lora_rank 2048, kv_lora_rank 512, qk 192 + 64 rope dims, v_head_dim 256; DSA
// indexer of 32 heads of 128 picking 2048 keys; vocab 154880, untied, max_position_embeddings
// 202752, bfloat16, one MTP layer (num_nextn_predict_layers).
ModelSpec glm5() {
  ModelSpec m;
  m.name = "glm-5";
  m.layers = 78;
  m.first_dense_layers = 3;
  m.hidden = 6144;
  m.expert_ffn = 2048;
  m.dense_ffn = 12288;
  m.experts = 256;
  m.top_k = 8;
  m.shared_experts = 1;
  m.shared_expert_ffn = 2048;
  m.attention = mla(64, 2048, 512);
  m.attention.qk_nope_head_dim = 192;
  m.attention.v_head_dim = 256;
  m.attention.head_dim = 192 + 64;
  m.attention.index_heads = 32;
  m.attention.index_head_dim = 128;
  m.attention.index_topk = 2048;
  m.vocab = 154880;
  m.max_context = 202752;
  m.mtp_layers = 1;
  return m;
}

// meta-llama/Llama-4-{Maverick-17B-128E,Scout-17B-16E}-Instruct config.json, text_config
// (tests/data/hf/llama-4-*.json): 48 layers, hidden 5120, 40 heads / 8 KV heads of head_dim 128,
// routed experts of intermediate_size 8192, top-1, one shared expert of the same width (model
// code), dense layers of intermediate_size_mlp 16384, attention_chunk_size 8192 with every
// fourth layer global (NoPE), vocab 202048, bfloat16. Maverick: 128 experts in every other layer
// (interleave_moe_layer_step 2: layers 1, 3, ...), max_position_embeddings 1048576. Scout: 16
// experts in every layer, max_position_embeddings 10485760. The vision tower is not simulated.
ModelSpec llama4(const char* name, int experts, int step, std::int64_t max_context) {
  ModelSpec m;
  m.name = name;
  m.layers = 48;
  m.moe_every = step;
  m.moe_offset = step - 1;
  m.hidden = 5120;
  m.expert_ffn = 8192;
  m.dense_ffn = 16384;
  m.experts = experts;
  m.top_k = 1;
  m.shared_experts = 1;
  m.shared_expert_ffn = 8192;
  m.attention = standard_attention(AttentionKind::kGqa, 40, 8, 128, 8192);
  m.full_attention_every = 4;
  m.vocab = 202048;
  m.max_context = max_context;
  return m;
}

// openai/gpt-oss-{120b,20b} config.json (tests/data/hf/gpt-oss-*.json): hidden 2880, experts of
// intermediate_size 2880, top-4, 64 heads / 8 KV heads of head_dim 64, layers alternating a
// 128-token sliding window and full attention (layer_types), vocab 201088, untied,
// max_position_embeddings 131072; experts in MXFP4 (quantization_config mxfp4), the rest bf16.
// 120b: 36 layers, 128 experts; 20b: 24 layers, 32 experts.
ModelSpec gpt_oss(const char* name, int layers, int experts) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = 2880;
  m.expert_ffn = 2880;
  m.experts = experts;
  m.top_k = 4;
  m.attention = standard_attention(AttentionKind::kGqa, 64, 8, 64, 128);
  m.full_attention_every = 2;
  m.expert_dtype = DType::kMxFp4;
  m.vocab = 201088;
  m.max_context = 131072;
  return m;
}

// llama-moe/LLaMA-MoE-v1-3_5B-4_16 config.json: LLaMA-2-7B with each FFN split into 16 experts
// (size_experts 688), num_selects 4, 32 layers, hidden 4096, 32 heads MHA, vocab 32000,
// max_position_embeddings 4096 (LLaMA-2's); fp16 as
// LLaMA-2 was released.
ModelSpec llama_moe() {
  ModelSpec m;
  m.name = "llama-moe";
  m.layers = 32;
  m.hidden = 4096;
  m.expert_ffn = 688;
  m.experts = 16;
  m.top_k = 4;
  m.attention = standard_attention(AttentionKind::kMha, 32, 32, 128);
  m.dtype = DType::kFp16;
  m.vocab = 32000;
  m.max_context = 4096;
  return m;
}

bool add(const ModelSpec& m, const std::string& description) { return model_presets().add(m.name, description, m); }

[[maybe_unused]] const bool kRegistered =
    add(switch_base(8), "Switch-Base encoder, 8 experts (T5 encoder, MoE every other layer, top-1, fp32)") &&
    add(switch_base(64), "Switch-Base encoder, 64 experts (T5 encoder, MoE every other layer, top-1, fp32)") &&
    add(switch_base(128), "Switch-Base encoder, 128 experts (HarMoEny's SWITCH128; MoEShard's encoder)") &&
    add(switch_base(256), "Switch-Base encoder, 256 experts (T5 encoder, MoE every other layer, top-1, fp32)") &&
    add(qwen15_moe(), "Qwen1.5-MoE-A2.7B: 60 experts top-4 + one shared expert (HarMoEny's QWEN)") &&
    add(mixtral_8x7b(), "Mixtral 8x7B: 8 experts top-2, GQA, 4K sliding window (MoE-GPS, AMoE)") &&
    add(mixtral_8x22b(), "Mixtral 8x22B: 8 experts top-2, GQA 48/8 heads") &&
    add(olmoe(), "OLMoE-1B-7B: 64 experts top-8, strongly skewed real routing") &&
    add(deepseek_v2_lite(), "DeepSeek-V2-Lite: MLA, 64 routed experts top-6 + 2 shared, first layer dense") &&
    add(qwen3_30b(), "Qwen3-30B-A3B: 128 experts top-8, GQA 32/4 heads") &&
    add(deepseek_v3(), "DeepSeek-V3: MLA, 256 routed experts top-8 + 1 shared, first 3 layers dense, fp8") &&
    add(llama_moe(), "LLaMA-MoE-3.5B (4/16): LLaMA-2-7B FFNs split into 16 experts, top-4") &&
    add(deepseek_r1(), "DeepSeek-R1: DeepSeek-V3's architecture, fp8, one MTP module (deepseek-ai/DeepSeek-R1 config.json)") &&
    add(kimi_k2(), "Kimi-K2: DeepSeek-V3 architecture, 384 experts top-8, 64 MLA heads, 1T/32B (moonshotai/Kimi-K2-Instruct)") &&
    add(qwen3_235b(), "Qwen3-235B-A22B: 128 experts top-8 in 94 layers, GQA 64/4 heads (Qwen/Qwen3-235B-A22B)") &&
    add(llama4("llama-4-maverick", 128, 2, 1048576),
        "Llama 4 Maverick 17B-128E: MoE every other layer, 128 experts top-1 + shared, chunked attention") &&
    add(llama4("llama-4-scout", 16, 1, 10485760),
        "Llama 4 Scout 17B-16E: 16 experts top-1 + shared in every layer, chunked attention") &&
    add(gpt_oss("gpt-oss-120b", 36, 128), "GPT-OSS-120B: 128 MXFP4 experts top-4, alternating 128-token sliding window") &&
    add(gpt_oss("gpt-oss-20b", 24, 32), "GPT-OSS-20B: 32 MXFP4 experts top-4, alternating 128-token sliding window") &&
    add(minimax_m25(), "MiniMax-M2.5: 256 experts top-8 in all 62 layers, GQA 48/8 heads, block-scaled fp8") &&
    add(dense("llama-3.1-8b", 32, 4096, 14336, 32, 128256, 131072), "Llama-3.1-8B: dense (no experts), GQA 32/8 heads") &&
    add(dense("llama-3.1-70b", 80, 8192, 28672, 64, 128256, 131072), "Llama-3.1-70B: dense (no experts), GQA 64/8 heads") &&
    add(dense("qwen3-32b", 64, 5120, 25600, 64, 151936, 40960), "Qwen3-32B: dense (no experts), GQA 64/8 heads") &&
    add(qwen35_397b(), "Qwen3.5-397B-A17B: 512 experts top-10 + shared; Gated DeltaNet in 3 layers of 4, gated GQA in the 4th") &&
    add(glm5(), "GLM-5: DeepSeek-V3 layout, 256 experts top-8 + shared, MLA with DeepSeek Sparse Attention (top-2048 keys)");

}  // namespace
}  // namespace moesim
