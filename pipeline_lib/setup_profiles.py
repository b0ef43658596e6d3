"""Make the repository's Snakemake profiles available by name: ``snakemake --profile slurm all``.

Snakemake looks a bare profile name up in ``$XDG_CONFIG_HOME/snakemake/<name>`` (default
``~/.config/snakemake``) and ``/etc/xdg/snakemake``. This links ``profiles/<name>`` of this checkout
there. ``snakemake --profile profiles/slurm`` (a path) works without it.

    python -m pipeline_lib.setup_profiles                 # link slurm and local
    python -m pipeline_lib.setup_profiles --keep-others   # `make setup`: leave other checkouts' links
    python -m pipeline_lib.setup_profiles --force         # `make profiles`: re-point them to this one

A link to another checkout that still exists is that checkout's profile: without --force it is an
error, or with --keep-others left alone with a line saying so and how to choose; --force re-points it
and says which checkout it took it from. A link whose target is gone is re-pointed (said too). A real
directory is never touched.
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
    keep_others: bool = False,
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
            previous = os.readlink(target)
            if target.resolve() == source:
                report.append(f"{name}: already linked ({target} -> {source})")
                continue
            if target.exists() and not force:
                if keep_others:
                    report.append(
                        f"{name}: kept {target} -> {previous} (another checkout's); `--profile {name}` "
                        f"runs that checkout's profile: `make profiles` re-points it here, or pass "
                        f"`--profile {source}`"
                    )
                    continue
                raise ConfigError(
                    f"profile {name!r}: {target} already links to {previous}, not to {source}; "
                    "rerun with --force to replace that link"
                )
            target.unlink()
            target.symlink_to(source, target_is_directory=True)
            why = "" if Path(previous).exists() else ", which no longer exists"
            report.append(f"{name}: re-pointed {target} -> {source} (was -> {previous}{why})")
            continue
        if target.exists():
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
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--force", action="store_true", help="re-point links to another checkout to this one")
    choice.add_argument(
        "--keep-others", action="store_true", help="leave links to another checkout, saying so (make setup)"
    )
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
        for line in link_profiles(
            config_dir=args.config_dir, names=args.names, force=args.force, keep_others=args.keep_others
        ):
            print(line)
    except PipelineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
