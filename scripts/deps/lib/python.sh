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
