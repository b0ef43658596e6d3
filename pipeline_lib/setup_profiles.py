"""Make the repository's Snakemake profiles available by name: ``snakemake --profile slurm all``.

Snakemake looks a bare profile name up in ``$XDG_CONFIG_HOME/snakemake/<name>`` (default
``~/.config/snakemake``) and ``/etc/xdg/snakemake``. This links ``profiles/<name>`` of this checkout
there. ``snakemake --profile profiles/slurm`` (a path) works without it.

    python -m pipeline_lib.setup_profiles            # link slurm and local
    python -m pipeline_lib.setup_profiles --force    # replace links that point to another checkout

An existing profile of the same name that is not our link (a directory, or a link elsewhere) is
never touched without --force, and a real directory never at all.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from pipeline_lib.errors import ConfigError, PipelineError

PROFILE_NAMES = ("slurm", "local")
REPO_ROOT = Path(__file__).resolve().parent.parent


def snakemake_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME") or str(Path.home()), ".config")
    return Path(base) / "snakemake"


def link_profiles(
    repo_root: Path = REPO_ROOT,
    config_dir: Path | None = None,
    names: Iterable[str] = PROFILE_NAMES,
    force: bool = False,
) -> list[str]:
    """Symlink ``repo_root/profiles/<name>`` into ``config_dir``; returns one line per profile."""
    config_dir = snakemake_config_dir() if config_dir is None else config_dir
    config_dir.mkdir(parents=True, exist_ok=True)
    report = []
    for name in names:
        source = (repo_root / "profiles" / name).resolve()
        if not (source / "config.yaml").is_file():
            raise ConfigError(f"profile {name!r}: {source / 'config.yaml'} does not exist")
        target = config_dir / name
        if target.is_symlink():
            if target.resolve() == source:
                report.append(f"{name}: already linked ({target} -> {source})")
                continue
            if not force:
                raise ConfigError(
                    f"profile {name!r}: {target} already links to {os.readlink(target)}, not to {source}; "
                    "rerun with --force to replace that link"
                )
            target.unlink()
        elif target.exists():
            raise ConfigError(
                f"profile {name!r}: {target} already exists and is not a link to this repository; "
                f"move it away or use `snakemake --profile {source}`"
            )
        target.symlink_to(source, target_is_directory=True)
        report.append(f"{name}: linked {target} -> {source}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline_lib.setup_profiles", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--force", action="store_true", help="replace our-named links pointing elsewhere")
    parser.add_argument(
        "--config-dir",
        type=Path,
        default=None,
        help="default: $XDG_CONFIG_HOME/snakemake or ~/.config/snakemake",
    )
    parser.add_argument(
        "names", nargs="*", default=list(PROFILE_NAMES), help="profiles to link (default: all)"
    )
    args = parser.parse_args(argv)
    try:
        for line in link_profiles(config_dir=args.config_dir, names=args.names, force=args.force):
            print(line)
    except PipelineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
