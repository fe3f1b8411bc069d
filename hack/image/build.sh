#!/usr/bin/env bash
# `make image`: plumb's image, built here with buildah from the repository's Dockerfile with no
# network and no registry, and loaded into the local cluster's real node when one is running.
#
#   1. hack/image/stage.sh stages the context (Dockerfile + wheels/) in build/image/context;
#   2. plumb_dev.cluster.localnode.images builds the Python base (mmdebstrap: python3,
#      python3-venv) once, then the Dockerfile on it with BASE set to it; both are cached by
#      content in ~/.cache/plumb/images, so an unchanged checkout rebuilds nothing;
#   3. with a real node up (plumb cluster up --node), ctr imports the image into its containerd.
#
# Prints the image's reference and archive on the last line of stdout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
python=${PYTHON:-.venv/bin/python}
context=${PLUMB_IMAGE_CONTEXT:-build/image/context}

bash hack/image/stage.sh "$context"
"$python" - "$context" <<'PY'
import os
import sys
from pathlib import Path

from plumb_dev import commands
from plumb_dev.cluster.localnode import images
from plumb_dev.cluster.localnode import nodelifecycle as localnode

try:
    image = images.ensure_plumb_image(Path(sys.argv[1]))
except images.ImageError as error:
    sys.exit(f"error: {error}")
size = image.archive.stat().st_size / 1e6
print(f"plumb image {image.ref}: {size:.0f} MB as a docker-archive", file=sys.stderr)
directory = commands.default_cluster_dir()
node = localnode.load(directory) if localnode.recorded(directory) else None
if node is not None and localnode.status(directory).get("containerd") == "running":
    images.load(image, containerd_address=node.containerd_address)
    print(f"loaded into {node.name}'s containerd ({directory})", file=sys.stderr)
else:
    print(f"no real node running in {directory}: built only", file=sys.stderr)
print(f"{image.ref}\t{image.archive}")
PY
