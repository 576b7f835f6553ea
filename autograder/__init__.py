"""The course's grading tools: nbgrader's configuration and the sandboxed class grader."""
