// Placeholder: filled in by the fastermoe work of issue 3.
