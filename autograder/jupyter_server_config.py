"""The course's Jupyter server, for reviewing in formgrader (issue 32). Start it from this folder:

    cd autograder && ../.venv/bin/jupyter lab --config=jupyter_server_config.py --no-browser

so that nbgrader reads ``nbgrader_config.py`` here (the course, the gradebook's ``db_url``) and this
file configures the server:

* the server's root is the course root (the repository), so formgrader's links to ``solutions/``,
  ``autograder/submitted/`` and the rest open (with this folder as root they pointed above it);
* MathJax is served from the course's environment at ``static/mathjax/`` (the copy of
  sphinx-mathjax-offline, as the book uses it), and formgrader's pages load it from there (the
  template ``jupyter/nbconvert/templates/formgrade/mathjax.html.j2``), so they work with no network
  (JupyterLab brings its own MathJax);
* nbgrader's student-side extensions (the Assignments list and the course list) are switched off:
  this course hands notebooks in through ``autograder/submitted/``, not through nbgrader's exchange,
  and they polled an exchange folder that does not exist, logging "Unwritable directory" each time.
  Formgrader's own exchange (its Release and Collect buttons) gets a folder of the course,
  ``autograder/exchange/``, so it warns of no missing directory;
* the login cookie is set for the whole server (path ``/``): nbgrader's pages give it the path of
  their ``base_url`` without its final "/", an empty path, which a browser takes as the folder of
  the page opened. A link such as ``/formgrader/gradebook/02-hmm/hmm?token=...`` then logged in
  that folder only, formgrader's calls to ``/formgrader/api/...`` went without the cookie, were
  sent to the login page, and the page stayed at "Loading, please wait...".
"""

import os
import sysconfig

here = os.path.dirname(os.path.abspath(__file__))
c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)

c.ServerApp.root_dir = os.path.dirname(here)
# jupyter/nbconvert/templates/formgrade/mathjax.html.j2 replaces nbconvert's MathJax macro on
# formgrader's pages (Jupyter's data path is searched before nbconvert's base templates)
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    [os.path.join(here, "jupyter"), *filter(None, [os.environ.get("JUPYTER_PATH")])]
)
c.ServerApp.extra_static_paths = [
    os.path.join(sysconfig.get_paths()["purelib"], "sphinx-mathjax-offline", "static")
]
c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False,
}
c.IdentityProvider.cookie_options = {"path": "/"}
c.Exchange.root = os.path.join(here, "exchange")
os.makedirs(c.Exchange.root, exist_ok=True)
