#!/usr/bin/env bash
# Install fairseq into its own venv (see install.sh).
exec "$(dirname "$0")/install.sh" fairseq "$@"
