"""fairseq 0.12 plugins (``--user-dir``) for the trajectory oracle: Transformer-Clinic's RAdam and linear
schedule, which cannot be pip-installed, written here from their lines so that fairseq itself can run
the Admin paper's recipes. Loaded only inside the fairseq peer venv.

* ``tc_radam``: LiyuanLucasLiu/Transformer-Clinic@70f72b7 radam_fairseq/radam.py:80-126: moments,
  N_sma, decoupled decay always, the rectified step only once N_sma >= 5, nothing before.
* ``tc_linear``: radam_fairseq/linear_schedule.py:38-78: linear warm-up from --warmup-init-lr, then
  a linear decay from --lr to --min-lr (0 here: see pipeline_lib/train/schedule.py) at --max-update.
"""

import math
from dataclasses import dataclass, field
from typing import Any, List  # noqa: UP035 (omegaconf reads typing.List)

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.optim import FairseqOptimizer, register_optimizer
from fairseq.optim.lr_scheduler import FairseqLRScheduler, register_lr_scheduler
from omegaconf import II


@dataclass
class TcRAdamConfig(FairseqDataclass):
    adam_betas: Any = field(default="(0.9, 0.999)")
    adam_eps: float = field(default=1e-8)
    weight_decay: float = field(default=0.0)
    lr: List[float] = II("optimization.lr")  # noqa: UP006


class _TcRAdam(torch.optim.Optimizer):
    def __init__(self, params, lr, betas, eps, weight_decay):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @property
    def supports_flat_params(self):
        return True

    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.data.float()
                w = p.data.float()
                st = self.state[p]
                if not st:
                    st["step"], st["m"], st["v"] = 0, torch.zeros_like(w), torch.zeros_like(w)
                st["v"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
                st["m"].mul_(beta1).add_(g, alpha=1 - beta1)
                st["step"] += 1
                t = st["step"]
                b2t = beta2**t
                n_max = 2 / (1 - beta2) - 1
                n = n_max - 2 * t * b2t / (1 - b2t)
                if group["weight_decay"] != 0:
                    w.add_(w, alpha=-group["weight_decay"] * group["lr"])
                if n >= 5:
                    r = (1 - b2t) * (n - 4) / (n_max - 4) * (n - 2) * n_max / n / (n_max - 2)
                    size = group["lr"] * math.sqrt(r) / (1 - beta1**t)
                    w.addcdiv_(st["m"], st["v"].sqrt().add_(group["eps"]), value=-size)
                p.data.copy_(w)


@register_optimizer("tc_radam", dataclass=TcRAdamConfig)
class TcRAdam(FairseqOptimizer):
    def __init__(self, cfg, params):
        super().__init__(cfg)
        betas = eval(cfg.adam_betas) if isinstance(cfg.adam_betas, str) else tuple(cfg.adam_betas)
        self._optimizer = _TcRAdam(params, cfg.lr[0], betas, cfg.adam_eps, cfg.weight_decay)

    @property
    def optimizer_config(self):
        return {"lr": self.cfg.lr[0]}


@dataclass
class TcLinearConfig(FairseqDataclass):
    warmup_updates: int = field(default=4000)
    warmup_init_lr: float = field(default=-1)
    end_lr: float = field(default=0.0)
    lr: List[float] = II("optimization.lr")  # noqa: UP006
    max_update: int = II("optimization.max_update")


@register_lr_scheduler("tc_linear", dataclass=TcLinearConfig)
class TcLinear(FairseqLRScheduler):
    def __init__(self, cfg, optimizer):
        super().__init__(cfg, optimizer)
        peak = cfg.lr[0]
        self.init = peak if cfg.warmup_init_lr < 0 else cfg.warmup_init_lr
        self.lr_step = (peak - self.init) / cfg.warmup_updates
        self.peak, self.end = peak, cfg.end_lr
        self.decay_updates = cfg.max_update - cfg.warmup_updates
        self.lr = self.init
        self.optimizer.set_lr(self.lr)

    def step_update(self, num_updates):
        w = self.cfg.warmup_updates
        if num_updates < w:
            self.lr = self.init + num_updates * self.lr_step
        else:
            self.lr = (self.peak - self.end) * (1 - (num_updates - w) / self.decay_updates) + self.end
        self.optimizer.set_lr(self.lr)
        return self.lr
