// Placeholder: filled in by the predictors work of issue 4.
namespace moesim {}
