"""Fast tests for the mix mutants the other tests let survive (make mutate MODULE=mix)."""
