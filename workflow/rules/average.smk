# Checkpoint averaging (last N epoch checkpoints, or interval checkpoints with average_kind: update;
# fp32 sums). A diverged run gets a placeholder (--skip-if-diverged).

# this file's partner: pipeline_lib/workflow/rules/average.py
AVERAGE = AverageRules(PLAN)


rule average:
    input:
        trained=P.trained,
    output:
        P.checkpoint_avg,
    log:
        AVERAGE.log("average"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        args=lambda wc: AVERAGE.average(wc.exp),
    shell:
        "exec python -m pipeline_lib average {params.args} > {log:q} 2>&1"
