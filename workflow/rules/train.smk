# Training. `train` covers experiments on real data (including the reverse models of
# back-translation); `train_backtranslation` the forward models trained on a real+synthetic mix.
# The job shape (GPUs, nodes, launcher) comes from the config, per experiment. A diverged run
# exits 0 with status.json saying so; downstream rules then write placeholders.
# The output, trained.json, is written only when the run has concluded (completed or diverged):
# status.json is not an output, so a preempted or Ctrl-C'd run keeps it ("preempted") and its
# checkpoints, and the next run resumes. A run whose settings or data changed starts afresh (the old
# one is set aside under superseded/).

# this file's partner: pipeline_lib/workflow/rules/train.py
TRAIN = TrainRules(PLAN)


rule train:
    input:
        unpack(TRAIN.train_inputs),
    output:
        P.trained,
    log:
        TRAIN.log("train"),
    wildcard_constraints:
        exp=regex(PLAN.plain_names()),
    priority: train_priority
    conda:
        CONDA_ENV
    threads: config["threads"]["train"]
    resources:
        gpu=res_fn("train", "gpu", 1),
        nodes=res_fn("train", "nodes"),
        tasks_per_node=res_fn("train", "tasks_per_node"),
        mpi=res_fn("train", "mpi"),
        mem_mb=res_fn("train", "mem_mb", 8000),
        runtime=res_fn("train", "runtime", 1440),
    params:
        launch=train_launcher,
        args=lambda wc: TRAIN.train(wc.exp),
    # `exec`: the trainer replaces the job's bash. SLURM signals (scancel --signal, --signal=TERM@s
    # before the time limit, preemption) reach every process of the job step; bash would die of
    # SIGTERM at once and let the step end (and the trainer be killed or orphaned) before the
    # checkpoint is saved. With exec, Snakemake waits for the trainer's own exit 75 and retries.
    # Snakemake deletes a job's log before it runs; the log is a link to <exp>.history.log, which a
    # resumed or restarted run appends to. Progress lines also go to the job's console (fd 3: Snakemake's
    # terminal locally, the job's output file on SLURM), at most one every 30 s.
    shell:
        "ln -sfn {wildcards.exp:q}.history.log {log:q};"
        " exec {params.launch} train {params.args} --num-threads {threads} --progress-fd 3"
        " 3>&2 >> {log:q} 2>&1"


use rule train as train_backtranslation with:
    log:
        TRAIN.log("train_backtranslation"),
    wildcard_constraints:
        exp=regex(PLAN.bt_names()),
    conda:
        CONDA_ENV
