# results/tables.md (Tables 1-4 shapes), learning curves (Figure 2), stability map (Admin Fig. 10).

import os

from pipeline_lib.report.spec_file import curves_spec, spec_digest, write_spec

# this file's partner: pipeline_lib/workflow/rules/report.py
REPORT = ReportRules(PLAN)

# The spec the report reads, with the --configfile(s) given on the command line (relative to the
# working directory, as typed) and the Snakefile, for the tables' rerun hint.
REPORT_SPEC = {
    **REPORT.spec(),
    **(
        {"configfiles": [os.path.relpath(f) for f in workflow.overwrite_configfiles]}
        if workflow.overwrite_configfiles
        else {}
    ),
    "snakefile": str(workflow.main_snakefile),
}
CURVES_SPEC = curves_spec(REPORT_SPEC)


# The spec's digest is the param, not the spec: Snakemake prints a changed param's old and new
# values in its reason (pipeline_lib/report/spec_file.py).
rule report_spec:
    output:
        P.report_spec,
    log:
        REPORT.log("report_spec"),
    params:
        spec=spec_digest(REPORT_SPEC),
    run:
        write_spec(REPORT_SPEC, output[0], log[0])


# What the learning curves read of the spec (logs and labels): a decoding or table edit leaves it.
rule curves_spec:
    output:
        P.curves_spec,
    log:
        REPORT.log("curves_spec"),
    params:
        spec=spec_digest(CURVES_SPEC),
    run:
        write_spec(CURVES_SPEC, output[0], log[0])


rule report:
    input:
        **REPORT.table_inputs(),
        spec=P.report_spec,
    output:
        report(P.tables, caption="../report/tables.rst", category="Tables"),
    log:
        REPORT.log("report"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "exec python -m pipeline_lib report --spec {input.spec:q} --tables {output:q} > {log:q} 2>&1"


rule learning_curves:
    input:
        spec=P.curves_spec,
        trained=[PLAN.trained_marker(n) for n in PLAN.table_experiments()],
    output:
        report(
            P.learning_curves,
            caption="../report/learning_curves.rst",
            category="Plots",
        ),
    log:
        REPORT.log("learning_curves"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "exec python -m pipeline_lib report --spec {input.spec:q} --learning-curves {output:q} > {log:q} 2>&1"


rule stability_map:
    input:
        spec=P.report_spec,
        trained=[PLAN.trained_marker(n) for n in PLAN.stability_runs],
        # a decoded grid (stability_map.decode) shows each cell's BLEU beside its verdict
        scores=PLAN.stability_scores(),
    output:
        plot=report(
            P.stability_plot,
            caption="../report/stability_map.rst",
            category="Plots",
        ),
        table=P.stability_table,
    log:
        REPORT.log("stability_map"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "exec python -m pipeline_lib report --spec {input.spec:q} --stability-map {output.plot:q}"
        " --stability-table {output.table:q} > {log:q} 2>&1"
