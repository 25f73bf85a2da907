# TotalCOW: build, test and demo entry points. See README.md.
#
# `make help` lists every target: each target's line ends with a `##`
# comment that says what it does, `##@` lines name the groups, and other
# `##` lines are printed as they are. A new target needs its `##` comment
# (tests/harness/test_make_help.py checks that every target has one).

## Usage: make TARGET [VARIABLE=value ...]
## Variables: TOTALCOW_BUILD_DIR (where everything is built, default build/, git-ignored),
##     TOTALCOW_JOBS (parallel compile jobs, default all cores), TEST_JOBS (test VMs at once,
##     default cores + 1; 1 runs them one after the other), PYTEST_ARGS (e.g. -k baseline).

TOTALCOW_BUILD_DIR ?= $(CURDIR)/build
export TOTALCOW_BUILD_DIR
B := $(TOTALCOW_BUILD_DIR)

PYTHON ?= /usr/bin/python3
PYTEST_ARGS ?=
# Integration tests boot one VM each; run one more at once than there are
# cores (pytest-xdist). A VM is not busy all the time (kmemleak's 6 s wait
# at the end of every debug run, dm-delay and the modelled disk, an x86-64
# guest's idle vCPUs): with as many VMs as cores, the test VMs of a CI run
# (2026-11-26, 108f111) used 65.2 CPU-minutes in 35.7 minutes, 1.83 of the
# 2 cores (tests/vm/vm-cost).
# TEST_JOBS=1 runs them one after the other.
TEST_JOBS ?= $(shell echo $$(($$(nproc) + 1)))
PYTEST_XDIST := $(if $(filter-out 0 1,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadgroup)
TREE := $(B)/linux
TREE_STAMP := $(TREE)/.totalcow-tree
KERNEL_BASE := $(B)/uml-base/linux
KERNEL_DEBUG := $(B)/uml-debug/linux
KERNEL_PREEMPT := $(B)/uml-preempt/linux
KERNEL_TRACE := $(B)/uml-trace/linux
KERNEL_X86_BASE := $(B)/x86-base/bzImage
KERNEL_X86_DEBUG := $(B)/x86-debug/bzImage
KERNEL_X86_KCSAN := $(B)/x86-kcsan/bzImage
# The 7.3 series (mm-patches/7.3/): Debian 13's linux-source-7.3, where
# btrfs data has large folios on x86-64 (not on UML: large page-cache
# folios need CONFIG_TRANSPARENT_HUGEPAGE, which UML cannot have).
TREE_73_STAMP := $(B)/linux-7.3/.totalcow-tree
KERNEL_73_BASE := $(B)/uml-base-7.3/linux
KERNEL_73_DEBUG := $(B)/uml-debug-7.3/linux
KERNEL_73_X86_DEBUG := $(B)/x86-debug-7.3/bzImage
OOT := $(B)/oot

# Everything the kernels are built from, besides the Linux tree itself.
GRAFTED := $(shell find module sysfs -type f 2>/dev/null)
KCONFIGS := $(wildcard tests/vm/configs/*.config)
KERNEL_C := $(filter %.c %.h,$(GRAFTED))

.PHONY: all deps tree kernel kernel-base kernel-debug kernel-preempt kernel-trace kunit modules lint \
	kernel-x86 kernel-x86-base kernel-x86-debug kernel-x86-kcsan kunit-x86 integration-x86 \
	check-x86 check-lanes check-7.3 tree-7.3 kernel-7.3 kernel-x86-7.3 series-check torture-x86 torture-kcsan torture-x86-extents stock-kernels stock-kernel-check check-stock \
	integration check check-quick demo bench-demo bench bench-dm-overhead bench-dm-cgroups \
	bench-dm-miss bench-fleet-dm bench-extents bench-extents-mmap bench-image-pair \
	bench-registration bench-fig4 \
	bench-fig5-8 bench-write-phases bench-share-cost bench-resolve-cost bench-share-scale \
	bench-fleet bench-goals clean distclean help

##@ Building
all: kernel ## the same as kernel

help: ## this list, made from the ## comments on the targets' lines in the Makefile
	@awk '/^##@ / { sub(/^##@ /, ""); printf "\n%s:\n", $$0; next } \
		/^## / { sub(/^## /, ""); print; next } \
		{ line = line $$0 } /\\$$/ { sub(/\\$$/, "", line); next } \
		line ~ /^[a-z][a-z0-9_.-]*:[^=].*## / { t = line; sub(/:.*/, "", t); \
			d = line; sub(/^[^#]*## /, "", d); printf "  %-20s %s\n", t, d } \
		{ line = "" }' $(firstword $(MAKEFILE_LIST))

deps: ## apt-get install every tool (no kernel source or image: those are downloaded into the build directory)
	@tests/vm/install-deps

tree: $(TREE_STAMP) ## the pinned linux-source-6.12 (mm-patches/PIN) in $TOTALCOW_BUILD_DIR/linux, with mm-patches/series, module/ and sysfs/
$(TREE_STAMP): mm-patches/series mm-patches/PIN $(wildcard mm-patches/*.patch) tests/vm/prepare-tree \
		$(wildcard module/*/Kconfig sysfs/Kconfig)
	@tests/vm/install-deps
	tests/vm/prepare-tree $(B)
	@touch $@

tree-7.3: $(TREE_73_STAMP) ## Debian 13's linux-source-7.3 (mm-patches/7.3/PIN) with mm-patches/7.3/series, in $TOTALCOW_BUILD_DIR/linux-7.3
$(TREE_73_STAMP): mm-patches/7.3/series mm-patches/7.3/PIN $(wildcard mm-patches/7.3/*.patch) \
		tests/vm/prepare-tree $(wildcard module/*/Kconfig sysfs/Kconfig)
	@tests/vm/install-deps
	tests/vm/prepare-tree $(B) 7.3
	@touch $@

# The base kernel is preemptible (CONFIG_PREEMPT: races whose window holds
# no sleep), the debug one is not: make check's "preempt" lane is the base
# kernel (docs/test-harness.md).
kernel: kernel-base kernel-debug ## the base (preemptible) and debug UML kernels
kernel-base: $(KERNEL_BASE) ## the base UML kernel (CONFIG_PREEMPT)
kernel-debug: $(KERNEL_DEBUG) ## the debug UML kernel (KASAN, lockdep, kmemleak; not preemptible)
# The debug kernel with CONFIG_PREEMPT, by hand (tests/vm/run --preempt).
kernel-preempt: $(KERNEL_PREEMPT) ## the debug UML kernel with CONFIG_PREEMPT, by hand (tests/vm/run --preempt)
# The base kernel with block tracepoints, for bench-write-phases only.
kernel-trace: $(KERNEL_TRACE) ## the base kernel with block tracepoints, for bench-write-phases only

$(B)/uml-%/linux: $(TREE_STAMP) $(GRAFTED) $(KCONFIGS) tests/vm/build-kernel
	tests/vm/build-kernel $(B) $*
	@touch $@

# The same flavours of 7.3 (the shorter stem wins over the rule above).
kernel-7.3: $(KERNEL_73_BASE) $(KERNEL_73_DEBUG) ## the base and debug UML kernels of the 7.3 series
$(B)/uml-%-7.3/linux: $(TREE_73_STAMP) $(GRAFTED) $(KCONFIGS) tests/vm/build-kernel
	tests/vm/build-kernel $(B) $* 7.3
	@touch $@
kernel-x86-7.3: $(KERNEL_73_X86_DEBUG) ## the x86-64 debug kernel of the 7.3 series (builds; its guest does not run yet)
$(KERNEL_73_X86_DEBUG): $(TREE_73_STAMP) $(GRAFTED) $(KCONFIGS) tests/vm/build-kernel
	@tests/vm/install-deps
	tests/vm/build-kernel $(B) x86-debug 7.3
	@touch $@

# The x86-64 lane: SMP, CONFIG_PREEMPT, booted in QEMU (tests/vm/run --x86).
kernel-x86: kernel-x86-base kernel-x86-debug ## the x86-64 kernels, base and debug (SMP, CONFIG_PREEMPT, booted in QEMU)
kernel-x86-base: $(KERNEL_X86_BASE) ## the x86-64 base kernel
kernel-x86-debug: $(KERNEL_X86_DEBUG) ## the x86-64 debug kernel (KASAN, lockdep, kmemleak)
# KCSAN, the data-race detector (excludes KASAN, so a flavour of its own).
kernel-x86-kcsan: $(KERNEL_X86_KCSAN) ## the x86-64 KCSAN kernel (the data-race detector)

$(B)/x86-%/bzImage: $(TREE_STAMP) $(GRAFTED) $(KCONFIGS) tests/vm/build-kernel
	@tests/vm/install-deps
	tests/vm/build-kernel $(B) x86-$*
	@touch $@

##@ Testing
# KUnit suites, built into the debug kernel, run at boot; the KTAP output
# is parsed by the kernel's own kunit.py.
kunit: $(KERNEL_DEBUG) ## run the KUnit suites in the debug UML kernel
	@tests/vm/install-deps
	tests/vm/kunit $(B)

# The same suites in the x86-64 debug kernel on 2 CPUs.
kunit-x86: $(KERNEL_X86_DEBUG) ## run the KUnit suites in the x86-64 debug kernel on 2 CPUs
	@tests/vm/install-deps
	tests/vm/kunit --x86 $(B)

# Out-of-tree builds against Debian's headers, as DKMS does on a stock
# kernel: Debian 12's 6.1, the 6.12 the test kernels come from (also
# through DKMS), Debian 13's 6.12 (also through DKMS) and the newest
# kernel of Debian 13's trixie-backports (tests/vm/fetch-headers,
# tests/vm/debian-kernels.sh). W=1; any warning fails. One line per kernel
# (once per release: the pinned 6.12 is Debian 13's newest until Debian
# moves on).
MODULE_KERNELS := 6.1 6.12 6.12-trixie newest
modules: ## build dm-totalcow.ko out of tree, W=1, against Debian's 6.1, 6.12 and newest headers
	@tests/vm/install-deps
	@hdrs=$$(tests/vm/fetch-headers $(B) $(MODULE_KERNELS)) && \
	echo "$$hdrs" | awk '!seen[$$0]++' | while read -r hdr vars; do \
		tests/vm/build-module $(OOT)/$${hdr##*/linux-headers-} $$hdr $$vars || exit 1; \
	done

# The stock lane (tests/vm/run --stock): those Debian kernels themselves,
# unpatched, their linux-image packages unpacked into $(B)/stock (never
# installed) with the dm-totalcow.ko just built (tests/vm/fetch-stock-kernel).
# make check boots Debian 12's default kernel, make check-stock all four.
STOCK_KERNELS := $(MODULE_KERNELS)
STOCK_CHECK_KERNEL := 6.1
stock-kernels: modules ## modules, then Debian's own kernel images unpacked with that module (tests/vm/run --stock)
	tests/vm/fetch-stock-kernel $(B) $(STOCK_KERNELS)
stock-kernel-check: modules ## the same for Debian 12's default kernel only (what make check boots)
	tests/vm/fetch-stock-kernel $(B) $(STOCK_CHECK_KERNEL)

# checkpatch --strict and sparse on every kernel C file we own.
lint: $(KERNEL_BASE) ## checkpatch --strict, sparse and W=1 on our kernel code and patches
	tests/vm/lint $(B)

# The integration tests of make check: everything on the UML kernels but
# the further lanes' runs (lane_extra), of the x86-64 lane the races and a
# provoked warning (x86_check), and the dm guest scripts on Debian 12's
# default kernel (stock_check; pytest.ini); not the packages' install test
# in a throwaway root (deb_root: make deb-test).
CHECK_MARKS := (not lane_extra and not x86 and not stock and not deb_root and not linux73) or x86_check or stock_check

# pytest on the tests marked $(1), then the test VMs that cost the most
# host CPU (tests/vm/vm-cost), passed or not: CI's time is the CPU's.
define run-pytest
	@mkdir -p $(B)/runs && rm -f $(B)/runs/vm-cost.tsv
	$(PYTHON) -m pytest $(PYTEST_XDIST) -m "$(1)" $(PYTEST_ARGS) tests; \
	status=$$?; tests/vm/vm-cost --top 15 || true; exit $$status
endef

integration: $(KERNEL_BASE) $(KERNEL_DEBUG) $(KERNEL_X86_DEBUG) stock-kernel-check ## the pytest scenarios of make check, each in a fresh VM
	@tests/vm/install-deps
	$(call run-pytest,$(CHECK_MARKS))

# deb-kernel last: its relink leaves the x86-64 kernel the tests booted
# as it was, but with another build number.
check: kernel kernel-x86-debug lint modules kunit kunit-x86 integration deb-kernel ## everything a change must pass: kernels, lint, modules, KUnit on both lanes, integration, deb-kernel
	@echo "make check: all passed"

# Everything that runs on the x86-64 lane: KUnit and every guest script
# that involves concurrency or sharing.
check-x86: kunit-x86 $(KERNEL_X86_DEBUG) ## KUnit and every test of the x86-64 lane (pytest marker x86)
	@tests/vm/install-deps
	$(call run-pytest,x86)
	@echo "make check-x86: all passed"

# The dm guest scripts on each of Debian's kernels (STOCK_KERNELS), with
# dm-totalcow.ko as DKMS would build it.
check-stock: stock-kernels ## the dm guest scripts on Debian's own, unpatched kernels (pytest marker stock)
	@tests/vm/install-deps
	$(call run-pytest,stock)
	@echo "make check-stock: all passed"

# make check plus everything it leaves out: the x86-64 lane, the
# preemptible UML kernel's longer runs, the packages' install test, and
# whether the series applies to Debian's newest 6.12 sources.
check-lanes: check check-x86 check-7.3 deb-test deb-kernel-test series-check ## check, check-x86, check-7.3, the preemptible lane's extra runs, deb-test, deb-kernel-test, series-check
	$(PYTHON) -m pytest $(PYTEST_XDIST) -m "lane_extra and not x86 and not linux73" $(PYTEST_ARGS) tests
	@echo "make check-lanes: all passed"

# The 7.3 series' guest tests, on its base and debug UML kernels.
check-7.3: kernel-7.3 ## checkpatch on the 7.3 series, and its tests on its UML kernels (pytest marker linux73)
	@tests/vm/install-deps
	@# A new file under fs/btrfs/ is in MAINTAINERS' BTRFS entry already:
	@# checkpatch cannot see that without the tree, so that notice is dropped.
	@fail=0; for p in $$(grep -v '^#' mm-patches/7.3/series); do \
		out=$$($(B)/linux-7.3/scripts/checkpatch.pl --strict --terse --no-tree - \
			< mm-patches/7.3/$$p 2>&1 | grep -E '(ERROR|WARNING|CHECK):' | \
			grep -v 'does MAINTAINERS need updating'); \
		[ -z "$$out" ] || { echo "mm-patches/7.3/$$p: $$out"; fail=1; }; \
	done; [ $$fail = 0 ] && echo "check-7.3: checkpatch --strict on mm-patches/7.3: clean"
	$(call run-pytest,linux73)
	@echo "make check-7.3: all passed"

# Does mm-patches/series apply to the newest linux-source-6.12 of
# bookworm-security and of trixie-security? Downloads and unpacks them
# under $(B)/series-check (never installed); says which patch fails, where.
series-check: ## does mm-patches/series apply to the newest linux-source-6.12 of bookworm and trixie?
	tests/vm/series-applies $(B)

# Move mm-patches/PIN to Debian 13's newest linux-source-6.12 if the series
# applies to it, and build the tree and the base UML kernel from it
# (tests/vm/repin); commit mm-patches/PIN after it.
.PHONY: repin
repin: ## pin Debian 13's newest linux-source-6.12 (mm-patches/PIN) if the series applies; build kernel-base
	@tests/vm/install-deps
	tests/vm/repin $(B)

# The developer's inner loop: kernels, lint, KUnit and the integration tests
# not marked slow (pytest.ini); `make check` runs everything.
check-quick: kernel lint kunit ## the inner loop: kernels, lint, KUnit and the integration tests not marked slow
	@tests/vm/install-deps
	$(PYTHON) -m pytest $(PYTEST_XDIST) -m "not slow and not x86 and not stock and not lane_extra" $(PYTEST_ARGS) tests
	@echo "make check-quick: passed (slow tests, the x86-64 and stock lanes skipped; make check runs them)"

##@ The demo and benchmarks
# The demo writes its run under $(B)/demo/ and prints it; bench-demo
# records it in bench/results/ (committed) and regenerates the READMEs.
demo: $(KERNEL_BASE) ## the snapshot-read demo: stock btrfs, overlayfs and TotalCOW side by side (in build/demo/)
	@tests/vm/install-deps
	$(PYTHON) bench/demo

bench-demo: $(KERNEL_BASE) ## the demo, recorded in bench/results/ and put into README.md
	@tests/vm/install-deps
	$(PYTHON) bench/demo --record
	$(PYTHON) bench/readme

# dm-totalcow: bypass overhead vs dm-linear, hit vs miss (fio, bench/fio/);
# the VM pinned to the last CPU (bench/README.md says why).
bench-dm-overhead: $(KERNEL_BASE) ## fio: random reads outside the whitelist, totalcow vs dm-linear; hit vs miss
	@tests/vm/install-deps
	$(PYTHON) bench/dm-overhead --cpu $$(($$(nproc) - 1))
	$(PYTHON) bench/readme

# The dm layer alone, N readers in I/O cgroups of their own, with and
# without io.max on one of them, both disk models: disk reads
# for N = 2..64 (counts: one repeat), the others' time with a limit on one
# for N = 8 (5 repeats).
bench-dm-cgroups: $(KERNEL_BASE) ## the dm layer with N readers in I/O cgroups of their own, with and without io.max
	@tests/vm/install-deps
	$(PYTHON) bench/dm-cgroups --name dm-cgroups --repeats 1
	$(PYTHON) bench/dm-cgroups --name dm-cgroups-limits --snapshots 8 --repeats 5
	$(PYTHON) bench/readme

# Template registration: a 100k-file tree, and kernel memory per extent.
bench-registration: $(KERNEL_BASE) ## register a 100k-file template (fs tree and FIEMAP); kernel memory per extent
	@tests/vm/install-deps
	$(PYTHON) bench/registration
	$(PYTHON) bench/readme
	@cat bench/results/registration.jsonl

# Paper Fig. 4 (8 x 256 MiB, the paper's own point) and scaling in N
# (1..64 x 32 MiB), RAM-backed and modelled hard disk; tables and plots.
bench-fig4: $(KERNEL_BASE) ## paper Fig. 4 (8 x 256 MiB, dd) and scaling N = 1..64, RAM and modelled hard disk
	@tests/vm/install-deps
	$(PYTHON) bench/fig4 --name fig4-paper --snapshots 8 --size-mib 256 --readers dd
	$(PYTHON) bench/fig4
	$(PYTHON) bench/readme

# Paper Figs. 5-8: overwrites of 2 MiB .. 1 GiB, fdatasync; time, page
# cache, disk reads and allocation; RAM-backed and modelled hard disk.
bench-fig5-8: $(KERNEL_BASE) ## paper Figs. 5-8: overwrites of 2 MiB .. 1 GiB + fdatasync, both disk models
	@tests/vm/install-deps
	$(PYTHON) bench/fig5-8 --cpu $$(($$(nproc) - 1))
	$(PYTHON) bench/readme

# Where an overwrite's fdatasync spends its time on the modelled disk: the
# wait before btrfs's first bio, and the I/O after it (block traces).
bench-write-phases: $(KERNEL_TRACE) ## where an overwrite's fdatasync spends its time (block traces, trace kernel)
	@tests/vm/install-deps
	$(PYTHON) bench/fig5-8 --trace --name write-phases --states cold,warm --sizes 256 \
		--big-mib 256 --writes 16,256 --configs btrfs,overlayfs,totalcow --models hdd \
		--repeats 3 --cpu $$(($$(nproc) - 1))
	$(PYTHON) bench/readme

# Page-cache sharing: CPU per shared page, signature screens.
bench-share-cost: $(KERNEL_BASE) ## page-cache sharing: CPU per shared page, how often each signature screen fires
	@tests/vm/install-deps
	$(PYTHON) bench/share-cost

# The read path's CPU per aliased page beyond a stock page-cache hit.
bench-resolve-cost: $(KERNEL_BASE) ## the read path's CPU per aliased page beyond a stock page-cache hit
	@tests/vm/install-deps
	$(PYTHON) bench/resolve-cost
	$(PYTHON) bench/resolve-cost --extents
	$(PYTHON) bench/readme

# Page-cache sharing at fleet scale: N = 1..256 members, a fleet mix of
# templates of skewed popularity; group operation times vs N.
bench-share-scale: $(KERNEL_BASE) ## page-cache sharing at N = 1..256 members and a fleet mix of templates
	@tests/vm/install-deps
	$(PYTHON) bench/share-scale
	$(PYTHON) bench/readme

# Shared extents without a group: reflinked copies and writable snapshots,
# stock vs a sharing scope; memory per extra file.
bench-extents: $(KERNEL_BASE) ## shared extents: N reflinked copies and writable snapshots, stock vs a sharing scope
	@tests/vm/install-deps
	$(PYTHON) bench/extents
	$(PYTHON) bench/readme

bench-extents-mmap: $(KERNEL_BASE) ## private mappings of shared extents, stock vs a scope; the cost of clones for repeated execs
	@tests/vm/install-deps
	$(PYTHON) bench/extents-mmap
	$(PYTHON) bench/readme

# Two releases of one application image, deduplicated, every file read
# once: shared extents against whole-file sharing and stock.
bench-image-pair: $(KERNEL_BASE) ## two Django releases deduplicated: shared extents vs whole-file sharing vs stock
	@tests/vm/install-deps
	$(PYTHON) bench/image-pair
	$(PYTHON) bench/readme

# dm-totalcow's sequential misses against dm-linear on both disk models,
# and on the RAM disk against one memcpy of the same bytes.
bench-dm-miss: $(KERNEL_BASE) ## sequential 1 MiB misses against dm-linear, and against one memcpy of the same bytes
	@tests/vm/install-deps
	$(PYTHON) bench/dm-miss --cpu $$(( $$(nproc) - 1 )) --repeats 7
	$(PYTHON) bench/readme

# Container fleets: 16 clones of a Debian image per engine (LXC,
# unprivileged LXC, systemd-nspawn, Podman), stock vs overlay vs TotalCOW
# (tools/lxc/debian-rootfs debootstraps the image once, cached).
# bench-fleet-dm, per engine: stock btrfs snapshots, the dm layer alone,
# both layers.
FLEET_DM_ENGINES := lxcu-stock,lxcu-dmonly,lxcu-totalcow,nspawn-stock,nspawn-dmonly,nspawn-totalcow
FLEET_DM_ENGINES := $(FLEET_DM_ENGINES),podman-stock,podman-dmonly,podman-totalcow
bench-fleet-dm: $(KERNEL_BASE) ## the container fleets with the dm layer alone, each container in an I/O cgroup
	@tests/vm/install-deps
	$(PYTHON) bench/fleet --name fleet-dm --repeats 3 --configs stock,dmonly,totalcow-noatime \
		--engines $(FLEET_DM_ENGINES)
	$(PYTHON) bench/readme

bench-fleet: $(KERNEL_BASE) ## 16 containers per engine (LXC, unprivileged LXC, nspawn, Podman): stock, overlay, TotalCOW
	@tests/vm/install-deps
	$(PYTHON) bench/fleet
	$(PYTHON) bench/readme

##@ Torture runs (hours)
# Both layers tortured on the x86-64 lane, 4 workers on 4 CPUs, 8 members:
# a million operations under the debug kernel (hours under TCG), 200,000
# under KCSAN; records in bench/results/torture-x86-*.json.
torture-x86: $(KERNEL_X86_DEBUG) ## both layers tortured on the x86-64 debug kernel: 4 CPUs, a million operations
	@tests/vm/install-deps
	$(PYTHON) bench/torture-x86 --flavour debug --ops 1000000

torture-kcsan: $(KERNEL_X86_KCSAN) ## the same under KCSAN, 200,000 operations
	@tests/vm/install-deps
	$(PYTHON) bench/torture-x86 --flavour kcsan --ops 200000

# Shared extents tortured on both sides (the user files and the canonical
# pages), 4 workers on 4
# CPUs of the x86-64 debug kernel (KASAN, lockdep); OPS operations, SEED
# its seed: a run of a million takes about 4.5 hours under TCG here, so it
# may be made of runs of other seeds (bench/results/torture-x86-extents-*).
# TORTURE_MINUTES, if set, is a time budget: the workers stop there if they
# have not done OPS, and the record counts what they did.
TORTURE_OPS ?= 250000
TORTURE_SEED ?= 1
TORTURE_MINUTES ?= 0
torture-x86-extents: $(KERNEL_X86_DEBUG) ## shared extents tortured on both sides (TORTURE_OPS, TORTURE_SEED, TORTURE_MINUTES)
	@tests/vm/install-deps
	$(PYTHON) bench/torture-x86 --mode extents --flavour debug --ops $(TORTURE_OPS) \
		--seed $(TORTURE_SEED) --minutes $(TORTURE_MINUTES) \
		--name torture-x86-extents-seed$(TORTURE_SEED)

##@ All benchmarks and their goals
# The performance goals (bench/goals: the figure each goal is judged on,
# and its bound) against what the targets above left in bench/results/
# (bench/results/goals.md).
bench-goals: ## the performance goals judged against bench/results/ (bench/results/goals.md)
	$(PYTHON) bench/goals

bench: bench-demo bench-dm-overhead bench-dm-miss bench-dm-cgroups bench-registration bench-fig4 \
	bench-fig5-8 bench-write-phases \
	bench-share-cost bench-resolve-cost bench-share-scale bench-extents bench-extents-mmap \
	bench-image-pair \
	bench-fleet bench-fleet-dm ## every benchmark above, then bench-goals
	$(PYTHON) bench/goals

##@ Debian packages
# Debian packages from debian/: dm-totalcow-dkms (module/dm/ as DKMS
# source) and totalcowctl (the tool and its manual page), in $(B)/deb,
# built from a copy of the checkout, which stays clean
# (tests/deb/build-packages).
.PHONY: deb deb-test deb-kernel deb-kernel-debian deb-kernel-test
deb: ## Debian packages dm-totalcow-dkms and totalcowctl in $TOTALCOW_BUILD_DIR/deb
	@tests/vm/install-deb-deps
	tests/deb/build-packages $(B)/deb

# Those packages on a fresh Debian 12, a throwaway root in $(B)/deb-root:
# DKMS builds the module for each kernel whose headers apt installs, and
# apt exits 0 (tests/deb/test-packages; root; make check-lanes runs it, make
# check not, for CI time; tests/packaging/test_packages.py is its pytest wrapper).
deb-test: deb ## install those packages in a throwaway Debian 12 root, DKMS-build for 6.1 and 6.12 (root)
	tests/deb/test-packages $(B)

# The patched kernel as linux-image and linux-headers packages (bindeb-pkg,
# in $(B)/deb/kernel-<flavour>/): deb-kernel from the x86-64 lane's debug
# kernel (make check builds it: a relink and the packaging, about a
# minute), deb-kernel-debian from Debian's own configuration of the
# pinned 6.12 (mm-patches/PIN; a long build: docs/install.md).
deb-kernel: $(KERNEL_X86_DEBUG) ## the patched x86-64 debug kernel as linux-image/linux-headers packages
	@tests/vm/install-deb-deps
	tests/deb/build-kernel-package $(B) x86-debug

deb-kernel-debian: $(TREE_STAMP) ## the same from Debian's own configuration of the pinned 6.12 (a long build)
	@tests/vm/install-deb-deps
	tests/deb/build-kernel-package $(B) debian

# deb-kernel's packages and totalcowctl's on a fresh Debian 12 root: apt
# installs them, QEMU boots the installed kernel, a demo with both layers
# runs in that root (tests/deb/test-kernel-package; root; make
# check-lanes).
deb-kernel-test: deb deb-kernel ## deb-kernel and totalcowctl installed by apt in a throwaway root, booted, demo run (root)
	tests/deb/test-kernel-package $(B)

##@ Cleaning up
clean: ## remove the test runs' output and the out-of-tree builds
	rm -rf $(B)/runs $(OOT) results

distclean: ## remove the whole build directory
	rm -rf $(B) results
