# Admin profiling (one forward/backward pass on one device). The profile lives in the folder of the
# experiment that owns it (itself, or with a recipe's profile_seed the first run sharing the command:
# Plan.profile_owner) and travels inside every checkpoint, so decoding never needs it.

# this file's partner: pipeline_lib/workflow/rules/profile.py
PROFILE = ProfileRules(PLAN)


rule profile_admin:
    input:
        lambda wc: PLAN.bin_marker(wc.exp),
    output:
        P.admin_profile,
    log:
        PROFILE.log("profile_admin"),
    wildcard_constraints:
        exp=regex(PLAN.profile_owners()),
    priority: train_priority
    conda:
        CONDA_ENV
    threads: config["threads"]["train"]
    resources:
        gpu=res_fn("profile_admin", "gpu", 1),
        mem_mb=res_fn("profile_admin", "mem_mb", 4000),
        runtime=res_fn("profile_admin", "runtime", 30),
    params:
        args=lambda wc: PROFILE.profile(wc.exp),
    shell:
        "exec python -m pipeline_lib profile {params.args} > {log:q} 2>&1"
