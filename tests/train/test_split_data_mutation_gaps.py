"""Fast tests for the split_data mutants the other tests let survive (make mutate MODULE=split_data)."""
