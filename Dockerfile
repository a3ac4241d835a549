# Multi-stage build: a static, cgo-free binary on a minimal non-root image.
#   docker build --build-arg VERSION=$(git describe --always --dirty) -t s3gate .
# deploy/containercheck_test.go builds the same file tree without Docker and
# runs it as the image's user: keep the two in step.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version `s3gate version` and the start-up log report (the Makefile's
# build passes the same -X).
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/s3gate ./cmd/s3gate
# The data directory, owned by the base image's nonroot user (65532:65532)
# and private: the image has no shell to create it, and a named volume
# mounted on /data starts as a copy of it, ownership and mode included.
# COPY of a directory copies its contents, so the owner of /data itself is
# the --chown below; the gateway sets the mode to 0700 at every start.
RUN mkdir -m 0700 /out/data && chown 65532:65532 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/s3gate /usr/local/bin/s3gate
COPY --from=build --chown=65532:65532 /out/data /data
# S3 on 9000; metrics and health (/metrics, /healthz, /readyz) on 9001.
ENV S3GATE_ADDR=0.0.0.0:9000 S3GATE_METRICS_ADDR=0.0.0.0:9001 S3GATE_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 9000 9001
USER 65532:65532
# The image has no shell or curl: the binary probes its own /readyz
# (database reachable, migrations applied, storage writable). start-period
# covers migrations on first start.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/s3gate", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/s3gate"]
CMD ["serve"]
