# Raw corpora and Moses preprocessing: work/data/<dataset>/{raw,tok}/


rule prepare_demo:
    output:
        f"{W}/data/{{ds}}/raw/splits.json",
    log:
        "logs/prepare_demo/{ds}.log",
    wildcard_constraints:
        ds=regex(dataset_names("demo")),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        out=lambda wc: data_dir(wc.ds, "raw"),
        args=lambda wc: flags(
            [("src", DATASETS[wc.ds]["src"]), ("tgt", DATASETS[wc.ds]["tgt"])]
        ),
        books=lambda wc: demo_book_flags(wc.ds),
    shell:
        "python -m pipeline_lib prepare-demo --out-dir {params.out} {params.args} {params.books}"
        " > {log} 2>&1"


rule prepare_ding:
    output:
        f"{W}/data/{{ds}}/raw/splits.json",
    log:
        "logs/prepare_ding/{ds}.log",
    wildcard_constraints:
        ds=regex(dataset_names("ding")),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        out=lambda wc: data_dir(wc.ds, "raw"),
        args=lambda wc: ding_flags(wc.ds),
    shell:
        "python -m pipeline_lib prepare-ding --out-dir {params.out} {params.args} > {log} 2>&1"


rule download:
    output:
        f"{W}/data/{{ds}}/raw/download.json",
    log:
        "logs/download/{ds}.log",
    wildcard_constraints:
        ds=regex(dataset_names("download")),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=8000,
        runtime=1440,
    params:
        out=lambda wc: f"{W}/data/{wc.ds}",
        recipe=lambda wc: DATASETS[wc.ds]["recipe"],
    shell:
        "python -m pipeline_lib download --recipe {params.recipe} --out-dir {params.out} > {log} 2>&1"
        " && cp {params.out}/orig/manifest.json {output}"


rule monolingual:
    input:
        text=lambda wc: DATASETS[wc.ds]["mono"],
        raw=lambda wc: raw_marker(wc.ds),
    output:
        f"{W}/data/{{ds}}/raw/mono.{{lang}}",
    log:
        "logs/monolingual/{ds}.{lang}.log",
    wildcard_constraints:
        ds=regex(
            [n for n, d in DATASETS.items() if "mono" in d and d["source"] != "local"]
        ),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=60,
    shell:
        "cp {input.text} {output} 2> {log}"


rule preprocess:
    input:
        unpack(preprocess_inputs),
    output:
        f"{W}/data/{{ds}}/tok/meta.json",
    log:
        "logs/preprocess/{ds}.log",
    wildcard_constraints:
        ds=regex(list(DATASETS)),
    conda:
        CONDA_ENV
    threads: config["threads"]["data"]
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        raw=lambda wc: raw_dir(wc.ds),
        out=lambda wc: data_dir(wc.ds, "tok"),
        args=lambda wc: preprocess_flags(wc.ds),
    shell:
        "python -m pipeline_lib preprocess --in-dir {params.raw} --out-dir {params.out} {params.args}"
        " --workers {threads} > {log} 2>&1"
