#!/usr/bin/env bash
# Install opennmt into its own venv (see install.sh).
exec "$(dirname "$0")/install.sh" opennmt "$@"
