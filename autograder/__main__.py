"""``python -m autograder grade <assignment>``: grade a class (:mod:`autograder.classgrader`)."""

from autograder.classgrader import main

if __name__ == "__main__":
    main()
