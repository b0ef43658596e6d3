"""Fast tests for the outputs mutants the other tests let survive (make mutate MODULE=outputs)."""
