#!/usr/bin/env bash
# Install one peer NMT toolkit into its own venv for bench/compare.py (never into the project's .venv).
#
#   bench/peers/install.sh fairseq|opennmt|sockeye [--force]
#
# The venv goes to ${DEEPNMT_BENCH_CACHE:-$HOME/.cache/deepnmt-bench}/venvs/<toolkit>. torch==2.13.0 (the
# CPU build from pip's find-links when available) is installed first so that no toolkit drags in a CUDA
# torch (on a GPU machine set DEEPNMT_BENCH_TORCH_INDEX_URL, e.g. https://download.pytorch.org/whl/cu128,
# for the CUDA build of the same version). Idempotent: a venv whose marker file records a finished install of the same version is kept
# (pass --force to rebuild). Recipes and pitfalls: /work/shared/REFERENCE.md, "Peer toolkits".
set -euo pipefail

toolkit="${1:-}"
force="${2:-}"
CACHE="${DEEPNMT_BENCH_CACHE:-$HOME/.cache/deepnmt-bench}"
PYTHON="${DEEPNMT_BENCH_PYTHON:-python3.11}"
TORCH_SPEC="torch==2.13.0"
TORCH_INDEX=()
if [[ -n "${DEEPNMT_BENCH_TORCH_INDEX_URL:-}" ]]; then TORCH_INDEX=(--index-url "$DEEPNMT_BENCH_TORCH_INDEX_URL"); fi

case "$toolkit" in
  fairseq) version="fairseq-fixed==0.12.3.1" ;;
  opennmt) version="OpenNMT-py==3.5.1" ;;
  sockeye) version="sockeye==3.1.34" ;;
  *) echo "usage: $0 fairseq|opennmt|sockeye [--force]" >&2; exit 2 ;;
esac

venv="$CACHE/venvs/$toolkit"
marker="$venv/.deepnmt-bench-installed"
if [[ "$force" != "--force" && -f "$marker" && "$(cat "$marker")" == "$version" ]]; then
  echo "$toolkit: already installed in $venv ($version)"
  exit 0
fi
if [[ "$force" == "--force" ]]; then rm -rf "$venv"; fi
rm -f "$marker"

if ! command -v "$PYTHON" >/dev/null; then PYTHON=python3; fi
echo "$toolkit: creating $venv with $($PYTHON --version)"
mkdir -p "$CACHE/venvs"
"$PYTHON" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --disable-pip-version-check --no-input)
"${pip[@]}" "setuptools<81" wheel
# torch first and pinned: later installs see it satisfied and never replace it with a CUDA build.
"${pip[@]}" "${TORCH_INDEX[@]}" "$TORCH_SPEC"

case "$toolkit" in
  fairseq)
    # fairseq 0.12.2 does not import on Python 3.11; fairseq-fixed does. --no-deps keeps torchaudio (and
    # a second torch) out; --no-build-isolation builds its C++/Cython extensions against our torch.
    "${pip[@]}" numpy cython wheel cffi hydra-core==1.3.2 omegaconf==2.3.0 regex sacrebleu tqdm bitarray \
      scikit-learn packaging
    MAX_JOBS=2 "${pip[@]}" --no-deps --no-build-isolation "$version"
    check="import fairseq, fairseq_cli.train; print('fairseq', fairseq.__version__)"
    ;;
  opennmt)
    "${pip[@]}" --no-deps "$version"
    "${pip[@]}" configargparse pyyaml sacrebleu six "pyonmttok>=1.37,<2" rapidfuzz pyahocorasick \
      tensorboard flask waitress numpy spacy fasttext-wheel
    check="import onmt, onmt.bin.train; print('OpenNMT-py', onmt.__version__)"
    ;;
  sockeye)
    "${pip[@]}" "numpy<2" pyyaml "sacrebleu>=2.3.0"
    "${pip[@]}" --no-deps "$version"
    check="import sockeye, sockeye.train; print('sockeye', sockeye.__version__)"
    ;;
esac

"$venv/bin/python" -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__; $check"
echo "$version" > "$marker"
echo "$toolkit: installed in $venv"
