"""Errors the CLI reports as one clear line instead of a traceback."""


class PipelineError(Exception):
    """A user-facing error: bad input, bad config, missing or corrupt file."""


class ConfigError(PipelineError):
    """An invalid configuration value; the message names the key."""


class InputError(PipelineError):
    """Bad input data; the message names the file and line."""


class CheckpointError(PipelineError):
    """A missing, corrupt or mismatched checkpoint or profile file."""
