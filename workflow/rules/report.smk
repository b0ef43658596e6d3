# results/tables.md (Tables 1-4 shapes), learning curves (Figure 2), stability map (Admin Fig. 10).


rule report_spec:
    output:
        f"{R}/report_spec.json",
    log:
        "logs/report/spec.log",
    conda:
        CONDA_ENV
    params:
        spec=lambda wc: json.dumps(report_spec(), indent=2, sort_keys=True),
    run:
        Path(output[0]).write_text(f"{params.spec}\n", encoding="utf-8")
        Path(log[0]).write_text(f"wrote {output[0]}\n", encoding="utf-8")


rule report:
    input:
        spec=f"{R}/report_spec.json",
        scores=[score_file(n) for n in table_experiments()],
        status=[status_file(n) for n in table_experiments()],
        significance=[f"{R}/significance/{t}.json" for t in SIGNIFICANCE],
    output:
        report(f"{R}/tables.md", caption="../report/tables.rst", category="Tables"),
    log:
        "logs/report/tables.log",
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m pipeline_lib report --spec {input.spec} --tables {output} > {log} 2>&1"


rule learning_curves:
    input:
        spec=f"{R}/report_spec.json",
        status=[status_file(n) for n in table_experiments()],
    output:
        report(
            f"{R}/plots/learning_curves.png",
            caption="../report/learning_curves.rst",
            category="Plots",
        ),
    log:
        "logs/report/learning_curves.log",
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m pipeline_lib report --spec {input.spec} --learning-curves {output} > {log} 2>&1"


rule stability_map:
    input:
        spec=f"{R}/report_spec.json",
        status=[status_file(n) for n in STABILITY_RUNS],
    output:
        plot=report(
            f"{R}/plots/stability_map.png",
            caption="../report/stability_map.rst",
            category="Plots",
        ),
        table=f"{R}/stability_map.md",
    log:
        "logs/report/stability_map.log",
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m pipeline_lib report --spec {input.spec} --stability-map {output.plot}"
        " --stability-table {output.table} > {log} 2>&1"
