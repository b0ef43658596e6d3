"""Run inside the fairseq peer venv (bench/peers/install.sh fairseq), not ours: fairseq's own forward
pass on an exported checkpoint, as fairseq batches it (sources left-padded, decoder input = </s> + target).

    python fairseq_peer_forward.py EXPORT_DIR BATCH.json OUT.npy

BATCH.json holds {"src": [[fairseq ids]], "tgt": [[fairseq ids]]} (no </s>); OUT.npy gets the
log-probabilities (batch, 1 + longest target, vocab) in fairseq's id order.
"""

import json
import sys

import numpy as np
import torch
from fairseq import checkpoint_utils


def main(export_dir: str, batch_path: str, out_path: str) -> None:
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [f"{export_dir}/checkpoint.pt"], arg_overrides={"data": export_dir}
    )
    model = models[0].eval()
    d = task.source_dictionary
    pad, eos = d.pad(), d.eos()
    with open(batch_path, encoding="utf-8") as handle:
        batch = json.load(handle)
    src = [row + [eos] for row in batch["src"]]
    prev = [[eos] + row for row in batch["tgt"]]
    src_tokens = torch.full((len(src), max(map(len, src))), pad)
    prev_tokens = torch.full((len(prev), max(map(len, prev))), pad)
    for i, row in enumerate(src):
        src_tokens[i, src_tokens.shape[1] - len(row) :] = torch.tensor(row)  # left_pad_source
    for i, row in enumerate(prev):
        prev_tokens[i, : len(row)] = torch.tensor(row)
    lengths = torch.tensor([len(row) for row in src])
    with torch.no_grad():
        out = model(src_tokens, lengths, prev_tokens)
        lprobs = model.get_normalized_probs(out, log_probs=True)
    np.save(out_path, lprobs.float().numpy())


if __name__ == "__main__":
    main(*sys.argv[1:4])
