# Harrier: `make run` and `make test` are all a new user needs (see README.md).
CARGO ?= cargo
HARRIER := target/release/harrier

.PHONY: deps build run test fuzz test-kernels bench-capture bench-bypass bench-rules bench-files bench-outputs vmlinux clean

deps:
	@bash scripts/deps.sh

build: deps
	$(CARGO) build --release --locked --workspace

# The main job: Falco's rule language on live syscalls, the embedded default rules,
# alerts on stdout (Ctrl-C stops it and prints what it saw).
run: build
	$(HARRIER) run

# Every test, in phases, each one's wall time printed at the end (scripts/phase.sh).
PHASE := bash scripts/phase.sh
test:
	@$(PHASE) start
	$(PHASE) deps bash scripts/deps.sh
	$(PHASE) build $(CARGO) build --release --locked --workspace
	$(PHASE) test-build $(CARGO) test --release --locked --workspace --no-run
	$(PHASE) test-run $(CARGO) test --release --locked --workspace --no-fail-fast
	$(PHASE) fuzz-install bash scripts/deps-fuzz.sh
	$(PHASE) fuzz bash scripts/fuzz.sh
	$(PHASE) bypass-c $(MAKE) -C bypass test
	$(PHASE) packaging-install bash scripts/deps-packaging.sh >/dev/null
	$(PHASE) packaging $(MAKE) --no-print-directory test-packaging
	$(PHASE) vm-install bash scripts/deps-vm.sh
	$(PHASE) guests bash scripts/test-kernels.sh guest
	@$(PHASE) report

# Each cargo-fuzz target (rules, capfile, scap) for FUZZ_SECONDS (5; make test runs this).
fuzz: deps
	bash scripts/fuzz.sh

# The kernel matrix: the suite on this kernel, then on Debian 12's 6.1 and 6.12
# under qemu, side by side (`make test` boots both guests too, after the host's tests).
test-kernels: build
	bash scripts/test-kernels.sh

bench-capture: build
	target/release/harrier-bench capture

# Capture files: write/read events/s on one core, with and without zstd, bytes per event.
bench-files: build
	target/release/harrier-bench files

# Alert outputs: alerts/s each sink sustains on one CPU (stdout, file, HTTP; text and JSON),
# a 20,000-alert burst, 200,000 Warnings then a Critical, 2,000,000 alerts to a dead HTTP
# receiver, floods through harrier run with Falco's stable rules; writes docs/bench/outputs.md
# and .png. BENCH_ARGS=--quick for a smoke run, --no-e2e without harrier run. FALCO= and
# FALCO_CONFIG= (a Falco built by hand, never part of the project): the floods through it too.
bench-outputs: build
	target/release/harrier-bench outputs $(if $(FALCO),--falco $(FALCO) --falco-config $(FALCO_CONFIG)) $(BENCH_ARGS)

# File-system watchers: harrier fswatch vs inotify vs fanotify vs none on one
# workload; writes bench-results/fs.md and fs.png. BENCH_ARGS=--bpf-stats for
# fswatch's BPF ns per operation.
.PHONY: bench-fs bench-fs-scenarios
bench-fs: build
	target/release/harrier-bench fs $(BENCH_ARGS)

# FSProbe's six scenarios (open+close), every resolution mode and ring size, and the highest
# rate held without drops; full ~20 min, --quick: minutes.
bench-fs-scenarios: build
	target/release/harrier-bench fs-scenarios $(BENCH_ARGS)

# A syscall tracepoint against fentry/fexit on the syscall's function (harrier-bench
# hook-costs), in a Debian guest (KERNEL=6.12 or 6.1) whose clock counts instructions
# (qemu -icount shift=0): ns per call there are instructions. docs/kernels.md.
.PHONY: bench-hooks
bench-hooks: build
	HARRIER_VM_CPUS=1 HARRIER_VM_QEMU_OPTS="-icount shift=0" bash scripts/test-kernels.sh exec $(or $(KERNEL),6.12) \
		target/release/harrier-bench hook-costs $(BENCH_ARGS)

# An open's exit by the depth of its file, with and without the path cache
# (harrier-bench path-depth); writes docs/bench/path-depth.md and .png.
.PHONY: bench-paths
bench-paths: build
	target/release/harrier-bench path-depth --out docs/bench $(BENCH_ARGS)

# Where the vs-falco mix's BPF time goes, per program and per step
# (harrier-bench handler-steps); writes docs/bench/handler-steps.md and .png.
.PHONY: bench-steps
bench-steps: build
	target/release/harrier-bench handler-steps --out docs/bench $(BENCH_ARGS)

bench-bypass: build
	bash scripts/bench-bypass.sh

# Falco's performance-testing method against harrier run (event-generator bench
# rounds, a stepped syscall load, the sensor under 0.5/1/2 CPU quotas); writes
# docs/bench/rules-load.md and .png. BENCH_ARGS=--quick for a smoke run.
bench-rules: build
	target/release/harrier-bench rules-load $(BENCH_ARGS)

# harrier run side by side with a real Falco (never part of the project: pass its binary and
# config): no sensor, Falco, harrier run and its empty-program floor interleaved on four
# workloads, BPF stats, drop-free rate at 1 CPU, SIGINT stops; bench-results/vs-falco.md and
# .png (~25 min; BENCH_ARGS=--quick: ~3 min). Without FALCO=: harrier only.
.PHONY: bench-vs-falco
bench-vs-falco: build
	target/release/harrier-bench vs-falco $(if $(FALCO),--falco $(FALCO) --falco-config $(FALCO_CONFIG)) $(BENCH_ARGS)

# Plugin sources (k8saudit + json built by hand from falcosecurity/plugins, never part of the
# project: PLUGINS_DIR holds them): a file and the webhook, against FALCO if given (~2 min).
.PHONY: bench-plugins
bench-plugins: build
	target/release/harrier-bench plugins $(if $(FALCO),--falco $(FALCO)) $(if $(PLUGINS_DIR),--plugins-dir $(PLUGINS_DIR)) $(BENCH_ARGS)

# Alert-by-alert comparison with a real Falco (never part of the project: pass its binary and
# config): both attached at once, the battery of behaviours (or BENCH_ARGS='--workload cargo'),
# every alert and output field compared; docs/falco-diff.md and .json (~5 min).
.PHONY: bench-falco-diff
bench-falco-diff: build
	target/release/harrier-bench falco-diff --falco $(FALCO) --falco-config $(FALCO_CONFIG) $(BENCH_ARGS)

# Regenerates bpf/vmlinux/vmlinux.h from the running kernel.
vmlinux:
	bash scripts/gen-vmlinux.sh

clean:
	$(CARGO) clean

# install, uninstall, deb, test-packaging
include packaging/install.mk
