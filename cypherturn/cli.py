"""What the project's command lines share: how an error is printed and which exit code it gets.

Exit codes: 0 success (or what the command returns), 2 bad input (an ``InputError`` such as an
unknown world or a malformed config, or another error type the command names), 3 something the project
depends on failed (an ``InfrastructureError``: the local Neo4j could not be started or reached, a model
server did not answer). The message goes to stderr as ``error: ...``."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from cypherturn.errors import InfrastructureError, InputError


def error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def run_command(command: Callable[[argparse.Namespace], int], args: argparse.Namespace, *,
                input_errors: tuple[type[BaseException], ...] = ()) -> int:
    """``command(args)``, with the errors above turned into a message and an exit code."""
    try:
        return command(args)
    except (InputError, *input_errors) as exc:
        error(str(exc))
        return 2
    except InfrastructureError as exc:
        error(f"infrastructure ({type(exc).__name__}): {exc}")
        return 3
