# Checkpoint averaging (last N epoch checkpoints, or interval checkpoints with average_kind: update;
# fp32 sums). A diverged run gets a placeholder.


rule average:
    input:
        status=f"{W}/experiments/{{exp}}/status.json",
    output:
        f"{W}/experiments/{{exp}}/checkpoint_avg.pt",
    log:
        "logs/average/{exp}.log",
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        save_dir=lambda wc: exp_dir(wc.exp),
        last=lambda wc: recipe(wc.exp).get("average_last", 5),
        kind=lambda wc: recipe(wc.exp).get("average_kind", "epoch"),
    run:
        if DIV.skip_diverged(input.status, log[0], checkpoint=output[0]):
            return
        shell(
            "python -m pipeline_lib average --save-dir {params.save_dir}"
            " --num-{params.kind}-checkpoints {params.last} --output {output} > {log} 2>&1"
        )
