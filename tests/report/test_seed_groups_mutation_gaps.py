"""Fast tests for the seed_groups mutants the other tests let survive (make mutate MODULE=seed_groups)."""
