"""Fast tests for the compound_split mutants the other tests let survive (make mutate MODULE=compound_split)."""
