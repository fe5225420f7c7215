// Placeholder: filled in by the even_split work of issue 3.
