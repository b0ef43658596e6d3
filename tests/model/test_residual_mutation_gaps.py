"""Fast tests for the residual mutants the other tests let survive (make mutate MODULE=residual)."""
