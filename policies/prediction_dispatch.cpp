// Placeholder: filled in by the predwire work of issue 4.
namespace moesim {}
