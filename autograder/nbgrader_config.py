"""nbgrader configuration for the course (nbgrader 0.9). Run nbgrader from this folder.

The course root is the repository: assignments are authored in ``solutions/<assignment>/``
(nbgrader's *source*) and released to ``exercises/<assignment>/``. Students' submissions, the
autograded copies, the feedback and the gradebook live here, in ``autograder/``, and are never
committed (see ``.gitignore``).
"""

import os

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

here = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = os.path.dirname(here)
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "autograder/submitted"
c.CourseDirectory.autograded_directory = "autograder/autograded"
c.CourseDirectory.feedback_directory = "autograder/feedback"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db")
c.CourseDirectory.course_id = "nlpcourse"

# Students may leave scratch cells; only the graded cells count.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# A check that loops forever must not stall a whole class: stop a notebook after 10 minutes.
c.ExecutePreprocessor.timeout = 600
