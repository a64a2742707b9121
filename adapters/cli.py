"""The ``cpsat-scheduler`` command: a thin dispatcher over ``adapters/commands/<name>.py``.

Each subcommand is one module with ``register(subparsers)``, which adds its parser and sets
``handler`` (``args -> exit status``). This module builds the parser from the list below and
turns whatever happens into an exit status:

* 0 — success (pods left unschedulable are a result, not an error);
* 1 — an internal failure, or a result that is a failure (``validate`` found violations,
  ``schedule`` refused to print a plan its validator rejected);
* 2 — bad input or usage: ``cpsat-scheduler: error: <object>: <field>: <problem>``, no traceback;
* 130 — interrupted (Ctrl-C); 141 — stdout closed early (``| head``), silently.

Tracebacks are printed only with ``--debug`` or ``CPSAT_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
import traceback
from collections.abc import Sequence
from typing import Optional

from models.errors import InputError, Interrupted

from . import gc_control
from .interrupts import sigint_stops_decisions

PROG = "cpsat-scheduler"

# Subcommands, in the order `--help` lists them. To add one, write adapters/commands/<name>.py
# with `register(subparsers)` and add its module here:
COMMANDS = (
    "adapters.commands.schedule",
    "adapters.commands.validate",
    "adapters.commands.repack",
    "adapters.commands.bench",
    "adapters.commands.run",
    "adapters.commands.what_if",
    "adapters.commands.why",
    "adapters.commands.provision",
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer cut off by `head`


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Optimal placement scheduler for Kubernetes: a CP-SAT model of the pending "
        "pods, with kube-scheduler's greedy scheduleOne as baseline and fallback.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--debug", action="store_true", help="print full tracebacks of internal errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    for sub in subparsers.choices.values():
        # Accepted after the subcommand too; SUPPRESS keeps a top-level --debug from being reset.
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def main(argv: Optional[Sequence[str]] = None, *, as_kubectl_plugin: bool = False) -> int:
    """Run the command line; returns the exit status (the console script exits with it).

    ``as_kubectl_plugin``: run as `kubectl cpsat` (``kubectl_plugin``), where a command given no
    SNAPSHOT reads the current kubeconfig's cluster; it travels with the parsed arguments
    (``args.as_kubectl_plugin``, read by ``cluster_read.cluster_requested``), not in a module flag.

    Run as the process's command (``argv`` None: the console script, ``python -m adapters``),
    a command that held a large input (``gc_control.keep_for_good``) ends the process as soon as
    its output is flushed: tearing down a snapshot of 50,000 pods and its model object by object
    takes seconds, after the answer (or after Ctrl-C) and for nothing."""
    status = _main(argv, as_kubectl_plugin)
    # Not under a profiler, debugger or coverage tracer: they write their results at exit.
    if argv is None and gc_control.kept() and sys.getprofile() is None and sys.gettrace() is None:
        _exit_now(status)
    gc_control.release()
    return status


def _exit_now(status: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError, ValueError):
            status = EXIT_BROKEN_PIPE if stream is sys.stdout and status == EXIT_OK else status
    logging.shutdown()
    os._exit(status)


def _main(argv: Optional[Sequence[str]], as_kubectl_plugin: bool = False) -> int:
    debug = os.environ.get("CPSAT_DEBUG", "") not in ("", "0")
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # usage errors (2), --help and --version (0)
            return exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_USAGE)
        args.as_kubectl_plugin = as_kubectl_plugin
        debug = debug or getattr(args, "debug", False)
        logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format=f"{PROG}: %(message)s")
        if getattr(args, "decides", False):
            # A decision in CP-SAT's C++ code: Ctrl-C must stop it rather than end it as a plan.
            with sigint_stops_decisions():
                status = args.handler(args)
        else:
            status = args.handler(args)
        sys.stdout.flush()
        return status
    except InputError as exc:
        _error(f"error: {exc}")
        return EXIT_USAGE
    except (KeyboardInterrupt, Interrupted):
        _error("interrupted: no plan printed")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001 - the one place every other failure ends up
        if debug:
            traceback.print_exc()
        _error(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_FAILURE


# Characters that would end or rewrite the one-line message (input text is quoted in it):
# C0/C1 controls (\r, \n, ESC, ...) and the characters Python and terminals treat as line breaks.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(message: str) -> str:
    """``message`` with every character that could break its line written as an escape."""
    return _UNPRINTABLE.sub(_escape, message)


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _error(message: str) -> None:
    message = one_line(message)
    try:
        print(f"{PROG}: {message}", file=sys.stderr)
    except (BrokenPipeError, OSError):
        pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (tests capture stdout); nothing left to flush


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("cpsat-scheduler")
    except Exception:  # noqa: BLE001 - running from a source tree without metadata
        return "unknown"


def kubectl_plugin(argv: Optional[Sequence[str]] = None) -> int:
    """The kubectl plugin (`kubectl cpsat schedule|repack|validate ...`, installed as the
    executable kubectl-cpsat): the same command line, reading the current kubeconfig's cluster
    ($KUBECONFIG, ~/.kube/config; --context to choose) when no SNAPSHOT is given."""
    return main(argv, as_kubectl_plugin=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
