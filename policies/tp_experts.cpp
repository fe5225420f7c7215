// Placeholder: filled in by the tp_experts work of issue 3.
namespace moesim {}
