# Joint subword segmentation and binarization: work/data/<dataset>/{subword,bpe,bin}/


rule learn_bpe:
    input:
        f"{W}/data/{{ds}}/tok/meta.json",
    output:
        f"{W}/data/{{ds}}/subword/subword.json",
    log:
        "logs/learn_bpe/{ds}.log",
    wildcard_constraints:
        ds=regex(list(DATASETS)),
    conda:
        CONDA_ENV
    threads: config["threads"]["data"]
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        tok=lambda wc: data_dir(wc.ds, "tok"),
        out=lambda wc: data_dir(wc.ds, "subword"),
        args=lambda wc: learn_bpe_flags(wc.ds),
    shell:
        "python -m pipeline_lib learn-bpe --in-dir {params.tok} --model-dir {params.out} {params.args}"
        " --workers {threads} > {log} 2>&1"


rule apply_bpe:
    input:
        tok=f"{W}/data/{{ds}}/tok/meta.json",
        model=f"{W}/data/{{ds}}/subword/subword.json",
    output:
        f"{W}/data/{{ds}}/bpe/meta.json",
    log:
        "logs/apply_bpe/{ds}.log",
    wildcard_constraints:
        ds=regex(list(DATASETS)),
    conda:
        CONDA_ENV
    threads: config["threads"]["data"]
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        tok=lambda wc: data_dir(wc.ds, "tok"),
        model=lambda wc: data_dir(wc.ds, "subword"),
        out=lambda wc: data_dir(wc.ds, "bpe"),
        args=lambda wc: apply_bpe_flags(wc.ds),
    shell:
        "python -m pipeline_lib apply-bpe --in-dir {params.tok} --model-dir {params.model}"
        " --out-dir {params.out} {params.args} --workers {threads} > {log} 2>&1"


rule binarize:
    input:
        f"{W}/data/{{ds}}/bpe/meta.json",
    output:
        f"{W}/data/{{ds}}/bin/meta.json",
    log:
        "logs/binarize/{ds}.log",
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        bpe=lambda wc: data_dir(wc.ds, "bpe"),
        out=lambda wc: data_dir(wc.ds, "bin"),
        args=lambda wc: binarize_flags(wc.ds),
    shell:
        "python -m pipeline_lib binarize --in-dir {params.bpe} --out-dir {params.out} {params.args}"
        " > {log} 2>&1"
