# Back-translation (Table 4): the reverse model (an experiment with direction: reverse) translates
# the target-side monolingual text in `shards` contiguous parts, one job each (streamed in chunks of
# `buffer_lines`); the synthetic pairs join the real bitext as the pseudo-dataset bt-<name>, which
# `binarize` and `train_backtranslation` then use.


rule translate_backtranslation:
    input:
        unpack(bt_translate_inputs),
    output:
        bpe=P.bt_shard_bpe,
        text=P.bt_shard_text,
    log:
        P.log("translate_backtranslation"),
    wildcard_constraints:
        bt=regex(list(PLAN.backtranslation)),
        shard=r"\d+",
        shards=r"\d+",
    conda:
        CONDA_ENV
    threads: config["threads"]["translate"]
    resources:
        # the reverse model's translate resources (a CPU config or smoke gpu: false asks for none)
        gpu=lambda wc: PLAN.resources(
            PLAN.backtranslation[wc.bt]["reverse_model"], "translate"
        ).get("gpu", 1),
        mem_mb=4000,
        runtime=240,
    params:
        args=lambda wc: CMD.backtranslate(wc.bt, int(wc.shard)),
    shell:
        "exec python -m pipeline_lib translate {params.args} --threads {threads}"
        " > {log:q} 2>&1"


rule bt_mix:
    input:
        real=lambda wc: PLAN.bpe_marker(PLAN.backtranslation[wc.bt]["dataset"]),
        synthetic=lambda wc: PLAN.bt_shard_files(wc.bt),
    output:
        P.bt_mix,
    log:
        P.log("bt_mix"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        args=lambda wc: CMD.bt_mix(wc.bt),
    shell:
        "exec python -m pipeline_lib bt-mix {params.args} > {log:q} 2>&1"
