// Placeholder: filled in by the harmoeny work of issue 3.
