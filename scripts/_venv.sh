# Sourced by scripts/run and scripts/test: make .venv exist and match the requirements.
#
# Creates .venv with Python 3.11 or newer when it is missing, and runs
# `pip install -r requirements-dev.txt` whenever requirements*.txt changed since
# the last install (a SHA-256 stamp kept in .venv/.requirements.sha256).

venv_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.11 python3 python; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

requirements_hash() {
    # sha256sum (GNU coreutils), else shasum (macOS and the BSDs)
    if command -v sha256sum >/dev/null 2>&1; then
        cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1
    else
        cat requirements.txt requirements-dev.txt | shasum -a 256 | cut -d' ' -f1
    fi
}

ensure_venv() {
    if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys' 2>/dev/null; then
        local python
        if ! python="$(venv_python)"; then
            echo "scripts: ERROR: Python 3.11 or newer is needed (python3.11 or python3); set PYTHON to one" >&2
            exit 1
        fi
        echo "scripts: creating .venv with $("$python" --version 2>&1)"
        rm -rf .venv
        "$python" -m venv .venv
    fi
    local want have=""
    want="$(requirements_hash)"
    [ -f .venv/.requirements.sha256 ] && have="$(cat .venv/.requirements.sha256)"
    if [ "$want" != "$have" ]; then
        echo "scripts: installing requirements-dev.txt into .venv"
        .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off \
            -r requirements-dev.txt
        echo "$want" > .venv/.requirements.sha256
    fi
}
