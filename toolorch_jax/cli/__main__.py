"""`python -m toolorch_jax.cli`: the `toolorch` command."""

import sys

from toolorch_jax.cli.main import main

sys.exit(main())
