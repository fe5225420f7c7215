// serving.speculative, after SGLang's --speculative-* flags and TensorRT-LLM's MTP decoding config.
#include "app/scenario/scenario_speculative.hpp"

#include <algorithm>

namespace moesim {

std::vector<ParamSpec> speculative_specs() {
  return {
      ParamSpec{"method", ParamType::kString, "none", "",
                "none; mtp: the model's multi-token-prediction module drafts (DeepSeek-V3 §2.2; TensorRT-LLM "
                "num_nextn_predict_layers, SGLang --speculative-algorithm NEXTN); draft-model: a separate model "
                "(draft_model) drafts", {}, {}, {"none", "mtp", "draft-model"}},
      ParamSpec{"draft_tokens", ParamType::kInt, "1", "tokens",
                "tokens drafted and verified per sequence per decode step (one draft pass each)", 1.0, 64.0, {}},
      ParamSpec{"acceptance_rate", ParamType::kFloat, "0.8", "",
                "probability that a draft is accepted given the previous one was, in [0, 1]", 0.0, 1.0, {}},
      ParamSpec{"draft_model", ParamType::kString, "~", "", "model preset of the draft (method draft-model)", {}, {}, {}},
  };
}

SpeculativeConfig read_speculative_section(const YAML::Node& node, const ModelSpec& model, const SourceMap& src,
                                           Diagnostics& diags, const SourceLocation& fallback, YAML::Node& resolved) {
  const ParamSet sp = read_params(node, speculative_specs(), src, diags);
  SpeculativeConfig spec;
  const std::string method = sp.get_string("method");
  spec.method = method == "mtp" ? SpeculativeConfig::Method::kMtp
                : method == "draft-model" ? SpeculativeConfig::Method::kDraftModel
                                          : SpeculativeConfig::Method::kNone;
  spec.draft_tokens = static_cast<int>(sp.get_int("draft_tokens"));
  spec.acceptance_rate = sp.get_float("acceptance_rate");
  const SourceLocation spec_where = node ? src.locate(node) : fallback;
  const YAML::Node draft_name = sp.to_yaml()["draft_model"];
  const bool has_draft = draft_name && draft_name.IsScalar() && draft_name.Scalar() != "~" && draft_name.Scalar() != "null";
  if (spec.method == SpeculativeConfig::Method::kMtp) {
    // The MTP module: one layer of the target's shape per module (DeepSeek-V3 §2.2: its own
    // attention and MoE block, sharing the embedding and output head), run once per draft token.
    spec.draft = model;
    spec.draft.layers = std::max(1, model.mtp_layers);
    spec.draft.first_dense_layers = 0;
    spec.draft.moe_every = 1;
    spec.draft.moe_offset = 0;
    spec.draft.full_attention_every = 0;
    if (model.mtp_layers <= 0)
      diags.error(sp.given("method") ? sp.where("method") : spec_where,
                  "speculative method mtp needs a model with an MTP module (model.mtp_layers >= 1; DeepSeek-V3/R1 "
                  "ship one: num_nextn_predict_layers 1)");
    if (has_draft) diags.error(sp.where("draft_model"), "'draft_model' is for method draft-model, not mtp");
  } else if (spec.method == SpeculativeConfig::Method::kDraftModel) {
    if (!has_draft) {
      diags.error(sp.given("method") ? sp.where("method") : spec_where, "speculative method draft-model needs 'draft_model' (a model preset)");
    } else if (const auto* d = model_presets().find(draft_name.Scalar())) {
      spec.draft = d->value;
    } else {
      diags.error(sp.where("draft_model"), unknown_name_message(model_presets().family(), draft_name.Scalar(), model_presets().names()));
    }
  }
  resolved = sp.to_yaml();
  return spec;
}

}  // namespace moesim
