"""Divergence, in one place: ``rule`` decides when a training run has diverged and names the clause
(``train`` applies it every update; ``workflow`` and ``report`` state it and print its clauses), and
``placeholders`` writes the outputs of the stages downstream of a diverged run. Torch-free."""
