# Joint subword segmentation and binarization: work/data/<dataset>/{subword,bpe,bin}/

# this file's partner: pipeline_lib/workflow/rules/subword.py
SUBWORD = SubwordRules(PLAN)


# Memory follows the word types (591 MB at 369k types): ~5 GB at ~3M, WMT'14 En-Fr's order; 12-30 min there.
# subword.sample_lines learns on a sample instead, bounding it by the sample's types.
rule learn_bpe:
    input:
        P.tok,
    output:
        P.subword,
    log:
        SUBWORD.log("learn_bpe"),
    wildcard_constraints:
        ds=regex(PLAN.datasets),
    conda:
        CONDA_ENV
    threads: config["threads"]["data"]
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        args=lambda wc: SUBWORD.learn_bpe(wc.ds),
    shell:
        "exec python -m pipeline_lib learn-bpe {params.args} --workers {threads}"
        " > {log:q} 2>&1"


# 130 MB on 2 workers (a bounded cache per worker); ~5 min for En-Fr on 16 cores.
rule apply_bpe:
    input:
        tok=P.tok,
        model=P.subword,
    output:
        P.bpe,
    log:
        SUBWORD.log("apply_bpe"),
    wildcard_constraints:
        ds=regex(PLAN.datasets),
    conda:
        CONDA_ENV
    threads: config["threads"]["data"]
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        args=lambda wc: SUBWORD.apply_bpe(wc.ds),
    shell:
        "exec python -m pipeline_lib apply-bpe {params.args} --workers {threads}"
        " > {log:q} 2>&1"


use rule apply_bpe as apply_bpe_test with:
    input:
        tok=P.tok_test,
        model=P.subword,
    output:
        P.bpe_test,
    log:
        SUBWORD.log("apply_bpe_test"),
    threads: 1
    params:
        args=lambda wc: SUBWORD.apply_bpe(wc.ds, test=True),


# 115 MB on 2 workers; ~12 min for En-Fr (its main process, which writes, is the bound).
rule binarize:
    input:
        P.bpe,
    output:
        P.bin,
    log:
        SUBWORD.log("binarize"),
    conda:
        CONDA_ENV
    threads: config["threads"]["data"]
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        args=lambda wc: SUBWORD.binarize(wc.ds),
    shell:
        "exec python -m pipeline_lib binarize {params.args} --workers {threads}"
        " > {log:q} 2>&1"


# The test split with the training vocabulary (a back-translation mix: its base dataset's test text).
rule binarize_test:
    input:
        text=lambda wc: PLAN.bpe_test_marker(wc.ds),
        vocab=P.bin,
    output:
        P.bin_test,
    log:
        SUBWORD.log("binarize_test"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        args=lambda wc: SUBWORD.binarize_test(wc.ds),
    shell:
        "exec python -m pipeline_lib binarize {params.args} --workers {threads}"
        " > {log:q} 2>&1"
