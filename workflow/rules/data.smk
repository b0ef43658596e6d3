# Raw corpora and Moses preprocessing: work/data/<dataset>/{raw,tok}/

# this file's partner: pipeline_lib/workflow/rules/data.py
DATA = DataRules(PLAN)


rule prepare_demo:
    output:
        P.raw_splits,
    log:
        DATA.log("prepare_demo"),
    wildcard_constraints:
        ds=regex(PLAN.dataset_names("demo")),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        args=lambda wc: DATA.prepare_demo(wc.ds),
    shell:
        "exec python -m pipeline_lib prepare-demo {params.args} > {log:q} 2>&1"


rule prepare_ding:
    output:
        P.raw_splits,
    log:
        DATA.log("prepare_ding"),
    wildcard_constraints:
        ds=regex(PLAN.dataset_names("ding")),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        args=lambda wc: DATA.prepare_ding(wc.ds),
    shell:
        "exec python -m pipeline_lib prepare-ding {params.args} > {log:q} 2>&1"


rule download:
    output:
        P.raw_download,
    log:
        DATA.log("download"),
    wildcard_constraints:
        ds=regex(PLAN.dataset_names("download")),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=8000,
        runtime=1440,
    params:
        args=lambda wc: DATA.download(wc.ds),
    shell:
        "exec python -m pipeline_lib download {params.args} > {log:q} 2>&1"


rule monolingual:
    input:
        text=lambda wc: PLAN.datasets[wc.ds]["mono"],
        raw=lambda wc: PLAN.raw_marker(wc.ds),
    output:
        P.raw_mono,
    log:
        DATA.log("monolingual"),
    wildcard_constraints:
        ds=regex(PLAN.mono_dataset_names("copy")),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=60,
    shell:
        "exec cp {input.text:q} {output:q} 2> {log:q}"


rule download_mono:
    output:
        P.raw_mono,
    log:
        DATA.log("download_mono"),
    wildcard_constraints:
        ds=regex(PLAN.mono_dataset_names("download")),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=1440,
    params:
        args=lambda wc: DATA.download_mono(wc.ds),
    shell:
        "exec python -m pipeline_lib download {params.args} > {log:q} 2>&1"


# Resources from bench/scale_data.py (docs/performance.md, 'The data path at paper scale'): 78 MB on 2 workers, ~15 min
# for WMT'14 En-Fr's 40.8M pairs on 16 cores. The training side (train, valid, mono) only: the test
# split has its own job, so that editing a test file reruns evaluation and never training.
# `--workers {threads}` stays out of params: Snakemake compares only params that do not take threads.
rule preprocess:
    input:
        unpack(DATA.preprocess_inputs),
    output:
        P.tok,
    log:
        DATA.log("preprocess"),
    wildcard_constraints:
        ds=regex(PLAN.datasets),
    conda:
        CONDA_ENV
    threads: config["threads"]["data"]
    resources:
        mem_mb=2000,
        runtime=60,
    params:
        args=lambda wc: DATA.preprocess(wc.ds),
    shell:
        "exec python -m pipeline_lib preprocess {params.args} --workers {threads}"
        " > {log:q} 2>&1"


rule preprocess_test:
    input:
        lambda wc: PLAN.raw_marker(wc.ds, test=True),
    output:
        P.tok_test,
    log:
        DATA.log("preprocess_test"),
    wildcard_constraints:
        ds=regex(PLAN.datasets),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        args=lambda wc: DATA.preprocess(wc.ds, test=True),
    shell:
        "exec python -m pipeline_lib preprocess {params.args} --workers {threads}"
        " > {log:q} 2>&1"
