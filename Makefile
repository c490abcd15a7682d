# GPUDirect RDMA conformance suite.
#   make conformance   run the suite on this host (reports/junit.xml, reports/test.json)
#   make test          unit tests, fixture runs, and the Soft-RoCE two-host lab
SHELL   := /bin/bash
GO      ?= go
TAGS    ?= gpu,rdma
REPORTS := reports
GOTESTSUM := $(GO) tool gotestsum

.PHONY: all conformance test unit lint deps lab lab-bench bench fuzz clean dist

all: test

deps:
	@harness/deps.sh '$(TAGS)'

# The suite itself. Absent hardware skips (GDR_STRICT=1 makes it fail).
conformance: deps
	@mkdir -p $(REPORTS)
	$(GOTESTSUM) --format testname --junitfile $(REPORTS)/junit.xml \
	  --jsonfile $(REPORTS)/test.json -- -tags '$(TAGS)' -count=1 ./conformance/...

# Unit tests of internal/ and harness/, and the no-tag conformance packages
# run against every recorded and constructed host tree under fixtures/.
unit: deps
	@mkdir -p $(REPORTS)
	$(GOTESTSUM) --format testname --junitfile $(REPORTS)/unit-junit.xml -- \
	  -tags '$(TAGS)' -count=1 ./internal/... ./harness/... ./fixtures/...

lint: deps
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo 'gofmt: files above need formatting'; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags '$(TAGS)' ./...

# What CI runs (README's test command).
test: lint unit lab

clean:
	rm -rf $(REPORTS)

# A copy of the suite for hosts without Go: dist/run.sh writes the same reports.
dist: deps
	harness/dist/build.sh '$(TAGS)' dist

# Pinned 256 MiB host<->GPU copy bandwidth next to the PCIe link's theoretical
# rate, per GPU (GPU machine; needs libcuda.so.1).
bench:
	$(GO) test -tags gpu -count=1 -run '^$$' -bench . -benchtime 20x ./conformance/gpu/
