# Sourced by scripts/deps/*.sh: find_python MINOR prints the path of a Python MINOR (e.g. 3.12)
# interpreter: pyenv's first, then pythonMINOR on PATH.
find_python() {
    local minor=$1 pyenv_root=${PYENV_ROOT:-$HOME/.pyenv} candidate
    for candidate in "$pyenv_root"/versions/"$minor".*/bin/python"$minor"; do
        [ -x "$candidate" ] && { echo "$candidate"; return 0; }
    done
    command -v "python$minor" && return 0
    echo "no Python $minor: pyenv install $minor, or put python$minor on PATH" >&2
    return 1
}

# core_venv VENV MINOR VERSION: a fresh venv at VENV on Python MINOR with ansible-core VERSION.
core_venv() {
    local venv=$1 minor=$2 version=$3 python
    python=$(find_python "$minor") || return 1
    mkdir -p "$(dirname "$venv")"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "ansible-core==$version" >&2
}
