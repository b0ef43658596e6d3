"""Fast tests for the clean_segmented mutants the other tests let survive (make mutate MODULE=clean_segmented)."""
