#!/usr/bin/env bash
# Stages the build context of plumb's image for a build with no network: the Dockerfile, and in
# wheels/ plumb's own wheel with every runtime dependency as a CPython 3.11 manylinux x86_64
# wheel (the Python of the Debian bookworm base that `make image` builds on), pinned to the
# versions installed in .venv, which the test suite ran with.
#
# Usage: hack/image/stage.sh CONTEXT_DIR     (CONTEXT_DIR is emptied first)
#
# The only network access is pip's to PyPI, for wheels not already in pip's cache. Files are
# written with fixed timestamps so that the same sources give the same context, and so the same
# image key (plumb_dev.cluster.localnode.recipes): an unchanged checkout reuses the cached image.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

context=${1:?usage: hack/image/stage.sh CONTEXT_DIR}
python=${PYTHON:-.venv/bin/python}
# Debian bookworm: Python 3.11, glibc 2.36. pip 23 takes a platform tag literally (it does not
# add the older glibc versions a newer glibc runs), so every one up to 2.36 is listed.
py_version=3.11
platforms=(--platform manylinux2014_x86_64)
for minor in $(seq 17 36); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done

if [[ ! -x $python ]]; then
    echo "error: $python not found; run \`make install\` first (or set PYTHON)" >&2
    exit 1
fi

rm -rf "$context"
mkdir -p "$context/wheels"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# plumb's wheel from a copy of just what it is made of, so that the build leaves no egg-info or
# build/ in the checkout. SOURCE_DATE_EPOCH gives the zip entries fixed times.
mkdir -p "$work/src"
cp -r pyproject.toml README.md "$work/src/"
mkdir -p "$work/src/operator"
tar -C operator --exclude=__pycache__ --exclude='*.egg-info' -cf - plumb | tar -C "$work/src/operator" -xf -
SOURCE_DATE_EPOCH=315532800 "$python" -m pip wheel --quiet --disable-pip-version-check \
    --no-deps --wheel-dir "$context/wheels" "$work/src"

# The runtime dependencies, at the versions the suite ran with (plumb and its tooling left out).
"$python" -m pip freeze --exclude-editable --disable-pip-version-check \
    | grep -v -E '^plumb(-dev)?[=@ ]' \
    > "$work/constraints.txt"
"$python" -m pip download --quiet --disable-pip-version-check \
    --only-binary=:all: --implementation cp --python-version "$py_version" \
    --abi "cp${py_version/./}" "${platforms[@]}" \
    --constraint "$work/constraints.txt" \
    --dest "$context/wheels" "$context"/wheels/plumb-*.whl

cp Dockerfile "$context/Dockerfile"
for tooling in matplotlib plumb_dev; do
    if compgen -G "$context/wheels/$tooling-*" >/dev/null; then
        echo "error: $tooling is among the runtime wheels; it belongs to the development" \
            "tooling (tools/, plumb-dev), never to the image" >&2
        exit 1
    fi
done
find "$context" -exec touch -h -d @315532800 {} +
echo "staged $(ls "$context/wheels" | wc -l) wheels in $context/wheels" \
    "($(du -sm "$context/wheels" | cut -f1) MB)" >&2
