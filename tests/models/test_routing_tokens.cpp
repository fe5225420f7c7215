// Placeholder: filled in by the tokens work of issue 4.
