"""The CPU matrix-multiply back ends a run can ask for, by name: without torch, so that reading a
config (the workflow, check-config, plan) does not load it."""

CPU_GEMMS = ("auto", "mkl", "onednn")
