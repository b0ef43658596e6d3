"""The workflow's logic as plain, tested Python: what `workflow/rules/*.smk` asks of the config.

* :mod:`.schema`      validates a config against the JSON schema and fills its defaults;
* :mod:`.experiments` expands the stability grid into experiments;
* :mod:`.crossref`    checks the references between config sections;
* :mod:`.paths`       the path table: every file pattern, read by the rules and by the plan;
* :mod:`.plan`        recipes, priorities, significance sets and targets, each shared path formatted;
* :mod:`.rules`       the partner of each rule file: its input functions, quoted command lines, logs
                      (and the report spec); :mod:`.argv` holds them all in one ``Commands``;
* :mod:`.flags`       config values as quoted argv words.

The .smk files keep only the rules, which call these.
"""

from pipeline_lib.workflow.argv import Commands
from pipeline_lib.workflow.plan import Plan

__all__ = ["Commands", "Plan"]
