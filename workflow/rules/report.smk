# results/tables.md (Tables 1-4 shapes), learning curves (Figure 2), stability map (Admin Fig. 10).

from pipeline_lib.report.cli import configfile_flags

# the --configfile(s) given on the command line, for the tables' rerun hint
CONFIGFILE_FLAGS = configfile_flags(workflow.overwrite_configfiles)


rule report_spec:
    output:
        P.report_spec,
    log:
        P.log("report_spec"),
    conda:
        CONDA_ENV
    params:
        # a plain string, so that Snakemake's params trigger sees any change of the spec
        args=CMD.report_spec(P.report_spec) + CONFIGFILE_FLAGS,
    shell:
        "python -m pipeline_lib report {params.args} > {log:q} 2>&1"


rule report:
    input:
        spec=P.report_spec,
        scores=[PLAN.score_file(n) for n in PLAN.table_experiments()],
        trained=[PLAN.trained_marker(n) for n in PLAN.table_experiments()],
        significance=[PLAN.significance_file(t) for t in PLAN.significance],
        data=[PLAN.ref_marker(ds) for ds in PLAN.report_datasets()],
    output:
        report(P.tables, caption="../report/tables.rst", category="Tables"),
    log:
        P.log("report"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m pipeline_lib report --spec {input.spec:q} --tables {output:q} > {log:q} 2>&1"


rule learning_curves:
    input:
        spec=P.report_spec,
        trained=[PLAN.trained_marker(n) for n in PLAN.table_experiments()],
    output:
        report(
            P.learning_curves,
            caption="../report/learning_curves.rst",
            category="Plots",
        ),
    log:
        P.log("learning_curves"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m pipeline_lib report --spec {input.spec:q} --learning-curves {output:q} > {log:q} 2>&1"


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
        P.log("stability_map"),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m pipeline_lib report --spec {input.spec:q} --stability-map {output.plot:q}"
        " --stability-table {output.table:q} > {log:q} 2>&1"
