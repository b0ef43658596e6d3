"""Mutation gaps of update (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test."""
