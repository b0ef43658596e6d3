# Decoding of the evaluation split with the averaged checkpoint (beam search, on one GPU).


rule translate:
    input:
        checkpoint=f"{W}/experiments/{{exp}}/checkpoint_avg.pt",
        status=f"{W}/experiments/{{exp}}/status.json",
        data=lambda wc: bin_marker(wc.exp),
    output:
        hyp=f"{R}/experiments/{{exp}}/{{split}}.hyp",
        generate=f"{R}/experiments/{{exp}}/{{split}}.generate",
    log:
        "logs/translate/{exp}.{split}.log",
    wildcard_constraints:
        split="valid|test",
    conda:
        CONDA_ENV
    threads: config["threads"]["translate"]
    resources:
        gpu=res_fn("translate", "gpu", 1),
        mem_mb=res_fn("translate", "mem_mb", 4000),
        runtime=res_fn("translate", "runtime", 120),
    params:
        bin=lambda wc: data_dir(data_key(wc.exp), "bin"),
        src=lambda wc: exp_langs(wc.exp)[0],
        tgt=lambda wc: exp_langs(wc.exp)[1],
        args=lambda wc: decoding_flags(exp_decoding(wc.exp)),
    run:
        lines = split_size(input.data, wildcards.split)
        if DIV.skip_diverged(input.status, log[0], text=list(output), lines=lines):
            return
        shell(
            "python -m pipeline_lib translate --checkpoint {input.checkpoint} --data-dir {params.bin}"
            " --split {wildcards.split} --source-lang {params.src} --target-lang {params.tgt}"
            " --output {output.hyp} --output-generate {output.generate} {params.args}"
            " --device auto --threads {threads} --no-progress > {log} 2>&1"
        )
