"""Batched search over a TransformerModel: beam search, greedy decoding and sampling.

Everything is vectorised over (sentences x beam): one ``topk`` over ``beam * vocab`` per sentence
per step, finished hypotheses are written into preallocated tensors, and sentences that are done
are dropped from the batch (their rows leave the K/V caches), as fairseq's SequenceGenerator does.

Semantics follow fairseq 0.12 (``fairseq-generate``):

* scores are natural-log probabilities; a finished hypothesis scores
  ``sum(log p) / len ** lenpen`` where ``len`` counts the final ``</s>``;
* ``</s>`` candidates are finalised only from the best ``beam`` of the ``2 * beam`` candidates
  of a step, and a sentence stops as soon as it holds ``beam`` finished hypotheses (fairseq's
  rule, not the "no active hypothesis could still win" bound: it is what published fairseq
  BLEU scores were decoded with);
* the output length is at most ``max_len_a * src_len + max_len_b`` tokens plus ``</s>``, where
  ``src_len`` counts the source ``</s>`` (fairseq's ``--max-len-a/--max-len-b``); at that length
  ``</s>`` is forced. Unlike fairseq, the limit is per sentence (fairseq uses the padded batch
  width), so results never depend on how sentences were batched;
* ``min_len``: ``</s>`` is forbidden before that many tokens (fairseq ``--min-len``, default 1);
* ``<pad>`` and ``<s>`` are never generated; ``<unk>`` can be penalised or forbidden;
* ``temperature`` divides the logits before the softmax (beam search and sampling alike); a
  sampled hypothesis is scored with the tempered log-probabilities, not renormalised over top-k
  (as fairseq's ``--sampling-topk``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pipeline_lib.decode.search_config import SearchConfig
from pipeline_lib.model.transformer import EncoderOut, TransformerModel

# Fixed by pipeline_lib.data.vocab.
PAD, BOS, EOS, UNK = 0, 1, 2, 3
NEG_INF = -math.inf


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, without the final </s>
    score: float  # sum of log-probs (incl. </s>) / (len(tokens) + 1) ** lenpen
    positional_scores: list[float]  # log-prob of every token, the final </s> included

    @property
    def logprob(self) -> float:
        return float(sum(self.positional_scores))


class StepDecoder:
    """One decoder step's log-probabilities, with or without the incremental cache.

    ``enc`` holds one row per sentence; decoder rows come in blocks of ``group`` (beams or samples
    of one sentence). With the cache, the blocks share their sentence's encoder K/V (no per-beam
    copies), beam reordering only touches the self-attention K/V, and the encoder state is reordered
    only when finished sentences leave the batch (``shrink``).
    """

    def __init__(
        self, model: TransformerModel, enc: EncoderOut, use_cache: bool, temperature: float, group: int
    ) -> None:
        self.model = model
        self.cache = model.new_cache(group) if use_cache else None
        if self.cache is None and group > 1:
            enc = enc.reorder(
                torch.arange(enc.hidden.shape[0], device=enc.hidden.device).repeat_interleave(group)
            )
        self.enc = enc
        self.temperature = temperature

    def log_probs(self, prefix: Tensor) -> Tensor:
        if self.cache is not None:
            logits = self.model.decode(prefix, self.enc, self.cache)[:, -1]
        else:
            logits = self.model.decode(prefix, self.enc)[:, -1]
        logits = logits.float()
        if self.temperature != 1.0:
            logits = logits / self.temperature
        return F.log_softmax(logits, dim=-1)

    def reorder(self, order: Tensor, shrink: bool, prefixes: Tensor | None = None) -> None:
        """Rows become ``order``'s rows. ``prefixes`` (rows, steps so far), the decoder inputs before
        the reorder, lets the cache skip the steps a row shares with its new history."""
        if self.cache is None:
            self.enc = self.enc.reorder(order)
            return
        shared = None if prefixes is None else shared_steps(prefixes, order, self.cache.group)
        self.cache.reorder(order, cross=shrink, shared=shared)
        if shrink:
            self.enc = self.enc.reorder(self.cache.group_order(order))


def shared_steps(prefixes: Tensor, order: Tensor, group: int) -> Tensor:
    """For each row ``i`` of a reorder into ``order``: how many first decoder steps its new history
    (row ``order[i]``'s) has in common with the one it holds, i.e. the same input tokens for the same
    sentence (rows come in blocks of ``group`` per sentence), which make the same keys and values."""
    n = order.shape[0]
    same = prefixes.index_select(0, order).eq(prefixes[:n]).long().cumprod(dim=1).sum(dim=1)
    rows = torch.arange(n, device=order.device)
    same_sentence = order.div(group, rounding_mode="floor").eq(rows.div(group, rounding_mode="floor"))
    return same * same_sentence


def max_lengths(model: TransformerModel, src_tokens: Tensor, cfg: SearchConfig) -> Tensor:
    """Per-sentence limit on generated tokens (without </s>), capped by the model's positions."""
    src_len = src_tokens.ne(PAD).sum(dim=1).double()
    limit = torch.floor(cfg.max_len_a * src_len + cfg.max_len_b).long()
    # Decoder input at the last step is [bos] + limit tokens.
    return limit.clamp(min=0, max=model.config.max_positions - 1)


def _mask_special(lprobs: Tensor, step: int, cfg: SearchConfig, at_max: Tensor | None) -> None:
    """In place: forbid pad/bos (and unk), enforce min_len, and force </s> at the length limit."""
    eos_col = lprobs[:, EOS].clone() if at_max is not None else None
    lprobs[:, PAD] = NEG_INF
    lprobs[:, BOS] = NEG_INF
    if cfg.no_unk:
        lprobs[:, UNK] = NEG_INF
    elif cfg.unkpen:
        lprobs[:, UNK] -= cfg.unkpen
    if step < cfg.min_len:
        lprobs[:, EOS] = NEG_INF
    if at_max is not None:
        rows = at_max.nonzero().squeeze(1)
        lprobs[rows] = NEG_INF
        lprobs[rows, EOS] = eos_col[rows]


def _rows_at_max(max_lens: Tensor, step: int, min_max: int, per_sentence: int) -> Tensor | None:
    if step < min_max:  # python-side check: no device sync on ordinary steps
        return None
    return (max_lens <= step).repeat_interleave(per_sentence)


def beam_search(model: TransformerModel, src_tokens: Tensor, cfg: SearchConfig) -> list[list[Hypothesis]]:
    """Beam search for a batch of sources (B, S) right-padded with </s>; n-best lists per sentence."""
    # a block, not a decorator: mutmut leaves decorated functions unmutated (docs/mutation.md)
    with torch.inference_mode():
        return _beam_search(model, src_tokens, cfg)


def _beam_search(model: TransformerModel, src_tokens: Tensor, cfg: SearchConfig) -> list[list[Hypothesis]]:
    device = src_tokens.device
    bsz, k = src_tokens.shape[0], cfg.beam
    max_lens = max_lengths(model, src_tokens, cfg)
    steps = int(max_lens.max()) + 1  # generated positions incl. </s>
    dec = StepDecoder(model, model.encode(src_tokens), cfg.use_cache, cfg.temperature, group=k)

    tokens = torch.full((bsz * k, steps + 1), PAD, dtype=torch.long, device=device)
    tokens[:, 0] = BOS
    cum = torch.zeros(bsz * k, steps, device=device)  # cumulative log-prob after each step
    # Finished hypotheses, indexed by original sentence and slot.
    fin_tokens = torch.full((bsz, k, steps), PAD, dtype=torch.long, device=device)
    fin_cum = torch.zeros(bsz, k, steps, device=device)
    fin_score = torch.full((bsz, k), NEG_INF, device=device)
    fin_len = torch.zeros(bsz, k, dtype=torch.long, device=device)
    fin_count = torch.zeros(bsz, dtype=torch.long, device=device)

    alive = torch.arange(bsz, device=device)  # original ids of the sentences still searching
    alive_max = max_lens
    min_max = int(alive_max.min())
    for step in range(steps):
        n = alive.shape[0]
        lprobs = dec.log_probs(tokens[:, : step + 1])
        vocab = lprobs.shape[1]
        _mask_special(lprobs, step, cfg, _rows_at_max(alive_max, step, min_max, k))
        if step == 0:
            # All beams hold the same prefix: expand from the first one only.
            c = min(2 * k, vocab)
            cand_scores, cand_tokens = lprobs.view(n, k, vocab)[:, 0, :].topk(c, dim=1)
            cand_beams = torch.zeros_like(cand_tokens)
        else:
            # The best c (beam, token) pairs of a sentence are among each beam's own best c tokens:
            # select per beam first, so cum + lprobs is never built over the whole vocabulary.
            c = min(2 * k, k * vocab)
            per_beam = min(c, vocab)
            beam_scores, beam_tokens = lprobs.topk(per_beam, dim=1)
            beam_scores = (beam_scores + cum[:, step - 1 : step]).view(n, k * per_beam)
            cand_scores, pick = beam_scores.topk(c, dim=1)
            cand_beams = torch.div(pick, per_beam, rounding_mode="floor")
            cand_tokens = beam_tokens.view(n, k * per_beam).gather(1, pick)
        base = torch.arange(n, device=device).unsqueeze(1) * k
        cand_rows = cand_beams + base  # rows of the current batch
        is_eos = cand_tokens.eq(EOS)

        # ---- finalise </s> among the best k candidates (tensors only) ----
        eos_top = is_eos[:, :k] & cand_scores[:, :k].gt(NEG_INF)
        rank = eos_top.long().cumsum(dim=1) - 1
        slot = fin_count[alive].unsqueeze(1) + rank
        take = eos_top & slot.lt(k)
        si, ci = take.nonzero(as_tuple=True)
        if si.numel():
            orig, sl, rows = alive[si], slot[si, ci], cand_rows[si, ci]
            hyp = tokens[rows, 1 : step + 2].clone()
            hyp[:, step] = EOS
            fin_tokens[orig, sl, : step + 1] = hyp
            fin_cum[orig, sl, :step] = cum[rows, :step]
            fin_cum[orig, sl, step] = cand_scores[si, ci]
            fin_score[orig, sl] = cand_scores[si, ci] / float(step + 1) ** cfg.lenpen
            fin_len[orig, sl] = step + 1
            fin_count.index_add_(0, orig, torch.ones_like(orig))
        done = fin_count[alive].ge(k) | alive_max.le(step)
        keep = fill_holes(done)
        if keep.numel() == 0:
            break

        # ---- the k best non-</s> candidates continue ----
        positions = torch.arange(c, device=device).expand(n, c)
        _, active = torch.topk(is_eos.long() * c + positions, k, dim=1, largest=False)
        shrink = keep.numel() < n
        if shrink:
            alive, alive_max = alive[keep], alive_max[keep]
            min_max = int(alive_max.min())
            active, cand_rows = active[keep], cand_rows[keep]
            cand_scores, cand_tokens, is_eos = cand_scores[keep], cand_tokens[keep], is_eos[keep]
        active = active.gather(1, parent_slots(cand_beams.gather(1, active)))
        order = cand_rows.gather(1, active).view(-1)
        new_scores = cand_scores.gather(1, active)
        # A </s> that had to be kept (vocabulary smaller than 2k) must never win.
        new_scores = new_scores.masked_fill(is_eos.gather(1, active), NEG_INF).view(-1)
        dec.reorder(order, shrink, tokens[:, : step + 1])
        tokens = tokens.index_select(0, order)
        tokens[:, step + 1] = cand_tokens.gather(1, active).view(-1)
        cum = cum.index_select(0, order)
        cum[:, step] = new_scores

    return _collect(fin_tokens, fin_cum, fin_score, fin_len, fin_count, cfg.nbest)


def fill_holes(done: Tensor) -> Tensor:
    """The unfinished positions of ``done`` in the order they take in the shrunk batch: a survivor
    keeps its position when that still exists, and the survivors beyond the new end move into the
    places of finished ones. Batch order carries no meaning for the search, and rows that stay put
    need no K/V cache copy (DecoderCache.reorder); shifting every later sentence down would move
    nearly all rows."""
    keep = (~done).nonzero().squeeze(1)
    n = keep.numel()
    order = torch.arange(n, device=done.device)
    holes = done[:n].nonzero().squeeze(1)
    order[holes] = keep[n - holes.numel() :]  # keep is sorted: its tail lies beyond the new end
    return order


def parent_slots(parents: Tensor) -> Tensor:
    """Where each survivor of a step goes within its sentence's block of beam rows.

    ``parents`` (n, k) holds the survivors' parent beams, best survivor first. The result ``perm``
    lists, for each row of the block, which survivor takes it: every parent's best child stays in
    the parent's own row, and the remaining children fill the rows of parents that left no child,
    in rank order. The row order of a block carries no meaning for the search, but rows that keep
    their history need no K/V cache copy (DecoderCache.reorder)."""
    n, k = parents.shape
    onehot = F.one_hot(parents, k)  # (n, survivor, parent)
    earlier_siblings = (onehot.cumsum(dim=1) - onehot).mul_(onehot).sum(dim=2)
    first = earlier_siblings.eq(0)
    childless = onehot.amax(dim=1).eq(0)  # (n, row)
    slots = torch.arange(k, device=parents.device).expand(n, k)
    free_rows = torch.sort(childless.logical_not().long() * k + slots, dim=1).values % k  # childless first
    later = (~first).long().cumsum(dim=1) - 1  # rank among the non-first children
    row_of = torch.where(first, parents, free_rows.gather(1, later.clamp(min=0)))
    return torch.empty_like(parents).scatter_(1, row_of, slots)


def _collect(
    fin_tokens: Tensor, fin_cum: Tensor, fin_score: Tensor, fin_len: Tensor, fin_count: Tensor, nbest: int
) -> list[list[Hypothesis]]:
    order = fin_score.argsort(dim=1, descending=True, stable=True)
    idx = order.unsqueeze(2).expand_as(fin_tokens)
    fin_tokens, fin_cum = fin_tokens.gather(1, idx).cpu(), fin_cum.gather(1, idx).cpu()
    fin_score, fin_len = fin_score.gather(1, order).cpu(), fin_len.gather(1, order).cpu()
    positional = torch.diff(fin_cum, dim=2, prepend=torch.zeros_like(fin_cum[:, :, :1]))
    counts = fin_count.clamp(max=fin_score.shape[1]).tolist()
    lens, scores, toks, pos = fin_len.tolist(), fin_score.tolist(), fin_tokens.tolist(), positional.tolist()
    out: list[list[Hypothesis]] = []
    for b, count in enumerate(counts):
        hyps = []
        for j in range(min(count, nbest)):
            n = lens[b][j]
            hyps.append(Hypothesis(toks[b][j][: n - 1], scores[b][j], pos[b][j][:n]))
        out.append(hyps)
    return out


def sample_search(
    model: TransformerModel, src_tokens: Tensor, cfg: SearchConfig, generator: torch.Generator | None = None
) -> list[list[Hypothesis]]:
    """Greedy decoding (``cfg.greedy``) or ancestral sampling: ``nbest`` independent samples per
    sentence, full or top-k, from the tempered distribution; n-best lists sorted by score."""
    with torch.inference_mode():  # a block, not a decorator (see beam_search)
        return _sample_search(model, src_tokens, cfg, generator)


def _sample_search(
    model: TransformerModel, src_tokens: Tensor, cfg: SearchConfig, generator: torch.Generator | None
) -> list[list[Hypothesis]]:
    device = src_tokens.device
    bsz = src_tokens.shape[0]
    per = cfg.nbest if cfg.sampling else 1
    max_lens = max_lengths(model, src_tokens, cfg)
    steps = int(max_lens.max()) + 1
    enc = model.encode(src_tokens)
    if per > 1:
        enc = enc.reorder(torch.arange(bsz, device=device).repeat_interleave(per))
    # Samples finish one by one, not in blocks, so each row keeps its own encoder copy (group 1).
    dec = StepDecoder(model, enc, cfg.use_cache, cfg.temperature, group=1)
    rows_total = bsz * per

    tokens = torch.full((rows_total, steps + 1), PAD, dtype=torch.long, device=device)
    tokens[:, 0] = BOS
    lps = torch.zeros(rows_total, steps, device=device)
    fin_tokens = torch.full((rows_total, steps), PAD, dtype=torch.long, device=device)
    fin_lps = torch.zeros(rows_total, steps, device=device)
    fin_len = torch.zeros(rows_total, dtype=torch.long, device=device)

    alive = torch.arange(rows_total, device=device)  # original row ids
    alive_max = max_lens.repeat_interleave(per)
    min_max = int(alive_max.min())
    for step in range(steps):
        lprobs = dec.log_probs(tokens[:, : step + 1])
        _mask_special(lprobs, step, cfg, _rows_at_max(alive_max, step, min_max, 1))
        if cfg.sampling:
            if cfg.sampling_topk > 0:
                top_lp, top_idx = lprobs.topk(min(cfg.sampling_topk, lprobs.shape[1]), dim=1)
                pick = torch.multinomial(top_lp.exp(), 1, generator=generator)
                choice, lp = top_idx.gather(1, pick).squeeze(1), top_lp.gather(1, pick).squeeze(1)
            else:
                choice = torch.multinomial(lprobs.exp(), 1, generator=generator).squeeze(1)
                lp = lprobs.gather(1, choice.unsqueeze(1)).squeeze(1)
        else:
            lp, choice = lprobs.max(dim=1)
        tokens[:, step + 1] = choice
        lps[:, step] = lp
        done = choice.eq(EOS) | alive_max.le(step)
        fin = done.nonzero().squeeze(1)
        if fin.numel():
            orig = alive[fin]
            fin_tokens[orig, : step + 1] = tokens[fin, 1 : step + 2]
            fin_tokens[orig, step] = EOS
            fin_lps[orig, : step + 1] = lps[fin, : step + 1]
            fin_len[orig] = step + 1
            keep = fill_holes(done)
            if keep.numel() == 0:
                break
            alive, alive_max = alive[keep], alive_max[keep]
            min_max = int(alive_max.min())
            tokens, lps = tokens.index_select(0, keep), lps.index_select(0, keep)
            dec.reorder(keep, shrink=True)

    lens = fin_len.cpu()
    # Unnormalised sum, then fairseq's length normalisation.
    score = fin_lps.sum(dim=1).cpu() / lens.double().pow(cfg.lenpen).float()
    toks, pos, lens_l, score_l = (
        fin_tokens.cpu().tolist(),
        fin_lps.cpu().tolist(),
        lens.tolist(),
        score.tolist(),
    )
    out: list[list[Hypothesis]] = []
    for b in range(bsz):
        hyps = []
        for r in range(b * per, (b + 1) * per):
            n = lens_l[r]
            hyps.append(Hypothesis(toks[r][: n - 1], score_l[r], pos[r][:n]))
        hyps.sort(key=lambda h: -h.score)
        out.append(hyps)
    return out


def generate(
    model: TransformerModel, src_tokens: Tensor, cfg: SearchConfig, generator: torch.Generator | None = None
) -> list[list[Hypothesis]]:
    """Dispatch: sampling and beam 1 go through the cheaper one-row-per-hypothesis loop."""
    if cfg.sampling or cfg.greedy:
        return sample_search(model, src_tokens, cfg, generator)
    return beam_search(model, src_tokens, cfg)
