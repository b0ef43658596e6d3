"""The workflow's logic as plain, tested Python: what `workflow/rules/*.smk` asks of the config.

* :mod:`.schema`      validates a config against the JSON schema and fills its defaults;
* :mod:`.experiments` expands the stability grid into experiments;
* :mod:`.crossref`    checks the references between config sections;
* :mod:`.paths`       the path table: every file pattern, read by the rules and by the plan;
* :mod:`.plan`        recipes, priorities, significance sets, report spec and targets, each path formatted;
* :mod:`.argv`        the quoted command line of every stage.

The .smk files keep only input functions and rules that call these.
"""

from pipeline_lib.workflow.argv import Commands
from pipeline_lib.workflow.plan import Plan

__all__ = ["Commands", "Plan"]
