# kube-gc's image: a static-enough release build on Debian, run on a distroless base as an
# unprivileged user (65532, as deploy/base/deployment.yaml expects).
#
#   docker build -t kube-gc:$(git rev-parse --short HEAD) \
#       --build-arg KUBE_GC_GIT_COMMIT=$(git rev-parse --short=12 HEAD) .
#
# Where no registry can be reached (this project's CI), scripts/image assembles the same runtime
# image from scratch with buildah, from a binary built on the host, and checks that it runs.
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
ARG KUBE_GC_GIT_COMMIT=unknown
ENV KUBE_GC_GIT_COMMIT=${KUBE_GC_GIT_COMMIT}
RUN cargo build --release --locked -p kube-gc

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/kube-gc /usr/local/bin/kube-gc
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kube-gc"]
