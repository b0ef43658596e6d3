"""Reading fairseq-generate's output, which the peer tests (tests/export/test_fairseq_peer.py, skipped
without fairseq) and bench/oracle_fairseq.py compare our hypotheses with. Runs without fairseq."""

from __future__ import annotations

from pipeline_lib.export.fairseq import generate_hypotheses


def test_generate_hypotheses_reads_only_the_h_lines() -> None:
    log = "S-1\tthe cat\nH-1\t-0.5\tle chat\nD-1\t-0.5\tle chat\nP-1\t-0.1 -0.9\nH-0\t-1.25\t\nH-2\t-2.0\n"
    assert generate_hypotheses(log) == {1: (-0.5, "le chat"), 0: (-1.25, ""), 2: (-2.0, "")}
