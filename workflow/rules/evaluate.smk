# Scores with signatures, paired bootstrap significance (Table 3 matrix), fine-grained analysis.

# this file's partner: pipeline_lib/workflow/rules/evaluate.py
EVALUATE = EvaluateRules(PLAN)


rule score:
    input:
        hyp=P.hyp,
        generate=P.generate,
        trained=P.trained,
        data=EVALUATE.score_data,
    output:
        report(
            P.score,
            category="Scores",
            labels={"experiment": "{exp}", "split": "{split}"},
        ),
    log:
        EVALUATE.log("score"),
    wildcard_constraints:
        split="valid|test",
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        args=lambda wc: EVALUATE.score(wc.exp, wc.split),
    shell:
        "exec python -m pipeline_lib score {params.args} > {log:q} 2>&1"


rule significance:
    input:
        unpack(EVALUATE.significance_inputs),
    output:
        P.significance,
    log:
        EVALUATE.log("significance"),
    wildcard_constraints:
        table=regex(PLAN.significance),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        args=lambda wc: EVALUATE.significance(wc.table),
    shell:
        "exec python -m pipeline_lib significance {params.args} > {log:q} 2>&1"


rule analyze:
    input:
        unpack(EVALUATE.analysis_inputs),
    output:
        json=P.analysis,
        words=report(
            P.word_accuracy,
            caption="../report/word_accuracy.rst",
            category="Analysis",
        ),
        lengths=report(
            P.length_bleu,
            caption="../report/length_bleu.rst",
            category="Analysis",
        ),
    log:
        EVALUATE.log("analyze"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        args=lambda wc: EVALUATE.analyze(),
    shell:
        "exec python -m pipeline_lib analyze {params.args} > {log:q} 2>&1"
