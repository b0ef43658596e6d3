"""Run inside the fairseq peer venv (bench/peers/install.sh fairseq), not ours: fairseq's own Trainer
takes the updates our trainer took, on the same batches from the same weights.

    python fairseq_peer_train.py SPEC.json OUT.pt

SPEC.json: {"argv": fairseq-train's arguments (data dir with the dictionaries first), "weights": a
state dict in fairseq's names and ids, "batches": a file of updates, each a list of micro-batches
{src_tokens, prev_output_tokens, target} in fairseq ids, "frozen": parameter names not to train (the
position table, a fixed sinusoid on our side), "device": "cpu" or "cuda"}.
OUT.pt gets, per update attempt: the learning rate it used, the loss and nll sums and target tokens
of its micro-batches, the gradient norm, the loss scale after it (fp16) and whether it stepped; and
the final weights (with --fp16, fairseq's fp32 master copy as well).
"""

import json
import sys

import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer


def sample(micro: dict, pad: int, device: str) -> dict:
    src = micro["src_tokens"]
    target = micro["target"]
    return {
        "id": torch.arange(src.shape[0]),
        "nsentences": src.shape[0],
        "ntokens": int(target.ne(pad).sum()),
        "net_input": {
            "src_tokens": src.to(device),
            "src_lengths": src.ne(pad).sum(1).to(device),
            "prev_output_tokens": micro["prev_output_tokens"].to(device),
        },
        "target": target.to(device),
    }


def main(spec_path: str, out_path: str) -> None:
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=spec["argv"])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    model.load_state_dict(torch.load(spec["weights"], weights_only=False), strict=True)
    for name, p in model.named_parameters():
        if name in spec["frozen"]:
            p.requires_grad_(False)
    criterion = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    pad = task.target_dictionary.pad()

    sums = []
    forward = criterion.forward

    def recording_forward(*a, **kw):
        loss, sample_size, logging = forward(*a, **kw)
        sums.append((float(logging["loss"]), float(logging["nll_loss"]), float(logging["ntokens"])))
        return loss, sample_size, logging

    criterion.forward = recording_forward
    norms = []
    clip = trainer.clip_grad_norm

    def recording_clip(max_norm):
        try:
            norm = clip(max_norm)
        except OverflowError:
            norms.append(float("inf"))
            raise
        norms.append(float(norm))
        return norm

    trainer.clip_grad_norm = recording_clip
    records = []
    for update in torch.load(spec["batches"], weights_only=False):
        sums.clear()
        norms.clear()
        lr = trainer.get_lr()
        before = trainer.get_num_updates()
        trainer.train_step([sample(m, pad, spec["device"]) for m in update])
        scaler = getattr(trainer.optimizer, "scaler", None)
        records.append({
            "lr": lr,
            "loss_sum": sum(s[0] for s in sums),
            "nll_sum": sum(s[1] for s in sums),
            "ntokens": sum(s[2] for s in sums),
            "gnorm": norms[-1] if norms else float("nan"),
            "loss_scale": scaler.loss_scale if scaler is not None else None,
            "stepped": trainer.get_num_updates() == before + 1,
        })  # fmt: skip
    out = {"records": records, "weights": {k: v.detach().cpu() for k, v in model.state_dict().items()}}
    fp32 = getattr(trainer.optimizer, "fp32_params", None)
    if isinstance(fp32, torch.Tensor):
        out["fp32_flat"] = fp32.detach().cpu()
    torch.save(out, out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
