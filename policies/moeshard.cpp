// Placeholder: filled in by the moeshard work of issue 3.
namespace moesim {}
