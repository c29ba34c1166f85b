# syntax=docker/dockerfile:1
# The gpuadmit webhook image: ghcr.io/gpuadmit/gpuadmit:<version>, whose
# /gpuadmit-webhook deploy/ runs. A static binary on distroless, as non-root:
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t ghcr.io/gpuadmit/gpuadmit:v0.1.0 .
#
# Only the Go sources are copied (the context also holds tool and test
# binaries under .bin/ and test/e2e/.bin/).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
COPY policies/ policies/
COPY certs/ certs/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/gpuadmit-webhook ./cmd/webhook

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gpuadmit-webhook /gpuadmit-webhook
USER 65532:65532
ENTRYPOINT ["/gpuadmit-webhook"]
