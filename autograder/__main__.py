"""``python -m autograder COMMAND ...``: the course's commands for an instructor.

Each command is the ``main(argv)`` of one module, given the arguments after the command's name;
:data:`COMMANDS` lists them with one line each, and ``python -m autograder --help`` shows that list
(issue 45: it showed ``grade`` only, while ``report`` and ``lms`` were run all the same).
``python -m autograder COMMAND --help`` shows a command's own options.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# command: (the module whose main(arguments) runs it, what it does in one line)
COMMANDS = {
    "grade": (
        "autograder.classgrader",
        "grade every submission of an assignment: student code in a sandbox, checks outside it",
    ),
    "report": (
        "autograder.report",
        "an offline class report: each part's scores and the mistakes the class made",
    ),
    "lms": ("autograder.lms", "a gradebook-import CSV for Canvas or Moodle, from the gradebook"),
}


def parser() -> argparse.ArgumentParser:
    """The top level: the commands of :data:`COMMANDS`, each with its line of help."""
    top = argparse.ArgumentParser(
        prog="python -m autograder",
        description="The course's grading commands (see the README's instructor section).",
        epilog="python -m autograder COMMAND --help: the command's own options",
    )
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, what) in COMMANDS.items():
        commands.add_parser(name, help=what, add_help=False)
    return top


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command ``argv`` names with the arguments that follow it; otherwise show the list
    of commands (``--help``) or the usage with what is wrong (exit status 2)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        top = parser()
        top.parse_args(args[:1])  # --help: the list, exit 0; an unknown command: exit 2
        top.error(f"the command comes first: {' | '.join(COMMANDS)}")
    module, _ = COMMANDS[args[0]]
    importlib.import_module(module).main(args[1:])


if __name__ == "__main__":
    main()
