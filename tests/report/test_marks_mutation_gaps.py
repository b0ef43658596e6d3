"""Fast tests for the marks mutants the other tests let survive (make mutate MODULE=marks)."""
