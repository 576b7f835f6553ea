"""``python -m autograder grade <assignment>``: grade a class (:mod:`autograder.classgrader`);
``python -m autograder report <assignment>``: the class report (:mod:`autograder.report`);
``python -m autograder lms <assignment> --to canvas|moodle``: a gradebook file for an LMS
(:mod:`autograder.lms`)."""

import sys

COMMANDS = {"report": "autograder.report", "lms": "autograder.lms"}  # besides classgrader's grade

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in COMMANDS:
        import importlib

        importlib.import_module(COMMANDS[sys.argv[1]]).main(sys.argv[2:])
    else:
        from autograder.classgrader import main

        main()
