from pipeline_lib import job_signals
from pipeline_lib.cli import main

if __name__ == "__main__":
    job_signals.install()  # here, not in main(): tests call main() inside their own process
    raise SystemExit(main())
