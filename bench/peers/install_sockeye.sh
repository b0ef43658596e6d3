#!/usr/bin/env bash
# Install sockeye into its own venv (see install.sh).
exec "$(dirname "$0")/install.sh" sockeye "$@"
