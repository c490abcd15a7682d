# GPUDirect RDMA conformance suite.
#   make conformance   run the suite on this host (reports/junit.xml, reports/test.json)
#   make test          unit tests, fixture runs, and the Soft-RoCE two-host lab
SHELL   := /bin/bash
GO      ?= go
TAGS    ?= gpu,rdma
REPORTS := reports
GOTESTSUM := $(GO) tool gotestsum
# go-nvml's header marks many NVML calls deprecated; a cold build would print
# thousands of warnings about functions the suite never calls.
CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_CFLAGS

.PHONY: all conformance test unit race lint deps lab lab-bench bench fuzz clean dist

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
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags '$(TAGS)' ./...

# The race detector over the packages that run goroutines: the out-of-band
# session (heartbeats beside the test), the lab (VM watchers, record writer),
# membuf and dl (locks). About 30 s cold on 2 cores, a few seconds warm.
RACE_PKGS ?= ./harness/oob/... ./harness/lab/... ./harness/membuf/... ./harness/dl/...
race:
	$(GO) test -race -count=1 $(RACE_PKGS)

# What CI runs (README's test command).
test: lint unit race lab

clean:
	rm -rf $(REPORTS)

# A copy of the suite for hosts without Go: dist/run.sh writes the same reports.
dist: deps
	harness/dist/build.sh '$(TAGS)' dist

# The cluster planner beside deploy/rounds.sh (pure Go, any Linux host):
# srun -N<n> --ntasks-per-node=1 deploy/rounds.sh, or sbatch deploy/slurm/gdrconf.sbatch.
gdrcluster:
	CGO_ENABLED=0 $(GO) build -o deploy/gdrcluster ./harness/cluster/cmd/gdrcluster
.PHONY: gdrcluster

# Pinned 256 MiB host<->GPU copy bandwidth next to the PCIe link's theoretical
# rate, per GPU (GPU machine; needs libcuda.so.1).
bench:
	$(GO) test -tags gpu -count=1 -run '^$$' -bench . -benchtime 20x ./conformance/gpu/

# Soft-RoCE two-host lab (harness/lab/README.md): two qemu VMs run the rdma
# suite as server and client, and in loopback; reports/lab/junit.xml.
#   make lab LAB_PKGS=./conformance/pingpong LAB_RUN=TestPP03Write
LAB_BIN := .cache/lab/gdrlab
$(LAB_BIN): FORCE
	@mkdir -p $(dir $@)
	CGO_ENABLED=0 $(GO) build -o $@ ./harness/lab/cmd/gdrlab
lab: deps $(LAB_BIN)
	GO=$(GO) $(LAB_BIN) -mode lab
lab-bench: deps $(LAB_BIN)
	GO=$(GO) $(LAB_BIN) -mode bench
lab-kill: deps $(LAB_BIN)
	GO=$(GO) $(LAB_BIN) -mode kill
.PHONY: lab-kill FORCE

# Every fuzz target in the repo, FUZZTIME each (go test takes one -fuzz
# target per run). Short minimization: the default stalls on small machines.
#   make fuzz FUZZTIME=1m
FUZZTIME ?= 30s
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' --exclude-dir='.?*' --exclude-dir=testdata '^func Fuzz' . | sort); do \
	  for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "== $$fn ./$$(dirname $${f#./})"; \
	    $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s ./$$(dirname $${f#./}) || exit 1; \
	  done; \
	done
