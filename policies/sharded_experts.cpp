// Placeholder: filled in by the sharded_experts work of issue 3.
namespace moesim {}
