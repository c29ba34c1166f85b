# gpuadmit's two commands for people: `make run` decides for an example pod
# with the embedded default policies; `make test` runs every test.
GO ?= go

.PHONY: run test build bench

run:
	$(GO) run ./cmd/gpuadmit mutate -f examples/pods/hami-memory.yaml --nodes examples/nodes.yaml --namespace examples/namespace.yaml

test:
	$(GO) vet ./...
	$(GO) test -count=1 ./...

build:
	$(GO) build -o bin/ ./cmd/...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/mutate ./pkg/inventory
