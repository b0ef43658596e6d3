"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/train/schedule.py: each pins
a behaviour that no other fast test checked, found by a mutant that passed every test."""

from __future__ import annotations

import pytest
import torch

from pipeline_lib.train.schedule import LrSchedule

# -- learning-rate schedule (pipeline_lib/train/schedule.py) ---------------------------------------


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)


def test_schedule_defaults_to_inverse_sqrt_and_linear_needs_max_update() -> None:
    s = LrSchedule(_optimizer(), 1e-3, 4, 1e-7)  # fairseq's default scheduler
    assert s.lr_at(16) == pytest.approx(1e-3 * (4 / 16) ** 0.5, rel=1e-12)
    with pytest.raises(ValueError, match="max_update > warmup_updates"):
        LrSchedule(_optimizer(), 1e-3, 0, 1e-7, decay="linear")  # no max_update: no budget to decay over


def test_schedule_state_round_trip_resumes_the_position() -> None:
    s = LrSchedule(_optimizer(), 1e-3, 4, 1e-7)
    s.step_update(9)
    assert s.get_lr() == s.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * (4 / 9) ** 0.5, rel=1e-12)
    state = s.state_dict()
    assert state == {"num_updates": 9, "lr": 1e-3, "warmup_updates": 4, "warmup_init_lr": 1e-7}
    resumed = LrSchedule(_optimizer(), 1e-3, 4, 1e-7)
    resumed.load_state_dict(state)
    assert resumed.num_updates == 9
    assert resumed.get_lr() == s.get_lr()
