# Multi-stage build: a static, cgo-free binary on a minimal non-root image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/s3gate ./cmd/s3gate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/s3gate /usr/local/bin/s3gate
# S3 on 9000; metrics and health (/metrics, /healthz, /readyz) on 9001.
ENV S3GATE_ADDR=0.0.0.0:9000 S3GATE_METRICS_ADDR=0.0.0.0:9001 S3GATE_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 9000 9001
USER nonroot:nonroot
# The image has no shell or curl: the binary probes its own /readyz
# (database reachable, migrations applied, storage writable). start-period
# covers migrations on first start.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/s3gate", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/s3gate"]
CMD ["serve"]
