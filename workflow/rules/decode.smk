# Decoding of the evaluation split with the averaged checkpoint (beam search, on one GPU).
# A diverged run gets empty hypotheses, one per source line (--skip-if-diverged).

# this file's partner: pipeline_lib/workflow/rules/decode.py
DECODE = DecodeRules(PLAN)


rule translate:
    input:
        checkpoint=P.checkpoint_avg,
        trained=P.trained,
        data=lambda wc: PLAN.eval_bin_marker(wc.exp, wc.split),
    output:
        hyp=P.hyp,
        generate=P.generate,
    log:
        DECODE.log("translate"),
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
        args=lambda wc: DECODE.translate(wc.exp, wc.split),
    shell:
        "exec python -m pipeline_lib translate {params.args} --threads {threads}"
        " > {log:q} 2>&1"
