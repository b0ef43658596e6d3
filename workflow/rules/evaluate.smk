# Scores with signatures, paired bootstrap significance (Table 3 matrix), fine-grained analysis.


rule score:
    input:
        hyp=f"{R}/experiments/{{exp}}/{{split}}.hyp",
        status=f"{W}/experiments/{{exp}}/status.json",
        data=lambda wc: ref_marker(eval_dataset(wc.exp)),
    output:
        report(
            f"{R}/experiments/{{exp}}/{{split}}.score.json",
            category="Scores",
            labels={"experiment": "{exp}", "split": "{split}"},
        ),
    log:
        "logs/score/{exp}.{split}.log",
    wildcard_constraints:
        split="valid|test",
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        args=score_flags,
    run:
        if DIV.skip_diverged(
            input.status, log[0], score=output[0], system=wildcards.exp
        ):
            return
        shell(
            "python -m pipeline_lib score --hyp {input.hyp} -o {output} {params.args} > {log} 2>&1"
        )


rule significance:
    input:
        unpack(significance_inputs),
    output:
        f"{R}/significance/{{table}}.json",
    log:
        "logs/significance/{table}.log",
    wildcard_constraints:
        table=regex(list(SIGNIFICANCE)),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        args=significance_flags,
    shell:
        "python -m pipeline_lib significance {params.args} -o {output} > {log} 2>&1"


rule analyze:
    input:
        unpack(analysis_inputs),
    output:
        json=f"{R}/analysis/analysis.json",
        words=report(
            f"{R}/analysis/word_accuracy.png",
            caption="../report/word_accuracy.rst",
            category="Analysis",
        ),
        lengths=report(
            f"{R}/analysis/length_bleu.png",
            caption="../report/length_bleu.rst",
            category="Analysis",
        ),
    log:
        "logs/analyze/analysis.log",
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        args=analysis_flags,
        out=lambda wc, output: os.path.dirname(output.json),
    shell:
        "python -m pipeline_lib analyze {params.args} -o {params.out} > {log} 2>&1"
