# Back-translation (Table 4): the reverse model (an experiment with direction: reverse) translates
# the target-side monolingual text in `shards` contiguous parts, one job each (streamed in chunks of
# `buffer_lines`); the synthetic pairs join the real bitext as the pseudo-dataset bt-<name>, which
# `binarize` and `train_backtranslation` then use.

# this file's partner: pipeline_lib/workflow/rules/backtranslation.py
BACKTRANSLATION = BacktranslationRules(PLAN)


rule translate_backtranslation:
    input:
        unpack(BACKTRANSLATION.translate_inputs),
    output:
        bpe=P.bt_shard_bpe,
        text=P.bt_shard_text,
    log:
        BACKTRANSLATION.log("translate_backtranslation"),
    wildcard_constraints:
        bt=regex(list(PLAN.backtranslation)),
        shard=r"\d+",
        shards=r"\d+",
    conda:
        CONDA_ENV
    threads: config["threads"]["translate"]
    resources:
        gpu=BACKTRANSLATION.translate_gpus,
        mem_mb=4000,
        runtime=240,
    params:
        args=lambda wc: BACKTRANSLATION.backtranslate(wc.bt, int(wc.shard)),
    shell:
        "exec python -m pipeline_lib translate {params.args} --threads {threads}"
        " > {log:q} 2>&1"


rule bt_mix:
    input:
        unpack(BACKTRANSLATION.mix_inputs),
    output:
        P.bt_mix,
    log:
        BACKTRANSLATION.log("bt_mix"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        args=lambda wc: BACKTRANSLATION.bt_mix(wc.bt),
    shell:
        "exec python -m pipeline_lib bt-mix {params.args} > {log:q} 2>&1"
