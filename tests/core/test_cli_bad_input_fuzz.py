"""200 randomly corrupted variants of a small corpus through `preprocess` and `score`: every run either
succeeds with its changes counted, or fails with rc 2 and a message naming the file, with no traceback
and nothing left behind."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

from pipeline_lib.cli import main

WORDS = [
    "the",
    "a",
    "small",
    "house",
    "river",
    "light",
    "old",
    "new",
    "man",
    "woman",
    "day",
    "night",
    "city",
    "road",
    "green",
    "red",
]
MOTS = [
    "le",
    "la",
    "petite",
    "maison",
    "rivière",
    "lumière",
    "vieux",
    "neuf",
    "homme",
    "femme",
    "jour",
    "nuit",
    "ville",
    "route",
    "vert",
    "rouge",
]
FILES = [f"{split}.{lang}" for split in ("train", "valid", "test") for lang in ("en", "fr")]
# kind -> (preprocess succeeds?, score succeeds?) when that kind hits a file the stage reads
KINDS = {
    "nul": (False, False),
    "bad_utf8": (False, False),
    "extra_line": (False, False),
    "bom": (True, False),  # a corpus BOM is stripped and counted; a hypothesis BOM is refused
    "crlf": (True, True),  # CRLF is normalized (counted by preprocess; trailing whitespace to sacrebleu)
    "truncated": (True, True),  # the last line cut short, no final newline
    "overlong": (True, True),  # a 10k-token line: cleaned away in train/valid, kept in test
}


def corpus(rng: random.Random, n: int) -> tuple[list[str], list[str]]:
    src, tgt = [], []
    for _ in range(n):
        idx = [rng.randrange(len(WORDS)) for _ in range(rng.randint(3, 9))]
        src.append(" ".join(WORDS[i] for i in idx) + " .")
        tgt.append(" ".join(MOTS[i] for i in idx) + " .")
    return src, tgt


def corrupt(data: bytes, kind: str, rng: random.Random) -> bytes:
    lines = data.split(b"\n")[:-1]
    i = rng.randrange(len(lines))
    if kind == "nul":
        lines[i] = lines[i][:2] + b"\x00" + lines[i][2:]
    elif kind == "bad_utf8":
        lines[i] = lines[i] + b" caf\xe9"
    elif kind == "extra_line":
        lines.append(b"one line too many .")
    elif kind == "bom":
        return b"\xef\xbb\xbf" + data
    elif kind == "crlf":
        return b"".join(line + b"\r\n" for line in lines)
    elif kind == "truncated":
        lines[-1] = lines[-1][: max(1, len(lines[-1]) // 2)]
        return b"\n".join(lines)
    elif kind == "overlong":
        lines[i] = b" ".join([b"word"] * 10_000)
    return b"\n".join(lines) + b"\n"


def run(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(argv)  # anything but a PipelineError would propagate: a traceback fails the test
    return rc, capsys.readouterr().err


def test_corrupted_corpora(tmp_path: Path, capsys):
    rng = random.Random(1234)
    outcomes: Counter[str] = Counter()
    for variant in range(200):
        root = tmp_path / f"v{variant}"
        raw = root / "raw"
        raw.mkdir(parents=True)
        for split, n in (("train", 40), ("valid", 12), ("test", 12)):
            src, tgt = corpus(rng, n)
            (raw / f"{split}.en").write_text("".join(s + "\n" for s in src))
            (raw / f"{split}.fr").write_text("".join(t + "\n" for t in tgt))
        kind = rng.choice(sorted(KINDS))
        victim = rng.choice(FILES)
        (raw / victim).write_bytes(corrupt((raw / victim).read_bytes(), kind, rng))
        pre_ok, score_ok = KINDS[kind]

        out = root / "tok"
        rc, err = run(["preprocess", "--in-dir", str(raw), "--out-dir", str(out), "--src", "en", "--tgt", "fr",
                       "--workers", "1"], capsys)  # fmt: skip
        assert rc == (0 if pre_ok else 2), (variant, kind, victim, err)
        if rc == 0:
            split = victim.split(".")[0]
            stats = json.loads((out / "meta.json").read_text())["splits"][split]
            if kind == "crlf":
                assert stats["crlf_normalized"] > 0, stats
            if kind == "bom":
                assert stats["bom_removed"] == 1, stats
            if kind == "overlong" and split != "test":
                assert stats["removed"], stats
        else:
            assert victim in err and "Traceback" not in err, err
            assert not out.exists(), f"{kind}: output left behind"
        outcomes[f"preprocess {'ok' if rc == 0 else 'rc2'}"] += 1

        # score: the victim file as the hypothesis against a clean reference of the same split
        split, lang = victim.split(".")
        ref = root / f"ref.{lang}"
        clean_src, clean_tgt = corpus(random.Random(variant), 12 if split != "train" else 40)
        clean = clean_src if lang == "en" else clean_tgt
        ref.write_text("".join(line + "\n" for line in clean))
        lines = len((raw / victim).read_bytes().rstrip(b"\n").split(b"\n"))
        if lines != len(clean):  # the hypothesis has the reference's length unless an extra line was added
            assert kind == "extra_line"
        score = root / "score.json"
        rc, err = run(["score", "--hyp", str(raw / victim), "--ref", str(ref), "-o", str(score),
                       "--metrics", "bleu", "chrf"], capsys)  # fmt: skip
        assert rc == (0 if score_ok else 2), (variant, kind, victim, err)
        if rc == 0:
            assert json.loads(score.read_text())["n_segments"] == len(clean)
        else:
            assert victim in err and "Traceback" not in err, err
            assert not score.exists()
        outcomes[f"score {'ok' if rc == 0 else 'rc2'}"] += 1
        outcomes[kind] += 1
    print("fuzz outcomes:", dict(sorted(outcomes.items())))
    assert (
        outcomes["preprocess ok"]
        and outcomes["preprocess rc2"]
        and outcomes["score ok"]
        and outcomes["score rc2"]
    )
