#!/usr/bin/env bash
# The project's commands (see README.md), run from anywhere. Usage:
#   bash .ci/tasks.sh setup   create .venv, install requirements.txt, fetch and verify the Brown corpus
#   bash .ci/tasks.sh book    setup, then build the book into _build/html (fails on any cell error or warning)
#   bash .ci/tasks.sh test    setup, then lint and run every test (book build and nbgrader runs included)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
PY=$VENV/bin/python

setup() {
    if [ ! -x "$PY" ]; then
        python3 -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is needed"'
        python3 -m venv "$VENV"
    fi
    "$PY" -m pip install --quiet --disable-pip-version-check -r requirements.txt
    "$PY" -m nlpcourse.data  # fetches the Brown corpus once into ~/.cache/nlpcourse (or $NLPCOURSE_DATA)
    browser
    sandbox
    database
}

# A Debian package that a part of the project needs, installed with apt-get where it can be (as
# root, or with sudo that asks no password); elsewhere a note says what is lost and how to install
# it. Usage: apt_install PACKAGE "what it is for" "what happens without it"
apt_install() {
    local package=$1 purpose=$2 without=$3 sudo=""
    if [ "$(id -u)" != 0 ]; then
        sudo="sudo -n"
    fi
    if command -v apt-get >/dev/null \
        && $sudo apt-get update -qq >/dev/null 2>&1 \
        && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$package" >/dev/null 2>&1; then
        echo "installed $package $purpose"
    else
        echo "NOTE: could not install $package with apt-get (needs Debian/Ubuntu and root or" \
            "sudo); $without. Install it with: sudo apt-get install $package" >&2
    fi
}

# The sandbox of the class grader (autograder/sandbox.py): Debian's bubblewrap. Without it the
# grader falls back to `unshare` or no isolation, says so in every result, and the tests that need
# it are skipped with the reason.
sandbox() {
    if ! command -v bwrap >/dev/null; then
        apt_install bubblewrap "for the grader's sandbox" \
            "the class grader will isolate student code less (it says how in each result)"
    fi
}

# The headless browser of tests/test_browser.py: Debian's chromium, driven by pip's playwright
# (`playwright install` downloads its own browser, which these machines cannot).
browser() {
    if [ ! -x /usr/bin/chromium ]; then
        apt_install chromium "for the browser test" "tests/test_browser.py will be skipped"
    fi
}

# A gradebook in PostgreSQL (README, "A gradebook in PostgreSQL"): Debian's postgresql. The tests
# start a throw-away server of their own (tests/services.py: initdb in a temporary folder, a Unix
# socket, stopped at the end) and are skipped, with the reason, without it. Installing the package
# also starts Debian's own server where systemd runs; the tests do not use it.
database() {
    if ! command -v initdb >/dev/null && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
        apt_install postgresql "for the tests of a PostgreSQL gradebook" \
            "tests/test_postgres.py will be skipped"
    fi
}

# nbgrader and jupyter-book call scripts (alembic, jupyter) that live beside the venv's python
export PATH="$PWD/$VENV/bin:$PATH"

case "${1:-}" in
    setup) setup ;;
    book)
        setup
        jupyter-book build . -W -n --keep-going
        # fails when a chapter's last execution failed or a glued value is missing, even when
        # the build above found nothing to redo
        "$PY" .ci/check_build.py _build
        echo "The book is in _build/html/index.html"
        ;;
    test)
        setup
        # test-only dependencies (KenLM, the oracle of tests/test_arpa.py; builds with g++)
        "$PY" -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
        ruff check .
        ruff format --check .
        mypy  # the package nlpcourse/, configured in pyproject.toml
        # all of them (a plain pytest leaves the slow ones out); the 30 slowest are listed at the end
        pytest -m "slow or not slow" --durations=30
        ;;
    *)
        echo "usage: bash .ci/tasks.sh setup|book|test" >&2
        exit 2
        ;;
esac
