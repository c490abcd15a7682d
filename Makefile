# GPUDirect RDMA conformance suite. `make` alone prints the targets (make help).
#   make conformance   run the suite on this host: reports/{junit.xml,summary.txt,md,json,report.html}
#   make soak          the suite with a soak (GDR_SOAK=10m unless set): reports/ and reports/soak.json
#   make report IN='dir ...' OUT=dir   merge hosts' report folders into one report
#   make test          lint, unit tests, fixture runs, the browser test and the qemu labs
SHELL   := /bin/bash
GO      ?= go
TAGS    ?= gpu,rdma
# make dist ARCH=arm64: the dist for another architecture (a GOARCH), in
# dist-<arch>/; without ARCH, this host's, in dist/.
ARCH    ?=
# x86/x86_64/aarch64 (the kernel's names, which kernel builds export as
# ARCH) are amd64/arm64 here too (build/arch.sh).
DIST    ?= $(if $(ARCH),dist-$(subst aarch64,arm64,$(subst x86,amd64,$(subst x86_64,amd64,$(ARCH)))),dist)
REPORTS := reports
GOTESTSUM := $(GO) tool gotestsum
# go-nvml's header marks many NVML calls deprecated; a cold build would print
# thousands of warnings about functions the suite never calls.
CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_CFLAGS

.PHONY: all help conformance soak report test unit browser race lint update deps deps-unit deps-test lab lab-bench lab-arm64 bench fuzz clean dist
.DEFAULT_GOAL := help

all: test

# What each target does and needs (docs/developing.md has the long form).
define HELP
make TARGET [VAR=value]. Needs: Go and gcc; what else a target needs is
installed by the project's own files where it is missing (as root, with the
network for packages); as another user the target names what to run as root.
min: minutes on 2 cores with warm caches. rdma-core headers: deps installs
them as root where they are missing; present, any user builds.

  target       what                                         needs                          min
  conformance  the suite on this host -> reports/ (RUN=,    root (devices, and to install  1-5
               TAGS=, GDR_STRICT=1); prints the verdict     rdma-core headers if missing)
  soak         conformance with a soak: every rail's traffic   root, as conformance           10+
               and the GPUs' copies for GDR_SOAK (10m),
               sampled into reports/soak.json
  report       merge report folders: IN='dir ...' OUT=dir   -                              <1
  test         lint unit browser race lab (CI: then         root, qemu, network the first  ~11
               lab-arm64, lab-cluster, lab-k8s, lab-soak's  time (packages, lab kernel)
               short form: .ci/run)
  unit         unit tests and fixture runs; no browser      rdma-core headers, xmllint     1-2
                                                            (deps-unit as root); not root
  browser      the HTML report in headless Chromium         Chromium (deps-test as root)   <1
  race         the race detector, concurrent packages       rdma-core headers              ~1
  lint         gofmt, go vet, staticcheck (both tag sets),  rdma-core headers              ~1
               go mod tidy -diff
  update       rewrite what is generated from code          rdma-core headers              <1
               (UPDATE=1: docs tables, golden outputs)
  lab          Soft-RoCE two-VM lab + loopback              root, qemu, network (first)    ~8
  lab-cluster  four VMs under real Slurm: a rail and a      root, qemu, network (first)    ~11
               path degraded (.ci/run runs it after make test)
  lab-cluster-host
               the same, every rail of one VM degraded      root, qemu, network (first)    ~12
               (not in CI: lab-k8s plants this fault)
  lab-cluster-live
               lab-cluster-host with a node 90 s late and  root, qemu, network (first)    ~20
               one killed in round 1 (not in CI)
  lab-cluster-soak
               lab-cluster with GDR_SOAK=2m: every host     root, qemu, network (first)    ~7
               soaks in its first round (not in CI)
  lab-k8s      the four VMs as Kubernetes nodes of a real   root, qemu, network (first)    ~18
               control plane; deploy/k8s's Job, every rail  (+6 the first time: builds
               of one VM degraded (.ci/run)                 Kubernetes)
  lab-arm64    one arm64 VM (qemu-system-aarch64, TCG,      root, qemu, network (first)    ~2
               Debian's arm64 kernel) runs dist-arm64's
               install topology memreg pingpong in loopback
               on the emulated GPU -> reports/lab-arm64
  lab-bench    ours against perftest in the lab VMs         root, qemu, network (first)    ~10
  lab-kill     the client VM killed mid-run                 root, qemu, network (first)    ~2
  lab-faults   the fault matrix, fresh VMs per case         root, qemu, network (first)    10+
  lab-soak     6-minute soaks: a rail flapping, one with    root, qemu, network (first)    ~20
               loss bursts, one clean; a CPU hog; the
               flap guard (CI: 90s, flap-loss,cut, ~3)
  bench        pinned host<->GPU copy bandwidth             a GPU host                     ~1
  fuzz         every fuzz target for FUZZTIME (30s) each    -                              ~15
  dist         dist/: the suite for hosts without Go        rdma-core headers              ~2
               (ARCH=arm64: dist-arm64/, cross-compiled)    (+ a cross gcc: deps installs)
  gdrcluster   the cluster planner deploy/gdrcluster        -                              <1
  deps         check build prerequisites, install missing   root only for what is missing  -
  deps-unit    deps, plus xmllint (JUnit schema checks)     root only for what is missing  -
  deps-test    deps-unit, plus Chromium and a font          root only for what is missing  -
  clean        remove reports/                              -                              -
  help         this list (what make alone prints)           -                              -

The manual: docs/README.md (targets: docs/developing.md, labs: docs/lab.md).
endef
export HELP
help:
	@printf '%s\n' "$$HELP"

deps:
	@build/deps.sh '$(TAGS)'

# What the unit tests need beyond the build: xmllint, which validates the
# JUnit files the report and the labs write against the two XSDs CI systems
# use (report/junitcheck).
deps-unit:
	@build/deps.sh --unit '$(TAGS)'

# What the project's own tests need beyond the build (xmllint, headless Chromium).
deps-test:
	@build/deps.sh --test '$(TAGS)'

# The report command. Go records no VCS revision for a git worktree, so the
# version is also linked in from git describe.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)
REPORT_BIN := .cache/gdrreport
REPORT_LDFLAGS := -X github.com/gdrconf/gdrconf/report.version=$(VERSION)
$(REPORT_BIN): FORCE
	@mkdir -p $(dir $@)
	@CGO_ENABLED=0 $(GO) build -buildvcs=auto -ldflags '$(REPORT_LDFLAGS)' -o $@ ./cmd/gdrreport

# The suite itself (RUN=<go test -run pattern> selects by requirement ID:
# RUN=TestPP08), then the report (printed; NOT QUALIFIED fails, INCOMPLETE
# fails only with GDR_STRICT=1). Absent hardware skips (GDR_STRICT=1 makes it
# fail). make exits 2 for every failure; the verdict's own code (README) is
# reports/exit-code, and build/verdict.sh make conformance exits with it.
# -p 1: one package at a time, or on a many-core host the GPU copies of one
# would load the links another's traffic measures (docs/configuration.md,
# "Packages one at a time").
conformance: deps $(REPORT_BIN)
	@mkdir -p $(REPORTS)
	@rm -f $(REPORTS)/test.json $(REPORTS)/host.json $(REPORTS)/soak.json
	@rc=0; $(GOTESTSUM) --format testname --jsonfile $(REPORTS)/test.json -- \
	  -tags '$(TAGS)' -count=1 -p 1 $(if $(RUN),-run '$(RUN)') ./conformance/... || rc=$$?; \
	  $(REPORT_BIN) -collect -go-exit $$rc $(REPORTS)

# The suite with a soak (docs/soak.md): conformance/soak keeps every rail's
# RDMA WRITE traffic and the GPUs' copy engines busy for GDR_SOAK (10m unless
# set: make soak GDR_SOAK=2h), a sample every GDR_SOAK_INTERVAL into
# reports/soak.json (rewritten as it goes: Ctrl-C or a job's SIGTERM leaves
# what was measured, and the report says the soak was cut). The whole suite
# runs, so the one report qualifies the host and judges the soak.
# -timeout 0: go test's default 10 minutes would end a longer soak; every
# wait of the suite has its own deadline (GDR_TIMEOUT, the soak's end).
GDR_SOAK ?= 10m
soak: deps $(REPORT_BIN)
	@mkdir -p $(REPORTS)
	@rm -f $(REPORTS)/test.json $(REPORTS)/host.json $(REPORTS)/soak.json
	@rc=0; GDR_SOAK='$(GDR_SOAK)' GDR_REPORTS='$(abspath $(REPORTS))' $(GOTESTSUM) --format testname --jsonfile $(REPORTS)/test.json -- \
	  -tags '$(TAGS)' -count=1 -p 1 -timeout 0 $(if $(RUN),-run '$(RUN)') ./conformance/... || rc=$$?; \
	  $(REPORT_BIN) -collect -go-exit $$rc $(REPORTS)

# Merges report folders (a host's reports/, a dist run's, reports/lab, or a
# folder of such folders) into one report; build/verdict.sh make report ...
# exits with the merged verdict's code (OUT/exit-code).
#   make report IN='hostA/reports hostB/reports reports/lab' OUT=reports/merged
IN  ?= $(REPORTS)
OUT ?= $(REPORTS)/merged
report: $(REPORT_BIN)
	@$(REPORT_BIN) -out '$(OUT)' $(IN)

# Unit tests of internal/ and harness/, the no-tag conformance packages
# run against every recorded and constructed host tree under fixtures/, and
# build/'s and deploy/'s tests of the run paths (make conformance runs one
# package at a time, dist/run.sh too; the sbatch script against stand-in
# Slurm commands).
# No root and no browser: deps-unit only checks where everything is present
# (xmllint too), and the report's browser test is make browser's.
BROWSER_TEST := ^(TestHTMLInBrowser|TestFleetHTMLInBrowser|TestSoakHTMLInBrowser)$$
unit: deps-unit
	@mkdir -p $(REPORTS)
	$(GOTESTSUM) --format testname --junitfile $(REPORTS)/unit-junit.xml -- \
	  -tags '$(TAGS)' -count=1 -skip '$(BROWSER_TEST)' ./internal/... ./harness/... ./report/... ./cluster/... ./lab/... ./cmd/... ./fixtures/... ./build/... ./deploy/...

# The HTML report in headless Chromium. GDR_BROWSER_TEST=1: it must run
# (deps-test installs Chromium), never skip.
browser: deps deps-test
	@mkdir -p $(REPORTS)
	GDR_BROWSER_TEST=1 $(GOTESTSUM) --format testname --junitfile $(REPORTS)/browser-junit.xml -- \
	  -tags '$(TAGS)' -count=1 -run '$(BROWSER_TEST)' ./report/

# Rewrite every file generated from code (golden summaries and verdicts, the
# tables in docs/) after a change that should alter them; check the diff.
update: deps-unit
	UPDATE=1 $(GO) test -count=1 -tags '$(TAGS)' ./report ./lab ./internal/reqs ./harness/verbs

lint: deps
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo 'gofmt: files above need formatting'; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags '$(TAGS)' ./...
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags '$(TAGS)' ./...
	@# go.mod and go.sum are what go mod tidy makes of the code (the nested
	@# modules under build/ are the labs' tool builds, checked when built).
	$(GO) mod tidy -diff || { echo 'go mod tidy: go.mod/go.sum above are not tidy; run go mod tidy'; exit 1; }

# The race detector over the packages that run goroutines or share state
# behind locks: the out-of-band session (heartbeats beside the test), the lab
# (VM watchers, record writer), membuf, dl, the selection (testenv) and
# rdmadev's lazily read GID tables; with the rdma tag, harness/rc (the ends'
# goroutines, the budget watchdog, the port watch, the shared checkpoint: its
# unit tests need no device). cuda's need a GPU: the lab runs them. About 40 s
# cold on 2 cores, 15 s warm.
RACE_PKGS ?= ./harness/oob/... ./lab/... ./harness/membuf/... ./harness/dl/... ./harness/testenv/... ./internal/rdmadev/...
RACE_RDMA_PKGS ?= ./harness/rc/...
race: deps
	$(GO) test -race -count=1 $(RACE_PKGS)
	$(GO) test -race -tags rdma -count=1 $(RACE_RDMA_PKGS)

# README's test command: about 11 minutes for lint, unit, the browser test,
# race and the two-VM lab on 2 cores. The four-VM labs take 11-18 minutes
# each, so .ci/run runs them after it: arm64's short lab, lab-cluster,
# lab-k8s, then the soak's short form: 20 minutes for make test, 60 for CI.
test: lint unit browser race lab

clean:
	rm -rf $(REPORTS)

# A copy of the suite for hosts without Go: dist/run.sh writes the same reports;
# with gdrcluster, rounds.sh and gdrconf.sbatch beside it, srun -N<n>
# --ntasks-per-node=1 dist/run.sh (or sbatch -N<n> dist/gdrconf.sbatch) qualifies n hosts.
dist:
	@build/deps.sh $(if $(ARCH),--arch '$(ARCH)') '$(TAGS)'
	ARCH='$(ARCH)' REPORT_LDFLAGS='$(REPORT_LDFLAGS)' build/dist/build.sh '$(TAGS)' '$(DIST)'

# The cluster planner beside deploy/rounds.sh in a checkout (pure Go, any
# Linux host); make dist ships it as dist/gdrcluster.
gdrcluster:
	CGO_ENABLED=0 $(GO) build -o deploy/gdrcluster ./cmd/gdrcluster
.PHONY: gdrcluster

# Pinned 256 MiB host<->GPU copy bandwidth next to the PCIe link's theoretical
# rate, per GPU (GPU machine; needs libcuda.so.1).
bench:
	$(GO) test -tags gpu -count=1 -run '^$$' -bench . -benchtime 20x ./conformance/gpu/

# Soft-RoCE two-host lab (docs/lab.md): two qemu VMs run the rdma
# suite as server and client, and in loopback; reports/lab/junit.xml.
#   make lab LAB_PKGS=./conformance/pingpong LAB_RUN=TestPP03Write
LAB_BIN := .cache/lab/gdrlab
$(LAB_BIN): FORCE
	@mkdir -p $(dir $@)
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -ldflags '$(REPORT_LDFLAGS)' -o $@ ./cmd/gdrlab
lab: deps-unit $(LAB_BIN)
	GO=$(GO) $(LAB_BIN) -mode lab
lab-bench: deps-unit $(LAB_BIN)
	GO=$(GO) $(LAB_BIN) -mode bench
# The lab on arm64 (Grace) guests (docs/lab.md): deps installs
# qemu-system-arm, the cross compiler and arm64 as a dpkg architecture;
# make dist ARCH=arm64 builds the suite the VM runs; one VM, loopback.
lab-arm64: $(LAB_BIN)
	@build/deps.sh --unit --lab arm64 '$(TAGS)'
	@$(MAKE) --no-print-directory dist ARCH=arm64
	GO=$(GO) LAB_ARCH=arm64 LAB_DIST=dist-arm64 $(LAB_BIN) -mode lab
lab-kill: deps-unit $(LAB_BIN)
	GO=$(GO) $(LAB_BIN) -mode kill
# The fault matrix (loss, delay, link down, kill, token, mismatch, stray,
# hostile, load), fresh VMs per case: reports/lab-faults/faults.json.
#   make lab-faults LAB_FAULTS=loss-1pct,token
#   make lab-faults LAB_REPEAT=3   (each case three times: a flaky one shows as 2 of 3)
lab-faults: deps-unit $(LAB_BIN)
	GO=$(GO) $(LAB_BIN) -mode faults
# The soak with planted faults: two VMs with three rails each run the
# shipped dist/run.sh with GDR_SOAK (LAB_SOAK, 6m) while the client's rail
# 1 flaps (down 5 s every minute) and rail 2 loses 30% for 10 s every 90 s,
# rail 0 clean; then fresh VMs with a CPU hog in the client from a third
# into the soak; then fresh VMs whose run.sh process groups get a SIGTERM
# 40 s in (as srun signals a step on scancel). The report must name each
# fault on its rail, with its times and cause, and nothing on the clean
# rail, and the cut run must still leave its report and a series that says
# it was cut: reports/lab-soak/lab-soak.json; last, fresh VMs whose soak
# ends in the link-flap guard (GDR_SOAK_FLAP=1: each rail retrained once,
# SOAK-08 must pass). .ci/run runs the short form:
#   make lab-soak LAB_SOAK=90s LAB_SOAK_CASES=flap-loss,cut
# LAB_SOAK_CASES=cut-gotestsum: the SIGTERM to gotestsum alone (docs/soak.md).
lab-soak: deps-unit $(LAB_BIN)
	GO=$(GO) $(LAB_BIN) -mode soak
# Four VMs with two rails and two emulated GPUs each under real Slurm (munge,
# slurmctld, slurmd from Debian; the GPUs as GRES, ConstrainDevices=yes):
# sbatch --wait -N4 runs the shipped deploy/slurm/gdrconf.sbatch, a rail and a
# path are degraded on purpose (LAB_DEGRADE), and the merged reports/lab-cluster
# report must find exactly those bad: a failed cluster/isolation case each,
# merge exit 1, and the job's own exit status the same (docs/lab.md).
#   make lab-cluster LAB_SBATCH=old   (the script without its GPU request: must fail naming it)
lab-cluster: deps-unit $(LAB_BIN)
	GO=$(GO) $(LAB_BIN) -mode cluster
# The cluster lab with a whole host degraded (every rail of vm2): the merged
# reports/lab-cluster-host report must name host vm2 and nothing else. Its
# own VMs: a third bad part beside lab-cluster's rail and path would leave
# four hosts too few healthy pairs to judge by (docs/lab.md). Not in CI:
# make lab-k8s plants the same fault under Kubernetes.
lab-cluster-host: deps-unit $(LAB_BIN)
	GO=$(GO) LAB_DEGRADE='vm2:*:delay=250ms' LAB_REPORTS=reports/lab-cluster-host $(LAB_BIN) -mode cluster
# The cluster lab with a late and a dead node besides the whole-host fault:
# vm3's task held 90 s by a Slurm TaskProlog (it must join within the lab's
# GDR_START_TIMEOUT of 5m), vm4 killed 30 s into round 1 (it must be named
# "stopped in round 1", its pairs stopped, drained with that reason), host
# vm2 still found bad, and nothing found against vm3 or vm4 (docs/lab.md).
# Not in CI: the late task and the dead node's quiet heartbeat add minutes.
lab-cluster-live: deps $(LAB_BIN)
	GO=$(GO) LAB_DEGRADE='vm2:*:delay=250ms' LAB_LATE=vm3:90s LAB_KILL=vm4:round1 LAB_REPORTS=reports/lab-cluster-live $(LAB_BIN) -mode cluster
# The cluster lab with a soak (not in CI): the shipped sbatch script with
# GDR_SOAK=2m in the job's environment, as a user exports it; nothing
# degraded. Every host must soak in its first round, all rails of its pair
# at once, and the merged report must show each host's soak, judged
# (docs/soak.md#fleets). GDR_SOAK_STABLE_FRACTION=0.5: vm1 also runs
# slurmctld, and its rate under TCG wandered to 0.80 of its start with no
# fault.
lab-cluster-soak: deps-unit $(LAB_BIN)
	GO=$(GO) LAB_DEGRADE=none LAB_PKGS='./conformance/pingpong ./conformance/soak ./conformance/gpu' LAB_ENV='GDR_SOAK=2m GDR_SOAK_STABLE_FRACTION=0.5' LAB_REPORTS=reports/lab-cluster-soak $(LAB_BIN) -mode cluster
# The cluster lab's VMs as Kubernetes nodes: a control plane built from the
# published Kubernetes modules (cached in .cache/lab/k8s-<key>) on this
# machine, containerd, kubelet and a device plugin in every VM, CoreDNS;
# deploy/k8s applied through a lab overlay with kubectl, one rail degraded
# on purpose (LAB_DEGRADE), and the merged reports/lab-k8s report must name
# exactly that rail (docs/lab.md).
lab-k8s: deps-unit $(LAB_BIN)
	tools="$$(GO=$(GO) $(LAB_BIN) k8s-tools)" && GDR_LAB_K8S_TOOLS="$$tools" $(GO) test -count=1 -run TestControlPlaneRuns -v ./lab/kube/
	GO=$(GO) $(LAB_BIN) -mode k8s
.PHONY: lab-kill lab-faults lab-soak lab-cluster lab-cluster-host lab-cluster-live lab-cluster-soak lab-k8s FORCE

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
