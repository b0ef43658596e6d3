"""The search settings of ``translate`` (torch-free: the workflow schema's ``decoding`` keys are
generated from these fields, pipeline_lib/workflow/schema.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pipeline_lib.errors import ConfigError
from pipeline_lib.field_spec import check_fields


def _search(default: Any, help: str | None = None, *, decoding: bool = True, **meta: Any) -> Any:
    """A search flag; ``decoding``: a workflow ``decoding`` entry may set it; ``meta`` may give its
    bounds (pipeline_lib/field_spec.py: checked here and written into the workflow schema)."""
    metadata = {"help": help, "group": "search", "decoding": decoding, **meta}
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class SearchConfig:
    """Search settings; ``translate`` derives its search flags from these fields."""

    beam: int = _search(5, "beam size (1 = greedy)", ge=1)
    lenpen: float = _search(1.0, "score / length**lenpen (fairseq)")
    max_len_a: float = _search(0.0, "max output length a*src_len + b", ge=0)
    max_len_b: int = _search(200, ge=0)
    # Not workflow keys (yet): the rules write one hypothesis per sentence and always use the cache.
    min_len: int = _search(1, "forbid </s> before this many tokens", decoding=False, ge=0)
    nbest: int = _search(1, "hypotheses per sentence (<= beam)", decoding=False, ge=1)
    unkpen: float = _search(0.0, "subtract from <unk>'s log-prob", decoding=False)
    no_unk: bool = _search(False, "never generate <unk>", decoding=False)
    sampling: bool = _search(False, "sample instead of search (nbest samples)")
    sampling_topk: int = _search(-1, "sample among the k most likely (<= 0: the full distribution)")
    temperature: float = _search(1.0, gt=0)
    use_cache: bool = _search(
        True, "recompute every position (testing only)", flag="--no-cache", decoding=False
    )

    def __post_init__(self) -> None:
        check_fields(self, lambda name: f"--{name.replace('_', '-')}")
        if not self.sampling and self.nbest > self.beam:
            raise ConfigError(f"--nbest ({self.nbest}) cannot exceed --beam ({self.beam})")
        if self.sampling_topk > 0 and not self.sampling:
            raise ConfigError("--sampling-topk needs --sampling")

    @property
    def greedy(self) -> bool:
        return self.beam == 1 and not self.sampling
