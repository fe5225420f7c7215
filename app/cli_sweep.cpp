// Placeholder: filled in by the sweep work of issue 4.
namespace moesim {}
