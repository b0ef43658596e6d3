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
        args=lambda wc: decoding_flags(BT[wc.bt]["decoding"]),
        mono=lambda wc: bt_mono(wc.bt),
    run:
        if DIV.skip_diverged(
            input.status,
            log[0],
            text=[output.bpe, output.text],
            lines=count_lines(params.mono),
        ):
            return
        shell(
            "python -m pipeline_lib translate --checkpoint {input.checkpoint} --input {params.mono}"
            " --output {output.text} --output-subword {output.bpe} {params.args}"
            " --device auto --threads {threads} --no-progress > {log} 2>&1"
        )


rule bt_mix:
    input:
        real=lambda wc: f"{data_dir(BT[wc.bt]['dataset'], 'bpe')}/meta.json",
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
        real=lambda wc: data_dir(BT[wc.bt]["dataset"], "bpe"),
        out=lambda wc: data_dir(f"bt-{wc.bt}", "bpe"),
        args=lambda wc: bt_mix_flags(wc.bt),
    shell:
        "python -m pipeline_lib bt-mix --real-dir {params.real} --synthetic-src {input.synthetic}"
        " --out-dir {params.out} {params.args} > {log} 2>&1"
