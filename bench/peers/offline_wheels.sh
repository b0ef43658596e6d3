#!/usr/bin/env bash
# The wheels a GPU machine with no package index needs beside its own CUDA torch, downloaded here (where
# pip reaches an index) for its Python (3.12, x86-64 Linux): fairseq-fixed and its needs (the peer of
# bench/compare.py and bench/fp16_numerics.py), and the pipeline's own packages a stock CUDA image
# lacks (Snakemake with its needs, jsonschema, sacremoses, subword-nmt, nltk) for bench/gpu_evidence.py's
# plan and GPU-demo steps. Then, there: bench/peers/offline_setup.sh WHEEL_DIR.
#
#   bench/peers/offline_wheels.sh WHEEL_DIR [PYTHON_VERSION]
#
# The list is pyproject.toml's runtime dependencies, closed over their requirements, less what an
# NVIDIA PyTorch image already holds (numpy, pandas, matplotlib, sentencepiece, sacrebleu, pyyaml,
# tqdm, regex, click, joblib, attrs, ...). Left out: pulp (16 MB; Snakemake falls back to its greedy
# scheduler, which one machine's jobs do not miss) and ctranslate2 (export only). About 33 MB.
set -euo pipefail

dir="${1:?usage: $0 WHEEL_DIR [PYTHON_VERSION]}"
version="${2:-3.12}"
py="${PYTHON:-python3}"
mkdir -p "$dir"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
  manylinux1_x86_64; do
  platforms+=(--platform "$p")
done

fairseq=(fairseq-fixed==0.12.3.1 hydra-core==1.3.2 omegaconf==2.3.0 bitarray==3.12.3 mock==5.2.0
  defusedxml==0.7.1)
pipeline=(snakemake==9.27.1 sacremoses==0.2.0 subword-nmt==0.3.8 nltk==3.10.4
  jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
  fastjsonschema==2.22.3 annotated-types==0.8.0 argparse-dataclass==2.0.0 conda-inject==1.3.2
  configargparse==1.9.0 docutils==0.22.4 dpath==2.2.0 gitdb==4.0.12 gitpython==3.2.1 greenlet==3.5.6
  humanfriendly==10.0 immutables==0.21 jupyter-core==5.9.1 nbformat==5.11.1 platformdirs==4.14.8
  pydantic==2.14.4 pydantic-core==2.50.5 smart-open==7.7.1 smmap==5.0.3
  snakemake-interface-common==1.23.0 snakemake-interface-executor-plugins==9.4.0
  snakemake-interface-logger-plugins==2.1.0 snakemake-interface-report-plugins==1.3.0
  snakemake-interface-scheduler-plugins==2.0.2 snakemake-interface-storage-plugins==4.4.1
  sqlalchemy==2.0.58 sqlmodel==0.0.37 tenacity==9.2.1 throttler==1.2.3 traitlets==5.16.1
  typing-inspection==0.4.5 yte==1.9.4)

"$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$version" --implementation cp \
  "${platforms[@]}" -d "$dir" "${fairseq[@]}" "${pipeline[@]}"
# published as source only; pure Python, so a wheel built here installs there
"$py" -m pip wheel -q --no-deps -w "$dir" antlr4-python3-runtime==4.9.3 connection-pool==0.0.3
du -sh "$dir"
