// Placeholder: filled in by the moegps_dup work of issue 3.
namespace moesim {}
