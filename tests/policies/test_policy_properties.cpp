// Placeholder: filled in by the policy_properties work of issue 3.
