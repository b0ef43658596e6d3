# Back-translation (Table 4): the reverse model (an experiment with direction: reverse) translates
# the held-out target-side monolingual text; the synthetic pairs join the real bitext as the
# pseudo-dataset bt-<name>, which `binarize` and `train_backtranslation` then use.


rule translate_backtranslation:
    input:
        unpack(bt_translate_inputs),
    output:
        bpe=f"{W}/backtranslation/{{bt}}/synthetic.bpe",
        text=f"{W}/backtranslation/{{bt}}/synthetic.txt",
    log:
        "logs/translate_backtranslation/{bt}.log",
    conda:
        CONDA_ENV
    threads: config["threads"]["translate"]
    resources:
        gpu=1,
        mem_mb=4000,
        runtime=240,
    params:
        args=lambda wc, output, threads: CMD.backtranslate(wc.bt, output, threads),
    shell:
        "python -m pipeline_lib translate {params.args} > {log:q} 2>&1"


rule bt_mix:
    input:
        real=lambda wc: PLAN.bpe_marker(PLAN.backtranslation[wc.bt]["dataset"]),
        synthetic=f"{W}/backtranslation/{{bt}}/synthetic.bpe",
    output:
        f"{W}/data/bt-{{bt}}/bpe/meta.json",
    log:
        "logs/bt_mix/{bt}.log",
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        args=lambda wc: CMD.bt_mix(wc.bt),
    shell:
        "python -m pipeline_lib bt-mix {params.args} > {log:q} 2>&1"
