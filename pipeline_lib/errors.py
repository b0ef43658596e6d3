"""Errors the CLI reports as one clear line instead of a traceback."""


class PipelineError(Exception):
    """A user-facing error: bad input, bad config, missing or corrupt file."""


class ConfigError(PipelineError):
    """An invalid configuration value; the message names the key (``key``: the dotted config key,
    when the error is about one, so the workflow can point at its file and line)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class InputError(PipelineError):
    """Bad input data; the message names the file and line."""


class CheckpointError(PipelineError):
    """A missing, corrupt or mismatched checkpoint or profile file."""
