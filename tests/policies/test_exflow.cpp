// Placeholder: filled in by the exflow work of issue 3.
