"""The trainer's stop signals: one Ctrl-C (or SIGTERM) saves and stops; a second Ctrl-C stops at once."""

from __future__ import annotations

import os
import signal

import pytest

from pipeline_lib.train.run_state import StopSignal


def test_a_relayed_sigterm_after_ctrl_c_does_not_count_as_a_second_ctrl_c():
    with StopSignal() as stop:
        os.kill(os.getpid(), signal.SIGINT)  # the terminal's Ctrl-C reaches the whole process group
        os.kill(os.getpid(), signal.SIGTERM)  # and Snakemake relays a SIGTERM to its jobs
        assert stop.received == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # the user's second Ctrl-C
