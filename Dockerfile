# plumb's image: a virtualenv with the runtime dependencies only (no plotting, no dev tools) and
# the numba kernel compiled at build time, run as a non-root user.
#
#   docker build -t plumb .                          # python:3.12-slim, dependencies from PyPI
#   make image                                       # here: buildah, a Debian base, no network
#
# The builder installs from ./wheels when the context has it (make image stages plumb's wheel
# and its dependencies there, for a build with no network) and from the source otherwise.
ARG BASE=python:3.12-slim

FROM ${BASE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    NUMBA_CACHE_DIR=/opt/plumb/numba-cache
WORKDIR /src
COPY . .
RUN python3 -m venv /opt/plumb \
 && if [ -d wheels ]; then \
        /opt/plumb/bin/pip install --no-index --find-links wheels plumb; \
    else \
        /opt/plumb/bin/pip install .; \
    fi \
 && /opt/plumb/bin/plumb --version
# Compile every variant of the kernel now, into the cache the image ships, so that a new pod
# loads it in a second instead of compiling for ~30 s. numba keys the cache by the source's
# path (the same /opt/plumb in the final image) and by the CPU it was compiled for: on another
# CPU model plumb compiles once at start, as it would without the cache.
RUN /opt/plumb/bin/python -c "from plumb.kernel import compiled; compiled.warm_up()" \
 && test -n "$(find /opt/plumb/numba-cache -name '*.nbi' -print -quit)" \
 && chown -R 65532:65532 /opt/plumb/numba-cache

FROM ${BASE}
COPY --from=builder /opt/plumb /opt/plumb
# Owned by plumb's user, so that a container with a writable root filesystem can add to it (a
# pod with a read-only one copies it into a volume first: manifests/deployment.yaml).
COPY --from=builder --chown=65532:65532 /opt/plumb/numba-cache /opt/plumb/numba-cache
# HOME: nothing of plumb's writes there, but libraries look it up; /tmp is a volume in the pod.
ENV PATH=/opt/plumb/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    NUMBA_CACHE_DIR=/opt/plumb/numba-cache
# A numeric user, so that the kubelet can check runAsNonRoot, with a passwd entry, since kopf
# asks for the user's name (getpass). Written by hand: the slimmest bases have no useradd.
RUN echo 'plumb:x:65532:65532:plumb:/tmp:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'plumb:x:65532:' >> /etc/group
USER 65532:65532
RUN plumb --version
EXPOSE 10251
ENTRYPOINT ["plumb"]
CMD ["run"]
